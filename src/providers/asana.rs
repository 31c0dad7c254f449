//! Asana: the `X-Hook-Secret` handshake, then the `X-Hook-Signature` header.
//!
//! Scheme (Asana, "Webhooks", <https://developers.asana.com/docs/webhooks-guide>,
//! and "Establish a webhook", <https://developers.asana.com/reference/createwebhook>):
//! - **The handshake.** While the API request creating a webhook is in
//!   flight, Asana POSTs to the target with an `X-Hook-Secret` header and no
//!   signature; the target must answer `200` or `204` echoing `X-Hook-Secret`,
//!   and should store the secret: it signs every later delivery.
//! - **Deliveries.** `X-Hook-Signature: <hex HMAC-SHA256 of the raw body>`,
//!   keyed with that secret as its bytes. The body is `{"events":[...]}`.
//!
//! **How the secret reaches you.** The handshake is unsigned, so anyone could
//! send one; storing its secret blindly would let them replace the signing
//! secret with one they know. The preset hands it to the closure given to
//! [`Provider::asana`](crate::Provider), with the request head (its path tells
//! which of your routes, so which webhook, it is for), as a
//! [`SigningSecret`], whose `Debug` and `Display` print `<redacted>`: the
//! crate never logs it. The closure stores it and returns `true` only for a
//! handshake it expects: Asana sends it while *your* request to create the
//! webhook is in flight, so set a "pending" mark for that target before the
//! API call, accept one handshake while it is set (and only if no secret is
//! stored for it yet), and clear it when the call returns. The preset then
//! answers `200`, echoing `X-Hook-Secret`; a refused handshake is answered
//! `403` (Asana then fails the creation). Nothing is claimed either way.
//!
//! Until a secret is stored, the endpoint has none, so this verifier accepts
//! an empty list of secrets (the preset's verifier): with a
//! [`ScopeResolver`](crate::scope::ScopeResolver) returning no secret for a
//! new webhook, the handshake gets through and every signed delivery is
//! refused (401, `no_secret`) until the resolver returns the stored secret.
//!
//! **What passes unsigned:** exactly a `POST` carrying one `X-Hook-Secret`
//! (visible ASCII, at most [`MAX_HOOK_SECRET_BYTES`]) and no
//! `X-Hook-Signature`; its body is ignored. The preset's
//! [`Challenge`] answers every such request
//! (through the closure), so nothing unsigned is ever claimed. Any other
//! request without a valid signature, an unsigned POST without
//! `X-Hook-Secret` included, is refused (401).
//!
//! **Signed / not signed:** the raw body of a delivery; headers are not.
//!
//! **Event key.** A delivery is a batch of events with no id (each has
//! `created_at`, `user`, `resource`, `action`, `change`), retried whole. The
//! key is a digest of the body in canonical JSON (RFC 8785), which a retry
//! repeats; events carry their `created_at`, so two batches are alike only if
//! they repeat the same events. A verified body whose `events` list is empty
//! is answered `200` without a claim (nothing to process). There is no event
//! type (a batch mixes actions).
//!
//! **Retries:** a delivery not answered 2xx within 10 seconds is resent for
//! up to 24 hours (<https://developers.asana.com/docs/webhooks-guide>);
//! delivered webhooks cannot be replayed. Hence [`REPLAY_WINDOW`], 2 days.
//! **Tolerance:** none; no time is signed.
//!
//! **Limit of the scheme:** a captured delivery verifies forever; the claim
//! on its digest makes a replay a duplicate while the key is kept.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): each
//! event's `created_at` (ISO 8601); Asana does not promise order.

use std::sync::Arc;

use bytes::Bytes;

use super::handover::{HandoverAnswer, HandoverVerifier, Handshake};
use crate::providers::{Challenge, Provider};
use crate::verify::generic::HmacVerifier;
use crate::verify::{hmac_sha256, single_header, Delivery, SigningSecret};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "asana";

/// How long an Asana delivery can be sent again: 2 days.
///
/// Asana resends a delivery for up to 24 hours and replays none later
/// (<https://developers.asana.com/docs/webhooks-guide>); a day plus a day of
/// margin.
pub const REPLAY_WINDOW: std::time::Duration = super::days(2);

/// The header Asana signs deliveries with.
pub const SIGNATURE_HEADER: &str = "x-hook-signature";

/// The handshake's header, carrying the secret.
pub const SECRET_HEADER: &str = "x-hook-secret";

/// The longest `X-Hook-Secret` accepted, in bytes: 256 (Asana's are 64 hex
/// digits).
pub const MAX_HOOK_SECRET_BYTES: usize = 256;

