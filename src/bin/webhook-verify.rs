//! `webhook-verify`: checks one webhook delivery offline, with the same
//! verifiers and key extractors as the layer.
//!
//! ```text
//! cargo run --features cli --bin webhook-verify -- \
//!     --provider stripe --secret whsec_... \
//!     --header 'Stripe-Signature: t=1700000000,v1=...' --body-file payload.json --now 1700000100
//! ```
//!
//! Prints the signature's verdict (`valid`, or `invalid: <kind>` with hints:
//! the timestamp's age, the body's length and SHA-256, a secret with
//! surrounding whitespace), then the event key on its own line: a valid
//! signature over a body without a usable key is still `valid` (the key line
//! says what is missing and that the layer would answer 400). A stale
//! timestamp says whether the MAC itself matched (secret and body right, only
//! the time off). `--json` prints the same as one object. Exit status: 0 the
//! signature verifies, 1 it does not, 2 usage error.
//!
//! `--hubspot-accept-v1-v2` (HubSpot only) also accepts HubSpot's legacy v1
//! and v2 signatures, the library's explicit opt-in
//! `HubSpotVerifier::accept_v1_v2(true)`: **weaker**, since they sign no
//! time (a captured request verifies forever); off by default, and a request
//! carrying a v3 signature is verified by v3 alone either way.
//!
//! Usage errors never print a secret or public key: argument errors name the
//! flag but not the value given (a secret passed to the wrong flag, or as a
//! stray positional argument, stays out of the terminal and the shell's
//! logs), and key material the provider refuses (an empty secret, a bare
//! `whsec_`, see [`Verifier::check_secrets`]) is reported by position and
//! kind, e.g. `key material unusable: empty_secret`.
//!
//! Limits: the body is read up to `--body-limit` bytes (default 25 MiB, the
//! layer's [`DEFAULT_BODY_LIMIT`]); a longer one is a usage error, so
//! `--body-file /dev/zero` ends. `--now` is 0 to 253402300799
//! (9999-12-31T23:59:59Z).
//!
//! [`Verifier::check_secrets`]: webhook_idempotency::verify::Verifier::check_secrets

use std::io::Read as _;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::error::ErrorKind;
use clap::{CommandFactory as _, Parser};
use sha2::{Digest, Sha256};
use webhook_idempotency::cli::{self, printable};
use webhook_idempotency::layer::DEFAULT_BODY_LIMIT;
use webhook_idempotency::providers::CheckError;
use webhook_idempotency::providers::{self, KeyKind, PresetInfo, UrlArg};
use webhook_idempotency::verify::{Delivery, SigningSecret, VerifyErrorKind};
use webhook_idempotency::Provider;

/// Check one webhook delivery's signature and event key offline.
#[derive(Parser, Debug)]
#[command(name = "webhook-verify", version)]
struct Args {
    /// The sender: a preset name from the registry, in lower-case
    /// kebab-case (stripe, github, standard-webhooks, coinbase-commerce,
    /// cal-com, ...; an unknown name lists every one compiled in).
    #[arg(long)]
    provider: String,
    /// A signing secret, exactly as configured (repeat for rotation). May
    /// start with `-`. Never printed.
    #[arg(long = "secret", value_name = "S", allow_hyphen_values = true)]
    secrets: Vec<String>,
    /// A public key, for asymmetric schemes (repeatable). May start with `-`.
    /// Never printed.
    #[arg(long = "public-key", value_name = "K", allow_hyphen_values = true)]
    public_keys: Vec<String>,
    /// A request header, `Name: value` (repeatable, in order).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// The raw body as received; `-` reads standard input.
    #[arg(long, value_name = "PATH")]
    body_file: String,
    /// The most body bytes read: 25 MiB by default (the layer's default body
    /// limit), at most 1 GiB. A longer body is a usage error.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_BODY_LIMIT as u64,
          value_parser = clap::value_parser!(u64).range(1..=MAX_BODY_LIMIT))]
    body_limit: u64,
    /// The URL the sender signed, where the scheme signs it.
    #[arg(long)]
    url: Option<String>,
    /// The HTTP method, where the scheme signs it.
    #[arg(long, default_value = "POST")]
    method: String,
    /// The time to check timestamps against, in Unix seconds, 0 to
    /// 253402300799 (9999-12-31T23:59:59Z) (default: now).
    #[arg(long, value_name = "UNIX_SECONDS", value_parser = clap::value_parser!(u64).range(0..=MAX_NOW))]
    now: Option<u64>,
    /// HubSpot only, and **weaker**: also accept the legacy v1 / v2
    /// signatures (`X-HubSpot-Signature` with `X-HubSpot-Signature-Version`),
    /// as `HubSpotVerifier::accept_v1_v2(true)` does. They sign no time, so
    /// nothing bounds a captured request's age; a request with a v3 signature
    /// is still verified by v3 alone. Off by default.
    #[arg(long)]
    hubspot_accept_v1_v2: bool,
    /// Print one JSON object (`signature`, `reason`, `mac_matched`,
    /// `timestamp`, `key`, `key_error`, `key_from`, `event_type`,
    /// `handshake`, `hints`) instead of lines.
    #[arg(long)]
    json: bool,
}

