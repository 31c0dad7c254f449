//! Slack: the `X-Slack-Signature` header (Events API, slash commands, interactivity).
//!
//! Scheme (Slack, "Verifying requests from Slack",
//! <https://api.slack.com/authentication/verifying-requests-from-slack>):
//! - `X-Slack-Request-Timestamp` carries the request time in Unix seconds;
//!   `X-Slack-Signature` carries `v0=` and the hex HMAC-SHA256 (lower case)
//!   of the base string `v0:{timestamp}:{raw body}`, keyed with the app's
//!   signing secret as UTF-8 bytes (used as shown, not decoded).
//! - `v0` is the only version Slack has published; a signature of any other
//!   version is ignored (and so cannot match). Slack sends one signature and
//!   has no rotation overlap of its own: to rotate, configure the old and the
//!   new secret together while Slack switches; either may match.
//! - the timestamp must be within five minutes of now, as Slack's docs and
//!   its SDKs check (`abs(now - timestamp) > 60 * 5` is refused); this crate
//!   applies [`FACTS`]' tolerance in both directions, configurable with
//!   `FACTS.verifier().tolerance(d)`.
//!
//! The event key is the Events API callback's `event_id` (`/event_id`) and
//! the event type the inner event's `type` (`/event/type`), or the outer
//! `type` when there is no inner event (Slack, "The Events API", callback
//! fields, <https://api.slack.com/apis/events-api>).
//!
//! **Retries.** Slack retries a delivery it considers failed (no 2xx within
//! 3 seconds) up to three times, adding `X-Slack-Retry-Num` (1, 2, 3) and
//! `X-Slack-Retry-Reason` (Slack, "The Events API", retries,
//! <https://api.slack.com/apis/events-api>). Each retry is a new signed
//! request carrying the same `event_id`: it is verified like any delivery and
//! its claim finds the first one's, so the handler does not run twice.
//! Nothing here reads the retry headers, and no retry is refused for being a
//! retry.
//!
//! **URL verification.** When a Request URL is configured Slack sends
//! `{"token": "...", "challenge": "...", "type": "url_verification"}`, signed
//! like any delivery. The preset's [`Challenge`](crate::providers::Challenge) answers it
//! after the signature check and before any claim: `200`, `Content-Type:
//! text/plain`, the `challenge` value as the body, as Slack documents
//! (<https://api.slack.com/events/url_verification>). Nothing is stored.
//!
//! **Slash commands and interactivity.** Both are signed with the same `v0`
//! scheme over the raw body, and both are `application/x-www-form-urlencoded`
//! (Slack, "Enabling interactivity with Slash Commands",
//! <https://api.slack.com/interactivity/slash-commands>, and "Handling user
//! interaction", <https://api.slack.com/interactivity/handling>): a slash
//! command's fields (`command`, `text`, `trigger_id`, ...), or one `payload`
//! field holding the interaction's JSON (`type`, `trigger_id`, ...). Neither
//! carries an `event_id`; each invocation has its own `trigger_id`, which is
//! the key (type: the command, such as `/deploy`, or the payload's `type`,
//! such as `block_actions`). The handler receives the raw form body. Slack
//! does not redeliver these: the key stops a client's or proxy's repeat. A
//! form body without a `trigger_id` is 400 (`key_missing`).
//! `app_rate_limited` notifications carry no `event_id`: also 400.
//!
//! **Signed / not signed**
//! (<https://api.slack.com/authentication/verifying-requests-from-slack>):
//! the raw body and `X-Slack-Request-Timestamp` are signed, so the event key
//! (the body's `event_id`) and the event type (the body's `event.type` or
//! `type`) are signed. Other headers, `X-Slack-Retry-Num` and
//! `X-Slack-Retry-Reason` included, are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! envelope's `event_time` (Unix seconds) of the Events API
//! (<https://api.slack.com/apis/events-api#callback-field>).

use std::time::Duration;

use bytes::Bytes;

use crate::key::{EventIdentity, KeyError, KeyErrorKind};
use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::{HmacScheme, Quirks, Signed, Tolerance};
use crate::verify::Boundary;
use crate::verify::Delivery;

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "x-slack-signature";
/// The header the signed timestamp travels in.
const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";

