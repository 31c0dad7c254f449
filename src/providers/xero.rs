//! Xero: the `x-xero-signature` header, and the "Intent to receive"
//! validation.
//!
//! Scheme (Xero, "Configuring your server",
//! <https://developer.xero.com/documentation/guides/webhooks/configuring-your-server/>):
//! `x-xero-signature: <base64 HMAC-SHA256 of the raw body>`, keyed with the
//! app's webhooks key as given (it looks like base64 but is used as text, not
//! decoded). One key per app; to change it, configure the old and new ones
//! together.
//!
//! **Intent to receive.** When a subscription is created, re-enabled or its
//! URL changes, Xero sends a series of POSTs whose body has no events
//! (`{"events": [], "firstEventSequence": 0, "lastEventSequence": 0,
//! "entropy": "..."}`), some correctly signed and some not. The endpoint
//! must answer `200 OK` with no body to the correctly signed ones and `401
//! Unauthorized` to the others, within 5 seconds. The layer answers a bad
//! signature `401` already; the preset's [`Challenge`](crate::providers::Challenge) answers a verified
//! body with an empty `events` array `200` with an empty body, before any
//! claim, so the validation requests never reach the handler or the
//! database. Xero's rules for every delivery apply to the handler's answers
//! too: `200` within 5 seconds, no body, no cookies.
//!
//! **Event key.** A delivery is a batch, `events[]` (each with `tenantId`,
//! `resourceId`, `eventCategory`, `eventType`, `eventDateUtc`), with no id
//! of its own. The key is a [`DerivedKey`](crate::key::DerivedKey) over the `events` array in
//! canonical JSON: a retry resends the same events, and the request's
//! `entropy` (which need not repeat) is left out. If Xero re-batches events
//! differently on a retry, the batch gets a new key: a handler that applies
//! each event by `resourceId` and `eventDateUtc`
//! ([`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)) stays
//! correct either way. There is no single event type.
//!
//! **Limit of the scheme:** the signature covers only the body, with no
//! timestamp; a captured delivery verifies forever; the claim makes its
//! replay a duplicate. Serve the endpoint over TLS.
//!
//! **Signed / not signed**
//! (<https://developer.xero.com/documentation/guides/webhooks/configuring-your-server/>):
//! only the raw body is signed; the key comes from it. Headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): each
//! event's `eventDateUtc`, per `resourceId`; the batch's
//! `firstEventSequence` / `lastEventSequence` order batches.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset, KeyField};
use crate::verify::generic::HmacScheme;
use crate::verify::Encoding;

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "x-xero-signature";

/// The facts of the xero preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Xero batch can be sent again: 2 days.
///
/// Xero retries a delivery that gets no acceptable answer "with decreasing
/// frequency for up to 24 hours", then disables the webhook until it is
/// re-enabled ("Configuring your server",
/// <https://developer.xero.com/documentation/guides/webhooks/configuring-your-server/>);
/// no manual redelivery is documented. The 24 hours of retries plus a day of
/// margin.
pub const FACTS: HmacPreset = HmacPreset {
    name: "xero",
    scheme: HmacScheme { encoding: Encoding::Base64, strict: true, ..HmacScheme::new(SIGNATURE_HEADER) },
    event_key: EventKey::Derived { fields: &[KeyField::Json("/events")], event_type: None },
    headers: &[],
    replay_window: super::days(2),
    replay_evidence:
        "retries for up to 24 hours (https://developer.xero.com/documentation/guides/webhooks/configuring-your-server/)",
    challenge: Some(&super::EmptyEventsAnswered),
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Xero (`x-xero-signature`, base64 HMAC-SHA256; derived key; answers Intent to receive). See [`crate::providers::xero`].
    ///
    /// The Xero preset: [`xero::FACTS`](FACTS); key derived from the `events`
    /// array; `EmptyEventsAnswered` answers the validation requests.
    pub fn xero() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::sign;
    use crate::providers::tests::support::BodyOnly;
    use crate::test_support::{at, headers, identity, NOW};
    use crate::verify::Delivery;
    use crate::verify::SigningSecret;
    use crate::verify::VerifyErrorKind;

    /// The common cases, rotation and precheck, and Xero's own: base64, one
    /// line per signature.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"events":[{"resourceId":"r1"}],"firstEventSequence":1,"lastEventSequence":1,"entropy":"x"}"#;
        BodyOnly::of(&FACTS)
            .check_cases("xero_webhooks_key", body, b"{\"events\":[]}", "%", |_, good| BodyOnly::base64_alone(good));
    }

    #[test]
    fn derived_key() {
        let p = Provider::xero();
        let a = identity(&p, &headers(&[]), br#"{"events":[{"resourceId":"r1"}],"entropy":"a"}"#);
        let b = identity(&p, &headers(&[]), br#"{"entropy":"b","events":[{"resourceId":"r1"}]}"#);
        let c = identity(&p, &headers(&[]), br#"{"events":[{"resourceId":"r2"}],"entropy":"a"}"#);
        assert_eq!(a.key, b.key, "entropy is not part of the key");
        assert_ne!(a.key, c.key);
        assert!(p.identify(&headers(&[]), br#"{"entropy":"a"}"#).is_err());
        assert_eq!(p.name(), "xero");
    }

    /// Intent to receive: a correctly signed empty batch is answered 200 with
    /// no body and nothing claimed; an incorrectly signed one fails
    /// verification (the layer answers 401); a batch with events is an
    /// ordinary delivery.
    #[test]
    fn intent_to_receive() {
        let secret = SigningSecret::from("xero_webhooks_key");
        let itr = br#"{"events":[],"lastEventSequence":0,"firstEventSequence":0,"entropy":"S0m3r4Nd0mt3xt"}"#;
        let provider = Provider::xero();
        let secrets = [secret.clone()];
        let answer = |sig: &str, body: &[u8]| {
            let p = headers(&[(SIGNATURE_HEADER, sig)]);
            provider.handshake(&Delivery::new(&p, body, &secrets, at(NOW))).map_err(|e| e.kind())
        };
        let res = answer(&sign(&FACTS, &secret, itr), itr).unwrap().expect("answered");
        assert_eq!(res.status(), http::StatusCode::OK);
        assert!(res.body().is_empty());
        let wrong = sign(&FACTS, &SigningSecret::from("not the key"), itr);
        assert_eq!(answer(&wrong, itr).unwrap_err(), VerifyErrorKind::NoMatchingSignature);
        let batch = br#"{"events":[{"resourceId":"r1"}],"entropy":"e"}"#;
        assert!(answer(&sign(&FACTS, &secret, batch), batch).unwrap().is_none());
    }
}
