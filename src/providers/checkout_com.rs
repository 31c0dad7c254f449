//! Checkout.com: the `Cko-Signature` header.
//!
//! Scheme (Checkout.com, "Set up your webhook receiver",
//! <https://www.checkout.com/docs/developer-resources/webhooks/manage-webhooks/set-up-your-webhook-receiver>):
//! `Cko-Signature: <hex HMAC-SHA256 of the raw body>`, keyed with the
//! signature key of the workflow's webhook action, as UTF-8 bytes. The page
//! warns that re-serialising the JSON changes characters such as `©` and
//! `™`: only the raw bytes verify, which is what this verifier checks.
//! Checkout.com sends one signature; rotating the key means configuring both
//! here for the changeover.
//!
//! **Not covered:** a workflow webhook action can also send custom headers,
//! typically `Authorization: <your key>`, a second, token-style check. This
//! preset does not read it; check it in the handler, or wrap the verifier
//! with a [`TokenHeaderVerifier`](crate::verify::generic::TokenHeaderVerifier)
//! of your own (its secret differs from the signature key, so it needs a
//! verifier of its own). Accounts still on the older notification webhooks
//! (before Workflows) used the same header with another key; this preset is
//! written against the Workflows page.
//!
//! **Signed / not signed:** only the raw body is signed, so the event key
//! (the body's `id`, `evt_...`) and the event type (its `type`) are signed.
//! Headers are not.
//!
//! The event key is the body's `id`, the event id: deliveries are "at least
//! once" and a retry resends the same event. The event type is `type`
//! (`payment_captured`).
//!
//! **Retries** (Checkout.com, "Workflows", receiving webhooks,
//! <https://www.checkout.com/docs/workflows>): after a failure an event is
//! resent up to 8 times, 5 minutes, 10 minutes, 15 minutes, 30 minutes,
//! 1 hour, 4 hours, 12 hours and 12 hours later (about 30 hours in all), and
//! can be resent by hand from the Dashboard or the API, with no stated age
//! limit, hence [`FACTS`]' `replay_window`. **Tolerance:** none; no timestamp is
//! signed (the body's `created_on` is signed but no window is set on it).
//! **Handshake:** none.
//!
//! **Limit of the scheme:** no timestamp is signed: a captured delivery
//! verifies forever; the claim on `id` makes its replay a duplicate. Serve
//! the endpoint over TLS.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! event's `created_on` (RFC 3339, milliseconds); Checkout.com does not
//! promise the order of deliveries.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;

/// The facts of the checkout-com preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Checkout.com event can be sent again: 30 days.
///
/// Checkout.com resends a failed event up to 8 times over about 30 hours and
/// lets it be resent by hand from the Dashboard or the API
/// (<https://www.checkout.com/docs/workflows>); the manual resend has no
/// stated age limit, so the window is the crate's default for an unknown
/// span, [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "checkout-com",
    scheme: HmacScheme { strict: true, ..HmacScheme::new("cko-signature") },
    event_key: EventKey::Json { id: "/id", event_type: Some("/type") },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence:
        "8 retries over about 30 hours; manual resend without a stated limit (https://www.checkout.com/docs/workflows)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Checkout.com (`Cko-Signature`; key = `id`). See [`crate::providers::checkout_com`].
    ///
    /// The Checkout.com preset: [`checkout_com::FACTS`](FACTS); key = the body's
    /// `id`, type = `type`.
    pub fn checkout_com() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::BodyOnly;
    use crate::verify::VerifyErrorKind;

    /// The common cases (a re-serialised body with escapes is another body),
    /// rotation and precheck, and Checkout.com's own: bare hex.
    #[test]
    fn verifies_and_rejects() {
        let body = "{\"id\":\"evt_1\",\"type\":\"payment_captured\",\"reference\":\"©™\"}".as_bytes();
        let escaped = br#"{"id":"evt_1","type":"payment_captured","reference":"\u00a9\u2122"}"#;
        BodyOnly::of(&FACTS).check_cases("cko_key", body, escaped, "zz", |_, _| {
            vec![("short hex", vec!["abcd".to_owned()], Err(VerifyErrorKind::MalformedHeader))]
        });
    }
}
