//! The `webhook-verify` command, run as a process.
#![cfg(feature = "cli")]

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use webhook_idempotency::providers::stripe;
use webhook_idempotency::verify::SigningSecret;

fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_webhook-verify"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        let _ = input.write_all(bytes); // a usage error exits before reading
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

const NOW: u64 = 1_700_000_000;
const BODY: &[u8] = b"{\n  \"id\": \"evt_cli\",\n  \"type\": \"invoice.paid\"\n}\n";

fn stripe_args<'a>(header: &'a str, secret: &'a str, now: &'a str) -> Vec<&'a str> {
    vec!["--provider", "stripe", "--secret", secret, "--header", header, "--body-file", "-", "--now", now]
}

#[test]
fn verify_command_cases() {
    let sig = format!("Stripe-Signature: {}", stripe::FACTS.sign(&SigningSecret::from("whsec_cli"), NOW, BODY));
    let now = NOW.to_string();
    let later = (NOW + 3600).to_string();
    let tampered = b"{\n  \"id\": \"evt_cli\",\n  \"type\": \"invoice.paid\"}\n";
    let tampered_hint = {
        use sha2::Digest as _;
        format!("hint: body: {} bytes, SHA-256 {}", tampered.len(), hex::encode(sha2::Sha256::digest(tampered)))
    };
    let tampered_expect = ["invalid: no_matching_signature", tampered_hint.as_str()];
    let cases: Vec<(&str, Vec<&str>, &[u8], i32, &[&str])> = vec![
        (
            "valid",
            stripe_args(&sig, "whsec_cli", &now),
            BODY,
            0,
            &["valid", "event key: evt_cli", "event type: invoice.paid"],
        ),
        ("tampered body", stripe_args(&sig, "whsec_cli", &now), tampered, 1, &tampered_expect),
        (
            "secret with a trailing newline",
            stripe_args(&sig, "whsec_cli\n", &now),
            BODY,
            1,
            &["invalid: no_matching_signature", "secret #1 has leading or trailing whitespace"],
        ),
        (
            "an hour late",
            stripe_args(&sig, "whsec_cli", &later),
            BODY,
            1,
            &["invalid: timestamp_too_old", "signed timestamp 1700000000 is 3600 s older than --now 1700003600"],
        ),
        (
            "no signature header",
            vec!["--provider", "stripe", "--secret", "s", "--header", "X-Other: 1", "--body-file", "-"],
            BODY,
            1,
            &["invalid: missing_header", "headers given: x-other"],
        ),
        (
            "GitHub docs vector",
            vec![
                "--provider",
                "github",
                "--secret",
                "It's a Secret to Everybody",
                "--header",
                "X-Hub-Signature-256: sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
                "--header",
                "X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958",
                "--body-file",
                "-",
            ],
            b"Hello, World!",
            0,
            &["valid", "event key: 72d3162e-cc78-11e3-81ab-4c9367dc0958"],
        ),
        (
            "unknown provider",
            vec!["--provider", "nope", "--secret", "s", "--body-file", "-"],
            BODY,
            2,
            &["unknown provider"],
        ),
        ("no body file", vec!["--provider", "stripe", "--secret", "s"], BODY, 2, &["--body-file"]),
        (
            "bad header syntax",
            vec!["--provider", "stripe", "--secret", "s", "--header", "novalue", "--body-file", "-"],
            BODY,
            2,
            &["Name: value"],
        ),
        (
            "unreadable body file",
            vec!["--provider", "stripe", "--secret", "s", "--body-file", "/nonexistent/x"],
            BODY,
            2,
            &["cannot read"],
        ),
    ];
    for (name, args, stdin, code, expect) in cases {
        let out = run(&args, Some(stdin));
        let all = text(&out);
        assert_eq!(out.status.code(), Some(code), "{name}: {all}");
        for e in expect {
            assert!(all.contains(e), "{name}: {e:?} not in {all}");
        }
        assert!(!all.contains("whsec_cli"), "{name}: the secret is never printed");
    }
}

