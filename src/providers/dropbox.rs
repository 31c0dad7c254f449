//! Dropbox: the `X-Dropbox-Signature` header, and the `GET ?challenge=`
//! verification request.
//!
//! Scheme (Dropbox, "Webhooks", <https://www.dropbox.com/developers/reference/webhooks>):
//! `X-Dropbox-Signature: <hex HMAC-SHA256 of the raw body>`, keyed with the
//! app's **app secret** (App Console) as its UTF-8 bytes; one signature, no
//! timestamp. To rotate the app secret, configure the old and the new one
//! together for the changeover.
//!
//! **Handshake.** When a webhook URI is added, Dropbox sends a `GET` with a
//! `challenge` query parameter (a random string) and expects it echoed back
//! as the body, with `Content-Type: text/plain` and
//! `X-Content-Type-Options: nosniff` "to avoid introducing a reflected XSS
//! vulnerability". The request is unsigned and cannot be authenticated, and
//! answering it is a harmless echo with no side effect, so the verifier lets
//! through exactly that shape (a `GET` whose query is one non-empty
//! `challenge` of at most [`MAX_CHALLENGE_BYTES`], with an empty body; the
//! provider allows `GET` and `POST`) and the preset's
//! [`Challenge`] answers every such request:
//! `200`, `text/plain`, `nosniff`, the challenge as the body; nothing is
//! claimed. Any other request without a valid signature (an unsigned `POST`,
//! a `GET` without a challenge) is refused (401).
//!
//! **Signed / not signed:** the raw body only; the event key comes from it.
//! Headers are not signed.
//!
//! **Event key: none; every delivery runs the handler.** A notification
//! names no event: its body lists the accounts whose files changed
//! (`{"list_folder":{"accounts":[...]},"delta":{"users":[...]}}`), and the app
//! is to fetch the changes with its stored cursor. Two notifications of two
//! changes to the same accounts are byte for byte alike, so any key read from
//! the body would answer the second as a duplicate and skip the fetch that
//! picks up the second change. So the key is new for each delivery
//! ([`EachDelivery`]: `delivery:` and 128 random bits, hex): the claim's
//! transaction still wraps the handler's writes, but nothing is deduplicated,
//! and a retry of a notification runs the handler again. The handler must be
//! safe to run again, which fetching from the stored cursor
//! (`files/list_folder/continue`, the cursor saved in the same transaction) is.
//! There is no event type.
//!
//! **Retries:** a notification not answered 200 within ten seconds is retried
//! with back-off "over the course of about ten minutes", then reported as a
//! failure in the App Console (<https://www.dropbox.com/developers/reference/webhooks>);
//! the verification request is not retried. Hence [`REPLAY_WINDOW`], 1 day.
//! **Tolerance:** none; no time is signed.
//!
//! **Limit of the scheme:** a captured notification verifies forever; its
//! replay is only a hint to sync from the cursor again.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): none in
//! the notification; the order of changes is the cursor's (`list_folder`).

use bytes::Bytes;

use crate::providers::{Challenge, Provider};
use crate::verify::generic::HmacVerifier;
use crate::verify::{hmac_sha256, Delivery, SigningSecret, Verifier, VerifyError, VerifyErrorKind};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "dropbox";

/// How long a Dropbox notification can be sent again: 1 day.
///
/// Dropbox retries a notification "over the course of about ten minutes"
/// (<https://www.dropbox.com/developers/reference/webhooks>) and resends
/// nothing later; ten minutes plus a day of margin.
pub const REPLAY_WINDOW: std::time::Duration = super::days(1);

/// The header Dropbox signs notifications with.
pub const SIGNATURE_HEADER: &str = "x-dropbox-signature";

/// The longest `challenge` echoed, in bytes (decoded): 1024. Dropbox's is a
/// short random string.
pub const MAX_CHALLENGE_BYTES: usize = 1024;

/// Verifies `X-Dropbox-Signature`; lets through the unsigned `GET
/// ?challenge=` verification request (answered by the preset's challenge).
#[derive(Debug, Clone)]
#[must_use]
pub struct DropboxVerifier {
    inner: HmacVerifier,
}

impl Default for DropboxVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl DropboxVerifier {
    /// The verifier: one hex HMAC-SHA256 of the body per header line.
    pub fn new() -> Self {
        let inner = HmacVerifier::builder(SIGNATURE_HEADER).strict().build();
        Self { inner: inner.expect("a valid fixed configuration") }
    }
}

