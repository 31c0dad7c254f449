//! Front (application webhooks): the `x-front-signature` and
//! `x-front-request-timestamp` headers.
//!
//! Scheme (Front, "Application webhooks", "Verifying integrity",
//! <https://dev.frontapp.com/docs/application-webhooks>):
//! - `x-front-request-timestamp: <unix milliseconds>` and
//!   `x-front-signature: <base64 HMAC-SHA256 of "{timestamp}:{raw body}">`,
//!   keyed with the app's secret (the "App secret" on the app's page in
//!   Front's developer settings) as given. One signature; to rotate,
//!   configure the old and new keys together.
//! - tolerance: the timestamp is signed; Front's security guide for
//!   connectors (<https://dev.frontapp.com/docs/security-1>) recommends
//!   refusing requests older than 5 minutes. [`FACTS`]' tolerance is those
//!   300 seconds, in both directions, compared to the millisecond.
//!
//! **Handshake.** When an application webhook is saved, Front sends a
//! signed POST with an `x-front-challenge` header and the body `{"type":
//! "sync", "authorization": {...}}`, and expects the challenge back. The
//! preset's [`Challenge`], `Validation`, answers a verified request that carries the header
//! **and** a signed body of type `sync` with `200` and the challenge as the
//! `text/plain` body; nothing is claimed. (Front's page shows the request
//! but not the expected answer's form; echoing the challenge as a plain-text
//! body is our assumption.)
//!
//! **Not covered: rule webhooks.** Front's older rule webhooks
//! (<https://dev.frontapp.com/docs/rule-webhooks>) sign differently (base64
//! HMAC-SHA1 of the body with the company API secret, no timestamp):
//! configure them with
//! [`HmacVerifier`](crate::verify::generic::HmacVerifier) (`.algorithm(Algorithm::Sha1).encoding(Encoding::Base64)`) and key `/id`.
//!
//! The event key is the body's `payload.id`, the event's id (`evt_...`);
//! the event type is the body's `type` (`inbound_received`,
//! `assignee_changed`).
//!
//! **Signed / not signed** (<https://dev.frontapp.com/docs/application-webhooks>):
//! the timestamp header and the raw body are signed, so the event key and
//! type are. `x-front-challenge` is not (the signed `sync` body decides).
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! event's `payload.emitted_at` (Unix seconds with a fraction).

use std::time::Duration;

use bytes::Bytes;

use crate::providers::Challenge;
use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::{HmacScheme, Signed, TimestampFormat, Tolerance};
use crate::verify::Boundary;
use crate::verify::{single_header, Delivery, Encoding};

/// The header carrying the handshake's challenge (not signed).
const CHALLENGE_HEADER: &str = "x-front-challenge";

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "x-front-signature";
/// The header the signed timestamp travels in.
const TIMESTAMP_HEADER: &str = "x-front-request-timestamp";

/// The facts of the front preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Front event can be sent again: 30 days.
///
/// Front's application-webhooks page
/// (<https://dev.frontapp.com/docs/application-webhooks>) publishes no
/// retry schedule or span that the research for this preset could confirm,
/// and no manual redelivery. With the span not stated, the window is the
/// crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "front",
    scheme: HmacScheme {
        encoding: Encoding::Base64,
        strict: true,
        signed: Signed::TimestampBody { separator: ":" },
        timestamp_header: Some(TIMESTAMP_HEADER),
        timestamp_format: TimestampFormat::UnixMilliseconds,
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(300),
            evidence: "Front's security guide: refuse requests older than 5 minutes (https://dev.frontapp.com/docs/security-1)",
            boundary: Boundary::Inclusive,
        }),
        ..HmacScheme::new(SIGNATURE_HEADER)
    },
    event_key: EventKey::Json { id: "/payload/id", event_type: Some("/type") },
    headers: &[CHALLENGE_HEADER],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://dev.frontapp.com/docs/application-webhooks)",
    challenge: Some(&Validation),
    example_headers: &[],
    fixture: super::Fixture::formula(&["timestamp_ms"]),
};

impl Provider {
    /// Front (`x-front-signature` of `{ms}:{body}`, 300 s; key = `payload.id`; answers the challenge). See [`crate::providers::front`].
    ///
    /// The Front application-webhooks preset: [`front::FACTS`](FACTS) with the 300
    /// second tolerance; key = the body's `payload.id`, type = `type`;
    /// `Validation` answers the save-time handshake.
    pub fn front() -> Self {
        FACTS.provider()
    }
}

