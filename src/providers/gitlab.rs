//! GitLab: the `X-Gitlab-Token` header, or the Standard Webhooks signature
//! of a webhook's **signing token**.
//!
//! Scheme (GitLab, "Webhooks", sections "Create a webhook" (secret token,
//! signing token) and "Delivery headers",
//! <https://docs.gitlab.com/user/project/integrations/webhooks/>; the headers
//! are built in `app/services/web_hook_service.rb`, `build_headers`). A hook
//! authenticates its requests in one or both of two ways:
//! - its **secret token** is sent as it is in `X-Gitlab-Token`. It is a
//!   shared token, not a signature: [`TokenHeaderVerifier`] compares it with
//!   the configured secret tokens in constant time.
//! - its **signing token** (`whsec_` + base64 of a 32-byte key; GitLab merge
//!   requests 230944 and 231325, <https://gitlab.com/gitlab-org/gitlab/-/merge_requests/230944>,
//!   behind the feature flag `webhook_signing_token` at the time of writing)
//!   signs the request in the Standard Webhooks format: `webhook-id` (equal
//!   to `Idempotency-Key`), `webhook-timestamp` (Unix seconds) and
//!   `webhook-signature: v1,<base64 HMAC-SHA256 of {id}.{timestamp}.{body}>`,
//!   keyed with the base64-decoded key. This part is verified by
//!   [`StandardWebhooksVerifier`] itself (the `gitlab` feature turns on `standard-webhooks`): the same
//!   `whsec_` reading, 300 seconds of tolerance in both directions, a time
//!   exactly 300 seconds away accepted, as the Standard Webhooks libraries
//!   decide it (`now - timestamp > tolerance` refused), and operator
//!   replays without the age check.
//!
//! **Which configured secret is which:** a secret beginning with `whsec_` is a
//! signing token; any other is a secret token (so a secret token of your
//! own must not begin with `whsec_`). [`GitLabVerifier`] checks each kind as
//! its own ([`Verifier::check_secrets`]: a `whsec_` one must decode as the
//! Standard Webhooks preset requires, any other must be a shared token of at
//! least 16 bytes).
//!
//! **Which path a delivery takes:** a delivery carrying any of `webhook-id`,
//! `webhook-timestamp` or `webhook-signature` is verified by the signature
//! alone, against the configured signing tokens; it must pass, whatever its
//! `X-Gitlab-Token` says (a hook with both tokens sends both headers, and the
//! token does not stand in for a signature that fails, is stale or is
//! missing a part: with no signing token configured, such a delivery is
//! refused, [`NoSecret`](crate::verify::VerifyErrorKind::NoSecret)). A
//! delivery carrying only `X-Gitlab-Token` is compared with the configured
//! secret tokens, as before (with none configured, it is refused). So the
//! secrets you configure decide what is accepted: configure **only** the
//! signing token to refuse token-only deliveries, which anyone who saw one
//! request of a hook with both tokens could otherwise forge.
//!
//! **Signed / not signed:** with a signing token, the body, `webhook-id` and
//! `webhook-timestamp` are signed; with a secret token alone nothing is
//! signed (the token authenticates the sender). The event type
//! (`X-Gitlab-Event`) is never signed.
//!
//! The event key is the hook execution's UUID: `webhook-id` when the
//! delivery is signed (signed, and equal to `Idempotency-Key`), else the
//! `Idempotency-Key` header. GitLab generates it for each hook execution and
//! stores it with its log, so a "Resend request" from the hook's recent
//! events (or the API's `resend`) carries the same key (GitLab issue 388692
//! and merge request 160952, which added it for this purpose).
//! `X-Gitlab-Webhook-UUID` is new on every request and is not used. The
//! event type is `X-Gitlab-Event` (`Push Hook`, `Issue Hook`, `System
//! Hook`).
//!
//! **Retries:** GitLab does not retry a failed request on a schedule; it
//! disables a hook that keeps failing ("Auto-disabled webhooks": four
//! consecutive failures, or a back-off of up to 24 hours after 5xx answers)
//! and lets a logged request be resent by hand, through the UI or the REST
//! API (`POST /projects/:id/hooks/:hook_id/events/:hook_log_id/resend`,
//! GitLab issue 372826). How long the request log is kept is not stated on
//! the page, hence [`REPLAY_WINDOW`]. A resent request is signed afresh
//! (GitLab signs when it sends), so it passes the tolerance.
//!
//! **Tolerance:** 300 seconds for a signed delivery (above); none for a
//! token-only one, which carries no time. **Handshake:** none (the "Test"
//! button sends an ordinary event).
//!
//! **Limit of the secret token:** whoever holds the token, or one captured
//! request, can send any body under any `Idempotency-Key`, at any time, and
//! it verifies; the claim only stops GitLab's own resends and concurrent
//! copies. Prefer the signing token (configure it alone); otherwise serve the
//! endpoint over TLS only, keep the token secret, and make business writes
//! idempotent on the payload's own identity (for a push, the project id and
//! `checkout_sha`).
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! object's `object_attributes.updated_at` (issues, merge requests, notes);
//! push events carry no time of their own, and GitLab does not promise the
//! order of deliveries.

