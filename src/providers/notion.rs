//! Notion (integration webhooks): the one-time verification request, then
//! the `X-Notion-Signature` header.
//!
//! Scheme (Notion, "Webhooks", <https://developers.notion.com/reference/webhooks>):
//! - **Verification.** When a subscription is created, Notion POSTs
//!   `{"verification_token":"secret_..."}` to the URL, unsigned; the
//!   developer pastes that token into the integration's settings to verify
//!   the subscription. The token then keys every event's signature.
//! - **Events.** `X-Notion-Signature: sha256=<hex HMAC-SHA256 of the raw
//!   body>`, keyed with the verification token as its bytes. The body is one
//!   event: `id`, `timestamp`, `type` (`page.created`, `comment.created`,
//!   ...), `entity`, `data`, `attempt_number`.
//!
//! **How the token reaches you.** The verification request is unsigned, so
//! anyone could send one; the token matters only once *you* paste it into
//! Notion, and storing an attacker's token as the signing secret would let
//! them sign events. The preset hands it to the closure given to
//! [`Provider::notion`](crate::Provider), with the request head, as a
//! [`SigningSecret`] (its `Debug` and `Display` print `<redacted>`: the crate
//! never logs it). The closure returns `true` when it expects a verification
//! (a subscription being set up for that route): keep the token aside, show
//! it to the operator who pastes it into Notion (which proves it is
//! Notion's: the subscription's settings then say "verified"), and only then
//! configure it as the endpoint's signing secret. The preset answers `200`
//! (nothing echoed) when the closure accepts, `403` when it refuses; nothing
//! is claimed either way.
//!
//! Until the token is configured the endpoint has no secret, so this
//! verifier accepts an empty list of secrets (the preset's verifier):
//! the verification gets through and every signed event is refused (401,
//! `no_secret`) until the token is configured.
//!
//! **What passes unsigned:** exactly a `POST` without `X-Notion-Signature`
//! whose body is a JSON object holding only a `verification_token` string (at
//! most [`MAX_TOKEN_BYTES`]; the head check lets through an unsigned POST
//! only with `Content-Type: application/json`, as Notion sends); the preset's
//! [`Challenge`](crate::providers::Challenge) answers every such request.
//! Any other request without a valid signature, an ordinary unsigned POST
//! included, is refused (401).
//!
//! **Signed / not signed:** the raw body of an event, so its key and type;
//! headers are not. One token per subscription; to change it, configure the
//! old and the new token together.
//!
//! **Event key.** The body's `id`, the event's id, which Notion's retries
//! repeat (each retry's body has a higher `attempt_number`, so another
//! signature, but the same `id`); the event type is `type`.
//!
//! **Retries:** Notion retries an event that is not answered 2xx; the span
//! is not confirmed by this research, hence the crate's default window.
//! **Tolerance:** none; the body's `timestamp` is the event's time, not the
//! delivery's, and is not checked.
//!
//! **Limit of the scheme:** a captured event verifies forever; its `id` is
//! signed, so a replay is a duplicate while the key is kept.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! body's `timestamp` (ISO 8601); Notion does not promise order, and
//! aggregates some events (`page.content_updated`).

use std::sync::Arc;

use super::handover::{HandoverAnswer, HandoverVerifier, Handshake};
use crate::key::json::{self, Node};
use crate::providers::Provider;
use crate::verify::generic::HmacVerifier;
use crate::verify::{hmac_sha256, SigningSecret};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "notion";

/// How long a Notion event can be sent again: 30 days.
///
/// Notion retries an event that is not acknowledged
/// (<https://developers.notion.com/reference/webhooks>); the span is not
/// confirmed, so the window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const REPLAY_WINDOW: std::time::Duration = super::DEFAULT_REPLAY_WINDOW;

/// The header Notion signs events with.
pub const SIGNATURE_HEADER: &str = "x-notion-signature";

/// The longest verification token accepted, in bytes: 512.
pub const MAX_TOKEN_BYTES: usize = 512;

