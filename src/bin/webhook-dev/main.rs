//! `webhook-dev`: sign and send real-shaped deliveries of any preset to a
//! local route, with the redeliveries, duplicates and faults senders
//! produce, offline; the in-process form is
//! [`webhook_idempotency::dev::Delivery`].
//!
//! ```text
//! webhook-dev send stripe --to http://127.0.0.1:3000/webhooks/stripe --secret whsec_... --repeat 2 --expect 2xx
//! webhook-dev send github --concurrent 16 --expect 2xx          # secret from $GITHUB_WEBHOOK_SECRET
//! webhook-dev send stripe --tamper --expect 4xx
//! webhook-dev send stripe --stale 3600 --expect 4xx
//! webhook-dev send stripe --fixture charge.refunded --out-of-order --expect 2xx
//! webhook-dev send shopify --body captured.json --expect 2xx   # your own bytes, byte for byte
//! webhook-dev scenario webhooks.contract --base http://127.0.0.1:3000
//! webhook-dev fixtures stripe
//! ```
//!
//! `--to` defaults to `http://127.0.0.1:3000/webhooks/<preset>` (the
//! quickstart's routes); the key to `--secret`, else
//! `$<PRESET>_WEBHOOK_SECRET` (`-` as `_`, upper case), else the preset's
//! test key (`PresetInfo::test_key`), which the quickstart serves with
//! (for a public-key scheme, Discord and SendGrid, a fixed test private key
//! whose public key is printed for the receiver).
//!
//! Exit status: 0 when every answer matched `--expect` (without it, when
//! every request was answered); 1 when one did not match or a request got
//! no answer; 2 on a usage error.
//!
//! Output: one line per delivery (`#1 stripe evt_... 200 (replayed) 12 ms`);
//! `--json` prints one JSON document instead. Answer bodies are cut to 200
//! characters and escaped as `webhook-verify` escapes (`src/cli.rs`). The
//! key is never printed.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod scenario;
mod send;

/// Sign and send real-shaped webhook deliveries to a local route.
#[derive(Parser, Debug)]
#[command(name = "webhook-dev", version)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Sign one event of a preset and deliver it, as its sender would.
    Send(Box<send::SendArgs>),
    /// Run the `send` steps of a scenario file, one per line.
    Scenario(scenario::ScenarioArgs),
    /// List a preset's fixtures (every preset's, without one).
    Fixtures {
        /// The preset.
        preset: Option<String>,
    },
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) if e.use_stderr() => {
            // clap's own message would quote the value given: it may be a secret.
            use clap::CommandFactory as _;
            eprintln!("webhook-dev: {}", webhook_idempotency::cli::usage_message(&e, &Args::command()));
            eprintln!("Usage: webhook-dev send <PRESET> [--to URL] [--secret SECRET] [OPTIONS]; see --help");
            return ExitCode::from(2);
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let outcome = match args.command {
        Command::Send(send) => runtime.block_on(send::run(*send)),
        Command::Scenario(scenario) => runtime.block_on(scenario::run(scenario)),
        Command::Fixtures { preset } => fixtures(preset.as_deref()),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(send::Usage(message)) => {
            eprintln!("webhook-dev: {}", webhook_idempotency::cli::printable(&message));
            ExitCode::from(2)
        }
    }
}

/// `webhook-dev fixtures [PRESET]`.
fn fixtures(preset: Option<&str>) -> Result<bool, send::Usage> {
    use webhook_idempotency::{dev, providers};
    let presets: Vec<&str> = match preset {
        Some(name) => vec![providers::find(name).ok_or_else(|| send::unknown_preset(name))?.name],
        None => providers::all().iter().map(|p| p.name).collect(),
    };
    for name in presets {
        if dev::test_key(name).is_none() {
            println!("{name}: (not sent: signed with the sender's own key)");
            continue;
        }
        let names = dev::fixtures(name);
        let source = dev::fixture_source(name).unwrap_or_default();
        println!(
            "{name}: {} {source}",
            if names.is_empty() { "(a generic event)".to_owned() } else { names.join(", ") }
        );
    }
    Ok(true)
}
