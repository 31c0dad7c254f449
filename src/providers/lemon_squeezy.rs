//! Lemon Squeezy: the `X-Signature` header.
//!
//! Scheme (Lemon Squeezy, "Signing requests",
//! <https://docs.lemonsqueezy.com/help/webhooks/signing-requests>):
//! `X-Signature: <hex HMAC-SHA256 of the raw body>`, keyed with the signing
//! secret chosen when the webhook was created (6 to 40 characters), as
//! UTF-8 bytes. Lemon Squeezy sends one signature; changing the secret means
//! configuring both here for the changeover.
//!
//! **Signed / not signed:** only the raw body is signed, so every field of
//! the derived key and the event type (`meta.event_name`) are signed. The
//! `X-Event-Name` header (the same name) is not, and is not read.
//!
//! **Event key.** Lemon Squeezy sends no event or delivery id, in the body
//! or in a header ("Webhook requests",
//! <https://docs.lemonsqueezy.com/help/webhooks/webhook-requests>: the body
//! is the JSON:API object the event concerns, with `meta.event_name`). The
//! key is derived ([`DerivedKey`](crate::key::DerivedKey)) from `meta.event_name`, `data.type`,
//! `data.id` and `data.attributes.updated_at`: the event, the object it
//! concerns and that object's version. A retry resends the same object, so
//! its key is equal; two events on one object differ in their name or in
//! `updated_at`. Two events of the same name on the same object within one
//! `updated_at` value (its precision is microseconds, often `.000000`) would
//! share a key: the second is treated as a duplicate. The event type is
//! `meta.event_name` (`order_created`, `subscription_updated`).
//!
//! **Retries** ("Webhook requests"): a request answered anything but
//! **200** (not any 2xx; the layer answers 200) is retried up to three more
//! times with an exponential back-off, for example after 5, 25 and 125
//! seconds. No manual resend is documented; the window is the crate's
//! default ([`FACTS`]' `replay_window`). **Tolerance:** none; no timestamp is signed.
//! **Handshake:** none.
//!
//! **Limit of the scheme:** no timestamp is signed: a captured delivery
//! verifies forever; the derived key makes its replay a duplicate. Serve the
//! endpoint over TLS.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! object's `data.attributes.updated_at` (RFC 3339, microseconds).

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset, KeyField};
use crate::verify::generic::HmacScheme;

/// The facts of the lemon-squeezy preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Lemon Squeezy event can be sent again: 30 days.
///
/// Lemon Squeezy retries a failed request three times within minutes
/// (<https://docs.lemonsqueezy.com/help/webhooks/webhook-requests>) and
/// documents no manual resend nor its span; the key is derived from the
/// body, so a resend of the same object would meet the claim. The window is
/// the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "lemon-squeezy",
    scheme: HmacScheme {
        strict: true,
        ..HmacScheme::new("x-signature")
    },
    event_key: EventKey::Derived {
        fields: &[
            KeyField::Json("/meta/event_name"),
            KeyField::Json("/data/type"),
            KeyField::Json("/data/id"),
            KeyField::Json("/data/attributes/updated_at"),
        ],
        event_type: Some(KeyField::Json("/meta/event_name")),
    },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence:
        "3 retries within minutes; no published resend span (https://docs.lemonsqueezy.com/help/webhooks/webhook-requests)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&["same_event"]),
};

impl Provider {
    /// Lemon Squeezy (`X-Signature`; derived key). See [`crate::providers::lemon_squeezy`].
    ///
    /// The Lemon Squeezy preset: [`lemon_squeezy::FACTS`](FACTS) and the derived
    /// its facts' `event_key`.
    pub fn lemon_squeezy() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::providers::tests::support::BodyOnly;
    use crate::test_support::headers;

    use crate::verify::VerifyErrorKind;

    /// The common cases, rotation and precheck, and Lemon Squeezy's own: bare
    /// hex.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"meta":{"event_name":"order_created"},"data":{"type":"orders","id":"1"}}"#;
        BodyOnly::of(&FACTS).check_cases("ls_secret", body, b"{}", "zz", |_, _| {
            vec![("short hex", vec!["abcd".to_owned()], Err(VerifyErrorKind::MalformedHeader))]
        });
    }

    #[test]
    fn derived_key_cases() {
        let k = FACTS.provider();
        let p = headers(&[]);
        let doc = |event: &str, id: &str, updated: &str| {
            serde_json::json!({
                "meta": {"event_name": event, "test_mode": true},
                "data": {"type": "subscriptions", "id": id, "attributes": {"updated_at": updated, "status": "active"}},
            })
            .to_string()
        };
        let a = k.identify(&p, doc("subscription_updated", "7", "2024-06-10T06:13:20.000000Z").as_bytes()).unwrap();
        // The same event re-sent, members in another order and spaced: one key.
        let resent = br#"{ "data": {"attributes": {"status": "active", "updated_at": "2024-06-10T06:13:20.000000Z"}, "id": "7", "type": "subscriptions"}, "meta": {"test_mode": true, "event_name": "subscription_updated"} }"#;
        assert_eq!(k.identify(&p, resent).unwrap(), a);
        for other in [
            doc("subscription_cancelled", "7", "2024-06-10T06:13:20.000000Z"),
            doc("subscription_updated", "8", "2024-06-10T06:13:20.000000Z"),
            doc("subscription_updated", "7", "2024-06-10T06:13:21.000000Z"),
        ] {
            assert_ne!(k.identify(&p, other.as_bytes()).unwrap().key, a.key, "{other}");
        }
        let no_version = br#"{"meta":{"event_name":"x"},"data":{"type":"orders","id":"1"}}"#;
        assert_eq!(k.identify(&p, no_version).unwrap_err().kind(), KeyErrorKind::Missing);
    }
}