/// The largest `--now`: 9999-12-31T23:59:59Z, in Unix seconds.
const MAX_NOW: u64 = 253_402_300_799;
/// The largest `--body-limit`: 1 GiB.
const MAX_BODY_LIMIT: u64 = 1 << 30;

/// A usage error: message, exit status 2.
struct Usage(String);

/// The `scheme://host[:port]` of a URL, for presets that sign the full URL
/// from a configured public base plus the request's path and query.
fn base_of(url: &str) -> Result<String, Usage> {
    let uri: http::Uri = url.parse().map_err(|_| Usage("--url is not a URL".into()))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some(scheme), Some(authority)) => Ok(format!("{scheme}://{authority}")),
        _ => Err(Usage("--url needs a scheme and a host".into())),
    }
}

/// The preset named `name`, from the registry.
fn preset(name: &str) -> Result<&'static PresetInfo, Usage> {
    providers::find(name).ok_or_else(|| {
        // The value is not echoed: it may be a secret given to the wrong flag.
        let known: Vec<_> = providers::all().iter().map(|p| p.name).collect();
        Usage(format!("unknown provider given to --provider; known: {}", known.join(", ")))
    })
}

fn provider(preset: &PresetInfo, url: Option<&str>, hubspot_v1_v2: bool) -> Result<Provider, Usage> {
    if hubspot_v1_v2 && preset.name != providers::hubspot::NAME {
        return Err(Usage(format!("--hubspot-accept-v1-v2 is for --provider hubspot, not {}", preset.name)));
    }
    let url = match (preset.url, url) {
        (UrlArg::None, _) => None,
        (_, None) => return Err(Usage(format!("--provider {} signs the URL: give --url", preset.name))),
        (UrlArg::PublicBaseUrl, Some(url)) => Some(base_of(url)?),
        (_, Some(url)) => Some(url.to_owned()),
    };
    let provider = preset.provider(url.as_deref()).map_err(|e| Usage(e.to_string()))?;
    Ok(match url {
        // The library's explicit opt-in, given explicitly here too.
        Some(base) if hubspot_v1_v2 => {
            provider.verifier(providers::hubspot::HubSpotVerifier::new(base).accept_v1_v2(true))
        }
        _ => provider,
    })
}

/// AWS SNS: the registry's provider accepts no topic (a receiver names its
/// own); this offline check accepts the message's own topic, which it prints.
fn sns_topic(provider: Provider, preset: &PresetInfo, body: &[u8]) -> Provider {
    if preset.name != providers::aws_sns::NAME {
        return provider;
    }
    let doc: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    match doc.get("TopicArn").and_then(serde_json::Value::as_str) {
        Some(topic) => {
            eprintln!("aws-sns: checking the message's own topic {topic}");
            Provider::aws_sns(providers::aws_sns::AwsSns::new([topic]))
        }
        None => provider,
    }
}

