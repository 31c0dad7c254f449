//! Intuit QuickBooks Online: the `intuit-signature` header.
//!
//! Scheme (Intuit, "Managing webhooks notifications", "Validating the
//! notification",
//! <https://developer.intuit.com/app/developer/qbo/docs/develop/webhooks/managing-webhooks-notifications>):
//! `intuit-signature: <base64 HMAC-SHA256 of the raw body>`, keyed with the
//! app's **Verifier Token** (one per environment, on the app's Webhooks page)
//! as given. One token; to change it, configure the old and new ones
//! together. Intuit's Java and .NET SDKs verify the same way
//! (`WebhooksService.verifyPayload`).
//!
//! **Event key.** A notification is a batch with no id of its own: the
//! classic payload is `{"eventNotifications": [{"realmId", "dataChangeEvent":
//! {"entities": [{"name", "id", "operation", "lastUpdated"}]}}]}`; Intuit's
//! newer CloudEvents payload is an array of events that each carry an `id`.
//! The key is a [`DerivedKey`](crate::key::DerivedKey) over the whole body in canonical JSON, which
//! covers both: the body holds no send time or attempt counter, so a retry
//! repeats it, and two notifications differ in their entities' `lastUpdated`
//! (or their events' ids). There is no single event type. Apply each entity
//! by `realmId`, `name`, `id` and `lastUpdated` to stay correct if Intuit
//! ever batches a retry differently.
//!
//! **Limit of the scheme:** the signature covers only the body, with no
//! timestamp; a captured notification verifies forever; the claim makes its
//! replay a duplicate. Serve the endpoint over TLS.
//!
//! **Signed / not signed**
//! (<https://developer.intuit.com/app/developer/qbo/docs/develop/webhooks/managing-webhooks-notifications>):
//! only the raw body is signed; the key comes from it. Headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): each
//! entity's `lastUpdated` (CloudEvents: `time`), per `realmId`, `name` and
//! `id`.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset, KeyField};
use crate::verify::generic::HmacScheme;
use crate::verify::Encoding;

/// The facts of the quickbooks preset (the scheme is in the module docs).
///
/// **Replay window.** How long a QuickBooks notification can be sent again: 30 days.
///
/// Intuit retries a notification that gets no 200 within its timeout on a
/// back-off, then marks it failed ("Managing webhooks notifications",
/// <https://developer.intuit.com/app/developer/qbo/docs/develop/webhooks/managing-webhooks-notifications>;
/// the research for this preset read retries after 20, 30 and 50 minutes,
/// unconfirmed); no manual redelivery is documented. With the span not
/// confirmed, the window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "quickbooks",
    scheme: HmacScheme {
        encoding: Encoding::Base64,
        strict: true,
        ..HmacScheme::new("intuit-signature")
    },
    event_key: EventKey::Derived { fields: &[KeyField::CanonicalBody], event_type: None },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence:
        "no published span (https://developer.intuit.com/app/developer/qbo/docs/develop/webhooks/managing-webhooks-notifications)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Intuit QuickBooks Online (`intuit-signature`, base64 HMAC-SHA256; derived key). See [`crate::providers::quickbooks`].
    ///
    /// The QuickBooks Online preset: [`quickbooks::FACTS`](FACTS); key derived from
    /// the canonical body.
    pub fn quickbooks() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::sign;
    use crate::providers::tests::support::{BodyOnly, OneHeader};
    use crate::test_support::{headers, identity, NOW};
    use crate::verify::SigningSecret;

    /// Intuit's own vector: intuit/QuickBooks-V3-DotNET-SDK,
    /// `Intuit.Ipp.WebhooksService.Test/WebhooksServiceTest.cs`
    /// (`ExecuteverifyToken`, @859c320), with the verifier token of that test
    /// project's `AppSettings.json`.
    #[test]
    fn intuits_sdk_test_vector() {
        let secret = SigningSecret::from("00faeec4-08d0-4996-bb37-698ae19f0149");
        let body = br#"{"eventNotifications":[{"realmId":"1269959970","dataChangeEvent":{"entities":[{"name":"Vendor","id":"40","operation":"Update","lastUpdated":"2016-10-05T03:09:04.000Z"},{"name":"Customer","id":"43","operation":"Create","lastUpdated":"2016-10-05T03:07:04.000Z"}]}}]}"#;
        let header = "6q+xGyMirJupwKTh2/WBl2NcdxzxqdIbk3sneKTxLWM=";
        assert_eq!(sign(&FACTS, &secret, body), header);
        assert_eq!(OneHeader::of(&FACTS).check(&[header], body, &[secret], NOW), Ok(()));
    }

    /// The common cases, rotation and precheck, and Intuit's own: base64, one
    /// line per signature.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"eventNotifications":[{"realmId":"1"}]}"#;
        let tampered = b"{\"eventNotifications\":[]}";
        BodyOnly::of(&FACTS).check_cases("verifier_token", body, tampered, "%", |_, good| BodyOnly::base64_alone(good));
    }

    #[test]
    fn derived_key() {
        let p = Provider::quickbooks();
        let entity = |updated: &str| {
            format!(
                r#"{{"eventNotifications":[{{"realmId":"1","dataChangeEvent":{{"entities":[{{"name":"Customer","id":"1","operation":"Update","lastUpdated":"{updated}"}}]}}}}]}}"#
            )
        };
        let a = identity(&p, &headers(&[]), entity("t1").as_bytes());
        let b = identity(&p, &headers(&[]), entity("t2").as_bytes());
        assert_ne!(a.key, b.key);
        let cloud = identity(&p, &headers(&[]), br#"[{"id":"e1","type":"qbo.customer.updated.v1"}]"#);
        assert!(cloud.key.starts_with("sha256:"));
        assert_eq!(p.name(), "quickbooks");
    }
}
