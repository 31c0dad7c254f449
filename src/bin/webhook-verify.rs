//! `webhook-verify`: checks one webhook delivery offline, with the same
//! verifiers and key extractors as the layer.
//!
//! ```text
//! cargo run --features cli --bin webhook-verify -- \
//!     --provider stripe --secret whsec_... \
//!     --header 'Stripe-Signature: t=1700000000,v1=...' --body-file payload.json --now 1700000100
//! ```
//!
//! Prints `valid` and the event key, or `invalid: <kind>` with hints (the
//! timestamp's age, the body's length and SHA-256, a secret with
//! surrounding whitespace). Exit status: 0 valid, 1 invalid, 2 usage error.

use std::io::Read as _;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use sha2::{Digest, Sha256};
use webhook_idempotency::provider::CheckError;
use webhook_idempotency::verify::{Delivery, SigningSecret, VerifyErrorKind};
use webhook_idempotency::Provider;

/// Check one webhook delivery's signature and event key offline.
#[derive(Parser, Debug)]
#[command(name = "webhook-verify", version)]
struct Args {
    /// The sender: stripe, github, slack, standard-webhooks, svix, shopify,
    /// square, twilio, paddle, linear, hubspot, pagerduty, zoom, twitch,
    /// intercom, mailgun, calendly, typeform, discord, sendgrid.
    #[arg(long)]
    provider: String,
    /// A signing secret, exactly as configured (repeat for rotation).
    #[arg(long = "secret", value_name = "S")]
    secrets: Vec<String>,
    /// A public key, for asymmetric schemes (repeatable).
    #[arg(long = "public-key", value_name = "K")]
    public_keys: Vec<String>,
    /// A request header, `Name: value` (repeatable, in order).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// The raw body as received; `-` reads standard input.
    #[arg(long, value_name = "PATH")]
    body_file: String,
    /// The URL the sender signed, where the scheme signs it.
    #[arg(long)]
    url: Option<String>,
    /// The HTTP method, where the scheme signs it.
    #[arg(long, default_value = "POST")]
    method: String,
    /// The time to check timestamps against, in Unix seconds (default: now).
    #[arg(long, value_name = "UNIX_SECONDS")]
    now: Option<u64>,
}

/// A usage error: message, exit status 2.
struct Usage(String);

/// The preset names, as `--provider` takes them.
const PROVIDERS: &[&str] = &[
    "stripe",
    "github",
    "slack",
    "standard-webhooks",
    "svix",
    "shopify",
    "square",
    "twilio",
    "paddle",
    "linear",
    "hubspot",
    "pagerduty",
    "zoom",
    "twitch",
    "intercom",
    "mailgun",
    "calendly",
    "typeform",
    "discord",
    "sendgrid",
];

/// The `scheme://host[:port]` of a URL, for presets that sign the full URL
/// from a configured public base plus the request's path and query.
fn base_of(url: &str) -> Result<String, Usage> {
    let uri: http::Uri = url.parse().map_err(|_| Usage(format!("--url {url:?} is not a URL")))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some(scheme), Some(authority)) => Ok(format!("{scheme}://{authority}")),
        _ => Err(Usage(format!("--url {url:?} needs a scheme and a host"))),
    }
}

fn provider(name: &str, url: Option<&str>) -> Result<Provider, Usage> {
    let need_url = || url.ok_or_else(|| Usage(format!("--provider {name} signs the URL: give --url")));
    Ok(match name {
        "stripe" => Provider::stripe(),
        "github" => Provider::github(),
        "slack" => Provider::slack(),
        "standard-webhooks" => Provider::standard_webhooks(),
        "svix" => Provider::svix(),
        "shopify" => Provider::shopify(),
        "square" => Provider::square(need_url()?),
        "twilio" => Provider::twilio(base_of(need_url()?)?),
        "paddle" => Provider::paddle(),
        "linear" => Provider::linear(),
        "hubspot" => Provider::hubspot(base_of(need_url()?)?),
        "pagerduty" => Provider::pagerduty(),
        "zoom" => Provider::zoom(),
        "twitch" => Provider::twitch(),
        "intercom" => Provider::intercom(),
        "mailgun" => Provider::mailgun(),
        "calendly" => Provider::calendly(),
        "typeform" => Provider::typeform(),
        "discord" => Provider::discord(),
        "sendgrid" => Provider::sendgrid(),
        other => return Err(Usage(format!("unknown provider {other:?}; known: {}", PROVIDERS.join(", ")))),
    })
}

fn request(args: &Args) -> Result<http::request::Parts, Usage> {
    let mut builder = http::Request::builder().method(args.method.as_str()).uri(args.url.as_deref().unwrap_or("/"));
    for h in &args.headers {
        let (name, value) =
            h.split_once(':').ok_or_else(|| Usage(format!("--header {h:?}: expected 'Name: value'")))?;
        builder = builder.header(name.trim(), value.trim_start());
    }
    let req = builder.body(()).map_err(|e| Usage(format!("invalid request: {e}")))?;
    Ok(req.into_parts().0)
}

fn read_body(path: &str) -> Result<Vec<u8>, Usage> {
    let mut body = Vec::new();
    let read = if path == "-" {
        std::io::stdin().read_to_end(&mut body).map(drop)
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut body)).map(drop)
    };
    read.map_err(|e| Usage(format!("cannot read the body from {path}: {e}")))?;
    Ok(body)
}