use http::HeaderName;

use crate::key::{EventIdentity, KeyError, KeyErrorKind, KeyExtractor};
use crate::providers::standard_webhooks::{self, StandardWebhooksVerifier};
use crate::providers::Provider;
use crate::verify::generic::TokenHeaderVerifier;
use crate::verify::{
    check_key_material, Delivery, KeyMaterialError, SigningSecret, Verifier, VerifyError, VerifyErrorKind,
};

/// The header carrying the webhook's secret token.
pub const TOKEN_HEADER: &str = "x-gitlab-token";
/// The header carrying the hook execution's UUID (the event key of a
/// token-only delivery), kept by a resend.
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";
/// The header carrying the event name (the event type).
pub const EVENT_HEADER: &str = "x-gitlab-event";
/// The signed message id of a signed delivery (equal to
/// [`IDEMPOTENCY_HEADER`]; the event key).
pub const ID_HEADER: &str = standard_webhooks::ID_HEADER;
/// The signed Unix seconds of a signed delivery.
pub const TIMESTAMP_HEADER: &str = standard_webhooks::TIMESTAMP_HEADER;
/// The `v1,<base64>` signature list of a signed delivery.
pub const SIGNATURE_HEADER: &str = standard_webhooks::SIGNATURE_HEADER;
/// The prefix that marks a configured secret as a signing token.
pub const SIGNING_TOKEN_PREFIX: &str = "whsec_";

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

/// True for a secret that is a signing token (`whsec_...`).
fn is_signing_token(secret: &SigningSecret) -> bool {
    secret.expose().starts_with(SIGNING_TOKEN_PREFIX.as_bytes())
}

/// True when the delivery carries any Standard Webhooks header (then it is
/// verified by its signature alone).
fn is_signed(parts: &http::request::Parts) -> bool {
    [ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER].iter().any(|h| parts.headers.contains_key(*h))
}

/// The verifier of the GitLab preset: a signed delivery (Standard Webhooks
/// headers) by its signature against the `whsec_` signing tokens, any other
/// by `X-Gitlab-Token` against the other secrets (see the module docs).
#[derive(Debug, Clone)]
#[must_use]
pub struct GitLabVerifier {
    token: TokenHeaderVerifier,
    signed: StandardWebhooksVerifier,
}

impl Default for GitLabVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl GitLabVerifier {
    /// Secret tokens in `X-Gitlab-Token`, signing tokens with the Standard
    /// Webhooks tolerance of 300 seconds.
    pub fn new() -> Self {
        Self {
            token: TokenHeaderVerifier::new(HeaderName::from_static(TOKEN_HEADER)),
            signed: StandardWebhooksVerifier::new(),
        }
    }

    /// Sets how far (both directions) a signed delivery's `webhook-timestamp`
    /// may be from now (default 300 seconds).
    pub fn tolerance(mut self, tolerance: std::time::Duration) -> Self {
        self.signed = self.signed.tolerance(tolerance);
        self
    }
}

/// `delivery` with only the secrets `keep` selects; `NoSecret` when none is
/// left (a path whose kind of secret is not configured).
fn only(secrets: &[SigningSecret], keep: impl Fn(&SigningSecret) -> bool) -> Result<Vec<SigningSecret>, VerifyError> {
    let kept: Vec<SigningSecret> = secrets.iter().filter(|s| keep(s)).cloned().collect();
    if kept.is_empty() {
        return Err(VerifyErrorKind::NoSecret.into());
    }
    Ok(kept)
}

