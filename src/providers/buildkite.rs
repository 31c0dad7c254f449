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
//!   replay attacks"). [`FACTS`]' tolerance is those 300 seconds, in both
//!   directions.
//!
//! **Token mode is not covered.** A Buildkite notification service sends
//! either this signature or, by default, the token itself in
//! `X-Buildkite-Token`; choose "Signature" in the service's settings to use
//! this preset (a token compare is a generic shared-token verifier, not this
//! HMAC preset).
//!
//! **Event key.** Buildkite sends no event or delivery id. The key is a
//! [`DerivedKey`](crate::key::DerivedKey) over the whole body in canonical
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

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset, KeyField};
use crate::verify::generic::{HmacScheme, Tolerance};
use crate::verify::Boundary;

/// The header carrying the event name (not signed).
const EVENT_HEADER: &str = "x-buildkite-event";

/// The facts of the buildkite preset, signature mode (the scheme is in the module docs).
///
/// **Replay window.** How long a Buildkite event can be sent again: 30 days.
///
/// Buildkite documents no retry schedule and no manual redelivery for
/// webhooks (<https://buildkite.com/docs/apis/webhooks>; the service's
/// request log keeps the last 20 requests). With the span not stated, the
/// window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "buildkite",
    scheme: HmacScheme {
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(300),
            evidence: "the docs suggest refusing old timestamps, \"for example, 5 minutes\" (https://buildkite.com/docs/apis/webhooks)",
            boundary: Boundary::Inclusive,
        }),
        ..super::timestamped_entries("x-buildkite-signature", ["timestamp", "signature"], ',', ".")
    },
    event_key: EventKey::Derived { fields: &[KeyField::CanonicalBody], event_type: Some(KeyField::Json("/event")) },
    headers: &[EVENT_HEADER],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://buildkite.com/docs/apis/webhooks)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Buildkite (`X-Buildkite-Signature: timestamp=,signature=`, 300 s; derived key). See [`crate::providers::buildkite`].
    ///
    /// The Buildkite preset (signature mode): [`buildkite::FACTS`](FACTS) with the
    /// 300 second tolerance; key derived from the canonical body, type =
    /// `event`.
    pub fn buildkite() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::KeyValueHeader;
    use crate::test_support::{headers, identity};
    use crate::verify::VerifyErrorKind;

    /// The family's cases, then Buildkite's own: another scheme's header,
    /// and the token mode's bare token, are malformed.
    #[test]
    fn verifies_and_rejects() {
        let wide = FACTS.verifier().tolerance(Duration::from_secs(600));
        KeyValueHeader::of(&FACTS, ["timestamp", "signature", "v2"]).check("signature", wide, |_| {
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