/// The verification request's token: a POST without a signature whose body
/// is `{"verification_token": "<at most MAX_TOKEN_BYTES>"}` alone.
fn verification(parts: &http::request::Parts, body: &[u8]) -> Option<String> {
    if parts.method != http::Method::POST || parts.headers.contains_key(SIGNATURE_HEADER) {
        return None;
    }
    match json::parse(body).ok()? {
        Node::Object(members) => match members.as_slice() {
            [(name, Node::String(token))] if name == "verification_token" => {
                (!token.is_empty() && token.len() <= MAX_TOKEN_BYTES).then(|| token.to_string())
            }
            _ => None,
        },
        _ => None,
    }
}

/// Notion's verification request.
struct VerificationToken;

impl Handshake for VerificationToken {
    /// The verification request is told apart by its body: a JSON POST
    /// without the signature header is read, then refused unless it is one.
    fn may_be(&self, parts: &http::request::Parts) -> bool {
        let json = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
        json && parts.method == http::Method::POST && !parts.headers.contains_key(SIGNATURE_HEADER)
    }

    fn secret(&self, parts: &http::request::Parts, body: &[u8]) -> Option<String> {
        verification(parts, body)
    }
}

/// The preset's verifier: `sha256=` and one hex HMAC-SHA256 of the body, or
/// exactly the unsigned verification request; a subscription with no token
/// yet passes the key-material check.
fn verifier() -> HandoverVerifier<VerificationToken> {
    let hmac = HmacVerifier::builder(SIGNATURE_HEADER).prefix("sha256=").strict().build();
    HandoverVerifier { hmac: hmac.expect("a valid fixed configuration"), handshake: VerificationToken }
}

/// The `X-Notion-Signature` Notion would send for `body` with the
/// verification token `secret`: `sha256=` and lower-case hex. For tests and
/// fixtures.
pub fn sign(secret: &SigningSecret, body: &[u8]) -> String {
    format!("sha256={}", hex::encode(hmac_sha256(secret, &[body])))
}