#[test]
fn verify_command_presets_keys_and_handshakes() {
    use webhook_idempotency::providers::{slack, square, standard_webhooks};
    let now = NOW.to_string();
    let challenge = br#"{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let slack_sig =
        format!("X-Slack-Signature: {}", slack::FACTS.sign(&SigningSecret::from("slack-secret"), NOW, challenge));
    let slack_ts = format!("X-Slack-Request-Timestamp: {NOW}");

    let seed = [3u8; 32];
    let whpk = standard_webhooks::public_key_of(&seed);
    let sw_body = br#"{"type":"invoice.paid"}"#;
    let v1a = standard_webhooks::sign_ed25519(&seed, "msg_1", NOW, sw_body);
    // A v1 (HMAC) signature keyed with the public key's text: must never verify.
    let forged = standard_webhooks::sign(&SigningSecret::from(whpk.as_str()), "msg_1", NOW, sw_body)
        .unwrap_or_else(|_| "v1,AAAA".into());
    let bare_key = whpk.trim_start_matches("whpk_").to_owned();
    let sw = |sig: &str, key: &str| -> Vec<String> {
        ["--provider", "standard-webhooks", "--public-key", key, "--header", "webhook-id: msg_1", "--header"]
            .iter()
            .map(|s| s.to_string())
            .chain([format!("webhook-timestamp: {NOW}"), "--header".into(), format!("webhook-signature: {sig}")])
            .chain(["--body-file", "-", "--now", &now].iter().map(|s| s.to_string()))
            .collect()
    };

    let square_url = "https://example.com/webhooks/square";
    let square_body = b"{\"event_id\":\"e\\u001b[31mred\",\"type\":\"payment.updated\"}";
    let square_sig = format!(
        "x-square-hmacsha256-signature: {}",
        square::sign(&SigningSecret::from("sq-key"), square_url, square_body)
    );

    type Case = (&'static str, Vec<String>, &'static [u8], i32, Vec<&'static str>);
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let cases: Vec<Case> = vec![
        (
            "slack url_verification",
            owned(&[
                "--provider",
                "slack",
                "--secret",
                "slack-secret",
                "--header",
                &slack_sig,
                "--header",
                &slack_ts,
                "--body-file",
                "-",
                "--now",
                &now,
            ]),
            challenge,
            0,
            vec!["valid", "handshake: answered by the layer with 200 OK, nothing claimed"],
        ),
        ("v1a with the whpk_ key", sw(&v1a, &whpk), sw_body, 0, vec!["valid", "event key: msg_1"]),
        ("v1a with the bare key", sw(&v1a, &bare_key), sw_body, 0, vec!["valid", "event key: msg_1"]),
        ("v1 keyed with the public key", sw(&forged, &bare_key), sw_body, 1, vec!["invalid"]),
        (
            "square, control characters escaped",
            owned(&[
                "--provider",
                "square",
                "--secret",
                "sq-key",
                "--url",
                square_url,
                "--header",
                &square_sig,
                "--body-file",
                "-",
            ]),
            square_body,
            0,
            vec!["valid", "event key: e\\u{1b}[31mred"],
        ),
        (
            "square without --url",
            owned(&["--provider", "square", "--secret", "sq-key", "--header", &square_sig, "--body-file", "-"]),
            square_body,
            2,
            vec!["give --url"],
        ),
        (
            "public key for an HMAC preset",
            owned(&["--provider", "stripe", "--public-key", "abc", "--body-file", "-"]),
            b"{}",
            2,
            vec!["verifies with secrets"],
        ),
    ];
    for (name, args, stdin, code, expect) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&args, Some(stdin));
        let all = text(&out);
        assert_eq!(out.status.code(), Some(code), "{name}: {all}");
        for e in expect {
            assert!(all.contains(e), "{name}: {e:?} not in {all}");
        }
        assert!(!all.contains('\u{1b}'), "{name}: no raw escape reaches the terminal");
    }
}

