//! Bitbucket Cloud: the `X-Hub-Signature` header.
//!
//! Scheme (Atlassian, "Manage webhooks", section "Secure webhooks",
//! <https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/>,
//! and "Event payloads", HTTP headers,
//! <https://support.atlassian.com/bitbucket-cloud/docs/event-payloads/>): a
//! webhook with a secret sends `X-Hub-Signature: sha256=<hex HMAC-SHA256 of
//! the raw body>`, keyed with the secret as UTF-8 bytes. The header name is
//! GitHub's old SHA-1 one, but Bitbucket puts SHA-256 in it: a `sha1=` value
//! is malformed here. A webhook without a secret sends no signature and this
//! preset refuses its requests (401). Bitbucket sends one signature;
//! rotating the secret means configuring both here for the changeover.
//!
//! **Signed / not signed:** only the raw body is signed. The event key
//! (`X-Request-UUID`) and the event type (`X-Event-Key`) are headers and
//! **not signed**, nor are `X-Hook-UUID` and `X-Attempt-Number`.
//!
//! The event key is `X-Request-UUID`, the request's UUID. Bitbucket counts
//! the attempts of a request in `X-Attempt-Number` ("the number of automatic
//! attempts", and manual resends from the request log), which describes one
//! request sent again; that a retry repeats `X-Request-UUID` is not said in
//! so many words: the one assumption of this preset. The event type is
//! `X-Event-Key` (`repo:push`, `pullrequest:created`).
//!
//! **Retries** (Atlassian, "Troubleshoot webhooks",
//! <https://support.atlassian.com/bitbucket-cloud/docs/troubleshoot-webhooks/>):
//! an answer in the 500-599 range makes Bitbucket resend the request up to
//! two more times, within seconds; a logged request (with the webhook's
//! history enabled) can be resent from its details page, with no stated age
//! limit, hence [`FACTS`]' `replay_window`. **Tolerance:** none; no timestamp is
//! sent. **Handshake:** none.
//!
//! **Limit of the scheme:** as GitHub's, only the body is signed: whoever
//! captured one delivery can send it again under a fresh `X-Request-UUID`,
//! and it verifies and is claimed as a new event. Make the business write
//! idempotent on the payload's own identity (for a push, the repository
//! `uuid` and each change's `new.target.hash`), and serve the endpoint over
//! TLS.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! object's `updated_on` (pull requests, issues; RFC 3339); pushes carry
//! commit dates only, and Bitbucket does not promise the order of
//! deliveries.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;

/// The facts of the bitbucket preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Bitbucket request can be sent again: 30 days.
///
/// Bitbucket resends a request answered 5xx up to two more times, within
/// seconds, and a logged request can be resent by hand from the request log
/// (<https://support.atlassian.com/bitbucket-cloud/docs/troubleshoot-webhooks/>),
/// with no stated age limit, so the window is the crate's default for an
/// unknown span, [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "bitbucket",
    scheme: HmacScheme {
        prefix: "sha256=",
        strict: true,
        ..HmacScheme::new("x-hub-signature")
    },
    event_key: EventKey::Header { id: REQUEST_HEADER, event_type: EVENT_HEADER },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence:
        "2 immediate retries; manual resend without a stated limit (https://support.atlassian.com/bitbucket-cloud/docs/troubleshoot-webhooks/)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&["same_event"]),
};

impl Provider {
    /// Bitbucket Cloud (`X-Hub-Signature` `sha256=`; key = `X-Request-UUID`). See [`crate::providers::bitbucket`].
    ///
    /// The Bitbucket Cloud preset: [`bitbucket::FACTS`](FACTS), key =
    /// `X-Request-UUID`, type = `X-Event-Key`.
    pub fn bitbucket() -> Self {
        FACTS.provider()
    }
}

/// The header carrying the request UUID (the event key).
const REQUEST_HEADER: &str = "x-request-uuid";
/// The header carrying the event key (the event type, `repo:push`).
const EVENT_HEADER: &str = "x-event-key";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::BodyOnly;
    use crate::verify::VerifyErrorKind::MalformedHeader;

    /// The common cases, rotation and precheck, and Bitbucket's own:
    /// `sha256=` and hex, not GitHub's `sha1=`.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"push":{"changes":[]}}"#;
        BodyOnly::of(&FACTS).check_cases("bb_secret", body, b"{\"push\":{}}", "sha1=00", |_, good| {
            vec![
                ("GitHub's sha1 form", vec![format!("sha1={}", "a".repeat(40))], Err(MalformedHeader)),
                ("no prefix", vec![good[7..].to_owned()], Err(MalformedHeader)),
                ("short hex", vec!["sha256=abcd".to_owned()], Err(MalformedHeader)),
            ]
        });
    }
}
