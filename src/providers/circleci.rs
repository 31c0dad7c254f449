//! CircleCI (outbound webhooks): the `circleci-signature` header.
//!
//! Scheme (CircleCI, "Outbound webhooks", "Payload signature",
//! <https://circleci.com/docs/outbound-webhooks/>):
//! `circleci-signature: v1=<hex HMAC-SHA256 of the raw body>`, keyed with
//! the webhook's secret token (API field `signing-secret`) as given. The
//! header "contains a comma-separated list of versioned signatures"; only
//! `v1` exists today, so every `v1=` entry is tried (any may match) and
//! other versions are ignored. A `v1` value that is not 64 hex digits is
//! skipped like an unknown version.
//!
//! The event key is the body's `id`: CircleCI's docs say webhooks may be
//! duplicated and to "use the `id` property in the webhook payload to
//! identify duplicates". The event type is `type` (`workflow-completed`,
//! `job-completed`), also sent, unsigned, as `circleci-event-type`.
//!
//! **Limit of the scheme:** the signature covers only the body; the body's
//! `happened_at` is signed but is the event's time, with no acceptance
//! window. A captured delivery verifies forever; the claim on `id` makes its
//! replay a duplicate. Serve the endpoint over TLS.
//!
//! **Signed / not signed** (<https://circleci.com/docs/outbound-webhooks/>):
//! only the raw body is signed; the event key and type come from it. Headers
//! (`circleci-event-type`) are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! body's `happened_at` (RFC 3339).

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;

/// The facts of the circleci preset (the scheme is in the module docs).
///
/// **Replay window.** How long a CircleCI event can be sent again: 30 days.
///
/// CircleCI retries a delivery that gets no 2xx within 5 seconds, but "the
/// exact details of the retry policy are not currently documented"
/// (<https://circleci.com/docs/outbound-webhooks/>); no manual redelivery is
/// documented. With the span not stated, the window is the crate's default
/// for an unknown span, [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "circleci",
    scheme: HmacScheme { key_value: Some("v1"), separator: Some(','), ..HmacScheme::new("circleci-signature") },
    event_key: EventKey::Json { id: "/id", event_type: Some("/type") },
    headers: &[EVENT_TYPE_HEADER],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://circleci.com/docs/outbound-webhooks/)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// CircleCI (`circleci-signature: v1=`, hex HMAC-SHA256; key = body `id`). See [`crate::providers::circleci`].
    ///
    /// The CircleCI outbound-webhooks preset: [`circleci::FACTS`](FACTS); key = the
    /// body's `id`, type = `type`.
    pub fn circleci() -> Self {
        FACTS.provider()
    }
}

/// The header carrying the event type (not signed).
const EVENT_TYPE_HEADER: &str = "circleci-event-type";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::sign;
    use crate::providers::tests::support::BodyOnly;

    use crate::verify::SigningSecret;
    use crate::verify::VerifyErrorKind;

    /// The common cases, rotation and precheck, and CircleCI's own: `v1=`
    /// entries in a comma list, other versions ignored.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"id":"e1","type":"job-completed"}"#;
        BodyOnly::of(&FACTS).check_cases("circleci_secret", body, b"{\"id\":\"e2\"}", "v1", |_, good| {
            let other = sign(&FACTS, &SigningSecret::from("circleci_other"), body);
            vec![
                ("two v1 in one line", vec![format!("{other},{good}")], Ok(())),
                ("unknown version ignored", vec![format!("v2={},{good}", "a".repeat(64))], Ok(())),
                ("space after comma", vec![format!("{other}, {good}")], Ok(())),
                ("only another version", vec!["v2=00".to_owned()], Err(VerifyErrorKind::NoMatchingSignature)),
                ("short v1 skipped", vec!["v1=abcd".to_owned()], Err(VerifyErrorKind::NoMatchingSignature)),
                ("bare hex", vec![good[3..].to_owned()], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
    }
}