impl Verifier for GitLabVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        if is_signed(parts) {
            self.signed.precheck(parts)
        } else {
            self.token.precheck(parts)
        }
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        if is_signed(delivery.parts) {
            let secrets = only(delivery.secrets, is_signing_token)?;
            self.signed.verify(&Delivery { secrets: &secrets, ..*delivery })
        } else {
            let secrets = only(delivery.secrets, |s| !is_signing_token(s))?;
            self.token.verify(&Delivery { secrets: &secrets, ..*delivery })
        }
    }

    /// [`check_key_material`], then each secret as its kind requires: a
    /// `whsec_` signing token as the Standard Webhooks preset reads it (an
    /// HMAC key of 24 to 64 bytes), any other as a shared token of at least
    /// 16 bytes.
    ///
    /// # Errors
    /// The first unusable secret's [`KeyMaterialError`], by its position.
    fn check_secrets(&self, secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        check_key_material(secrets)?;
        for (i, secret) in secrets.iter().enumerate() {
            let one = std::slice::from_ref(secret);
            let checked =
                if is_signing_token(secret) { self.signed.check_secrets(one) } else { self.token.check_secrets(one) };
            checked.map_err(|e| e.at(i))?;
        }
        Ok(())
    }

    /// `X-Gitlab-Token`, whichever path a delivery takes.
    fn credential_headers(&self) -> &[HeaderName] {
        self.token.credential_headers()
    }
}

/// The `X-Gitlab-Token` value GitLab sends for the secret token `secret`:
/// the token itself. For tests and fixtures.
pub fn sign(secret: &SigningSecret) -> String {
    String::from_utf8_lossy(secret.expose()).into_owned()
}

/// The key of a GitLab delivery: `webhook-id` when present (signed), else
/// `Idempotency-Key`; the type is `X-Gitlab-Event`.
#[derive(Debug, Clone, Copy)]
struct ExecutionKey;

impl KeyExtractor for ExecutionKey {
    fn extract(&self, parts: &http::request::Parts, _body: &[u8]) -> Result<EventIdentity, KeyError> {
        let name = if parts.headers.contains_key(ID_HEADER) { ID_HEADER } else { IDEMPOTENCY_HEADER };
        let key = crate::key::header_str(parts, name)?.ok_or(KeyErrorKind::Missing)?;
        let event_type = crate::key::header_str(parts, EVENT_HEADER).ok().flatten();
        Ok(EventIdentity { key, event_type })
    }
}