/// Signed Unix timestamps found in the headers (`t=`/`ts=` items, headers
/// named `*timestamp*`), for the age hint.
fn timestamps(parts: &http::request::Parts) -> Vec<u64> {
    let mut found = Vec::new();
    for (name, value) in &parts.headers {
        let Ok(value) = value.to_str() else { continue };
        if name.as_str().contains("timestamp") {
            found.extend(value.trim().parse::<u64>().ok().map(|t| if t > 100_000_000_000 { t / 1000 } else { t }));
        }
        for item in value.split([',', ';']) {
            if let Some(t) = item.trim().strip_prefix("t=").or_else(|| item.trim().strip_prefix("ts=")) {
                found.extend(t.parse::<u64>().ok());
            }
        }
    }
    found
}

fn hints(
    args: &Args,
    parts: &http::request::Parts,
    body: &[u8],
    kind: Option<VerifyErrorKind>,
    now: u64,
) -> Vec<String> {
    let mut out = vec![format!("body: {} bytes, SHA-256 {}", body.len(), hex::encode(Sha256::digest(body)))];
    if body.windows(2).any(|w| w == b"\r\n") {
        out.push("the body has CRLF line endings: did a proxy or a file transfer convert them?".into());
    }
    for (i, s) in args.secrets.iter().chain(&args.public_keys).enumerate() {
        if s != s.trim() {
            out.push(format!("secret #{} has leading or trailing whitespace: secrets are used byte for byte", i + 1));
        }
    }
    match kind {
        Some(VerifyErrorKind::TimestampTooOld | VerifyErrorKind::TimestampInFuture) => {
            for t in timestamps(parts) {
                let age = i128::from(now) - i128::from(t);
                out.push(if age >= 0 {
                    format!("signed timestamp {t} is {age} s older than --now {now}")
                } else {
                    format!("signed timestamp {t} is {} s ahead of --now {now}", -age)
                });
            }
        }
        Some(VerifyErrorKind::MissingHeader) => {
            let names: Vec<_> = parts.headers.keys().map(|k| k.as_str()).collect();
            out.push(format!("headers given: {}", if names.is_empty() { "none".into() } else { names.join(", ") }));
        }
        Some(VerifyErrorKind::NoMatchingSignature) => out.push(
            "no secret produced the signature over these exact bytes: compare the length and SHA-256 with what \
             the sender sent (a framework that re-serialized the JSON, a changed line ending, the wrong secret)"
                .into(),
        ),
        _ => {}
    }
    out
}

/// The sender's text with control characters escaped, so a body cannot
/// drive the operator's terminal.
fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_unicode().to_string() } else { c.to_string() }).collect()
}

/// Secrets and public keys in the form each preset's verifier expects: the
/// Standard Webhooks family tells HMAC secrets (`whsec_`) from public keys
/// (`whpk_`) by prefix, so a public key given without its prefix must never
/// become an HMAC key.
fn key_material(provider: &str, secrets: &[String], public_keys: &[String]) -> Result<Vec<SigningSecret>, Usage> {
    let mut out = Vec::new();
    for s in secrets {
        out.push(match provider {
            "standard-webhooks" | "svix" => webhook_idempotency::verify::standard_webhooks::secret(s)
                .map_err(|e| Usage(format!("--secret #{}: {e}", out.len() + 1)))?,
            _ => SigningSecret::from(s.as_str()),
        });
    }
    for k in public_keys {
        out.push(match provider {
            "standard-webhooks" | "svix" => webhook_idempotency::verify::standard_webhooks::public_key(k)
                .map_err(|e| Usage(format!("--public-key {k:?}: {e}")))?,
            "discord" => webhook_idempotency::verify::discord::public_key(k)
                .map_err(|e| Usage(format!("--public-key {k:?}: {e}")))?,
            "sendgrid" => SigningSecret::from(k.as_str()),
            other => return Err(Usage(format!("--provider {other} verifies with secrets, not public keys"))),
        });
    }
    if out.is_empty() {
        return Err(Usage("give at least one --secret (or --public-key)".into()));
    }
    Ok(out)
}

fn run(args: &Args) -> Result<bool, Usage> {
    let provider = provider(&args.provider, args.url.as_deref())?;
    let parts = request(args)?;
    let body = read_body(&args.body_file)?;
    let secrets = key_material(&args.provider, &args.secrets, &args.public_keys)?;
    let now = args.now.unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()));
    let delivery = Delivery::new(&parts, &body, &secrets, UNIX_EPOCH + Duration::from_secs(now));
    if let Ok(Some(answer)) = provider.handshake(&delivery) {
        println!("valid");
        println!("handshake: answered by the layer with {}, nothing claimed", answer.status());
        return Ok(true);
    }
    match provider.check(&delivery) {
        Ok(identity) => {
            println!("valid");
            println!("event key: {}", printable(&identity.key));
            if let Some(t) = identity.event_type {
                println!("event type: {}", printable(&t));
            }
            Ok(true)
        }
        Err(CheckError::Verify(e)) => {
            println!("invalid: {}", e.kind());
            for hint in hints(args, &parts, &body, Some(e.kind()), now) {
                println!("hint: {hint}");
            }
            Ok(false)
        }
        Err(e) => {
            println!(
                "invalid: {}",
                match &e {
                    CheckError::Key(k) => k.kind().as_str(),
                    _ => "unknown",
                }
            );
            println!("hint: the signature is valid, but the event key the layer needs is missing or unusable");
            Ok(false)
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse(); // exits with status 2 on a usage error
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(Usage(message)) => {
            eprintln!("webhook-verify: {message}");
            ExitCode::from(2)
        }
    }
}