/// The handshake's secret: a POST with one `X-Hook-Secret` of at most
/// [`MAX_HOOK_SECRET_BYTES`] and no `X-Hook-Signature`.
fn handshake(parts: &http::request::Parts) -> Option<&str> {
    if parts.method != http::Method::POST || parts.headers.contains_key(SIGNATURE_HEADER) {
        return None;
    }
    single_header(parts, SECRET_HEADER).ok().filter(|s| !s.is_empty() && s.len() <= MAX_HOOK_SECRET_BYTES)
}

/// Asana's `X-Hook-Secret` handshake, answered `200` with the header echoed.
struct HookSecret;

impl Handshake for HookSecret {
    fn may_be(&self, parts: &http::request::Parts) -> bool {
        handshake(parts).is_some()
    }

    fn secret(&self, parts: &http::request::Parts, _body: &[u8]) -> Option<String> {
        handshake(parts).map(str::to_owned)
    }

    fn accepted(&self, secret: &str) -> http::Response<Bytes> {
        let mut res = http::Response::new(Bytes::new());
        let value = http::HeaderValue::from_str(secret).expect("read from a header value");
        res.headers_mut().insert(SECRET_HEADER, value);
        res
    }
}

/// The preset's verifier: one hex HMAC-SHA256 of the body per
/// `X-Hook-Signature` line, or exactly the unsigned `X-Hook-Secret`
/// handshake; an endpoint with no secret yet passes the key-material check.
fn verifier() -> HandoverVerifier<HookSecret> {
    let hmac = HmacVerifier::builder(SIGNATURE_HEADER).strict().build().expect("a valid fixed configuration");
    HandoverVerifier { hmac, handshake: HookSecret }
}

/// The `X-Hook-Signature` Asana would send for `body` with the hook secret
/// `secret`: lower-case hex. For tests and fixtures.
pub fn sign(secret: &SigningSecret, body: &[u8]) -> String {
    hex::encode(hmac_sha256(secret, &[body]))
}