/// The challenge of Dropbox's verification request: a `GET` whose query is
/// exactly one non-empty `challenge` of at most [`MAX_CHALLENGE_BYTES`].
fn challenge(parts: &http::request::Parts) -> Option<String> {
    if parts.method != http::Method::GET {
        return None;
    }
    let mut params = form_urlencoded::parse(parts.uri.query()?.as_bytes());
    let (name, value) = params.next()?;
    let alone = params.next().is_none();
    (alone && name == "challenge" && !value.is_empty() && value.len() <= MAX_CHALLENGE_BYTES)
        .then(|| value.into_owned())
}

impl Verifier for DropboxVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        if challenge(parts).is_some() {
            return Ok(());
        }
        self.inner.precheck(parts)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        if challenge(delivery.parts).is_some() {
            // The unsigned verification request, answered by the challenge
            // with no claim; one carrying a body is no such request.
            delivery.require_secrets()?;
            return if delivery.body.is_empty() { Ok(()) } else { Err(VerifyErrorKind::MalformedHeader.into()) };
        }
        self.inner.verify(delivery)
    }
}

/// The `X-Dropbox-Signature` Dropbox would send for `body` with the app
/// secret `secret`: lower-case hex. For tests and fixtures.
pub fn sign(secret: &SigningSecret, body: &[u8]) -> String {
    hex::encode(hmac_sha256(secret, &[body]))
}

/// Echoes the verification request's `challenge` (after verification:
/// exactly the requests the verifier lets through unsigned), as
/// `text/plain` with `X-Content-Type-Options: nosniff`; `None` otherwise.
#[derive(Debug, Clone, Copy, Default)]
struct Echo;

impl Challenge for Echo {
    fn respond(&self, delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
        let challenge = challenge(delivery.parts)?;
        let mut res = http::Response::new(Bytes::from(challenge));
        let headers = res.headers_mut();
        headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
        headers.insert(http::header::X_CONTENT_TYPE_OPTIONS, http::HeaderValue::from_static("nosniff"));
        Some(res)
    }
}

impl Provider {
    /// Dropbox (`X-Dropbox-Signature`, hex HMAC-SHA256 of the body; a new key
    /// for each delivery, [`EachDelivery`]; echoes the `GET ?challenge=`).
    /// See [`crate::providers::dropbox`].
    ///
    /// The Dropbox preset: [`DropboxVerifier`], [`EachDelivery`], methods
    /// `POST` and `GET`, the verification request echoed without a claim.
    pub fn dropbox() -> Self {
        Provider::new(NAME, DropboxVerifier::new(), EachDelivery)
            .methods([http::Method::POST, http::Method::GET])
            .challenge(Echo)
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER],
    |_| Provider::dropbox(),
    super::ExampleOf::Signed(|s, d| vec![(SIGNATURE_HEADER, sign(s, d.body))]),
)
.signs("`X-Dropbox-Signature` hex HMAC-SHA256 of the body")
.key_from("a new key for each delivery (every notification runs the handler)")
.every_delivery_runs()
.fixture(super::Fixture::own("the key is random (`every_delivery_gets_a_new_key`); the signature vector of the hapi-dropbox-webhooks tests in `verifies_and_rejects`"));

/// A new event key for each delivery, `delivery:` and 128 random bits in
/// hex, no event type: for a notification that names no event and must run
/// the handler every time (see the [module docs](self)).
#[derive(Debug, Clone, Copy, Default)]
pub struct EachDelivery;

