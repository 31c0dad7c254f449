//! Paystack: the `x-paystack-signature` header.
//!
//! Scheme (Paystack, "Webhooks", "Verify event origin",
//! <https://paystack.com/docs/payments/webhooks/#verify-event-origin>):
//! `x-paystack-signature: <hex HMAC-SHA512 of the raw body>`, no prefix,
//! keyed with the integration's **secret key** (`sk_live_...` or
//! `sk_test_...`, Settings, API Keys & Webhooks) as UTF-8 bytes. Test and
//! live mode sign with their own secret key; an endpoint that receives both
//! configures both. One signature per delivery; changing the key means
//! configuring the old and new ones together for the changeover.
//!
//! **Signed / not signed:** only the raw body is signed, so the derived key
//! and the event type (`event`) are signed. Headers are not. Paystack also
//! names the IP addresses it sends from; the layer does not check them (an
//! allow-list in front of it can).
//!
//! **Event key.** Paystack sends no event or delivery id, in the body or in
//! a header: a delivery is `{"event": "charge.success", "data": {...}}`, the
//! object the event concerns as it was. The key is a [`DerivedKey`](crate::key::DerivedKey) over the
//! whole body in canonical JSON (RFC 8785), as for the other senders without
//! an id whose body is the event (Buildkite, Webflow, Help Scout): a retry
//! resends the event, so its key is equal even with its members reordered or
//! spaced otherwise; two events differ in `event` or in the object's state
//! (`status`, `paid_at`, `updatedAt`). Fields such as `event` + `data.id` +
//! a version were not chosen: the `data` of Paystack's events differs by
//! type (a transaction, a transfer, a subscription, a dispute, a refund), not
//! every one carries the same id or a version field, a key that is missing
//! is answered 400, which Paystack retries for 72 hours, and
//! `charge.dispute.remind` repeats for one dispute. The body carries no
//! delivery timestamp or attempt counter that would change the digest on a
//! retry (the docs' payloads; assumed, since the page does not say that a
//! retry is byte-identical). A handler that grants value should still claim
//! the transaction's `data.reference` with
//! [`WebhookTx::claim_action`](crate::WebhookTx::claim_action): two events
//! about one charge (`charge.success` and a later one) are two keys here.
//! The event type is `event` (`charge.success`, `transfer.success`).
//!
//! **Retries** ("Webhooks", <https://paystack.com/docs/payments/webhooks/>):
//! anything but a **200 OK** is a failed attempt (the layer answers 200). In
//! live mode a failed event is sent again every 3 minutes for the first 4
//! tries, then hourly for the next 72 hours; in test mode hourly for 10
//! hours; each request times out after 30 seconds. No manual resend is
//! documented. Window: [`FACTS`]' `replay_window`. **Tolerance:** none; no timestamp
//! is signed. **Handshake:** none.
//!
//! **Limit of the scheme:** no timestamp is signed: a captured delivery
//! verifies forever; the derived key makes its replay a duplicate within the
//! retention window. Serve the endpoint over TLS.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): Paystack
//! sends no event time or sequence; the object's own time where it has one
//! (a transaction's `paid_at`, a transfer's or dispute's `updatedAt`), else
//! re-read the object (`GET /transaction/verify/:reference`).

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset, KeyField};
use crate::verify::generic::HmacScheme;
use crate::verify::Algorithm;

/// The facts of the paystack preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Paystack event can be sent again: 4 days.
///
/// Paystack retries a failed event every 3 minutes for the first 4 tries,
/// then hourly for the next 72 hours in live mode (hourly for 10 hours in
/// test mode) (<https://paystack.com/docs/payments/webhooks/>); no manual
/// resend is documented. 72 hours and the first tries, with a margin, as
/// Square's 72 hours of retries: 4 days.
pub const FACTS: HmacPreset = HmacPreset {
    name: "paystack",
    scheme: HmacScheme { algorithm: Algorithm::Sha512, strict: true, ..HmacScheme::new("x-paystack-signature") },
    event_key: EventKey::Derived { fields: &[KeyField::CanonicalBody], event_type: Some(KeyField::Json("/event")) },
    headers: &[],
    replay_window: super::days(4),
    replay_evidence:
        "live: 4 tries 3 minutes apart, then hourly for 72 hours (https://paystack.com/docs/payments/webhooks/)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&["same_event"]),
};

impl Provider {
    /// Paystack (`x-paystack-signature`, hex HMAC-SHA512; derived key). See [`crate::providers::paystack`].
    ///
    /// The Paystack preset: [`paystack::FACTS`](FACTS) and the derived key of its facts.
    pub fn paystack() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::providers::tests::support::BodyOnly;
    use crate::test_support::headers;
    use crate::verify::hmac_sha256;
    use crate::verify::VerifyErrorKind::MalformedHeader;

    /// The common cases, rotation and precheck, and Paystack's own: bare hex
    /// of HMAC-SHA512 (any case), no prefix.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"event":"charge.success","data":{"id":302961,"reference":"qTPrJoy9Bx"}}"#;
        let tampered = br#"{"event":"charge.success","data":{"id":302962,"reference":"qTPrJoy9Bx"}}"#;
        BodyOnly::of(&FACTS).check_cases("sk_test_paystack", body, tampered, "zz", |secret, good| {
            assert_eq!(good.len(), 128, "a hex SHA-512 tag");
            vec![
                ("upper-case hex", vec![good.to_uppercase()], Ok(())),
                ("sha512= prefix", vec![format!("sha512={good}")], Err(MalformedHeader)),
                ("SHA-256 instead", vec![hex::encode(hmac_sha256(secret, &[body]))], Err(MalformedHeader)),
                ("truncated", vec![good[..64].to_owned()], Err(MalformedHeader)),
                ("short hex", vec!["abcd".to_owned()], Err(MalformedHeader)),
            ]
        });
    }

    #[test]
    fn derived_key_cases() {
        let k = FACTS.provider();
        let p = headers(&[]);
        let event = |name: &str, status: &str, updated: &str| {
            serde_json::json!({
                "event": name,
                "data": {"id": 1_234, "reference": "ref_1", "status": status, "updatedAt": updated},
            })
            .to_string()
        };
        let a = k.identify(&p, event("transfer.success", "success", "2024-06-10T06:13:20.000Z").as_bytes()).unwrap();
        assert_eq!(a.event_type.as_deref(), Some("transfer.success"));
        for other in [
            // Another event about the same object.
            event("transfer.reversed", "reversed", "2024-06-10T06:13:20.000Z"),
            // The same name again after the object changed (a dispute reminder).
            event("transfer.success", "success", "2024-06-10T06:13:21.000Z"),
        ] {
            assert_ne!(k.identify(&p, other.as_bytes()).unwrap().key, a.key, "{other}");
        }
        // Integer ids are kept exact: 1234 and "1234" are two events.
        let text_id = br#"{"event":"transfer.success","data":{"id":"1234","reference":"ref_1","status":"success","updatedAt":"2024-06-10T06:13:20.000Z"}}"#;
        assert_ne!(k.identify(&p, text_id).unwrap().key, a.key);
        // No `event`: keyed, without a type.
        assert_eq!(k.identify(&p, br#"{"data":{}}"#).unwrap().event_type, None);
        assert_eq!(k.identify(&p, b"event=charge.success").unwrap_err().kind(), KeyErrorKind::BodyNotJson);
    }
}
