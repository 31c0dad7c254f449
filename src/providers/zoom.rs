//! Zoom: the `x-zm-signature` and `x-zm-request-timestamp` headers, and the
//! `endpoint.url_validation` handshake.
//!
//! Scheme (Zoom, "Using webhooks", sections "Verify webhook events" and
//! "Validate your webhook endpoint",
//! <https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events>;
//! Zoom's own sample <https://github.com/zoom/webhook-sample> and the
//! `@zoom/rivet` SDK compute the same bytes):
//! - `x-zm-signature: v0=<hex HMAC-SHA256>`, lower-case hex, over
//!   `v0:{x-zm-request-timestamp}:{raw body}`, keyed with the app's **secret
//!   token** (Marketplace, Features, "Secret Token") as its UTF-8 bytes.
//! - `x-zm-request-timestamp` is Unix seconds (`1689061099` beside an
//!   `event_ts` of `1689061099652` ms).
//! - Zoom documents no tolerance and its SDK (`@zoom/rivet` 0.4.0,
//!   `users.cjs`, reads the timestamp only to rebuild the signed string)
//!   checks none. Zoom retries a failed delivery 5, 25 and 85 minutes after
//!   the first attempt and does not say whether a retry is signed afresh; if
//!   it resends the first attempt's timestamp, a tolerance under 85 minutes
//!   refuses the retries and the event is lost. [`FACTS`]' tolerance is
//!   therefore 2 hours, both directions (configurable with
//!   `FACTS.verifier().tolerance(d)`). That costs no replay protection: the event
//!   key is derived from the signed body, so a byte-for-byte replay inside
//!   the window is a duplicate of a claim kept for [`FACTS`]' `replay_window` (1 day).
//! - The header holds one signature. Other versions than `v0` are ignored,
//!   several header lines are all considered.
//! - Rotation: Zoom shows one secret token per app. After regenerating it,
//!   configure the old and the new token until no delivery signed with the
//!   old one can arrive: any one that matches passes.
//!
//! **Endpoint validation.** When an endpoint URL is saved, and every 72 hours
//! after, Zoom POSTs `{"event":"endpoint.url_validation","payload":
//! {"plainToken":"..."},"event_ts":...}`. That request is signed like any
//! other (Zoom's sample and `@zoom/rivet` verify it before answering), so it
//! passes [`FACTS`] first; then `UrlValidation` answers `200` with
//! `{"plainToken":"...","encryptedToken":"<hex HMAC-SHA256 of plainToken>"}`,
//! keyed with the secret token that verified the request. Nothing is claimed.
//!
//! **Event key.** Zoom payloads carry no event id: a delivery is
//! `{"event":"meeting.started","payload":{"account_id":...,"object":{...}},
//! "event_ts":<ms>}`, and the `x-zm-trackingid` header is a per-request
//! tracking id whose stability across retries Zoom does not document. The
//! key is therefore derived from the payload: `sha256:` and the hex SHA-256 of
//! the body in canonical JSON (RFC 8785 through [`crate::key::DerivedKey`],
//! numbers kept exact), so a retry of the same event
//! has the same key whatever its key order or spacing, and two different
//! events (two participants joining one meeting in the same millisecond:
//! same `event`, `event_ts` and `payload.object.id`, different
//! `payload.object.participant`) never share one. It assumes that a retry
//! resends the same body (same `event_ts` and payload), which Zoom does not
//! contradict but does not state either. The event type is `event`.
//!
//! **Signed / not signed** (<https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events>):
//! `x-zm-request-timestamp` and the raw body are signed, so the event key
//! (derived from the canonical body) and the event type (the body's `event`)
//! are signed. Other headers, `x-zm-trackingid` included, are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! payload's `event_ts` (Unix milliseconds).

use std::time::Duration;

use bytes::Bytes;

use crate::key::{EventIdentity, KeyError, KeyErrorKind};
use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::{HmacScheme, Signed, Tolerance};
use crate::verify::Boundary;
use crate::verify::{hmac_sha256, Delivery, SigningSecret, Verifier as _};

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "x-zm-signature";
/// The header the signed timestamp travels in.
const TIMESTAMP_HEADER: &str = "x-zm-request-timestamp";

