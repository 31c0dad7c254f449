//! Razorpay: the `X-Razorpay-Signature` header.
//!
//! Scheme (Razorpay, "Validate and Test Webhooks",
//! <https://razorpay.com/docs/webhooks/validate-test/>, and the SDK helper
//! `Razorpay.validateWebhookSignature` in `razorpay` on npm):
//! `X-Razorpay-Signature: <hex HMAC-SHA256 of the raw body>`, no prefix,
//! keyed with the **webhook secret** set when the webhook was created (not
//! the API key secret), as UTF-8 bytes. Razorpay sends one signature. After
//! the secret is changed, retries of older events are still signed with the
//! old one (Razorpay, "Webhooks FAQs",
//! <https://razorpay.com/docs/webhooks/faqs/>): configure both secrets until
//! those retries are over (24 hours). The SDK compares lower-case hex only;
//! this verifier also accepts upper-case digits of the same value.
//!
//! **Signed / not signed:** only the raw body is signed, so the event type
//! (the body's `event`) is signed. The event key, the
//! `x-razorpay-event-id` header, is **not signed**; nor is any other header.
//!
//! The event key is `x-razorpay-event-id`, the id Razorpay's "Best
//! Practices" page (<https://razorpay.com/docs/webhooks/best-practices/>)
//! tells receivers to deduplicate on: the same event can arrive several
//! times, "an expected behaviour". The body holds no event id of its own.
//! The event type is the body's `event` (`payment.captured`).
//!
//! **Retries** (Best Practices): a delivery not answered 2xx is retried with
//! an exponential back-off for 24 hours after the event was created, then
//! the webhook is disabled; an event up to 15 days old can be replayed on
//! request (FAQs), hence [`FACTS`]' `replay_window`. **Tolerance:** none; no
//! timestamp is signed (the body's `created_at` is signed but Razorpay sets
//! no window on it). **Handshake:** none.
//!
//! **Limit of the scheme:** neither a timestamp nor the event id is signed:
//! whoever captured one delivery can send it again under a fresh
//! `x-razorpay-event-id`, and it verifies and is claimed as a new event. Make
//! the business write idempotent on the payload's own identity (the payment
//! id with its `status`) where that matters, and serve the endpoint over TLS.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! event's `created_at` (Unix seconds), or the entity's own `created_at`;
//! Razorpay does not promise the order of deliveries.

use crate::key::{EventIdentity, HeaderKey, KeyError, KeyExtractor};
use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;

/// The facts of the razorpay preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Razorpay event can be sent again: 15 days.
///
/// Razorpay retries a failed delivery for 24 hours after the event was
/// created (<https://razorpay.com/docs/webhooks/best-practices/>), and
/// replays an event on request if it is not older than 15 days
/// (<https://razorpay.com/docs/webhooks/faqs/>).
pub const FACTS: HmacPreset = HmacPreset {
    name: "razorpay",
    scheme: HmacScheme { strict: true, ..HmacScheme::new("x-razorpay-signature") },
    event_key: EventKey::Own {
        extractor: &event_identity,
        reads: "the x-razorpay-event-id header",
        id_header: Some(EVENT_ID_HEADER),
    },
    headers: &[],
    replay_window: super::days(15),
    replay_evidence:
        "24 hours of retries; replay of events up to 15 days old (https://razorpay.com/docs/webhooks/best-practices/)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::sdk(&["sdk_time_cases"]),
};

impl Provider {
    /// Razorpay (`X-Razorpay-Signature`; key = `x-razorpay-event-id`). See [`crate::providers::razorpay`].
    ///
    /// The Razorpay preset: [`razorpay::FACTS`](FACTS) and `event_identity`.
    pub fn razorpay() -> Self {
        FACTS.provider()
    }
}

/// The header carrying the event id (the event key).
const EVENT_ID_HEADER: &str = "x-razorpay-event-id";

/// Razorpay's event identity: key = `x-razorpay-event-id`; type = the
/// body's `event`.
///
/// # Errors
/// [`KeyErrorKind::Missing`](crate::key::KeyErrorKind::Missing) without `x-razorpay-event-id`,
/// [`KeyErrorKind::Invalid`](crate::key::KeyErrorKind::Invalid) for two different values of it or one
/// that is not visible ASCII.
fn event_identity(parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
    let mut identity = HeaderKey::new(http::HeaderName::from_static(EVENT_ID_HEADER)).extract(parts, body)?;
    if let Ok(doc) = serde_json::from_slice::<serde_json::Value>(body) {
        identity.event_type = doc.get("event").and_then(serde_json::Value::as_str).map(str::to_owned);
    }
    Ok(identity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::providers::tests::support::BodyOnly;
    use crate::test_support::{headers, identity};

    use crate::verify::VerifyErrorKind;

    /// The common cases, rotation and precheck, and Razorpay's own: hex in
    /// either case, no prefix.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"event":"payment.captured","payload":{}}"#;
        BodyOnly::of(&FACTS).check_cases("rzp_secret", body, b"{\"event\":\"x\"}", "zz", |_, good| {
            vec![
                ("upper-case hex", vec![good.to_uppercase()], Ok(())),
                ("sha256= prefix", vec![format!("sha256={good}")], Err(VerifyErrorKind::MalformedHeader)),
                ("short hex", vec!["abcd".to_owned()], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
    }

    #[test]
    fn key_from_the_header() {
        let p = Provider::razorpay();
        let no_id = p.extractor_ref().extract(&headers(&[]), b"{\"event\":\"x\"}").unwrap_err();
        assert_eq!(no_id.kind(), KeyErrorKind::Missing);
        let id = identity(&p, &headers(&[(EVENT_ID_HEADER, "E1")]), b"not json");
        assert_eq!((id.key.as_str(), id.event_type), ("E1", None));
        assert_eq!(p.name(), "razorpay");
    }
}
