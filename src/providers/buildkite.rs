//! Buildkite (webhooks, signature mode): the `X-Buildkite-Signature` header.
//!
//! Scheme (Buildkite, "Webhooks", "Webhook signature" and "Verifying HMAC
//! signatures", <https://buildkite.com/docs/apis/webhooks>):
//! - `X-Buildkite-Signature: timestamp=<unix seconds>,signature=<hex>`, the
//!   hex HMAC-SHA256 of `{timestamp}.{raw body}` keyed with the webhook's
//!   token as given (the docs' Ruby: `OpenSSL::HMAC.hexdigest("sha256",
//!   secret, "#{timestamp}.#{webhook_request_body}")`). Buildkite sends one
//!   `signature`; several are accepted (any may match), unknown keys are
//!   ignored.
//! - tolerance: the timestamp "is part of the signed payload" and the docs
//!   suggest rejecting old ones, "for example, 5 minutes" ("Defending against
//!   replay attacks"). [`DEFAULT_TOLERANCE`] is those 300 seconds, in both
//!   directions.
//!
//! **Token mode is not covered.** A Buildkite notification service sends
//! either this signature or, by default, the token itself in
//! `X-Buildkite-Token`; choose "Signature" in the service's settings to use
//! this preset (a token compare is a generic shared-token verifier, not this
//! HMAC preset).
//!
//! **Event key.** Buildkite sends no event or delivery id. The key is a
//! [`DerivedKey`] over the whole body in canonical
//! JSON: the body is the event (`event`, and the `build`, `job` or `agent`
//! in the state it was in), so two events differ in it (another `event`, a
//! build's `state` or `finished_at`), and Buildkite documents no retry that
//! would change it. The docs warn that a payload may show a later state than
//! its event; a build that changes between two events of the same name gives
//! two keys, as it should. The event type is `event` (`build.finished`,
//! `ping` when the settings are saved).
//!
//! **Signed / not signed** (<https://buildkite.com/docs/apis/webhooks>): the
//! `timestamp=` and the raw body are signed, so the key and type are. The
//! `X-Buildkite-Event` header is not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! build's (or job's) `finished_at` / `started_at` / `scheduled_at`, or its
//! `number` within a pipeline.

use std::time::Duration;

use crate::key::DerivedKey;
use crate::provider::Provider;

/// The header carrying the event name (not signed).
pub const EVENT_HEADER: &str = "x-buildkite-event";

hmac_preset! {
    name: "buildkite";
    /// The header Buildkite signs deliveries with (signature mode).
    header: "x-buildkite-signature";
    /// How long a Buildkite event can be sent again: 30 days.
    ///
    /// Buildkite documents no retry schedule and no manual redelivery for
    /// webhooks (<https://buildkite.com/docs/apis/webhooks>; the service's
    /// request log keeps the last 20 requests). With the span not stated, the
    /// window is the crate's default for an unknown span,
    /// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
    replay_window: super::DEFAULT_REPLAY_WINDOW;
    /// Verifies the `X-Buildkite-Signature` header.
    pub struct BuildkiteVerifier = {
        super::timestamped_entries(SIGNATURE_HEADER, ["timestamp", "signature"], ',', ".")
    };
    /// The preset's tolerance: 300 seconds (the docs' example window).
    tolerance: Duration::from_secs(300);
    /// Buildkite (`X-Buildkite-Signature: timestamp=,signature=`, 300 s; derived key). See [`crate::providers::buildkite`].
    ///
    /// The Buildkite preset (signature mode): [`BuildkiteVerifier`] with the
    /// 300 second tolerance; key derived from the canonical body, type =
    /// `event`.
    fn buildkite() = Provider::new(
        NAME,
        BuildkiteVerifier::new(),
        DerivedKey::new().canonical_body().event_type_json("/event"),
    );
    headers: [EVENT_HEADER];
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::testing::KeyValueHeader;
    use crate::test_support::{headers, identity};
    use crate::verify::VerifyErrorKind;

    /// The family's cases, then Buildkite's own: another scheme's header,
    /// and the token mode's bare token, are malformed.
    #[test]
    fn verifies_and_rejects() {
        let wide = BuildkiteVerifier::new().tolerance(Duration::from_secs(600));
        KeyValueHeader::of(&PRESET, ["timestamp", "signature", "v2"], ',', 300, sign).check("signature", wide, |_| {
            vec![
                ("stripe-style header", vec!["t=1,v1=00".into()], Err(VerifyErrorKind::MalformedHeader)),
                ("a bare token", vec!["bk_token".into()], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
    }

    #[test]
    fn key_from_the_canonical_body() {
        let p = Provider::buildkite();
        let a = identity(&p, &headers(&[]), br#"{"event":"build.started","build":{"id":"b1"}}"#);
        let b = identity(&p, &headers(&[]), br#"{"build":{"id":"b1"}, "event":"build.started"}"#);
        let c = identity(&p, &headers(&[]), br#"{"event":"build.finished","build":{"id":"b1"}}"#);
        assert_eq!(a.key, b.key);
        assert_ne!(a.key, c.key);
    }
}
