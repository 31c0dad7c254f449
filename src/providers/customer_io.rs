//! Customer.io (reporting webhooks): the `X-CIO-Signature` and
//! `X-CIO-Timestamp` headers.
//!
//! Scheme (Customer.io, "Reporting Webhooks", "Securely verifying requests",
//! <https://docs.customer.io/api/webhooks/>, and the official Node SDK,
//! `customerio-node` 5.2.0, `verifyRequestSignature`):
//! - `X-CIO-Timestamp: <unix seconds>` and `X-CIO-Signature: <hex>`, the
//!   lower-case hex HMAC-SHA256 of `v0:{timestamp}:{raw body}` (the shape of
//!   Slack's), keyed with the webhook's signing key as given. One signature
//!   per delivery; to rotate, configure the old and new keys together.
//!   Upper-case hex is accepted here (the SDK compares hex text and refuses
//!   it); anything that is not 64 hex digits is malformed.
//! - tolerance: Customer.io's SDK checks no age at all, and its docs give
//!   none. The timestamp is signed, so [`FACTS`]' tolerance is the crate's
//!   usual 300 seconds in both directions, our choice; widen it with
//!   `FACTS.verifier().tolerance(d)` if deliveries queue longer.
//!
//! The event key is the body's `event_id` (a ULID), the id of the reporting
//! event: it is inside the signed body and names the event, not the attempt,
//! so a retry repeats it (Customer.io does not state this in so many words;
//! it is what an event id means). The event type is
//! `{object_type}.{metric}` (`email.sent`, `push.opened`), or `object_type`
//! alone when there is no `metric`.
//!
//! **Signed / not signed** (<https://docs.customer.io/api/webhooks/>): the
//! `X-CIO-Timestamp` and the raw body are signed, so the event key and type
//! (from the body) are signed. Other headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! body's `timestamp` (Unix seconds, when the metric happened).

use std::time::Duration;

use crate::key::{EventIdentity, JsonPointerKey, KeyError, KeyExtractor};
use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::{HmacScheme, Signed, Tolerance};
use crate::verify::Boundary;

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "x-cio-signature";
/// The header the signed timestamp travels in.
const TIMESTAMP_HEADER: &str = "x-cio-timestamp";

/// The facts of the customer-io preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Customer.io reporting event can be sent again: 30 days.
///
/// Customer.io's "Reporting Webhooks" page
/// (<https://docs.customer.io/api/webhooks/>) says a delivery that does not
/// get a 2xx within its timeout is retried, without a schedule or span we
/// could confirm, and documents no manual redelivery. With the span not
/// stated, the window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "customer-io",
    scheme: HmacScheme {
        strict: true,
        content_prefix: "v0:",
        signed: Signed::TimestampBody { separator: ":" },
        timestamp_header: Some(TIMESTAMP_HEADER),
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(300),
            evidence:
                "none stated and the SDK checks no age (https://docs.customer.io/api/webhooks/): the usual 300 seconds",
            boundary: Boundary::Inclusive,
        }),
        ..HmacScheme::new(SIGNATURE_HEADER)
    },
    event_key: EventKey::Own { extractor: &event_identity, reads: "the body's event_id (JSON)", id_header: None },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://docs.customer.io/api/webhooks/)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::sdk(&[]),
};

impl Provider {
    /// Customer.io (`X-CIO-Signature` of `v0:{ts}:{body}`, 300 s; key = `event_id`). See [`crate::providers::customer_io`].
    ///
    /// The Customer.io reporting-webhooks preset: [`customer_io::FACTS`](FACTS) with
    /// the 300 second tolerance; key = the body's `event_id`, type =
    /// `{object_type}.{metric}` (`event_identity`).
    pub fn customer_io() -> Self {
        FACTS.provider()
    }
}

/// Customer.io's event identity: key = the body's `event_id`; type =
/// `{object_type}.{metric}`, or `object_type` alone.
///
/// # Errors
/// As [`JsonPointerKey`] for `event_id`: missing, not a string or integer,
/// or a body that is not JSON.
fn event_identity(parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
    let mut identity = JsonPointerKey::new("/event_id").extract(parts, body)?;
    let doc: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let text = |name: &str| doc.get(name).and_then(serde_json::Value::as_str).filter(|s| !s.is_empty());
    identity.event_type = match (text("object_type"), text("metric")) {
        (Some(object), Some(metric)) => Some(format!("{object}.{metric}")),
        (Some(object), None) => Some(object.to_owned()),
        (None, _) => None,
    };
    Ok(identity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::TwoHeaders;
    use crate::test_support::assert_body_identity;
    use crate::verify::hmac_sha256;
    use crate::verify::VerifyErrorKind;

    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"event_id":"01J0","object_type":"email","metric":"sent"}"#;
        let t = TwoHeaders::facts(&FACTS, body);
        let upper = t.good.to_uppercase();
        let prefixed = format!("v0={}", t.good);
        let short = &t.good[..62];
        let slack_style = hex::encode(hmac_sha256(&t.key, &[b"v0:", t.timestamp.as_bytes(), b".", body]));
        use VerifyErrorKind::{MalformedHeader, NoMatchingSignature};
        t.check_with_common(&[
            t.case("upper-case hex").signature(&upper),
            t.case("rotation: the other line matches").signatures(&[&t.by_other, &t.good]),
            t.case("v0= prefix").signature(&prefixed).fails(MalformedHeader),
            t.case("short hex").signature(short).fails(MalformedHeader),
            t.case("dot separator").signature(&slack_style).fails(NoMatchingSignature),
            t.case("timestamp not digits").timestamp("1700000000.0").fails(MalformedHeader),
            t.case("another timestamp").timestamp("1700000001").fails(NoMatchingSignature),
        ]);
    }

    #[test]
    fn rotation_tolerance_and_replay() {
        let body = br#"{"event_id":"01J0"}"#;
        let t = TwoHeaders::facts(&FACTS, body);
        t.check_rotation_tolerance_and_replay(FACTS.verifier().tolerance(Duration::from_secs(600)));
    }

    #[test]
    fn key_cases() {
        let p = Provider::customer_io();
        assert_body_identity(
            &p,
            br#"{"event_id":"e1","object_type":"push","metric":"opened"}"#,
            "e1",
            Some("push.opened"),
        );
        assert_body_identity(&p, br#"{"event_id":"e1","object_type":"email"}"#, "e1", Some("email"));
        assert_body_identity(&p, br#"{"event_id":"e1","metric":"sent"}"#, "e1", None);
        let parts = http::Request::new(()).into_parts().0;
        assert!(p.identify(&parts, br#"{"object_type":"email"}"#).is_err());
        assert!(p.identify(&parts, b"not json").is_err());
    }
}