/// Key material and misplaced values never reach the output; bad numbers,
/// endless bodies and unusable secrets are usage errors (exit 2), not panics.
#[test]
fn verify_command_usage_errors_never_print_key_material() {
    use webhook_idempotency::providers::slack;
    const LEAK: &str = "whsec_LEAKED0secret";
    let sig =
        format!("Stripe-Signature: {}", stripe::FACTS.sign(&SigningSecret::from("-starts-with-hyphen"), NOW, BODY));
    let now = NOW.to_string();
    let limit = BODY.len().to_string();
    let limit_short = (BODY.len() - 1).to_string();
    let challenge = br#"{"token":"x","challenge":"c","type":"url_verification"}"#;
    let empty_key_sig = format!("X-Slack-Signature: {}", slack::FACTS.sign(&SigningSecret::from(""), NOW, challenge));
    let slack_ts = format!("X-Slack-Request-Timestamp: {NOW}");
    let base = |extra: &[&'static str]| -> Vec<String> {
        ["--provider", "stripe", "--secret", "s", "--body-file", "-"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let cases: Vec<(&str, Vec<String>, &[u8], i32, &[&str])> = vec![
        ("--now u64::MAX", base(&["--now", "18446744073709551615"]), BODY, 2, &["--now"]),
        ("--now past 9999-12-31", base(&["--now", "253402300800"]), BODY, 2, &["--now"]),
        (
            "--now at 9999-12-31",
            owned(&["--provider", "stripe", "--secret=-starts-with-hyphen", "--header", &sig, "--body-file", "-"])
                .into_iter()
                .chain(owned(&["--now", "253402300799"]))
                .collect(),
            BODY,
            1,
            &["invalid: timestamp_too_old", "older than --now 253402300799"],
        ),
        ("secret given to --now", base(&["--now", LEAK]), BODY, 2, &["--now"]),
        ("secret given to --body-limit", base(&["--body-limit", LEAK]), BODY, 2, &["--body-limit"]),
        ("secret as a positional argument", base(&[LEAK]), BODY, 2, &["not shown"]),
        ("secret after --", base(&["--", LEAK]), BODY, 2, &["not shown"]),
        ("misspelled flag with the secret", base(&["--secrt", LEAK]), BODY, 2, &["did you mean --secret"]),
        (
            "misspelled flag, secret after =",
            base(&["--secrt=whsec_LEAKED0secret"]),
            BODY,
            2,
            &["did you mean --secret"],
        ),
        ("--secret given twice in one", base(&["--secret", "a", LEAK]), BODY, 2, &["its own --secret"]),
        (
            "secret given to --provider",
            owned(&["--provider", LEAK, "--secret", "s", "--body-file", "-"]),
            BODY,
            2,
            &["unknown provider"],
        ),
        ("secret given to --header", base(&["--header", LEAK]), BODY, 2, &["--header #1"]),
        ("secret in a header name", base(&["--header", "whsec_LEAKED0secret\u{7f}: x"]), BODY, 2, &["--header #1"]),
        (
            "secret in a bad header value",
            base(&["--header", "X: whsec_LEAKED0secret\u{7f}"]),
            BODY,
            2,
            &["--header #1"],
        ),
        ("secret given to --method", base(&["--method", "whsec_LEAKED0secret("]), BODY, 2, &["--method"]),
        ("secret given to --url", base(&["--url", "whsec_LEAKED0secret^"]), BODY, 2, &["--url"]),
        (
            "secret given to --url of a URL-signing preset",
            owned(&["--provider", "twilio", "--secret", "s", "--url", "/whsec_LEAKED0secret", "--body-file", "-"]),
            BODY,
            2,
            &["--url"],
        ),
        (
            "secret given to --body-file",
            owned(&["--provider", "stripe", "--secret", "s", "--body-file", LEAK]),
            BODY,
            2,
            &["cannot read --body-file"],
        ),
        (
            "secret given to --public-key (Discord)",
            owned(&["--provider", "discord", "--public-key", LEAK, "--body-file", "-"]),
            BODY,
            2,
            &["--public-key #1"],
        ),
        (
            "secret given to --public-key (Standard Webhooks)",
            owned(&["--provider", "standard-webhooks", "--public-key", LEAK, "--body-file", "-"]),
            BODY,
            2,
            &["--public-key #1"],
        ),
        (
            "public key given to --secret (Standard Webhooks)",
            owned(&["--provider", "standard-webhooks", "--secret", "whpk_LEAKED0key", "--body-file", "-"]),
            BODY,
            2,
            &["--secret #1"],
        ),
        (
            "empty secret",
            owned(&["--provider", "stripe", "--secret", "", "--body-file", "-"]),
            BODY,
            2,
            &["empty_secret"],
        ),
        (
            "empty secret beside a good one",
            owned(&["--provider", "stripe", "--secret", LEAK, "--secret=", "--body-file", "-"]),
            BODY,
            2,
            &["empty_secret", "#2"],
        ),
        (
            "bare whsec_",
            owned(&["--provider", "stripe", "--secret", "whsec_", "--body-file", "-"]),
            BODY,
            2,
            &["only_prefix"],
        ),
        (
            "bare whsec_ (Standard Webhooks)",
            owned(&["--provider", "standard-webhooks", "--secret", "whsec_", "--body-file", "-"]),
            BODY,
            2,
            &["--secret #1"],
        ),
        (
            "handshake signed with an empty key",
            owned(&[
                "--provider",
                "slack",
                "--secret",
                "",
                "--header",
                &empty_key_sig,
                "--header",
                &slack_ts,
                "--body-file",
                "-",
                "--now",
                &now,
            ]),
            challenge,
            2,
            &["empty_secret"],
        ),
        (
            "secret starting with a hyphen",
            owned(&[
                "--provider",
                "stripe",
                "--secret",
                "-starts-with-hyphen",
                "--header",
                &sig,
                "--body-file",
                "-",
                "--now",
                &now,
            ]),
            BODY,
            0,
            &["valid", "event key: evt_cli"],
        ),
        (
            "body of exactly --body-limit bytes",
            owned(&[
                "--provider",
                "stripe",
                "--secret=-starts-with-hyphen",
                "--header",
                &sig,
                "--body-file",
                "-",
                "--now",
                &now,
                "--body-limit",
                &limit,
            ]),
            BODY,
            0,
            &["valid"],
        ),
        (
            "stdin one byte over --body-limit",
            owned(&["--provider", "stripe", "--secret", "s", "--body-file", "-", "--body-limit", &limit_short]),
            BODY,
            2,
            &["--body-limit"],
        ),
        (
            "endless body file",
            owned(&["--provider", "stripe", "--secret", LEAK, "--body-file", "/dev/zero"]),
            b"",
            2,
            &["--body-limit"],
        ),
        ("--body-limit 0", base(&["--body-limit", "0"]), BODY, 2, &["--body-limit"]),
        ("--body-limit over 1 GiB", base(&["--body-limit", "1073741825"]), BODY, 2, &["--body-limit"]),
    ];
    for (name, args, stdin, code, expect) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&args, Some(stdin));
        let all = text(&out);
        assert_eq!(out.status.code(), Some(code), "{name}: {all}");
        for e in expect {
            assert!(all.contains(e), "{name}: {e:?} not in {all}");
        }
        assert!(!all.contains("LEAKED0"), "{name}: key material printed: {all}");
        assert!(!all.contains("panicked"), "{name}: {all}");
    }
}

