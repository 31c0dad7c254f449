//! GitLab: the `X-Gitlab-Token` header.
//!
//! Scheme (GitLab, "Webhooks", sections "Create a webhook" (secret token)
//! and "Delivery headers",
//! <https://docs.gitlab.com/user/project/integrations/webhooks/>; the headers
//! are built in `app/services/web_hook_service.rb`, `build_headers`): the
//! webhook's **secret token** is sent as it is in `X-Gitlab-Token` on every
//! request of a project, group or system hook that has one. It is a shared
//! token, not a signature: [`TokenHeaderVerifier`] compares it with the
//! configured secrets in constant time. A hook saved without a token sends
//! no `X-Gitlab-Token`, and this preset refuses its deliveries (401). GitLab
//! sends one token; rotating it means configuring both here for the
//! changeover.
//!
//! **Signed / not signed:** nothing is signed. The token authenticates the
//! sender; the body, the event key (`Idempotency-Key`) and the event type
//! (`X-Gitlab-Event`) are **not signed**.
//!
//! The event key is the `Idempotency-Key` header: a UUID GitLab generates
//! for each hook execution and stores with its log, so a "Resend request"
//! from the hook's recent events (or the API's `resend`) carries the same
//! key (GitLab issue 388692 and merge request 160952, which added it for
//! this purpose). `X-Gitlab-Webhook-UUID` is new on every request and is not
//! used. The event type is `X-Gitlab-Event` (`Push Hook`, `Issue Hook`,
//! `System Hook`).
//!
//! **Retries:** GitLab does not retry a failed request on a schedule; it
//! disables a hook that keeps failing ("Auto-disabled webhooks": four
//! consecutive failures, or a back-off of up to 24 hours after 5xx answers)
//! and lets a logged request be resent by hand, through the UI or the REST
//! API (`POST /projects/:id/hooks/:hook_id/events/:hook_log_id/resend`,
//! GitLab issue 372826). How long the request log is kept is not stated on
//! the page, hence [`REPLAY_WINDOW`].
//!
//! **Tolerance:** none; no timestamp is sent. **Handshake:** none (the
//! "Test" button sends an ordinary event).
//!
//! **Limit of the scheme:** whoever holds the token, or one captured
//! request, can send any body under any `Idempotency-Key`, at any time, and
//! it verifies; the claim only stops GitLab's own resends and concurrent
//! copies. Serve the endpoint over TLS only, keep the token secret, and make
//! business writes idempotent on the payload's own identity (for a push, the
//! project id and `checkout_sha`). GitLab is adding an HMAC signing token in
//! the Standard Webhooks format (`webhook-id`, `webhook-timestamp`,
//! `webhook-signature`; behind the feature flag `webhook_signing_token` at
//! the time of writing): once it is available, prefer
//! [`Provider::standard_webhooks`](crate::Provider) with the signing token,
//! which signs the body, the id and the time.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! object's `object_attributes.updated_at` (issues, merge requests, notes);
//! push events carry no time of their own, and GitLab does not promise the
//! order of deliveries.

use crate::providers::Provider;
use crate::verify::generic::TokenHeaderVerifier;
use crate::verify::SigningSecret;

/// The header carrying the webhook's secret token.
pub const TOKEN_HEADER: &str = "x-gitlab-token";
/// The header carrying the hook execution's UUID (the event key), kept by a
/// resend.
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";
/// The header carrying the event name (the event type).
pub const EVENT_HEADER: &str = "x-gitlab-event";

/// The CLI name of the preset and the `provider` column of its claims.
pub const NAME: &str = "gitlab";
/// How long a GitLab request can be sent again: 30 days.
///
/// GitLab does not retry automatically; a request from the hook's log can be
/// resent by hand or through the API with its `Idempotency-Key` (GitLab,
/// "Webhooks", <https://docs.gitlab.com/user/project/integrations/webhooks/>,
/// and issue <https://gitlab.com/gitlab-org/gitlab/-/issues/372826>). The
/// page does not say how long the log keeps a request, so the window is the
/// crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const REPLAY_WINDOW: std::time::Duration = super::DEFAULT_REPLAY_WINDOW;

/// The verifier of the GitLab preset: the `X-Gitlab-Token` header compared
/// with the configured secret tokens.
pub fn verifier() -> TokenHeaderVerifier {
    TokenHeaderVerifier::new(http::HeaderName::from_static(TOKEN_HEADER))
}

