//! Sentry (integration platform): the `Sentry-Hook-Signature` header.
//!
//! Scheme (Sentry, "Webhooks", "Verifying the signature",
//! <https://docs.sentry.io/integrations/integration-platform/webhooks/>,
//! and Sentry's example integration, `getsentry/integration-platform-example`,
//! `verifySentrySignature.ts`): `Sentry-Hook-Signature: <hex HMAC-SHA256 of
//! the body>`, keyed with the integration's Client Secret as given. Sentry
//! serialises the JSON once and signs and sends those bytes; the example
//! re-serialises the parsed body, which only works because Sentry sends
//! compact JSON, so this preset verifies the raw bytes. Older integrations
//! also get the same value as `Sentry-App-Signature`: both headers are read
//! and any signature in them may match. No rotation list: configure the old
//! and new client secrets together while the secret changes.
//!
//! The event key is the `Request-ID` header (a UUID Sentry describes as a
//! unique identifier for tracking and debugging); the event type is the
//! `Sentry-Hook-Resource` header (`installation`, `issue`, `event_alert`,
//! `metric_alert`, `error`, `comment`); the body's `action` says what
//! happened to it (`created`, `resolved`). Neither header is signed, and
//! Sentry does not say whether a resent request keeps its `Request-ID`;
//! its deliveries are, by the research for this preset, not retried for most
//! resources, so the key mostly stops a request that arrives twice. The
//! install handshake is an ordinary signed delivery (`installation`,
//! `created`): answer it 2xx.
//!
//! **Limit of the scheme:** the signature covers only the body. The
//! `Sentry-Hook-Timestamp` header is not signed, so no age can be checked,
//! and the key is not signed either: a captured delivery replayed under a
//! fresh `Request-ID` verifies. `.body_digest_guard(true)` on the layer
//! refuses such replays (SECURITY.md). Serve the endpoint over TLS.
//!
//! **Signed / not signed**
//! (<https://docs.sentry.io/integrations/integration-platform/webhooks/>):
//! only the raw body is signed. The event key (`Request-ID`), the event type
//! (`Sentry-Hook-Resource`) and `Sentry-Hook-Timestamp` are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! resource's own time fields (an issue's `lastSeen`, an alert's
//! `date_created`); the unsigned `Sentry-Hook-Timestamp` only orders
//! deliveries, not events.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "sentry-hook-signature";

/// The facts of the sentry preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Sentry webhook request can arrive again: 30 days.
///
/// Sentry's webhooks page
/// (<https://docs.sentry.io/integrations/integration-platform/webhooks/>)
/// publishes no retry schedule and no manual redelivery (the research for
/// this preset read that most resources are not retried, unconfirmed). With
/// the span not stated, the window is the crate's default for an unknown
/// span, [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "sentry",
    scheme: HmacScheme {
        also_header: Some(LEGACY_SIGNATURE_HEADER),
        strict: true,
        ..HmacScheme::new(SIGNATURE_HEADER)
    },
    event_key: EventKey::Header { id: REQUEST_ID_HEADER, event_type: RESOURCE_HEADER },
    headers: &[TIMESTAMP_HEADER],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://docs.sentry.io/integrations/integration-platform/webhooks/)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Sentry (`Sentry-Hook-Signature`, hex HMAC-SHA256; key = `Request-ID`). See [`crate::providers::sentry`].
    ///
    /// The Sentry integration-platform preset: [`sentry::FACTS`](FACTS); key = the
    /// `Request-ID` header, type = `Sentry-Hook-Resource` (both unsigned).
    pub fn sentry() -> Self {
        FACTS.provider()
    }
}

/// The older name of the signature header, same value.
const LEGACY_SIGNATURE_HEADER: &str = "sentry-app-signature";
/// The header carrying the resource type (the event type; not signed).
const RESOURCE_HEADER: &str = "sentry-hook-resource";
/// The header carrying the send time in Unix seconds (not signed).
const TIMESTAMP_HEADER: &str = "sentry-hook-timestamp";
/// The header carrying the request id (the event key; not signed).
const REQUEST_ID_HEADER: &str = "request-id";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::sign;
    use crate::providers::tests::support::BodyOnly;
    use crate::providers::Provider;
    use crate::test_support::{headers, identity, NOW};
    use crate::verify::SigningSecret;
    use crate::verify::{Delivery, Verifier as _, VerifyErrorKind};

    /// The common cases, rotation and precheck, and Sentry's own: hex, no
    /// prefix; the legacy header alone or next to the new one.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"action":"created","data":{"issue":{"id":"1"}}}"#;
        let tampered = b"{\"action\":\"resolved\"}";
        BodyOnly::of(&FACTS).check_cases("sentry_client_secret", body, tampered, "xyz", |_, good| {
            vec![
                ("upper-case hex", vec![good.to_uppercase()], Ok(())),
                ("sha256= prefix", vec![format!("sha256={good}")], Err(VerifyErrorKind::MalformedHeader)),
                ("short hex", vec!["abcd".to_owned()], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
        let secret = SigningSecret::from("sentry_client_secret");
        let (good, from_other) =
            (sign(&FACTS, &secret, body), sign(&FACTS, &SigningSecret::from("sentry_other"), body));
        let secrets = [secret];
        let v = FACTS.verifier();
        let verify = |list: &[(&str, &str)]| {
            let p = headers(list);
            v.verify(&Delivery::new(&p, body, &secrets, crate::test_support::at(NOW))).map_err(|e| e.kind())
        };
        assert_eq!(verify(&[(LEGACY_SIGNATURE_HEADER, &good)]), Ok(()));
        assert_eq!(verify(&[(SIGNATURE_HEADER, &from_other), (LEGACY_SIGNATURE_HEADER, &good)]), Ok(()));
        assert_eq!(verify(&[(LEGACY_SIGNATURE_HEADER, &from_other)]), Err(VerifyErrorKind::NoMatchingSignature));
    }

    #[test]
    fn key_from_headers() {
        let p = Provider::sentry();
        let parts = headers(&[(RESOURCE_HEADER, "issue")]);
        assert!(p.identify(&parts, b"{}").is_err(), "no Request-ID");
        let parts = headers(&[(REQUEST_ID_HEADER, "r-1")]);
        assert_eq!(identity(&p, &parts, b"{}").event_type, None);
        assert_eq!(p.name(), "sentry");
    }
}
