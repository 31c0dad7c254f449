//! Hookdeck (the Event Gateway): the `x-hookdeck-signature` header.
//!
//! Scheme (Hookdeck, "Authentication", destination authentication and
//! webhook signature verification, <https://hookdeck.com/docs/authentication>,
//! and Hookdeck's own verification guide,
//! <https://github.com/hookdeck/webhook-skills/blob/main/skills/hookdeck-event-gateway-webhooks/references/verification.md>):
//! `x-hookdeck-signature: <base64 HMAC-SHA256 of the raw body>`, keyed with
//! the project's (or the destination's) webhook signing secret as UTF-8
//! bytes. One signature; to rotate, configure the old and new secrets
//! together.
//!
//! Hookdeck forwards the provider's request: the body byte for byte and the
//! provider's own headers (`stripe-signature`, `x-hub-signature-256`, ...),
//! plus its own `x-hookdeck-*` headers. To verify the provider's signature
//! too and claim the provider's event, use
//! [`Provider::behind`](crate::Provider::behind) with
//! [`Gateway::hookdeck`](super::gateway::Gateway::hookdeck) (see
//! [`gateway`](super::gateway), "Which key to choose"); this preset is the
//! gateway alone.
//!
//! The event key is the `x-hookdeck-eventid` header: Hookdeck's id of the
//! event (one request delivered to one destination), which its automatic
//! retries and manual retries keep; `x-hookdeck-attempt-count` and
//! `x-hookdeck-attempt-trigger` (`INITIAL`, `AUTOMATIC`, `MANUAL`,
//! `BULK_RETRY`, `UNPAUSE`) tell the attempts apart (Hookdeck's headers
//! reference,
//! <https://github.com/hookdeck/webhook-skills/blob/main/skills/hookdeck-event-gateway-webhooks/references/overview.md>). No event
//! type: the body is the provider's, whatever its shape.
//!
//! **Signed / not signed:** only the raw body is signed. The event key
//! (`x-hookdeck-eventid`) and every other header are **not signed**.
//!
//! **Limit of the scheme:** no timestamp is signed, and the event id is an
//! unsigned header: whoever captured one delivery can send it again under a
//! fresh `x-hookdeck-eventid`, and it verifies and is claimed as a new event.
//! Behind Hookdeck, prefer the provider's own signed event id
//! ([`Provider::behind`](crate::Provider::behind)).
//!
//! **Retries:** up to 50 automatic attempts, on a linear or exponential
//! schedule the connection's rules set, and manual or bulk retries of any
//! event the project still keeps (the retention of the plan)
//! (<https://hookdeck.com/docs/retries>). **Tolerance:** none (no time is
//! signed). **Handshake:** none.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! provider's own field, in the forwarded body (Stripe's `created`, ...);
//! Hookdeck's retries do not keep the order of events.

use crate::providers::gateway::{Gateway, GatewayEventId};
use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;
use crate::verify::Encoding;
use crate::verify::{KeyMaterialError, SigningSecret};

/// The header carrying Hookdeck's event id (the event key).
pub const EVENT_ID_HEADER: &str = "x-hookdeck-eventid";

/// The facts of the hookdeck preset (the scheme is in the module docs).
///
/// **Replay window: 30 days.** Hookdeck retries up to 50 times on the
/// connection's schedule and lets any event the project keeps be retried by
/// hand; how long it keeps events depends on the plan
/// (<https://hookdeck.com/docs/retries>), so the window is the crate's
/// default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "hookdeck",
    scheme: HmacScheme { encoding: Encoding::Base64, strict: true, ..HmacScheme::new("x-hookdeck-signature") },
    event_key: EventKey::Own {
        extractor: &GatewayEventId(EVENT_ID_HEADER),
        reads: "the x-hookdeck-eventid header",
        id_header: Some(EVENT_ID_HEADER),
    },
    headers: &["x-hookdeck-attempt-count", "x-hookdeck-attempt-trigger", "x-hookdeck-source-name"],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence:
        "50 automatic retries, manual retries within the plan's retention (https://hookdeck.com/docs/retries)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Hookdeck, the gateway alone (`x-hookdeck-signature`, base64 HMAC-SHA256
    /// of the body; key = `x-hookdeck-eventid`): [`hookdeck::FACTS`](FACTS).
    /// Behind Hookdeck with the provider's signature and key, see
    /// [`Provider::behind`].
    pub fn hookdeck() -> Self {
        FACTS.provider()
    }
}

impl Gateway {
    /// Hookdeck, with the destination's signing secret(s): the
    /// preset's scheme.
    ///
    /// # Errors
    /// As [`Gateway::new`].
    pub fn hookdeck(secrets: impl IntoIterator<Item = SigningSecret>) -> Result<Self, KeyMaterialError> {
        Self::new("hookdeck", FACTS.verifier(), secrets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::BodyOnly;
    use crate::verify::hmac_sha256;
    use crate::verify::VerifyErrorKind::MalformedHeader;

    /// The common cases, rotation and precheck, and Hookdeck's own: base64
    /// (not hex), no prefix.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"type":"payment_intent.succeeded","data":{"object":{"id":"pi_123"}}}"#;
        BodyOnly::of(&FACTS).check_cases("hookdeck_secret", body, b"{\"type\":\"x\"}", "!!", |secret, good| {
            vec![
                ("hex instead", vec![hex::encode(hmac_sha256(secret, &[body]))], Err(MalformedHeader)),
                ("sha256= prefix", vec![format!("sha256={good}")], Err(MalformedHeader)),
            ]
        });
    }

    /// The secret and payload of the tests of Hookdeck's guide, signed by its
    /// formula with Node's `crypto`
    /// (`createHmac('sha256', secret).update(body).digest('base64')`; Hookdeck
    /// publishes no expected value).
    #[test]
    fn hookdeck_guide_formula() {
        let secret = crate::verify::SigningSecret::from("test_hookdeck_secret");
        assert_eq!(
            crate::providers::tests::support::sign(&FACTS, &secret, br#"{"type":"test"}"#),
            "dyma6vPbJiLuMCIpVaOYUJhWBTZ3tO04E50Bt5fHWOo="
        );
    }

    #[test]
    fn the_key_is_the_event_id_header() {
        use crate::key::{KeyErrorKind, KeyExtractor as _};
        let (parts, _) = http::Request::builder().header(EVENT_ID_HEADER, " evt_abc ").body(()).unwrap().into_parts();
        let id = GatewayEventId(EVENT_ID_HEADER).extract(&parts, b"{}").unwrap();
        assert_eq!((id.key.as_str(), id.event_type), ("evt_abc", None));
        let (none, _) = http::Request::new(()).into_parts();
        assert_eq!(GatewayEventId(EVENT_ID_HEADER).extract(&none, b"{}").unwrap_err().kind(), KeyErrorKind::Missing);
        let (two, _) = http::Request::builder()
            .header(EVENT_ID_HEADER, "a")
            .header(EVENT_ID_HEADER, "b")
            .body(())
            .unwrap()
            .into_parts();
        assert_eq!(GatewayEventId(EVENT_ID_HEADER).extract(&two, b"{}").unwrap_err().kind(), KeyErrorKind::Invalid);
    }
}