/// Apple App Store: the registry's provider accepts no app; this check accepts the notification's own (printed).
fn apple_app(provider: Provider, preset: &PresetInfo, body: &[u8]) -> Provider {
    use providers::apple_app_store::{self as apple, AppleAppStore};
    let data = apple::decoded_payload(body).map(|p| p["data"].clone()).unwrap_or_default();
    let settings = match (data["bundleId"].as_str(), data["environment"].as_str(), data["appAppleId"].as_u64()) {
        _ if preset.name != apple::NAME => return provider,
        (Some(bundle), Some("Production"), Some(app)) => AppleAppStore::production(bundle, app),
        (Some(bundle), Some("Sandbox"), _) => AppleAppStore::sandbox(bundle),
        _ => return provider,
    };
    let (bundle, environment) = (data["bundleId"].as_str().unwrap_or(""), data["environment"].as_str().unwrap_or(""));
    eprintln!("apple-app-store: checking the notification's own app {bundle} ({environment})");
    Provider::apple_app_store(settings)
}

fn request(args: &Args) -> Result<http::request::Parts, Usage> {
    // No message below echoes a value: any of them may be a secret given to
    // the wrong flag.
    let method =
        http::Method::from_bytes(args.method.as_bytes()).map_err(|_| Usage("--method is not an HTTP method".into()))?;
    let uri: http::Uri = args.url.as_deref().unwrap_or("/").parse().map_err(|_| Usage("--url is not a URL".into()))?;
    let mut req = http::Request::new(());
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    for (i, h) in args.headers.iter().enumerate() {
        let n = i + 1;
        let (name, value) = h.split_once(':').ok_or_else(|| Usage(format!("--header #{n}: expected 'Name: value'")))?;
        let name = http::HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| Usage(format!("--header #{n}: invalid header name")))?;
        let value = http::HeaderValue::from_str(value.trim_start())
            .map_err(|_| Usage(format!("--header #{n}: invalid header value")))?;
        req.headers_mut().append(name, value);
    }
    Ok(req.into_parts().0)
}

/// Reads at most `limit` bytes (plus one, to tell a body of exactly `limit`
/// bytes from a longer one), so an endless input (`/dev/zero`, a pipe) ends.
fn read_body(path: &str, limit: u64) -> Result<Vec<u8>, Usage> {
    let mut body = Vec::new();
    let cap = limit.saturating_add(1);
    let read = if path == "-" {
        std::io::stdin().lock().take(cap).read_to_end(&mut body).map(drop)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(cap).read_to_end(&mut body)).map(drop)
    };
    // The path is not echoed: it may be a secret given to the wrong flag.
    read.map_err(|e| Usage(format!("cannot read --body-file: {}", e.kind())))?;
    if body.len() as u64 > limit {
        return Err(Usage(format!(
            "the body is longer than --body-limit ({limit} bytes; the layer answers such a delivery 413)"
        )));
    }
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

/// Secrets and public keys in the form each preset's verifier expects
/// ([`PresetInfo::secret`], [`PresetInfo::public_key`]): the Standard
/// Webhooks family tells HMAC secrets (`whsec_`) from public keys (`whpk_`)
/// by prefix, so a public key given without its prefix must never become an
/// HMAC key.
fn key_material(preset: &PresetInfo, secrets: &[String], public_keys: &[String]) -> Result<Vec<SigningSecret>, Usage> {
    let mut out = Vec::new();
    for s in secrets {
        out.push(preset.secret(s).map_err(|e| Usage(format!("--secret #{}: {e}", out.len() + 1)))?);
    }
    for (n_keys, k) in public_keys.iter().enumerate() {
        if matches!(preset.key, KeyKind::Secret | KeyKind::Base64Secret | KeyKind::HexSecret) {
            return Err(Usage(format!("--provider {} verifies with secrets, not public keys", preset.name)));
        }
        out.push(preset.public_key(k).map_err(|e| Usage(format!("--public-key #{}: {e}", n_keys + 1)))?);
    }
    if preset.key == KeyKind::ShippedRoot && !out.is_empty() {
        return Err(Usage(format!("--provider {} takes no key: the crate ships its root", preset.name)));
    }
    if out.is_empty() && !matches!(preset.key, KeyKind::Fetched | KeyKind::ShippedRoot) {
        return Err(Usage("give at least one --secret (or --public-key)".into()));
    }
    Ok(out)
}

/// What the check found, each part on its own: the signature (and whether the
/// MAC matched when only the time is off), the timestamp, the event key.
struct Verdict {
    signature_valid: bool,
    reason: Option<VerifyErrorKind>,
    mac_matched: bool,
    handshake: Option<http::StatusCode>,
    key: Option<String>,
    key_error: Option<&'static str>,
    event_type: Option<String>,
}