/// The facts of the slack preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Slack event can be sent again: 1 day.
///
/// Slack retries a delivery three times, the last about 5 minutes after the
/// first attempt (<https://api.slack.com/apis/events-api#retries>), and
/// documents no manual redelivery; a day covers the retries with a margin.
pub const FACTS: HmacPreset = HmacPreset {
    name: "slack",
    scheme: HmacScheme {
        key_value: Some("v0"),
        strict: true,
        quirks: Quirks::SLACK,
        timestamp_header: Some(TIMESTAMP_HEADER),
        content_prefix: "v0:",
        signed: Signed::TimestampBody { separator: ":" },
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(300),
            evidence: "within five minutes, as Slack's docs say (https://api.slack.com/authentication/verifying-requests-from-slack)",
            boundary: Boundary::Inclusive,
        }),
        ..HmacScheme::new(SIGNATURE_HEADER)
    },
    event_key: EventKey::Own { extractor: &event_identity, reads: "the body's event_id (JSON)", id_header: None },
    headers: &[RETRY_NUM_HEADER, RETRY_REASON_HEADER],
    replay_window: super::days(1),
    replay_evidence: "three retries within minutes (https://api.slack.com/apis/events-api#retries)",
    challenge: Some(&url_verification),
    example_headers: &[],
    fixture: super::Fixture::own("Slack's SDK vectors (`event_callback.json`), with the URL-verification answer"),
};

impl Provider {
    /// Slack (`X-Slack-Signature` `v0=`, 300 s; key = `event_id`; answers `url_verification`). See [`crate::providers::slack`].
    ///
    /// Slack's Events API preset: [`slack::FACTS`](FACTS) (five minutes), key =
    /// `/event_id`, type = `/event/type` (or `/type`), and the
    /// `url_verification` handshake answered with its `challenge`. Name:
    /// `slack`.
    pub fn slack() -> Self {
        FACTS.provider()
    }
}

/// The retry count header on redeliveries (informational; not read here).
const RETRY_NUM_HEADER: &str = "x-slack-retry-num";
/// The retry reason header on redeliveries (informational; not read here).
const RETRY_REASON_HEADER: &str = "x-slack-retry-reason";

fn json_str(value: Option<&serde_json::Value>) -> Result<Option<String>, KeyError> {
    match value {
        None => Ok(None),
        Some(serde_json::Value::String(s)) if s.is_empty() => Err(KeyErrorKind::Missing.into()),
        Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(KeyErrorKind::Invalid.into()),
    }
}

/// `event_id`, and the inner event's type (or the outer type); for a
/// form-encoded body (a slash command or an interaction), its `trigger_id`.
fn event_identity(_parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
    let json = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if !json {
        return form_identity(body);
    }
    let doc: serde_json::Value = serde_json::from_slice(body).map_err(|_| KeyErrorKind::BodyNotJson)?;
    let key = json_str(doc.get("event_id"))?.ok_or(KeyErrorKind::Missing)?;
    let event_type = match doc.pointer("/event/type") {
        Some(inner) => json_str(Some(inner))?,
        None => json_str(doc.get("type"))?,
    };
    Ok(EventIdentity { key, event_type })
}

/// A slash command's `trigger_id` and `command`, or an interaction's
/// (`payload=` JSON) `trigger_id` and `type`.
fn form_identity(body: &[u8]) -> Result<EventIdentity, KeyError> {
    let mut trigger = None;
    let mut command = None;
    let mut payload = None;
    for (name, value) in form_urlencoded::parse(body) {
        match &*name {
            "trigger_id" => trigger = Some(value.into_owned()),
            "command" => command = Some(value.into_owned()),
            "payload" => payload = Some(value.into_owned()),
            _ => {}
        }
    }
    if let Some(payload) = payload {
        let doc: serde_json::Value = serde_json::from_str(&payload).map_err(|_| KeyErrorKind::BodyNotJson)?;
        let key = json_str(doc.get("trigger_id"))?.ok_or(KeyErrorKind::Missing)?;
        return Ok(EventIdentity { key, event_type: json_str(doc.get("type"))? });
    }
    let key = trigger.filter(|t| !t.is_empty()).ok_or(KeyErrorKind::Missing)?;
    Ok(EventIdentity { key, event_type: command.filter(|c| !c.is_empty()) })
}