impl Provider {
    /// Notion (`X-Notion-Signature: sha256=<hex>` of the body; key = body
    /// `id`; the verification token handed to `on_verification`). See
    /// [`crate::providers::notion`].
    ///
    /// `on_verification(head, token)` keeps the token for the operator and
    /// returns `true` for a verification it expects (see the module docs);
    /// `false` answers `403`.
    pub fn notion(
        on_verification: impl Fn(&http::request::Parts, SigningSecret) -> bool + Send + Sync + 'static,
    ) -> Self {
        super::json_keyed(NAME, verifier(), "/id", "/type")
            .challenge(HandoverAnswer { handshake: VerificationToken, on: Arc::new(on_verification) })
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)):
/// its provider refuses every verification request (no closure to keep a
/// token).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER],
    |_| Provider::notion(|_, _| false),
    super::ExampleOf::Signed(|s, d| vec![(SIGNATURE_HEADER, sign(s, d.body))]),
)
.signs("`X-Notion-Signature: sha256=<hex>` HMAC-SHA256 of the body (keyed with the verification token)")
.key_from("the body's id (JSON)")
.fixture(super::Fixture::formula(&[]));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::BodyOnly;
    use crate::test_support::{at, request_to, NOW};
    use crate::verify::VerifyErrorKind::{self, MalformedHeader, MissingHeader, NoMatchingSignature, NoSecret};
    use crate::verify::{Delivery, Verifier as _};
    use std::sync::Mutex;

    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"id":"e1","type":"page.created","attempt_number":1}"#;
        BodyOnly::preset(&PRESET, sign).check_cases(
            "secret_notion_token",
            body,
            b"{\"id\":\"e2\"}",
            "sha256=zz",
            |_, good| {
                vec![
                    ("no prefix", vec![good["sha256=".len()..].to_owned()], Err(MalformedHeader)),
                    ("upper-case hex", vec![format!("sha256={}", good["sha256=".len()..].to_uppercase())], Ok(())),
                ]
            },
        );
    }

    fn verify(headers: &[(&str, &str)], body: &[u8], secrets: &[SigningSecret]) -> Result<(), VerifyErrorKind> {
        let p = request_to("POST", "/notion", headers);
        verifier().verify(&Delivery::new(&p, body, secrets, at(NOW))).map_err(|e| e.kind())
    }

    /// Exactly the verification body passes unsigned, even with no secret
    /// yet; anything else unsigned is refused.
    #[test]
    fn only_the_verification_request_passes_unsigned() {
        let k = [SigningSecret::from("secret_notion_token")];
        let event = br#"{"id":"e1","type":"page.created"}"#;
        let good = sign(&k[0], event);
        let long = format!(r#"{{"verification_token":"{}"}}"#, "a".repeat(MAX_TOKEN_BYTES + 1));
        let cases: &[(&str, Vec<(&str, &str)>, &[u8], &[SigningSecret], Result<(), VerifyErrorKind>)] = &[
            ("verification", vec![], br#"{"verification_token":"secret_abc"}"#, &k, Ok(())),
            ("verification before any secret", vec![], br#"{"verification_token":"secret_abc"}"#, &[], Ok(())),
            ("another member too", vec![], br#"{"verification_token":"s","id":"e1"}"#, &k, Err(MissingHeader)),
            ("empty token", vec![], br#"{"verification_token":""}"#, &k, Err(MissingHeader)),
            ("token not text", vec![], br#"{"verification_token":1}"#, &k, Err(MissingHeader)),
            ("too long a token", vec![], long.as_bytes(), &k, Err(MissingHeader)),
            ("an unsigned event", vec![], event, &k, Err(MissingHeader)),
            ("signed event", vec![(SIGNATURE_HEADER, &good)], event, &k, Ok(())),
            ("signed, no secret yet", vec![(SIGNATURE_HEADER, &good)], event, &[], Err(NoSecret)),
            (
                "signed verification body is an event",
                vec![(SIGNATURE_HEADER, &good)],
                br#"{"verification_token":"s"}"#,
                &k,
                Err(NoMatchingSignature),
            ),
        ];
        for (name, headers, body, secrets, want) in cases {
            assert_eq!(verify(headers, body, secrets), *want, "{name}");
        }
        assert_eq!(verifier().check_secrets(&[]), Ok(()));
    }

    /// The closure gets the token (redacted in `Debug`): accepted, `200` with
    /// nothing echoed; refused, `403`; a signed event is not a handshake.
    #[test]
    fn hands_the_token_to_the_closure() {
        let kept: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let sink = Arc::clone(&kept);
        let provider = Provider::notion(move |head, token| {
            assert_eq!(format!("{token:?}"), "SigningSecret(<redacted>)");
            let expected = head.uri.path() == "/notion";
            if expected {
                sink.lock().unwrap().push(token.expose().to_vec());
            }
            expected
        });
        let answer = |path: &str, headers: &[(&str, &str)], body: &[u8], secrets: &[SigningSecret]| {
            let p = request_to("POST", path, headers);
            provider.handshake(&Delivery::new(&p, body, secrets, at(NOW))).unwrap()
        };
        let body = br#"{"verification_token":"secret_tok"}"#;
        let res = answer("/notion", &[], body, &[]).expect("answered");
        assert_eq!((res.status(), res.body().is_empty()), (http::StatusCode::OK, true));
        assert_eq!(*kept.lock().unwrap(), [b"secret_tok".to_vec()]);
        assert_eq!(answer("/elsewhere", &[], body, &[]).unwrap().status(), http::StatusCode::FORBIDDEN);
        let k = [SigningSecret::from("secret_tok")];
        let event = br#"{"id":"e1","type":"page.created"}"#;
        assert!(answer("/notion", &[(SIGNATURE_HEADER, &sign(&k[0], event))], event, &k).is_none());
        crate::test_support::assert_body_identity(&provider, event, "e1", Some("page.created"));
    }
}