impl Provider {
    /// GitLab (`X-Gitlab-Token` shared token, or a `whsec_` signing token's Standard Webhooks signature; key = `webhook-id` / `Idempotency-Key`). See [`crate::providers::gitlab`].
    ///
    /// The GitLab preset: [`GitLabVerifier`], key = `webhook-id` of a signed
    /// delivery, else `Idempotency-Key`; type = `X-Gitlab-Event`.
    pub fn gitlab() -> Self {
        Provider::new(NAME, GitLabVerifier::new(), ExecutionKey).credentials_in(PRESET.credentials())
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[TOKEN_HEADER, IDEMPOTENCY_HEADER, EVENT_HEADER, ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER],
    |_| Provider::gitlab(),
    super::ExampleOf::Signed(|s, d| vec![(TOKEN_HEADER, sign(s)), (IDEMPOTENCY_HEADER, d.id.to_owned())]),
)
.shared_token(&[TOKEN_HEADER])
.signs("`X-Gitlab-Token`: the secret token as it is (a shared token, no signature; body not signed); or, with a `whsec_` signing token, `webhook-signature: v1,<b64>` HMAC-SHA256 of `{webhook-id}.{ts}.{body}` (Standard Webhooks), which must then pass")
.key_from("the webhook-id header if signed, else Idempotency-Key")
.fixture(super::Fixture::own("a token, not a secret, and the signing token (`classic`, `signing_token_preview`)"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::OneHeader;
    use crate::test_support::fixture_json;
    use crate::test_support::{at, headers, identity, NOW};
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

    /// The signing-token vector of `scripts/fixtures/gitlab.py` (the Standard
    /// Webhooks formula of GitLab merge request 230944), sent with the secret
    /// token too, as a hook with both tokens sends it.
    fn signed_request(signature: Option<&str>, token: Option<&str>) -> http::request::Parts {
        let expected = expected();
        let sent = &expected["signing_token_preview"]["headers"];
        let classic = &expected["classic"]["headers"];
        let mut list = vec![
            (ID_HEADER, sent["webhook-id"].as_str().unwrap()),
            (TIMESTAMP_HEADER, sent["webhook-timestamp"].as_str().unwrap()),
            (IDEMPOTENCY_HEADER, classic["Idempotency-Key"].as_str().unwrap()),
            (EVENT_HEADER, classic["X-Gitlab-Event"].as_str().unwrap()),
        ];
        list.extend(signature.map(|s| (SIGNATURE_HEADER, s)));
        list.extend(token.map(|t| (TOKEN_HEADER, t)));
        headers(&list)
    }

    /// Both paths and the mixed cases: a signed delivery passes by its
    /// signature only (a good token does not rescue a bad or partial
    /// signature), a token-only one by the secret tokens only; each path
    /// without its kind of secret configured is refused.
    #[test]
    fn signing_token_and_secret_token() {
        use VerifyErrorKind::{MissingHeader, NoMatchingSignature, NoSecret};
        let body = include_bytes!("../../tests/fixtures/providers/gitlab/body.json");
        let expected = expected();
        let signing = SigningSecret::from(expected["signing_token_preview"]["signing_token"].as_str().unwrap());
        let token = SigningSecret::from(expected["classic"]["secret_token"].as_str().unwrap());
        let good = expected["signing_token_preview"]["headers"]["webhook-signature"].as_str().unwrap().to_owned();
        let at_signing = at(1_718_000_000);
        let other_signing = SigningSecret::from("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let forged =
            standard_webhooks::sign(&other_signing, "f0c4a8d2-6b5e-4a3f-9c1d-2e7b8a9f0c13", 1_718_000_000, body)
                .unwrap();
        let t = token.expose().to_vec();
        let t = std::str::from_utf8(&t).unwrap();
        let v = GitLabVerifier::new();
        let check = |p: &http::request::Parts, b: &[u8], secrets: &[SigningSecret]| {
            v.verify(&Delivery::new(p, b, secrets, at_signing)).map_err(|e| e.kind())
        };
        let both = [token.clone(), signing.clone()];
        let cases: [(&str, http::request::Parts, &[u8], &[SigningSecret], Result<(), VerifyErrorKind>); 12] = [
            ("signed", signed_request(Some(&good), None), body, &both, Ok(())),
            ("signed and token", signed_request(Some(&good), Some(t)), body, &both, Ok(())),
            (
                "signed, signing token alone",
                signed_request(Some(&good), Some(t)),
                body,
                std::slice::from_ref(&signing),
                Ok(()),
            ),
            ("tampered body", signed_request(Some(&good), Some(t)), b"{}", &both, Err(NoMatchingSignature)),
            ("another signing token", signed_request(Some(&forged), Some(t)), body, &both, Err(NoMatchingSignature)),
            ("no signature, good token", signed_request(None, Some(t)), body, &both, Err(MissingHeader)),
            (
                "signed, secret token alone",
                signed_request(Some(&good), Some(t)),
                body,
                std::slice::from_ref(&token),
                Err(NoSecret),
            ),
            ("token only", headers(&[(TOKEN_HEADER, t)]), body, &both, Ok(())),
            ("token only, tampered body", headers(&[(TOKEN_HEADER, t)]), b"{}", &both, Ok(())),
            (
                "token only, signing token alone",
                headers(&[(TOKEN_HEADER, t)]),
                body,
                std::slice::from_ref(&signing),
                Err(NoSecret),
            ),
            (
                "the signing token sent as a token",
                headers(&[(TOKEN_HEADER, std::str::from_utf8(signing.expose()).unwrap())]),
                body,
                &both,
                Err(NoMatchingSignature),
            ),
            ("nothing", headers(&[]), body, &both, Err(MissingHeader)),
        ];
        for (name, parts, b, secrets, want) in &cases {
            assert_eq!(check(parts, b, secrets), *want, "{name}");
        }
        // The precheck follows the same path.
        assert!(v.precheck(&signed_request(Some(&good), None)).is_ok());
        assert_eq!(v.precheck(&signed_request(None, Some(t))).map_err(|e| e.kind()), Err(MissingHeader));
        assert!(v.precheck(&headers(&[(TOKEN_HEADER, t)])).is_ok());
        // The key is the signed webhook-id, equal to Idempotency-Key; an operator
        // replay skips the age check only.
        let p = signed_request(Some(&good), Some(t));
        let id = identity(&Provider::gitlab(), &p, body);
        assert_eq!(id.key, expected["event_id"].as_str().unwrap());
        assert_eq!(id.event_type.as_deref(), Some("Issue Hook"));
        let late = Delivery::new(&p, body, &both, at(1_718_000_000 + 86_400));
        assert_eq!(v.verify(&late).map_err(|e| e.kind()), Err(VerifyErrorKind::TimestampTooOld));
        assert!(v.verify(&late.without_timestamp_check()).is_ok());
    }

    /// Standard Webhooks' boundary, as its libraries decide it (`now -
    /// timestamp > tolerance` refused): exactly 300 s either way accepted, a
    /// second more refused; a wider tolerance is the verifier's setting.
    #[test]
    fn signed_tolerance_boundary() {
        let body = br#"{"object_kind":"push"}"#;
        let key = SigningSecret::from("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let sig = standard_webhooks::sign(&key, "id-1", NOW, body).unwrap();
        let p = headers(&[(ID_HEADER, "id-1"), (TIMESTAMP_HEADER, &NOW.to_string()), (SIGNATURE_HEADER, &sig)]);
        let keys = [key];
        let check = |v: &GitLabVerifier, now| v.verify(&Delivery::new(&p, body, &keys, at(now))).map_err(|e| e.kind());
        let v = GitLabVerifier::new();
        use VerifyErrorKind::{TimestampInFuture, TimestampTooOld};
        for (now, want) in [
            (NOW + 299, Ok(())),
            (NOW + 300, Ok(())),
            (NOW + 301, Err(TimestampTooOld)),
            (NOW - 299, Ok(())),
            (NOW - 300, Ok(())),
            (NOW - 301, Err(TimestampInFuture)),
        ] {
            assert_eq!(check(&v, now), want, "at {now}");
        }
        assert_eq!(check(&v.clone().tolerance(std::time::Duration::from_secs(600)), NOW + 600), Ok(()));
    }

    /// Each configured secret is checked as its kind: a `whsec_` one must
    /// decode, any other must be a long enough token; the error names its
    /// position in the whole list.
    #[test]
    fn secrets_by_kind() {
        use crate::verify::KeyMaterialErrorKind;
        let v = GitLabVerifier::new();
        let check = |list: &[&str]| {
            let secrets: Vec<SigningSecret> = list.iter().map(|s| SigningSecret::from(*s)).collect();
            v.check_secrets(&secrets).map_err(|e| (e.kind(), e.index()))
        };
        assert_eq!(check(&["glwt-secret-token-0123456789", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]), Ok(()));
        assert_eq!(check(&["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]), Ok(()));
        assert_eq!(
            check(&["glwt-secret-token-0123456789", "short"]),
            Err((KeyMaterialErrorKind::WeakCredential, Some(1)))
        );
        assert_eq!(check(&["glwt-secret-token-0123456789", "whsec_!!!"]).map_err(|e| e.1), Err(Some(1)));
        assert_eq!(
            check(&["glwt-secret-token-0123456789", "whsec_"]),
            Err((KeyMaterialErrorKind::OnlyPrefix, Some(1)))
        );
        assert_eq!(check(&[]).map_err(|e| e.0), Err(KeyMaterialErrorKind::NoSecret));
        assert_eq!(v.credential_headers(), [HeaderName::from_static(TOKEN_HEADER)]);
    }

    #[test]
    fn key_and_name() {
        let no_key = headers(&[(TOKEN_HEADER, "new-token"), (EVENT_HEADER, "Push Hook")]);
        let err = Provider::gitlab().extractor_ref().extract(&no_key, b"{}").unwrap_err();
        assert_eq!(err.kind(), crate::key::KeyErrorKind::Missing);
        assert_eq!(crate::providers::find(NAME).map(|p| p.signs_body), Some(false));
    }
}