fn run(args: &Args) -> Result<bool, Usage> {
    let preset = preset(&args.provider)?;

    let parts = request(args)?;
    let body = read_body(&args.body_file, args.body_limit)?;
    let provider = sns_topic(provider(preset, args.url.as_deref(), args.hubspot_accept_v1_v2)?, preset, &body);
    let provider = apple_app(provider, preset, &body);
    let secrets = key_material(preset, &args.secrets, &args.public_keys)?;
    let now = args.now.unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()));
    let at = UNIX_EPOCH
        .checked_add(Duration::from_secs(now))
        .ok_or_else(|| Usage(format!("--now must be at most {MAX_NOW} (9999-12-31T23:59:59Z)")))?;
    // A key the delivery names (SNS's certificate): fetched first, as the layer does.
    if let Some(prepare) = provider.prepare(&parts, &body) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let fetched = runtime.map_err(|e| Usage(format!("a runtime for the key fetch: {e}")))?.block_on(prepare);
        if let Err(e) = fetched {
            return Err(Usage(format!("the delivery's signing key: {e}")));
        }
    }
    let delivery = Delivery::new(&parts, &body, &secrets, at);
    // Key material first: a handshake must not verify under a key that
    // authenticates nothing (an empty secret), as the layer refuses to build.
    let checked = provider.check(&delivery);
    if let Some(e) = checked.as_ref().err().and_then(CheckError::key_material) {
        return Err(Usage(format!("key material unusable: {e}")));
    }
    let mut v = Verdict {
        signature_valid: true,
        reason: None,
        mac_matched: true,
        handshake: None,
        key: None,
        key_error: None,
        event_type: None,
    };
    if let Ok(Some(answer)) = provider.handshake(&delivery) {
        v.handshake = Some(answer.status());
    } else {
        match checked {
            Ok(identity) => {
                v.key = Some(identity.key);
                v.event_type = identity.event_type;
            }
            Err(e) if e.key_error().is_some() => v.key_error = e.key_error().map(|k| k.kind().as_str()),
            Err(e) => {
                let kind = e.verify_error().map(|e| e.kind());
                v.signature_valid = false;
                v.reason = kind;
                // Only the time off? Check the MAC alone, as an operator replay would.
                let stale = matches!(kind, Some(VerifyErrorKind::TimestampTooOld | VerifyErrorKind::TimestampInFuture));
                let replay = Delivery::new(&parts, &body, &secrets, at).without_timestamp_check();
                v.mac_matched = stale && provider.check(&replay).map_or_else(|e| e.key_error().is_some(), |_| true);
            }
        }
    }
    let hints = if v.signature_valid { Vec::new() } else { hints(args, &parts, &body, v.reason, now) };
    if args.json {
        print_json(&v, preset, &hints);
    } else {
        print_lines(&v, preset, &hints);
    }
    Ok(v.signature_valid)
}

fn print_lines(v: &Verdict, preset: &PresetInfo, hints: &[String]) {
    if let Some(status) = v.handshake {
        println!("valid");
        println!("handshake: answered by the layer with {status}, nothing claimed");
        return;
    }
    if !v.signature_valid {
        let kind = v.reason.map_or("unknown", VerifyErrorKind::as_str);
        println!("invalid: {kind}");
        if v.reason.is_some_and(|k| matches!(k, VerifyErrorKind::TimestampTooOld | VerifyErrorKind::TimestampInFuture))
        {
            println!(
                "signature: {}",
                if v.mac_matched {
                    "the MAC matches (secret and body are right); only the signed time is outside the tolerance"
                } else {
                    "does not match either: the time is off and the secret or the bytes differ"
                }
            );
        }
        for hint in hints {
            println!("hint: {hint}");
        }
        return;
    }
    println!("valid");
    println!("signature: valid");
    match (&v.key, v.key_error) {
        (Some(key), _) => println!("event key: {}", printable(key)),
        (None, Some(kind)) => println!(
            "event key: {kind}: the layer reads it from {} and answers a delivery without a usable one 400 \
             (the signature itself is valid)",
            preset.key_source()
        ),
        (None, None) => {}
    }
    if let Some(t) = &v.event_type {
        println!("event type: {}", printable(t));
    }
}