/// The facts of the zoom preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Zoom event can be sent again: 1 day.
///
/// Zoom retries a delivery not answered with 200 or 204 within 3 seconds
/// three times: 5 minutes after the first attempt, 20 minutes after that and
/// 60 minutes after that (85 minutes in all), then gives up on the event
/// (Zoom, "Resolving webhook delays",
/// <https://developers.zoom.us/blog/webhook-delays/>); no manual
/// redelivery is documented. A day covers the retries with a margin.
pub const FACTS: HmacPreset = HmacPreset {
    name: "zoom",
    scheme: HmacScheme {
        key_value: Some("v0"),
        strict: true,
        timestamp_header: Some(TIMESTAMP_HEADER),
        content_prefix: "v0:",
        signed: Signed::TimestampBody { separator: ":" },
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(7_200),
            evidence: "none documented; retries span 85 minutes and are not said to be signed afresh (https://developers.zoom.us/blog/webhook-delays/)",
            boundary: Boundary::Inclusive,
        }),
        ..HmacScheme::new(SIGNATURE_HEADER)
    },
    event_key: EventKey::Own {
        extractor: &event_identity,
        reads: "fields of the JSON body (a derived key)",
        id_header: None,
    },
    headers: &[],
    replay_window: super::days(1),
    replay_evidence: "retries at 5, 25 and 85 minutes (https://developers.zoom.us/blog/webhook-delays/)",
    challenge: Some(&UrlValidation),
    example_headers: &[],
    fixture: super::Fixture::own("Rivet's vectors (`rivet.json`): an event and the URL validation"),
};

impl Provider {
    /// Zoom (`x-zm-signature` `v0=`, 2 h; derived key; answers `endpoint.url_validation`). See [`crate::providers::zoom`].
    ///
    /// The Zoom preset: [`zoom::FACTS`](FACTS) (2 h), key from `event_identity`,
    /// type `event`, and the `UrlValidation` handshake. The CLI name is `zoom`.
    pub fn zoom() -> Self {
        FACTS.provider()
    }
}

/// The `event` of Zoom's endpoint validation request.
const URL_VALIDATION_EVENT: &str = "endpoint.url_validation";

/// The `encryptedToken` Zoom expects for `plain_token`: the hex HMAC-SHA256
/// of the token, keyed with the secret token.
fn encrypted_token(secret: &SigningSecret, plain_token: &str) -> String {
    hex::encode(hmac_sha256(secret, &[plain_token.as_bytes()]))
}

/// Answers Zoom's `endpoint.url_validation` request (after verification):
/// `200` JSON `{"plainToken","encryptedToken"}`; `400` when the request has no
/// string `payload.plainToken`; `None` for every other delivery.
#[derive(Debug, Clone, Copy, Default)]
struct UrlValidation;

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn json_response(status: http::StatusCode, body: Vec<u8>) -> http::Response<Bytes> {
    let mut res = http::Response::new(Bytes::from(body));
    *res.status_mut() = status;
    res.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    res
}