/// Answers Front's webhook validation (after verification): `200`
/// `text/plain` with the `x-front-challenge` value when the signed body's
/// `type` is `sync`; `None` otherwise.
#[derive(Debug, Clone, Copy, Default)]
struct Validation;

impl Challenge for Validation {
    fn respond(&self, delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
        let challenge = single_header(delivery.parts, CHALLENGE_HEADER).ok()?;
        let doc: serde_json::Value = serde_json::from_slice(delivery.body).ok()?;
        if doc.get("type").and_then(serde_json::Value::as_str) != Some("sync") {
            return None;
        }
        let mut res = http::Response::new(Bytes::from(challenge.to_owned()));
        res.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
        Some(res)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::TwoHeaders;
    use crate::providers::Provider;
    use crate::test_support::{at, headers, NOW};
    use crate::verify::VerifyErrorKind;
    use crate::verify::{hmac_sha256, SigningSecret};

    /// The signature header for `body` at `timestamp_ms` (the text of the
    /// timestamp header, Unix milliseconds), signed with `secret`.
    fn sign(secret: &SigningSecret, timestamp_ms: u64, body: &[u8]) -> String {
        FACTS.verifier().sign_text(secret, "", &timestamp_ms.to_string(), body)
    }

    fn two_headers(body: &[u8]) -> TwoHeaders<'_> {
        TwoHeaders::facts(&FACTS, body)
    }

    #[test]
    fn verifies_and_rejects() {
        use VerifyErrorKind::{MalformedHeader, NoMatchingSignature};
        let body = br#"{"type":"inbound_received","payload":{"id":"evt_1"}}"#;
        let t = two_headers(body);
        let seconds = NOW.to_string();
        let by_seconds = sign(&t.key, NOW, body);
        let hex = hex::encode(hmac_sha256(&t.key, &[t.timestamp.as_bytes(), b":", body]));
        let ms_plus_one = (NOW * 1000 + 1).to_string();
        t.check_with_common(&[
            t.case("rotation: the other line matches").signatures(&[&t.by_other, &t.good]),
            t.case("hex instead of base64").signature(&hex).fails(MalformedHeader),
            t.case("seconds, signed as seconds: 1970")
                .timestamp(&seconds)
                .signature(&by_seconds)
                .fails(VerifyErrorKind::TimestampTooOld),
            t.case("another millisecond").timestamp(&ms_plus_one).fails(NoMatchingSignature),
            t.case("fractional").timestamp("1700000000000.5").fails(MalformedHeader),
        ]);
    }

    #[test]
    fn rotation_tolerance_and_replay() {
        let mut t = two_headers(br#"{"payload":{"id":"evt_1"}}"#);
        t.tolerance = 300;
        t.check_rotation_tolerance_and_replay(FACTS.verifier().tolerance(Duration::from_secs(600)));
    }

    #[test]
    fn answers_the_validation_only() {
        let secret = SigningSecret::from("front_key");
        let sync = br#"{"type":"sync","authorization":{"id":"cmp_abc"}}"#;
        let event = br#"{"type":"inbound_received","payload":{"id":"evt_1"}}"#;
        let ms = (NOW * 1000).to_string();
        let provider = Provider::front();
        let answer = |body: &[u8], challenge: Option<&str>| {
            let sig = sign(&secret, NOW * 1000, body);
            let mut list = vec![(SIGNATURE_HEADER, sig.as_str()), (TIMESTAMP_HEADER, ms.as_str())];
            list.extend(challenge.map(|c| (CHALLENGE_HEADER, c)));
            let p = headers(&list);
            let secrets = [secret.clone()];
            provider.handshake(&Delivery::new(&p, body, &secrets, at(NOW))).map_err(|e| e.kind())
        };
        let res = answer(sync, Some("c-123")).unwrap().expect("answered");
        assert_eq!(res.status(), http::StatusCode::OK);
        assert_eq!(res.body().as_ref(), b"c-123");
        assert_eq!(res.headers()[http::header::CONTENT_TYPE], "text/plain");
        assert!(answer(event, Some("c-123")).unwrap().is_none(), "an event with a challenge header is an event");
        assert!(answer(sync, None).unwrap().is_none());
        // A forged validation is refused before any answer.
        let p = headers(&[(SIGNATURE_HEADER, "AAAA"), (TIMESTAMP_HEADER, &ms), (CHALLENGE_HEADER, "c")]);
        let secrets = [secret.clone()];
        assert!(provider.handshake(&Delivery::new(&p, sync, &secrets, at(NOW))).is_err());
    }
}