/// Answers `url_verification` with its `challenge`, as `text/plain`.
fn url_verification(delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
    // Only a body that names the handshake is parsed here, so ordinary
    // events are not parsed twice (the key extractor parses them).
    const NEEDLE: &[u8] = b"url_verification";
    if !delivery.body.windows(NEEDLE.len()).any(|w| w == NEEDLE) {
        return None;
    }
    let doc: serde_json::Value = serde_json::from_slice(delivery.body).ok()?;
    if doc.get("type")?.as_str()? != "url_verification" {
        return None;
    }
    let challenge = doc.get("challenge")?.as_str()?;
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "text/plain")
        .body(Bytes::copy_from_slice(challenge.as_bytes()))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::sign_at;
    use crate::providers::tests::support::TwoHeaders;
    use crate::test_support::fixture_json;
    use crate::test_support::{at, headers as parts, NOW};
    use crate::verify::SigningSecret;
    use crate::verify::VerifyErrorKind;
    use crate::verify::VerifyErrorKind::{MalformedHeader, NoMatchingSignature};
    use crate::verify::{Delivery, Verifier as _};

    /// The worked example in Slack's "Verifying requests from Slack": a
    /// slash command body, secret `8f742231b10e8888abcd99yyyzzz85a5`,
    /// timestamp `1531420618`.
    #[test]
    fn slack_docs_vector() {
        let secret = SigningSecret::from("8f742231b10e8888abcd99yyyzzz85a5");
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V\
&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=\
&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN\
&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let expected = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(sign_at(&FACTS, &secret, 1_531_420_618, body), expected);
        let p = parts(&[(SIGNATURE_HEADER, expected), (TIMESTAMP_HEADER, "1531420618")]);
        let secrets = [secret];
        let v = FACTS.verifier();
        assert!(v.verify(&Delivery::new(&p, body, &secrets, at(1_531_420_618))).is_ok());
        assert_eq!(
            v.verify(&Delivery::new(&p, &body[1..], &secrets, at(1_531_420_618))).unwrap_err().kind(),
            VerifyErrorKind::NoMatchingSignature
        );
    }

    /// A delivery signed by Slack's Python SDK (`slack_sdk` 3.47.0,
    /// `SignatureVerifier.generate_signature`); see
    /// `scripts/fixtures/slack.py`.
    #[test]
    fn slack_sdk_fixture() {
        let fixture: serde_json::Value = fixture_json("slack/event_callback.json");
        let field = |name: &str| fixture[name].as_str().unwrap().to_owned();
        let (secret, timestamp, body, signature) =
            (field("secret"), field("timestamp"), field("body"), field("signature"));
        let ts: u64 = timestamp.parse().unwrap();
        assert_eq!(sign_at(&FACTS, &SigningSecret::from(secret.as_str()), ts, body.as_bytes()), signature);
        let p = parts(&[(SIGNATURE_HEADER, &signature), (TIMESTAMP_HEADER, &timestamp)]);
        let secrets = [SigningSecret::from(secret.as_str())];
        assert!(FACTS.verifier().verify(&Delivery::new(&p, body.as_bytes(), &secrets, at(ts))).is_ok());
        let id = event_identity(&p, body.as_bytes()).unwrap();
        assert_eq!((id.key.as_str(), id.event_type.as_deref()), ("Ev123ABC456", Some("app_mention")));
    }

    /// Slack's own cases; the finer probes are in the conformance table.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"type":"event_callback","event_id":"Ev1","event":{"type":"message"}}"#;
        let s = TwoHeaders::facts(&FACTS, body);
        let hex = &s.good["v0=".len()..];
        s.check_with_common(&[
            s.case("upper-case hex").signature(&format!("v0={}", hex.to_uppercase())),
            s.case("same header twice").signatures(&[&s.good, &s.good]),
            s.case("other timestamp").timestamp("1700000001").fails(NoMatchingSignature),
            s.case("unknown version ignored").signature(&format!("v1={hex}")).fails(NoMatchingSignature),
            s.case("two different signatures").signatures(&[&s.good, &s.by_other]).fails(MalformedHeader),
            s.case("no version prefix").signature(hex).fails(MalformedHeader),
            s.case("short hex").signature("v0=abcd").fails(MalformedHeader),
            s.case("not hex").signature(&format!("v0={}", "zz".repeat(32))).fails(MalformedHeader),
            s.case("non-numeric timestamp").timestamp("17e8").fails(MalformedHeader),
            s.case("multi-byte garbage").signature("v0=é").fails(MalformedHeader),
        ]);
    }

    #[test]
    fn rotation_tolerance_and_replay() {
        let s = TwoHeaders::facts(&FACTS, b"{}");
        s.check_rotation_tolerance_and_replay(FACTS.verifier().tolerance(Duration::from_secs(600)));
    }

    #[test]
    fn event_keys() {
        let p = parts(&[]);
        let cases: &[(&str, &[u8], Result<(&str, Option<&str>), KeyErrorKind>)] = &[
            (
                "event callback",
                br#"{"type":"event_callback","event_id":"Ev9","event":{"type":"reaction_added"}}"#,
                Ok(("Ev9", Some("reaction_added"))),
            ),
            (
                "no inner event",
                br#"{"type":"app_uninstalled_team","event_id":"Ev8"}"#,
                Ok(("Ev8", Some("app_uninstalled_team"))),
            ),
            ("no type", br#"{"event_id":"Ev7"}"#, Ok(("Ev7", None))),
            ("no event_id", br#"{"type":"app_rate_limited","minute_rate_limited":1}"#, Err(KeyErrorKind::Missing)),
            ("empty event_id", br#"{"event_id":""}"#, Err(KeyErrorKind::Missing)),
            ("numeric event_id", br#"{"event_id":5}"#, Err(KeyErrorKind::Invalid)),
            ("inner type not a string", br#"{"event_id":"Ev6","event":{"type":1}}"#, Err(KeyErrorKind::Invalid)),
            ("form body without trigger_id", b"token=x&command=%2Fdo", Err(KeyErrorKind::Missing)),
            (
                "slash command",
                b"token=x&team_id=T1&command=%2Fdeploy&text=prod&trigger_id=13345224609.738474920.8088930838d88f008e0",
                Ok(("13345224609.738474920.8088930838d88f008e0", Some("/deploy"))),
            ),
            (
                "interaction payload",
                b"payload=%7B%22type%22%3A%22block_actions%22%2C%22trigger_id%22%3A%2212466734323.1395872398%22%7D",
                Ok(("12466734323.1395872398", Some("block_actions"))),
            ),
            (
                "interaction without trigger_id",
                b"payload=%7B%22type%22%3A%22block_actions%22%7D",
                Err(KeyErrorKind::Missing),
            ),
            ("interaction payload not JSON", b"payload=nope", Err(KeyErrorKind::BodyNotJson)),
        ];
        for (name, body, want) in cases {
            let got = event_identity(&p, body);
            let got = got.as_ref().map(|i| (i.key.as_str(), i.event_type.as_deref())).map_err(|e| e.kind());
            assert_eq!(got, *want, "{name}");
        }
    }

    #[test]
    fn url_verification_challenge() {
        // Through the preset's challenge, which is `url_verification`.
        let provider = crate::providers::Provider::slack();
        let respond = |d: &Delivery<'_>| provider.challenge_ref().expect("a challenge").respond(d);
        let p = parts(&[]);
        let docs_example = br#"{
    "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
    "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
    "type": "url_verification"
}"#;
        let answer = respond(&Delivery::new(&p, docs_example, &[], at(NOW))).expect("answered");
        assert_eq!(answer.status(), http::StatusCode::OK);
        assert_eq!(answer.headers()[http::header::CONTENT_TYPE], "text/plain");
        assert_eq!(answer.body().as_ref(), b"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P");
        let not_handshakes: &[(&str, &[u8])] = &[
            ("event", br#"{"type":"event_callback","event_id":"Ev1","event":{"type":"message"}}"#),
            ("word in a message", br#"{"type":"event_callback","event_id":"Ev1","event":{"text":"url_verification"}}"#),
            ("no challenge", br#"{"type":"url_verification"}"#),
            ("challenge not a string", br#"{"type":"url_verification","challenge":1}"#),
            ("not json", b"type=url_verification"),
        ];
        for (name, body) in not_handshakes {
            assert!(respond(&Delivery::new(&p, body, &[], at(NOW))).is_none(), "{name}");
        }
    }

    /// A retry is a new signed request for the same event: it verifies on
    /// its own and carries the same key, so its claim finds the first one.
    #[test]
    fn retry_is_another_delivery_of_the_same_event() {
        let provider = crate::providers::Provider::slack();
        let secrets = [SigningSecret::from("s")];
        let body = br#"{"type":"event_callback","event_id":"Ev42","event":{"type":"message"}}"#;
        let first_ts = NOW.to_string();
        let retry_ts = (NOW + 60).to_string();
        let first_sig = sign_at(&FACTS, &secrets[0], NOW, body);
        let retry_sig = sign_at(&FACTS, &secrets[0], NOW + 60, body);
        let first = parts(&[(SIGNATURE_HEADER, &first_sig), (TIMESTAMP_HEADER, &first_ts)]);
        let retry = parts(&[
            (SIGNATURE_HEADER, &retry_sig),
            (TIMESTAMP_HEADER, &retry_ts),
            (RETRY_NUM_HEADER, "1"),
            (RETRY_REASON_HEADER, "http_timeout"),
        ]);
        let mut keys = Vec::new();
        for (p, now) in [(&first, NOW), (&retry, NOW + 60)] {
            let d = Delivery::new(p, body, &secrets, at(now));
            assert!(provider.verifier_ref().verify(&d).is_ok());
            assert!(provider.challenge_ref().unwrap().respond(&d).is_none());
            keys.push(provider.extractor_ref().extract(p, body).unwrap().key);
        }
        assert_eq!(keys, ["Ev42", "Ev42"]);
    }
}
