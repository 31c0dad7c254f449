//! Coinbase Commerce: the `X-CC-Webhook-Signature` header.
//!
//! Scheme (Coinbase Developer Platform, Commerce, "Webhooks security",
//! <https://docs.cdp.coinbase.com/commerce/api-arcitecture/webhooks-security>,
//! and the verifier of the archived `coinbase-commerce-node`,
//! `Webhook.verifySigHeader`): `X-CC-Webhook-Signature: <hex HMAC-SHA256 of
//! the raw body>`, "computed using your webhook shared secret" (Settings,
//! Notifications) as UTF-8 bytes. Coinbase sends one signature; rotating the
//! shared secret means configuring both here for the changeover.
//!
//! **Signed / not signed:** only the raw body is signed, so the event key
//! (`event.id`) and the event type (`event.type`) are signed. Headers are
//! not.
//!
//! The event key is the body's `event.id`, the event's UUID. The envelope
//! around it is the notification: its own `id` and an `attempt_number`,
//! which grows on each attempt (from the field names; the page does not
//! describe them), so a retry is another body of the same `event.id`. The
//! event type is `event.type` (`charge:confirmed`).
//!
//! **Retries:** not stated on the pages current when this preset was
//! written, hence [`FACTS`]' `replay_window`. **Tolerance:** none; no timestamp is
//! signed (`scheduled_for` and `event.created_at` are signed but Coinbase
//! sets no window on them). **Handshake:** none.
//!
//! **Status:** Coinbase Commerce is being folded into Coinbase's newer
//! payment products and its Node SDK is archived; the scheme is still the
//! one documented above.
//!
//! **Limit of the scheme:** no timestamp is signed: a captured delivery
//! verifies forever; the claim on `event.id` makes its replay a duplicate.
//! Serve the endpoint over TLS.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! event's `created_at` (RFC 3339), or the charge's `timeline` entries.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;

/// The facts of the coinbase-commerce preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Coinbase Commerce event can be sent again: 30 days.
///
/// The retry schedule is not stated on Coinbase's current pages
/// (<https://docs.cdp.coinbase.com/commerce/api-arcitecture/webhooks-security>;
/// an older version of the docs spoke of retries for up to three days, not
/// confirmed), so the window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "coinbase-commerce",
    scheme: HmacScheme { strict: true, ..HmacScheme::new("x-cc-webhook-signature") },
    event_key: EventKey::Json { id: "/event/id", event_type: Some("/event/type") },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://docs.cdp.coinbase.com/commerce/api-arcitecture/webhooks-security)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::sdk(&["sdk_time_cases", "same_event"]),
};

impl Provider {
    /// Coinbase Commerce (`X-CC-Webhook-Signature`; key = `event.id`). See [`crate::providers::coinbase_commerce`].
    ///
    /// The Coinbase Commerce preset: [`coinbase_commerce::FACTS`](FACTS); key = the
    /// body's `event.id`, type = `event.type`.
    pub fn coinbase_commerce() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::BodyOnly;

    use crate::verify::VerifyErrorKind;

    /// The common cases, rotation and precheck, and Coinbase's own: bare hex.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"event":{"id":"e1","type":"charge:created"}}"#;
        BodyOnly::of(&FACTS).check_cases("cc_secret", body, b"{\"event\":{}}", "zz", |_, _| {
            vec![
                ("sha256= prefix", vec!["sha256=00".to_owned()], Err(VerifyErrorKind::MalformedHeader)),
                ("short hex", vec!["abcd".to_owned()], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
    }
}