fn print_json(v: &Verdict, preset: &PresetInfo, hints: &[String]) {
    let timestamp = match v.reason {
        Some(VerifyErrorKind::TimestampTooOld) => "too_old",
        Some(VerifyErrorKind::TimestampInFuture) => "in_future",
        _ if v.signature_valid => "ok",
        _ => "unchecked",
    };
    let doc = serde_json::json!({
        "signature": if v.signature_valid { "valid" } else { "invalid" },
        "reason": v.reason.map(VerifyErrorKind::as_str),
        "mac_matched": v.mac_matched,
        "timestamp": timestamp,
        "handshake": v.handshake.map(|s| s.as_u16()),
        "key": v.key,
        "key_error": v.key_error,
        "key_from": preset.key_source(),
        "event_type": v.event_type,
        "hints": hints,
    });
    println!("{}", cli::json_safe(&doc.to_string()));
}

/// A command-line error, worded without any value the user gave
/// ([`cli::usage_message`]), and the usage line.
fn usage_message(e: &clap::Error) -> String {
    format!(
        "{}\nUsage: webhook-verify --provider <PROVIDER> --secret <S> --body-file <PATH> [OPTIONS]; see --help",
        cli::usage_message(e, &Args::command())
    )
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => e.exit(),
        Err(e) => {
            eprintln!("webhook-verify: {}", usage_message(&e));
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(Usage(message)) => {
            eprintln!("webhook-verify: {}", printable(&message));
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use webhook_idempotency::providers::hubspot;

    /// `webhook-verify`'s arguments for a HubSpot v2 request to
    /// `https://hooks.example.com/hs?x=1`, with `extra` flags.
    fn hubspot_v2_args(body_file: &str, extra: &[&str]) -> Args {
        let secret = SigningSecret::from("client-secret");
        let url = "https://hooks.example.com/hs?x=1";
        let sig = hubspot::sign_legacy(&secret, true, "POST", url, b"[]");
        let mut argv = vec![
            "webhook-verify".to_owned(),
            "--provider".into(),
            "hubspot".into(),
            "--secret".into(),
            "client-secret".into(),
            "--url".into(),
            url.into(),
            "--header".into(),
            format!("X-HubSpot-Signature: {sig}"),
            "--header".into(),
            "X-HubSpot-Signature-Version: v2".into(),
            "--body-file".into(),
            body_file.into(),
        ];
        argv.extend(extra.iter().map(|s| (*s).to_owned()));
        Args::try_parse_from(argv).unwrap()
    }

    /// The v1 / v2 opt-in: without the flag a v2 request is refused (as the
    /// library's default), with it it verifies; a tampered body still fails;
    /// the flag on another provider is a usage error.
    #[test]
    fn hubspot_v1_v2_only_with_the_explicit_flag() {
        let dir = std::env::temp_dir().join(format!("webhook-verify-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let body = dir.join("body.json");
        std::fs::write(&body, b"[]").unwrap();
        let tampered = dir.join("tampered.json");
        std::fs::write(&tampered, b"[ ]").unwrap();
        let (body, tampered) = (body.to_str().unwrap(), tampered.to_str().unwrap());
        assert!(matches!(run(&hubspot_v2_args(body, &[])), Ok(false)), "v2 refused by default");
        assert!(matches!(run(&hubspot_v2_args(body, &["--hubspot-accept-v1-v2"])), Ok(true)), "v2 with the flag");
        assert!(matches!(run(&hubspot_v2_args(tampered, &["--hubspot-accept-v1-v2"])), Ok(false)), "tampered");
        let other = Args::try_parse_from([
            "webhook-verify",
            "--provider",
            "stripe",
            "--secret",
            "whsec_x",
            "--body-file",
            body,
            "--hubspot-accept-v1-v2",
        ])
        .unwrap();
        match run(&other) {
            Err(Usage(m)) => assert!(m.contains("--hubspot-accept-v1-v2 is for --provider hubspot"), "{m}"),
            _ => panic!("the flag on another provider is a usage error"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every preset says where its key is read (an HMAC preset from its
    /// facts' event key, another in its registry entry), for the hint.
    #[test]
    fn every_preset_has_a_key_hint() {
        for preset in webhook_idempotency::providers::all() {
            assert!(!preset.key_source().is_empty(), "{}: no key source", preset.name);
        }
    }
}
