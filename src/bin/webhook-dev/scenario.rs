//! `webhook-dev scenario FILE`: a webhook contract kept as a file in your
//! repository, one `send` step per line.
//!
//! # The format
//! Plain text, one step per line: `send`, then the `send` command's
//! arguments, split as a POSIX shell splits words (quotes and backslashes,
//! no variables, no globbing). Empty lines and lines starting with `#` are
//! skipped. `--to` may be a path, joined to `--base`; without it a step
//! goes to `<base>/webhooks/<preset>`. A relative `--body` path starts
//! from the scenario file's directory. The values of `--secret` and
//! `--rotate` are printed as `***`. Every line is checked before the
//! first is sent; the steps run in order, each to its end.
//!
//! ```text
//! # Our webhook contract (webhook-dev scenario webhooks.contract)
//! send stripe --fixture payment_intent.succeeded --repeat 2 --expect 2xx
//! send stripe --concurrent 16 --expect 2xx
//! send stripe --tamper --expect 401
//! send stripe --stale 3600 --expect 4xx
//! send github --fixture issues.opened --out-of-order --expect 2xx
//! send shopify --to /hooks/shopify --body tests/captured/order.json --expect 2xx
//! ```

use std::path::{Path, PathBuf};

use clap::Parser;
use webhook_idempotency::cli::json_safe;

use crate::send::{self, SendArgs, Usage};

/// The flags of `scenario`.
#[derive(clap::Args, Debug)]
pub(crate) struct ScenarioArgs {
    /// The scenario file.
    file: PathBuf,
    /// The base URL paths and presets are joined to.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:3000")]
    base: String,
    /// Print one JSON document instead of lines.
    #[arg(long)]
    json: bool,
}

/// One line of a scenario file, parsed as the command line `webhook-dev
/// send ...`.
#[derive(Parser, Debug)]
#[command(name = "webhook-dev", no_binary_name = true)]
enum Line {
    /// A `send` step.
    Send(SendArgs),
}

/// The steps of `text`: (line number, the step's text, its arguments).
/// `dir`: the scenario file's directory, which relative `--body` paths
/// start from.
pub(crate) fn parse(text: &str, base: &str, dir: &Path) -> Result<Vec<(usize, String, SendArgs)>, Usage> {
    let base = base.trim_end_matches('/');
    let mut steps = Vec::new();
    // A byte order mark, as some editors write one, is not part of the first step.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, line) in text.lines().enumerate() {
        let (number, line) = (i + 1, line.trim());
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words = shlex::split(line).ok_or_else(|| Usage(format!("line {number}: unbalanced quotes")))?;
        if words.first().map(String::as_str) != Some("send") {
            return Err(Usage(format!("line {number}: a step starts with `send` (`send stripe --expect 2xx`)")));
        }
        let Line::Send(mut args) = Line::try_parse_from(&words).map_err(|e| {
            use clap::CommandFactory as _;
            // Not clap's own message: it would quote the value given, which may be a secret.
            Usage(format!("line {number}: {}", webhook_idempotency::cli::usage_message(&e, &Line::command())))
        })?;
        args.to = Some(match args.to.take() {
            Some(to) if to.starts_with('/') => format!("{base}{to}"),
            Some(to) if !to.contains("://") => {
                return Err(Usage(format!("line {number}: --to is a path starting with `/` or an absolute URL")))
            }
            Some(to) => to,
            None => format!("{base}/webhooks/{}", args.preset),
        });
        // A body file is found next to the scenario file, wherever it is run from.
        if let Some(body) = args.body.take() {
            args.body = Some(dir.join(body));
        }
        steps.push((number, shown(&words), args));
    }
    if steps.is_empty() {
        return Err(Usage("the scenario has no step".into()));
    }
    Ok(steps)
}

/// A step's words as printed: the values of `--secret` and `--rotate`
/// (keys, never printed) as `***`.
fn shown(words: &[String]) -> String {
    let mut out = Vec::with_capacity(words.len());
    let mut hide_next = false;
    for word in words {
        let text = if hide_next {
            "***".to_owned()
        } else if let Some((flag, _)) = word.split_once('=').filter(|(f, _)| matches!(*f, "--secret" | "--rotate")) {
            format!("{flag}=***")
        } else {
            shlex::try_quote(word).map_or_else(|_| word.clone(), |q| q.into_owned())
        };
        hide_next = !hide_next && matches!(word.as_str(), "--secret" | "--rotate");
        out.push(text);
    }
    out.join(" ")
}

/// `webhook-dev scenario`: whether every step's answers matched.
pub(crate) async fn run(args: ScenarioArgs) -> Result<bool, Usage> {
    let text = std::fs::read_to_string(&args.file).map_err(|e| Usage(format!("{}: {e}", args.file.display())))?;
    let dir = args.file.parent().unwrap_or_else(|| Path::new("."));
    let steps = parse(&text, &args.base, dir)?;
    for (number, _, step) in &steps {
        send::check(step).map_err(|Usage(m)| Usage(format!("line {number}: {m}")))?;
    }
    let mut reports = Vec::new();
    for (number, line, step) in &steps {
        let report = send::execute(step).await.map_err(|Usage(m)| Usage(format!("line {number}: {m}")))?;
        if !args.json {
            println!("line {number}: {line}");
            report.print("  ");
        }
        reports.push(serde_json::json!({"line": number, "step": line, "report": report}));
    }
    let ok = reports.iter().all(|r| r["report"]["ok"] == true);
    if args.json {
        println!("{}", json_safe(&serde_json::json!({"steps": reports, "ok": ok}).to_string()));
    } else {
        println!("{}", if ok { "every step as expected" } else { "a step was not as expected" });
    }
    Ok(ok)
}