/// The `X-Gitlab-Token` value GitLab sends for the secret token `secret`:
/// the token itself. For tests and fixtures.
pub fn sign(secret: &SigningSecret) -> String {
    String::from_utf8_lossy(secret.expose()).into_owned()
}

impl Provider {
    /// GitLab (`X-Gitlab-Token` shared token; key = `Idempotency-Key`). See [`crate::providers::gitlab`].
    ///
    /// The GitLab preset: [`verifier`] (a shared token, no signature), key =
    /// `Idempotency-Key`, type = `X-Gitlab-Event`.
    pub fn gitlab() -> Self {
        Provider::new(
            NAME,
            verifier(),
            crate::key::HeaderKey::new(http::HeaderName::from_static(IDEMPOTENCY_HEADER))
                .event_type(http::HeaderName::from_static(EVENT_HEADER)),
        )
        .credentials_in(PRESET.credentials())
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[TOKEN_HEADER, IDEMPOTENCY_HEADER, EVENT_HEADER],
    |_| Provider::gitlab(),
    super::ExampleOf::Signed(|s, id, _, _| vec![(TOKEN_HEADER, sign(s)), (IDEMPOTENCY_HEADER, id.to_owned())]),
)
.shared_token(&[TOKEN_HEADER])
.signs("`X-Gitlab-Token`: the secret token as it is (a shared token, no signature; body not signed)")
.key_from("the Idempotency-Key header")
.fixture(super::Fixture::own("a token, not a secret, and the signing-token preview (`classic`)"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::OneHeader;
    use crate::test_support::fixture_json;
    use crate::test_support::{headers, identity, NOW};
    use crate::verify::VerifyErrorKind;

    fn expected() -> serde_json::Value {
        fixture_json("gitlab/expected.json")
    }

    /// The headers GitLab's `build_headers` sends, from
    /// `scripts/fixtures/gitlab.py` (GitLab ships no receiver SDK).
    #[test]
    fn formula_fixture() {
        let body = include_bytes!("../../tests/fixtures/providers/gitlab/body.json");
        let expected = expected();
        assert_eq!(expected["sdk_verified"], serde_json::json!(false));
        let sent = &expected["classic"]["headers"];
        let secret = SigningSecret::from(expected["classic"]["secret_token"].as_str().unwrap());
        let token = sent["X-Gitlab-Token"].as_str().unwrap();
        assert_eq!(sign(&secret), token);
        let secrets = [secret];
        assert_eq!(OneHeader::preset(&PRESET).check(&[token], body, &secrets, NOW), Ok(()));
        // The whole head as sent: the key is Idempotency-Key, not the per-request UUID.
        let all: Vec<(&str, &str)> =
            sent.as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap())).collect();
        let id = identity(&Provider::gitlab(), &headers(&all), body);
        assert_eq!(id.key, expected["event_id"].as_str().unwrap());
        assert_eq!(id.event_type.as_deref(), expected["event_type"].as_str());
        let resent: Vec<(&str, &str)> = all
            .iter()
            .map(
                |&(k, v)| {
                    if k == "X-Gitlab-Webhook-UUID" {
                        (k, "11111111-2222-4333-8444-555555555555")
                    } else {
                        (k, v)
                    }
                },
            )
            .collect();
        assert_eq!(identity(&Provider::gitlab(), &headers(&resent), body), id);
    }

    /// The shared-token cases, rotation and precheck, and GitLab's own: a
    /// near miss and a prefix of the token do not match.
    #[test]
    fn verifies_and_rejects() {
        use VerifyErrorKind::NoMatchingSignature;
        let body = br#"{"object_kind":"push"}"#;
        OneHeader::preset(&PRESET).check_shared_token(
            sign,
            "glwt-secret-token",
            [body, b"{\"object_kind\":\"tag_push\"}"],
            &[
                ("wrong token", vec!["glwt-secret-tokem"], body, Err(NoMatchingSignature)),
                ("prefix of the token", vec!["glwt-secret"], body, Err(NoMatchingSignature)),
            ],
        );
    }

    #[test]
    fn key_and_name() {
        let no_key = headers(&[(TOKEN_HEADER, "new-token"), (EVENT_HEADER, "Push Hook")]);
        let err = Provider::gitlab().extractor_ref().extract(&no_key, b"{}").unwrap_err();
        assert_eq!(err.kind(), crate::key::KeyErrorKind::Missing);
        assert_eq!(crate::providers::find(NAME).map(|p| p.signs_body), Some(false));
    }
}