/// Input from the second providers review: GitHub's documentation example
/// (`Hello, World!`, "It's a Secret to Everybody", no `X-GitHub-Delivery`)
/// printed `invalid: key_missing` and exited 1, so a user checking a secret
/// was told the signature was bad. The signature, the time and the key are
/// separate verdicts now, in lines and in `--json`.
#[test]
fn verify_command_reports_signature_time_and_key_separately() {
    let gh_sig = "X-Hub-Signature-256: sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    let gh = ["--provider", "github", "--secret", "It's a Secret to Everybody", "--header", gh_sig, "--body-file", "-"];
    let out = run(&gh, Some(b"Hello, World!"));
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "the signature verifies: {t}");
    assert!(t.starts_with("valid\nsignature: valid\n"), "{t}");
    assert!(t.contains("event key: key_missing") && t.contains("x-github-delivery") && t.contains("400"), "{t}");

    let json = |args: &[&str], body: &[u8]| -> (i32, serde_json::Value) {
        let out = run(&[args, &["--json"]].concat(), Some(body));
        (out.status.code().unwrap(), serde_json::from_slice(&out.stdout).expect("one JSON object"))
    };
    let (code, v) = json(&gh, b"Hello, World!");
    assert_eq!(code, 0);
    assert_eq!(
        (v["signature"].as_str(), v["key_error"].as_str(), v["mac_matched"].as_bool()),
        (Some("valid"), Some("key_missing"), Some(true))
    );
    assert!(v["key"].is_null());
    assert_eq!(v["key_from"], "the x-github-delivery header");

    // Stale, with the right and with a wrong secret: both exit 1, and say whether the MAC matched.
    let header = format!("Stripe-Signature: {}", stripe::FACTS.sign(&SigningSecret::from("whsec_cli"), NOW, BODY));
    for (secret, matched) in [("whsec_cli", true), ("whsec_wrong", false)] {
        let args = stripe_args(&header, secret, "1700003600");
        let out = run(&args, Some(BODY));
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{t}");
        assert!(t.starts_with("invalid: timestamp_too_old"), "{t}");
        assert_eq!(t.contains("the MAC matches"), matched, "{secret}: {t}");
        let (code, v) = json(&args, BODY);
        assert_eq!(code, 1);
        assert_eq!((v["signature"].as_str(), v["timestamp"].as_str()), (Some("invalid"), Some("too_old")));
        assert_eq!(v["mac_matched"].as_bool(), Some(matched), "{secret}");
    }
    // Valid and fresh, with its key and type.
    let args = stripe_args(&header, "whsec_cli", "1700000000");
    let (code, v) = json(&args, BODY);
    assert_eq!(code, 0);
    assert_eq!(
        (v["key"].as_str(), v["event_type"].as_str(), v["timestamp"].as_str()),
        (Some("evt_cli"), Some("invoice.paid"), Some("ok"))
    );
}
