//! Heroku (app webhooks): the `Heroku-Webhook-Hmac-SHA256` header.
//!
//! Scheme (Heroku Dev Center, "App Webhooks", "Securing webhook requests",
//! <https://devcenter.heroku.com/articles/app-webhooks>):
//! `Heroku-Webhook-Hmac-SHA256: <base64 HMAC-SHA256 of the raw body>`, keyed
//! with the subscription's secret (the `--secret` given to
//! `heroku webhooks:add`, or the one Heroku generated) as given. One
//! signature; to change the secret, configure the old and new ones together
//! while the subscription is updated.
//!
//! The event key is the body's `id`, the webhook event's id, which is signed;
//! Heroku also sends it as `Heroku-Webhook-Id`, which is not. The event type
//! is `resource` (`api:release`, `dyno`); the body's `action` (`create`,
//! `update`, `destroy`) says what happened to it.
//!
//! **Limit of the scheme:** the signature covers only the body. The
//! `Heroku-Webhook-Sent-At` header is not signed, so no age can be checked:
//! a captured delivery verifies forever; the claim on `id` makes its replay a
//! duplicate. Serve the endpoint over TLS.
//!
//! **Signed / not signed**
//! (<https://devcenter.heroku.com/articles/app-webhooks>): only the raw body
//! is signed; the event key and type come from it. `Heroku-Webhook-Id` and
//! `Heroku-Webhook-Sent-At` are not signed.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! body's `created_at` (RFC 3339), or the resource's `version` where it has
//! one (a release).

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;
use crate::verify::Encoding;

/// The facts of the heroku preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Heroku webhook event can be sent again: 30 days.
///
/// Heroku retries a delivery that gets no 2xx answer ("Webhook delivery" in
/// <https://devcenter.heroku.com/articles/app-webhooks>; the research for
/// this preset read up to 72 hours with a back-off, not confirmed), and the
/// deliveries can be listed (`heroku webhooks:deliveries`) but not resent.
/// With the span not confirmed, the window is the crate's default for an
/// unknown span, [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "heroku",
    scheme: HmacScheme { encoding: Encoding::Base64, strict: true, ..HmacScheme::new("heroku-webhook-hmac-sha256") },
    event_key: EventKey::Json { id: "/id", event_type: Some("/resource") },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://devcenter.heroku.com/articles/app-webhooks)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Heroku (`Heroku-Webhook-Hmac-SHA256`, base64; key = body `id`). See [`crate::providers::heroku`].
    ///
    /// The Heroku app-webhooks preset: [`heroku::FACTS`](FACTS); key = the body's
    /// `id`, type = `resource`.
    pub fn heroku() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::BodyOnly;

    /// The common cases, rotation and precheck, and Heroku's own: standard
    /// padded base64 alone, one line per signature.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"id":"e1","resource":"dyno","action":"create"}"#;
        BodyOnly::of(&FACTS)
            .check_cases("heroku_secret", body, b"{\"id\":\"e2\"}", "!!", |_, good| BodyOnly::base64_alone(good));
    }
}