impl crate::key::KeyExtractor for EachDelivery {
    fn extract(
        &self,
        _parts: &http::request::Parts,
        _body: &[u8],
    ) -> Result<crate::key::EventIdentity, crate::key::KeyError> {
        Ok(crate::key::EventIdentity { key: format!("delivery:{:032x}", fastrand::u128(..)), event_type: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::BodyOnly;
    use crate::test_support::{at, request_to, NOW};
    use crate::verify::VerifyErrorKind::{MalformedHeader, MissingHeader, NoMatchingSignature, NoSecret};

    #[test]
    fn every_delivery_gets_a_new_key() {
        use crate::key::KeyExtractor as _;
        let (parts, ()) = http::Request::post("/").body(()).unwrap().into_parts();
        let body = br#"{"list_folder":{"accounts":["dbid:A"]}}"#;
        let (a, b) = (EachDelivery.extract(&parts, body).unwrap(), EachDelivery.extract(&parts, body).unwrap());
        assert_ne!(a.key, b.key, "the same notification twice: two keys");
        assert!(a.key.starts_with("delivery:") && a.key.len() == "delivery:".len() + 32 && a.event_type.is_none());
    }

    /// The common body-only cases, rotation and precheck, and Dropbox's own:
    /// lower or upper-case hex, no prefix; the vector of the
    /// `hapi-dropbox-webhooks` plugin's tests.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"list_folder":{"accounts":["dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc"]}}"#;
        BodyOnly::preset(&PRESET, sign).check_cases("app_secret", body, b"{\"delta\":{}}", "zz", |_, good| {
            vec![
                ("upper-case hex", vec![good.to_uppercase()], Ok(())),
                ("sha256= prefix", vec![format!("sha256={good}")], Err(MalformedHeader)),
            ]
        });
        let vector = sign(&SigningSecret::from("the_secret"), br#"{"delta": {"users": [12345]}}"#);
        assert_eq!(vector, "0a8c16b085420b960dc78664279fe09e936a2a01b1f91064869d9e77dfd64529");
    }

    fn verify(
        method: &str,
        uri: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        secrets: &[SigningSecret],
    ) -> Result<(), VerifyErrorKind> {
        let p = request_to(method, uri, headers);
        DropboxVerifier::new().verify(&Delivery::new(&p, body, secrets, at(NOW))).map_err(|e| e.kind())
    }

    /// Exactly the verification shape passes unsigned; an unsigned POST, a
    /// GET without a challenge, with another parameter, an empty or too long
    /// challenge, or a body, are refused.
    #[test]
    fn only_the_verification_request_passes_unsigned() {
        let k = [SigningSecret::from("app_secret")];
        let long = format!("/hook?challenge={}", "a".repeat(MAX_CHALLENGE_BYTES + 1));
        let cases: &[(&str, &str, &str, &[u8], &[SigningSecret], Result<(), VerifyErrorKind>)] = &[
            ("verification", "GET", "/hook?challenge=abc123", b"", &k, Ok(())),
            ("encoded challenge", "GET", "/hook?challenge=a%20b", b"", &k, Ok(())),
            ("no secret configured", "GET", "/hook?challenge=abc123", b"", &[], Err(NoSecret)),
            ("with a body", "GET", "/hook?challenge=abc123", b"{}", &k, Err(MalformedHeader)),
            ("GET without a challenge", "GET", "/hook", b"", &k, Err(MissingHeader)),
            ("another parameter too", "GET", "/hook?challenge=abc&x=1", b"", &k, Err(MissingHeader)),
            ("empty challenge", "GET", "/hook?challenge=", b"", &k, Err(MissingHeader)),
            ("too long", "GET", &long, b"", &k, Err(MissingHeader)),
            ("unsigned POST", "POST", "/hook?challenge=abc123", b"{}", &k, Err(MissingHeader)),
        ];
        for (name, method, uri, body, secrets, want) in cases {
            assert_eq!(verify(method, uri, &[], body, secrets), *want, "{name}");
        }
        let good = sign(&k[0], b"{}");
        assert_eq!(verify("POST", "/hook", &[(SIGNATURE_HEADER, &good)], b"{}", &k), Ok(()));
        assert_eq!(verify("POST", "/hook", &[(SIGNATURE_HEADER, &good)], b"{ }", &k), Err(NoMatchingSignature));
    }

    /// The echo: `200`, `text/plain`, `nosniff`, the challenge decoded; a
    /// signed notification is not a handshake.
    #[test]
    fn echoes_the_challenge() {
        let provider = Provider::dropbox();
        assert_eq!(provider.allowed_methods(), [http::Method::POST, http::Method::GET]);
        let secrets = [SigningSecret::from("app_secret")];
        let p = request_to("GET", "/hook?challenge=%3Cscript%3E", &[]);
        let res = provider.handshake(&Delivery::new(&p, b"", &secrets, at(NOW))).unwrap().expect("answered");
        assert_eq!(res.status(), http::StatusCode::OK);
        assert_eq!(res.body().as_ref(), b"<script>");
        assert_eq!(res.headers()[http::header::CONTENT_TYPE], "text/plain");
        assert_eq!(res.headers()[http::header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        let body = br#"{"list_folder":{"accounts":["dbid:a"]}}"#;
        let sig = sign(&secrets[0], body);
        let p = request_to("POST", "/hook", &[(SIGNATURE_HEADER, &sig)]);
        assert!(provider.handshake(&Delivery::new(&p, body, &secrets, at(NOW))).unwrap().is_none());
    }
}