impl crate::providers::Challenge for UrlValidation {
    fn respond(&self, delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
        // Cheap filter: ordinary events are not parsed a second time here.
        if !contains(delivery.body, URL_VALIDATION_EVENT.as_bytes()) {
            return None;
        }
        let doc: serde_json::Value = serde_json::from_slice(delivery.body).ok()?;
        if doc.get("event").and_then(|e| e.as_str()) != Some(URL_VALIDATION_EVENT) {
            return None;
        }
        let Some(plain) = doc.pointer("/payload/plainToken").and_then(|t| t.as_str()) else {
            return Some(json_response(http::StatusCode::BAD_REQUEST, br#"{"error":"no plainToken"}"#.to_vec()));
        };
        // The token that verified this request (during a rotation, the one
        // Zoom holds now). None verifies: no answer, so the handshake can never
        // sign attacker-chosen text with a secret (an HMAC oracle), whatever
        // verifier the provider was configured with.
        // The signature alone decides here (the delivery was verified,
        // timestamp included, before the challenge is asked).
        let zoom = FACTS.verifier();
        let secret = delivery.secrets.iter().find(|s| {
            let one = Delivery { secrets: std::slice::from_ref(*s), ..*delivery }.without_timestamp_check();
            zoom.verify(&one).is_ok()
        })?;
        let answer = serde_json::json!({
            "plainToken": plain,
            "encryptedToken": encrypted_token(secret, plain),
        });
        Some(json_response(http::StatusCode::OK, answer.to_string().into_bytes()))
    }
}

/// Zoom's event identity: key `sha256:<hex>` over `event` and the body in
/// canonical JSON ([`crate::key::DerivedKey`]: RFC 8785, numbers exact),
/// type `event` (see the module docs).
///
/// # Errors
/// [`KeyErrorKind::BodyNotJson`] for a body that is not JSON,
/// [`KeyErrorKind::TooDeep`] for one nesting deeper than
/// [`crate::key::MAX_JSON_DEPTH`], [`KeyErrorKind::DuplicateMember`] for an
/// object naming a member twice, [`KeyErrorKind::Invalid`] when it is not an
/// object or `event` is not a string, [`KeyErrorKind::Missing`] when `event`
/// is absent or empty.
fn event_identity(parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
    use crate::key::json::{self, Node};
    let doc = json::parse(body)?;
    if !matches!(doc, Node::Object(_)) {
        return Err(KeyErrorKind::Invalid.into());
    }
    match doc.pointer("/event") {
        Some(Node::String(s)) if !s.is_empty() => {}
        Some(Node::String(_)) | None => return Err(KeyErrorKind::Missing.into()),
        Some(_) => return Err(KeyErrorKind::Invalid.into()),
    }
    crate::key::DerivedKey::new().canonical_body().event_type_json("/event").extract_parsed(parts, Some(&doc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::sign_at;
    use crate::providers::tests::support::TwoHeaders;
    use crate::providers::Challenge as _;
    use crate::test_support::fixture_json;
    use crate::test_support::{at, NOW};
    use crate::verify::Delivery;
    use crate::verify::SigningSecret;
    use crate::verify::VerifyErrorKind::{MalformedHeader, NoMatchingSignature};

    fn parts(signatures: &[&str], timestamps: &[&str]) -> http::request::Parts {
        crate::test_support::two_header_lines(SIGNATURE_HEADER, signatures, TIMESTAMP_HEADER, timestamps)
    }

    /// Fixture from `scripts/fixtures/zoom.js`: signed with the algorithm of
    /// Zoom's webhook-sample and accepted by `@zoom/rivet@0.4.0`, whose
    /// answer to the validation request is recorded too.
    #[derive(Debug)]
    struct Fixture {
        secret: String,
        timestamp: String,
        signature: String,
        body: String,
    }

    fn fixture(doc: &serde_json::Value) -> Fixture {
        let s = |k: &str| doc[k].as_str().unwrap().to_owned();
        Fixture { secret: s("secret"), timestamp: s("timestamp"), signature: s("signature"), body: s("body") }
    }

    #[test]
    fn rivet_fixture() {
        let doc: serde_json::Value = fixture_json("zoom/rivet.json");
        assert_eq!(doc["rivet"]["event"], "valid");
        assert_eq!(doc["rivet"]["url_validation"], "valid");
        let event = fixture(&doc["event"]);
        let secrets = [SigningSecret::from(event.secret.as_str())];
        let ts: u64 = event.timestamp.parse().unwrap();
        assert_eq!(sign_at(&FACTS, &secrets[0], ts, event.body.as_bytes()), event.signature);
        let p = parts(&[&event.signature], &[&event.timestamp]);
        let d = Delivery::new(&p, event.body.as_bytes(), &secrets, at(ts));
        assert!(FACTS.verifier().verify(&d).is_ok());
        assert!(UrlValidation.respond(&d).is_none());

        let validation = fixture(&doc["url_validation"]);
        let secrets = [SigningSecret::from(validation.secret.as_str())];
        let ts: u64 = validation.timestamp.parse().unwrap();
        let p = parts(&[&validation.signature], &[&validation.timestamp]);
        let d = Delivery::new(&p, validation.body.as_bytes(), &secrets, at(ts));
        assert!(FACTS.verifier().verify(&d).is_ok());
        let answer = UrlValidation.respond(&d).expect("handshake answered");
        assert_eq!(answer.status(), http::StatusCode::OK);
        assert_eq!(answer.headers()[http::header::CONTENT_TYPE], "application/json");
        let got: serde_json::Value = serde_json::from_slice(answer.body()).unwrap();
        assert_eq!(got, doc["rivet"]["url_validation_response"]);
    }

    /// Zoom's own cases; the finer probes are in the conformance table.
    #[test]
    fn verifies_and_rejects() {
        let body =
            br#"{"event":"meeting.started","payload":{"account_id":"a","object":{"id":"1"}},"event_ts":1700000000000}"#;
        let mut s = TwoHeaders::facts(&FACTS, body);
        s.tolerance = 7_200; // the pinned default: Zoom's retries span 85 minutes
        s.check_with_common(&[
            s.case("upper-case hex").signature(&format!("v0={}", s.good[3..].to_uppercase())),
            s.case("unknown version ignored").signatures(&["v1=zz", &s.good]),
            s.case("same timestamp twice").timestamps(&[&s.timestamp, &s.timestamp]),
            s.case("other timestamp").timestamp("1700000001").fails(NoMatchingSignature),
            // No `v0` entry: the precheck sees that no signature can match.
            s.case("only v1").signature("v1=00").fails(NoMatchingSignature).precheck(Err(NoMatchingSignature)),
            s.case("no prefix").signature(&s.good[3..]).fails(MalformedHeader),
            s.case("short hex").signature("v0=abcd").fails(MalformedHeader),
            s.case("not hex").signature(&format!("v0={}", "z".repeat(64))).fails(MalformedHeader),
            s.case("multibyte").signature("v0=é").fails(MalformedHeader),
        ]);
    }

    #[test]
    fn rotation_and_replay() {
        let mut s = TwoHeaders::facts(&FACTS, br#"{"event":"x"}"#);
        s.tolerance = 7_200;
        s.check_rotation_tolerance_and_replay(FACTS.verifier().tolerance(4 * FACTS.scheme.tolerance.unwrap().duration));
    }

    #[test]
    fn url_validation_cases() {
        let old = SigningSecret::from("old_token");
        let new = SigningSecret::from("new_token");
        let body = br#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
        let ts = NOW.to_string();
        let header = sign_at(&FACTS, &new, NOW, body);
        let p = parts(&[&header], &[&ts]);
        // Answered with the token that signed the request, not the first one.
        let secrets = [old.clone(), new.clone()];
        let d = Delivery::new(&p, body, &secrets, at(NOW));
        assert!(FACTS.verifier().verify(&d).is_ok());
        let res = UrlValidation.respond(&d).unwrap();
        let got: serde_json::Value = serde_json::from_slice(res.body()).unwrap();
        assert_eq!(
            got,
            serde_json::json!({
                "plainToken": "qgg8vlvZRS6UYooatFL8Aw",
                "encryptedToken": encrypted_token(&new, "qgg8vlvZRS6UYooatFL8Aw"),
            })
        );
        assert_ne!(encrypted_token(&new, "t"), encrypted_token(&old, "t"));

        let cases: &[(&str, &[u8], Option<http::StatusCode>)] = &[
            ("ordinary event", br#"{"event":"meeting.started","payload":{}}"#, None),
            ("mentions it elsewhere", br#"{"event":"x","payload":{"topic":"endpoint.url_validation"}}"#, None),
            (
                "no plainToken",
                br#"{"event":"endpoint.url_validation","payload":{}}"#,
                Some(http::StatusCode::BAD_REQUEST),
            ),
            (
                "numeric plainToken",
                br#"{"event":"endpoint.url_validation","payload":{"plainToken":1}}"#,
                Some(http::StatusCode::BAD_REQUEST),
            ),
            ("not json", b"endpoint.url_validation", None),
        ];
        for (name, body, want) in cases {
            let d = Delivery::new(&p, body, &secrets, at(NOW));
            assert_eq!(UrlValidation.respond(&d).map(|r| r.status()), *want, "{name}");
        }
    }

    #[test]
    fn event_key_is_canonical() {
        let p = parts(&[], &[]);
        let compact = br#"{"event":"meeting.participant_joined","payload":{"account_id":"a","object":{"id":"85","participant":{"user_id":"u1","join_time":"2024-01-01T00:00:00Z"}}},"event_ts":1700000000123}"#;
        let reordered = br#"{ "event_ts": 1700000000123, "payload": {"object": {"participant": {"join_time": "2024-01-01T00:00:00Z", "user_id": "u1"}, "id": "85"}, "account_id": "a"}, "event": "meeting.participant_joined" }"#;
        let other_participant = br#"{"event":"meeting.participant_joined","payload":{"account_id":"a","object":{"id":"85","participant":{"user_id":"u2","join_time":"2024-01-01T00:00:00Z"}}},"event_ts":1700000000123}"#;
        let a = event_identity(&p, compact).unwrap();
        assert!(a.key.starts_with("sha256:") && a.key.len() == 71, "{}", a.key);
        assert_eq!(a.event_type.as_deref(), Some("meeting.participant_joined"));
        assert_eq!(event_identity(&p, reordered).unwrap(), a);
        assert_ne!(event_identity(&p, other_participant).unwrap().key, a.key);

        let nested = |depth: usize| {
            let open = r#"{"event":"meeting.started","payload":"#.repeat(depth);
            format!("{open}9007199254740993{}", "}".repeat(depth)).into_bytes()
        };
        // 24 levels took 7 s before keys were read in linear time.
        let deep = event_identity(&p, &nested(24)).unwrap();
        assert_ne!(deep.key, event_identity(&p, &nested(23)).unwrap().key);
        let too_deep = nested(1000);
        let cases: &[(&str, &[u8], KeyErrorKind)] = &[
            ("too deep", &too_deep, KeyErrorKind::TooDeep),
            ("duplicate member", br#"{"event":"a","payload":{"id":1,"id":2}}"#, KeyErrorKind::DuplicateMember),
            ("null event", br#"{"event":null}"#, KeyErrorKind::Invalid),
            ("not json", b"event=x", KeyErrorKind::BodyNotJson),
            ("array", b"[]", KeyErrorKind::Invalid),
            ("no event", br#"{"payload":{}}"#, KeyErrorKind::Missing),
            ("empty event", br#"{"event":""}"#, KeyErrorKind::Missing),
            ("numeric event", br#"{"event":1}"#, KeyErrorKind::Invalid),
        ];
        for (name, body, want) in cases {
            assert_eq!(event_identity(&p, body).unwrap_err().kind(), *want, "{name}");
        }
    }

    #[test]
    fn preset_wiring() {
        let provider = crate::providers::Provider::zoom();
        assert_eq!(provider.name(), "zoom");
        let secret = [SigningSecret::from("tok")];
        let body = br#"{"event":"endpoint.url_validation","payload":{"plainToken":"abc"}}"#;
        let header = sign_at(&FACTS, &secret[0], NOW, body);
        let ts = NOW.to_string();
        let p = parts(&[&header], &[&ts]);
        let d = Delivery::new(&p, body, &secret, at(NOW));
        assert!(provider.verifier_ref().verify(&d).is_ok());
        assert!(provider.challenge_ref().unwrap().respond(&d).is_some());
        let id = provider.extractor_ref().extract(&p, body).unwrap();
        assert_eq!(id.event_type.as_deref(), Some(URL_VALIDATION_EVENT));
    }
}
