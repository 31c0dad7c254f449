//! Help Scout (Mailbox API webhooks): the `X-HelpScout-Signature` header.
//!
//! Scheme (Help Scout, "Webhooks", <https://developer.helpscout.com/webhooks/>,
//! and the official PHP SDK, `helpscout/api`,
//! `src/Webhooks/IncomingWebhook.php`: `base64_encode(hash_hmac('sha1',
//! $body, $secret, true))`): `X-HelpScout-Signature: <base64 HMAC-SHA1 of the
//! raw body>`, keyed with the webhook's secret key as given (at most 40
//! characters, chosen when the webhook is created). SHA-1 is the only choice
//! Help Scout offers; its collision attacks do not carry over to HMAC-SHA1
//! (RFC 6194). One signature; to change the key, configure the old and new
//! ones together. (Help Scout **Apps** sign their requests differently, with
//! a query parameter: not this preset.)
//!
//! **Event key.** Help Scout sends no event or delivery id: the body is the
//! resource itself (a conversation, a customer, a rating), whose `id` names
//! the resource, not the event. The key is a
//! [`DerivedKey`](crate::key::DerivedKey) over the whole body in canonical
//! JSON: a retry resends the same snapshot, and two events on one resource
//! differ in it (a conversation's `userUpdatedAt`, `status`, `threads`). The
//! `X-HelpScout-Event` header is **not** signed, so it is not part of the
//! key (a replay relabelled with another event name is still a duplicate);
//! it is the event type (`convo.created`, `customer.created`,
//! `helpscout.test` for the test event), which therefore must not drive
//! authorization. Two events whose bodies are byte for byte the same
//! resource snapshot share a key: the second is a duplicate.
//!
//! **Limit of the scheme:** the signature covers only the body, with no
//! timestamp; a captured delivery verifies forever; the claim makes its
//! replay a duplicate. Serve the endpoint over TLS.
//!
//! **Signed / not signed** (<https://developer.helpscout.com/webhooks/>): only
//! the raw body is signed, so the key is. The event type
//! (`X-HelpScout-Event`) is not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! resource's `userUpdatedAt` (a conversation) or `updatedAt` (a customer).

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset, KeyField};
use crate::verify::generic::HmacScheme;
use crate::verify::{Algorithm, Encoding};

/// The facts of the help-scout preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Help Scout event can be sent again: 30 days.
///
/// Help Scout retries a delivery that gets no 2xx and deactivates a webhook
/// that keeps failing (<https://developer.helpscout.com/webhooks/>; the
/// research for this preset read up to 10 attempts over a few hours,
/// unconfirmed), with no manual redelivery. With the span not confirmed, the
/// window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "help-scout",
    scheme: HmacScheme {
        algorithm: Algorithm::Sha1,
        encoding: Encoding::Base64,
        strict: true,
        ..HmacScheme::new("x-helpscout-signature")
    },
    event_key: EventKey::Derived {
        fields: &[KeyField::CanonicalBody],
        event_type: Some(KeyField::Header(EVENT_HEADER)),
    },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://developer.helpscout.com/webhooks/)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Help Scout (`X-HelpScout-Signature`, base64 HMAC-SHA1; derived key). See [`crate::providers::help_scout`].
    ///
    /// The Help Scout preset: [`help_scout::FACTS`](FACTS); key derived from the
    /// canonical body, type = the `X-HelpScout-Event` header (unsigned).
    pub fn help_scout() -> Self {
        FACTS.provider()
    }
}

/// The header carrying the event name (the event type; not signed).
const EVENT_HEADER: &str = "x-helpscout-event";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::sign;
    use crate::providers::tests::support::{BodyOnly, OneHeader};
    use crate::providers::Provider;
    use crate::test_support::{headers, identity, NOW};
    use crate::verify::VerifyErrorKind;
    use crate::verify::{hmac, Algorithm, Encoding, SigningSecret};

    /// Help Scout's own example: helpscout/helpscout-api-php
    /// `examples/incoming_webhook.php` (@6edf266): secret `asdfasdf`, body
    /// `{"id":123}`, `X-HelpScout-Signature: 7S2+kN8bZsrdAEADJ+yYfWWsf/4=`.
    #[test]
    fn help_scouts_sdk_example() {
        let secret = SigningSecret::from("asdfasdf");
        let (body, header) = (br#"{"id":123}"#, "7S2+kN8bZsrdAEADJ+yYfWWsf/4=");
        assert_eq!(sign(&FACTS, &secret, body), header);
        assert_eq!(OneHeader::of(&FACTS).check(&[header], body, &[secret], NOW), Ok(()));
    }

    /// The common cases, rotation and precheck, and Help Scout's own: base64
    /// of HMAC-SHA1, one line per signature.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"id":1,"status":"active"}"#;
        BodyOnly::of(&FACTS).check_cases("hs_secret", body, b"{\"id\":2}", "%%", |secret, good| {
            let sha256 = Encoding::Base64.encode(&crate::verify::hmac_sha256(secret, &[body]));
            let hex = hex::encode(hmac(Algorithm::Sha1, secret, &[body]).as_ref());
            vec![
                ("SHA-256 instead", vec![sha256], Err(VerifyErrorKind::MalformedHeader)),
                ("hex instead of base64", vec![hex], Err(VerifyErrorKind::MalformedHeader)),
                ("one bad line", vec![good.to_owned(), "x".to_owned()], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
    }

    #[test]
    fn derived_key() {
        let p = Provider::help_scout();
        let body = br#"{"id":1,"userUpdatedAt":"t1"}"#;
        let created = identity(&p, &headers(&[(EVENT_HEADER, "convo.created")]), body);
        let relabelled = identity(&p, &headers(&[(EVENT_HEADER, "convo.deleted")]), body);
        assert_eq!(created.key, relabelled.key, "the unsigned event header is not in the key");
        let later = identity(&p, &headers(&[(EVENT_HEADER, "convo.created")]), br#"{"id":1,"userUpdatedAt":"t2"}"#);
        assert_ne!(later.key, created.key);
        assert_eq!(identity(&p, &headers(&[]), body).event_type, None);
        assert_eq!(p.name(), "help-scout");
    }
}
