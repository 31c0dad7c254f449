//! Webflow (Data API webhooks): the `x-webflow-signature` and
//! `x-webflow-timestamp` headers.
//!
//! Scheme (Webflow, "Working with webhooks", "Validating request
//! signatures",
//! <https://developers.webflow.com/data/docs/working-with-webhooks#validating-request-signatures>,
//! and the official SDK, `webflow-api` 3.3.4, `webhooks.verifySignature`):
//! - `x-webflow-timestamp: <unix milliseconds>` and `x-webflow-signature:
//!   <hex HMAC-SHA256 of "{timestamp}:{raw body}">`, keyed with the OAuth
//!   app's client secret (webhooks an OAuth app created) or the webhook's own
//!   secret (webhooks created through the API with a site token) as given.
//!   One signature; to rotate, configure the old and new secrets together.
//! - tolerance: Webflow's page says to refuse a request whose timestamp is
//!   more than 5 minutes old (the SDK checks no age). [`FACTS`]' tolerance
//!   is those 300 seconds, in both directions, compared to the millisecond.
//! - webhooks created in the site dashboard are **not signed** ("signatures
//!   are only included" for app- and API-created webhooks): this preset
//!   refuses them (no signature header); create the webhook through the API.
//!
//! **Event key.** Webflow sends no event or delivery id: the body is
//! `{triggerType, payload}`, and `payload.id` names the resource (a form
//! submission, a CMS item), not the event. The key is a [`DerivedKey`](crate::key::DerivedKey) over
//! the whole body in canonical JSON: the send time is in the header, not in
//! the body, so a retry repeats the body, and two events on one resource
//! differ in it (`triggerType`, the item's `lastUpdated`, a submission's
//! `submittedAt`). The event type is `triggerType` (`form_submission`,
//! `collection_item_changed`).
//!
//! **Signed / not signed**
//! (<https://developers.webflow.com/data/docs/working-with-webhooks#validating-request-signatures>):
//! the timestamp header and the raw body are signed, so the key and type
//! are. Other headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! payload's own time (`lastUpdated` of a CMS item, `submittedAt` of a form
//! submission).

use std::time::Duration;

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset, KeyField};
use crate::verify::generic::{HmacScheme, Signed, TimestampFormat, Tolerance};
use crate::verify::Boundary;

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "x-webflow-signature";
/// The header the signed timestamp travels in.
const TIMESTAMP_HEADER: &str = "x-webflow-timestamp";

/// The facts of the webflow preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Webflow event can be sent again: 30 days.
///
/// Webflow retries a delivery that gets no 200 and deactivates a webhook
/// after repeated failures ("Working with webhooks",
/// <https://developers.webflow.com/data/docs/working-with-webhooks>; the
/// research for this preset read up to 3 retries, unconfirmed), with no
/// manual redelivery. With the span not confirmed, the window is the crate's
/// default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "webflow",
    scheme: HmacScheme {
        strict: true,
        signed: Signed::TimestampBody { separator: ":" },
        timestamp_header: Some(TIMESTAMP_HEADER),
        timestamp_format: TimestampFormat::UnixMilliseconds,
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(300),
            evidence: "refuse a timestamp over 5 minutes old (https://developers.webflow.com/data/docs/working-with-webhooks#validating-request-signatures)",
            boundary: Boundary::Inclusive,
        }),
        ..HmacScheme::new(SIGNATURE_HEADER)
    },
    event_key: EventKey::Derived { fields: &[KeyField::CanonicalBody], event_type: Some(KeyField::Json("/triggerType")) },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://developers.webflow.com/data/docs/working-with-webhooks)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::sdk(&["timestamp_ms"]),
};

impl Provider {
    /// Webflow (`x-webflow-signature` of `{ms}:{body}`, 300 s; derived key). See [`crate::providers::webflow`].
    ///
    /// The Webflow preset: [`webflow::FACTS`](FACTS) with the 300 second tolerance;
    /// key derived from the canonical body, type = `triggerType`.
    pub fn webflow() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::TwoHeaders;
    use crate::test_support::{headers, identity, NOW};
    use crate::verify::hmac_sha256;
    use crate::verify::VerifyErrorKind;

    fn two_headers(body: &[u8]) -> TwoHeaders<'_> {
        TwoHeaders::facts(&FACTS, body)
    }

    #[test]
    fn verifies_and_rejects() {
        use VerifyErrorKind::{MalformedHeader, NoMatchingSignature};
        let body = br#"{"triggerType":"form_submission","payload":{"id":"s1"}}"#;
        let t = two_headers(body);
        let upper = t.good.to_uppercase();
        let dot = hex::encode(hmac_sha256(&t.key, &[t.timestamp.as_bytes(), b".", body]));
        let ms_plus_one = (NOW * 1000 + 1).to_string();
        t.check_with_common(&[
            t.case("upper-case hex").signature(&upper),
            t.case("rotation: the other line matches").signatures(&[&t.by_other, &t.good]),
            t.case("dot separator").signature(&dot).fails(NoMatchingSignature),
            t.case("another millisecond").timestamp(&ms_plus_one).fails(NoMatchingSignature),
            t.case("sha256= prefix").signature(&format!("sha256={}", t.good)).fails(MalformedHeader),
            t.case("unsigned dashboard webhook").signatures(&[]).fails(VerifyErrorKind::MissingHeader),
        ]);
    }

    #[test]
    fn rotation_tolerance_replay_and_key() {
        two_headers(br#"{"triggerType":"x"}"#)
            .check_rotation_tolerance_and_replay(FACTS.verifier().tolerance(Duration::from_secs(600)));
        let p = Provider::webflow();
        let a = identity(
            &p,
            &headers(&[]),
            br#"{"triggerType":"collection_item_changed","payload":{"id":"i1","lastUpdated":"t1"}}"#,
        );
        let b = identity(
            &p,
            &headers(&[]),
            br#"{"payload":{"lastUpdated":"t1","id":"i1"},"triggerType":"collection_item_changed"}"#,
        );
        let c = identity(
            &p,
            &headers(&[]),
            br#"{"triggerType":"collection_item_changed","payload":{"id":"i1","lastUpdated":"t2"}}"#,
        );
        assert_eq!(a.key, b.key);
        assert_ne!(a.key, c.key);
        assert_eq!(p.name(), "webflow");
    }
}