impl Provider {
    /// Asana (`X-Hook-Signature`, hex HMAC-SHA256 of the body; key = digest
    /// of the canonical body; the `X-Hook-Secret` handshake handed to
    /// `on_handshake`). See [`crate::providers::asana`].
    ///
    /// `on_handshake(head, secret)` stores `secret` as the signing secret of
    /// the webhook `head` is for and returns `true`, only for a handshake it
    /// expects (see the module docs); `false` answers `403`.
    pub fn asana(on_handshake: impl Fn(&http::request::Parts, SigningSecret) -> bool + Send + Sync + 'static) -> Self {
        let handover = HandoverAnswer { handshake: HookSecret, on: Arc::new(on_handshake) };
        // The handshake, then an empty batch: both answered, never claimed.
        let answer = move |d: &Delivery<'_>| handover.respond(d).or_else(|| super::EmptyEventsAnswered.respond(d));
        Provider::new(NAME, verifier(), crate::key::DerivedKey::new().canonical_body()).challenge(answer)
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)):
/// its provider refuses every handshake (no closure to store a secret).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER],
    |_| Provider::asana(|_, _| false),
    super::ExampleOf::Signed(|s, d| vec![(SIGNATURE_HEADER, sign(s, d.body))]),
)
.signs("`X-Hook-Signature` hex HMAC-SHA256 of the body (the secret from the `X-Hook-Secret` handshake)")
.key_from("a digest of the canonical JSON body (a derived key)")
.fixture(super::Fixture::formula(&[]));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::BodyOnly;
    use crate::test_support::{at, request_to, NOW};
    use crate::verify::Verifier as _;
    use crate::verify::VerifyErrorKind::{self, MalformedHeader, MissingHeader, NoMatchingSignature, NoSecret};
    use std::sync::Mutex;

    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"events":[{"action":"changed","created_at":"2024-06-10T06:13:20.000Z","resource":{"gid":"1","resource_type":"task"}}]}"#;
        BodyOnly::preset(&PRESET, sign).check_cases("hook_secret", body, b"{\"events\":[1]}", "zz", |_, good| {
            vec![("sha256= prefix", vec![format!("sha256={good}")], Err(MalformedHeader))]
        });
    }

    fn verify(headers: &[(&str, &str)], body: &[u8], secrets: &[SigningSecret]) -> Result<(), VerifyErrorKind> {
        let p = request_to("POST", "/asana/tenant-1", headers);
        verifier().verify(&Delivery::new(&p, body, secrets, at(NOW))).map_err(|e| e.kind())
    }

    /// Exactly the handshake passes unsigned, even with no secret yet; a
    /// handshake header beside a signature is a delivery; an unsigned POST is
    /// refused.
    #[test]
    fn only_the_handshake_passes_unsigned() {
        let k = [SigningSecret::from("hook_secret")];
        let long = "a".repeat(MAX_HOOK_SECRET_BYTES + 1);
        let (good, other) = (sign(&k[0], b"{}"), sign(&SigningSecret::from("x"), b"{}"));
        let cases: &[(&str, Vec<(&str, &str)>, &[SigningSecret], Result<(), VerifyErrorKind>)] = &[
            ("handshake", vec![(SECRET_HEADER, "b537207f20cbfa02")], &k, Ok(())),
            ("handshake before any secret", vec![(SECRET_HEADER, "b537207f20cbfa02")], &[], Ok(())),
            (
                "handshake header beside a signature",
                vec![(SECRET_HEADER, "x"), (SIGNATURE_HEADER, "00")],
                &k,
                Err(MalformedHeader),
            ),
            ("too long a secret", vec![(SECRET_HEADER, &long)], &k, Err(MissingHeader)),
            ("unsigned POST", vec![], &k, Err(MissingHeader)),
            ("signed, no secret yet", vec![(SIGNATURE_HEADER, &good)], &[], Err(NoSecret)),
            ("signed", vec![(SIGNATURE_HEADER, &good)], &k, Ok(())),
            ("signed by another", vec![(SIGNATURE_HEADER, &other)], &k, Err(NoMatchingSignature)),
        ];
        for (name, headers, secrets, want) in cases {
            assert_eq!(verify(headers, b"{}", secrets), *want, "{name}");
        }
        assert_eq!(verifier().check_secrets(&[]), Ok(()));
        assert!(verifier().check_secrets(&[SigningSecret::from("")]).is_err());
    }

    /// The closure gets the head and the secret; accepted, the answer echoes
    /// `X-Hook-Secret` with `200`; refused, `403`; a verified empty batch is
    /// answered, a batch of events is not; the secret never shows in `Debug`.
    #[test]
    fn hands_the_secret_to_the_closure() {
        let stored: Arc<Mutex<Vec<(String, Vec<u8>)>>> = Arc::default();
        let sink = Arc::clone(&stored);
        let provider = Provider::asana(move |head, secret| {
            assert_eq!(format!("{secret:?}"), "SigningSecret(<redacted>)");
            let expected = head.uri.path() == "/asana/tenant-1";
            if expected {
                sink.lock().unwrap().push((head.uri.path().to_owned(), secret.expose().to_vec()));
            }
            expected
        });
        let handshake = |path: &str| {
            let p = request_to("POST", path, &[(SECRET_HEADER, "b537207f")]);
            provider.handshake(&Delivery::new(&p, b"", &[], at(NOW))).unwrap().expect("answered")
        };
        let res = handshake("/asana/tenant-1");
        assert_eq!(res.status(), http::StatusCode::OK);
        assert_eq!(res.headers()[SECRET_HEADER], "b537207f");
        assert_eq!(*stored.lock().unwrap(), [("/asana/tenant-1".to_owned(), b"b537207f".to_vec())]);
        let refused = handshake("/asana/unexpected");
        assert_eq!(refused.status(), http::StatusCode::FORBIDDEN);
        assert!(refused.headers().get(SECRET_HEADER).is_none());
        assert_eq!(stored.lock().unwrap().len(), 1);
        let secrets = [SigningSecret::from("b537207f")];
        let answer = |body: &[u8]| {
            let p = request_to("POST", "/asana/tenant-1", &[(SIGNATURE_HEADER, &sign(&secrets[0], body))]);
            provider.handshake(&Delivery::new(&p, body, &secrets, at(NOW))).unwrap()
        };
        assert_eq!(answer(br#"{"events":[]}"#).map(|r| r.status()), Some(http::StatusCode::OK));
        assert!(answer(br#"{"events":[{"action":"added"}]}"#).is_none());
    }

    #[test]
    fn key_is_the_canonical_body() {
        let p = Provider::asana(|_, _| false);
        let bare = crate::test_support::headers(&[]);
        let read = |body: &[u8]| crate::test_support::identity(&p, &bare, body);
        let a = read(br#"{"events":[{"action":"added","created_at":"t1"}]}"#);
        assert_eq!(read(br#"{ "events": [ { "created_at": "t1", "action": "added" } ] }"#), a);
        assert_ne!(read(br#"{"events":[{"action":"added","created_at":"t2"}]}"#).key, a.key);
        assert!(a.event_type.is_none());
    }
}
