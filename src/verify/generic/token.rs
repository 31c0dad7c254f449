//! [`TokenHeaderVerifier`] (a shared secret sent as it is in a header) and
//! [`BasicAuthVerifier`] (HTTP Basic credentials, RFC 7617): for senders
//! that authenticate with a static credential instead of a signature
//! (GitLab's `X-Gitlab-Token`, Telegram's
//! `X-Telegram-Bot-Api-Secret-Token`, Buildkite's token mode, Postmark's
//! credentials in the webhook URL).
//!
//! **What they prove.** Only that the sender knows the secret: nothing of
//! the body is signed and no timestamp is, so a captured request (or a
//! leaked token) can be sent again with any body, at any time. The claim on
//! the event key stops redeliveries and concurrent copies; the key comes
//! from an unsigned body or header. Serve such endpoints over TLS only, and
//! prefer the provider's HMAC scheme where it offers one.
//!
//! **Strength.** The credential alone authenticates any delivery, so the
//! layer refuses, when it is built, a configured token or Basic password
//! shorter than [`MIN_CREDENTIAL_BYTES`] (16 bytes, the crate's minimum for
//! the operator-replay token too: 128 bits when random), and an empty Basic
//! password ([`KeyMaterialErrorKind::WeakCredential`]). Where a provider
//! hands out shorter tokens the receiver cannot lengthen,
//! [`TokenHeaderVerifier::allow_short_tokens`] is the explicit opt-out.
//!
//! **Never stored, never handed on.** Both name the header they read
//! ([`Verifier::credential_headers`]): the layer removes it from the request
//! once the delivery is verified, so the handler never sees it and inbox
//! mode never stores it.
//!
//! **Comparison.** The received credential and each configured secret are
//! hashed with SHA-256 and the digests compared with `subtle`'s constant-time
//! equality, every configured secret each time, so neither the length of the
//! secret nor which one matched shows in the time taken. Rotation is several
//! secrets configured at once, as for the HMAC schemes.

use http::HeaderName;
use sha2::{Digest, Sha256};

use super::super::{
    check_key_material, match_any_secret, Delivery, KeyMaterialError, KeyMaterialErrorKind, SigningSecret, Verifier,
    VerifyError, VerifyErrorKind,
};

/// The longest credential header read, in bytes: 4096, as for signature headers.
const MAX_CREDENTIAL_BYTES: usize = super::super::MAX_SIGNATURE_HEADER_BYTES;

/// The shortest shared token or HTTP Basic password the verifiers accept in
/// the configuration, in bytes: 16, as the layer's operator-replay token (128
/// bits when random). Shorter: [`KeyMaterialErrorKind::WeakCredential`],
/// unless [`TokenHeaderVerifier::allow_short_tokens`].
pub const MIN_CREDENTIAL_BYTES: usize = 16;

/// The password of a configured `user-id:password` pair: all after the first
/// colon (RFC 7617 §2: the user-id holds none); empty without one.
fn basic_password(pair: &[u8]) -> &[u8] {
    pair.iter().position(|b| *b == b':').map_or(&[], |colon| &pair[colon + 1..])
}

/// The header [`BasicAuthVerifier`] reads its credentials from.
const BASIC_HEADERS: &[HeaderName] = &[http::header::AUTHORIZATION];

/// Refuses the first secret whose credential part (`credential(secret)`) is
/// shorter than [`MIN_CREDENTIAL_BYTES`], with `hint`.
fn check_strength(
    secrets: &[SigningSecret],
    credential: fn(&[u8]) -> &[u8],
    hint: &'static str,
) -> Result<(), KeyMaterialError> {
    match secrets.iter().position(|s| credential(s.expose()).len() < MIN_CREDENTIAL_BYTES) {
        Some(i) => Err(KeyMaterialError::new(KeyMaterialErrorKind::WeakCredential, Some(i), hint)),
        None => Ok(()),
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Passes when the SHA-256 of `presented` equals that of a configured secret
/// (constant time, every secret compared).
fn match_credential(delivery: &Delivery<'_>, presented: &[u8]) -> Result<(), VerifyError> {
    let presented = digest(presented);
    match_any_secret(delivery, [&presented[..]], |secret: &SigningSecret| digest(secret.expose()))
}

/// The credential header's single value (identical repeated lines pass), as
/// bytes (a token may hold UTF-8 or other non-ASCII bytes), at most
/// [`MAX_CREDENTIAL_BYTES`].
fn credential_header<'a>(parts: &'a http::request::Parts, name: &HeaderName) -> Result<&'a [u8], VerifyError> {
    let mut values = parts.headers.get_all(name).iter();
    let first = values.next().ok_or(VerifyErrorKind::MissingHeader)?;
    if values.any(|v| v != first) || first.len() > MAX_CREDENTIAL_BYTES {
        return Err(VerifyErrorKind::MalformedHeader.into());
    }
    Ok(first.as_bytes())
}

/// Splits `value` into an authentication scheme (compared case-insensitively,
/// RFC 9110 §11.1) and its credentials after one or more spaces.
fn strip_scheme<'a>(value: &'a [u8], scheme: &str) -> Option<&'a [u8]> {
    let space = value.iter().position(|b| *b == b' ')?;
    let (given, rest) = value.split_at(space);
    let start = rest.iter().position(|b| *b != b' ').unwrap_or(rest.len());
    given.eq_ignore_ascii_case(scheme.as_bytes()).then(|| &rest[start..])
}

/// A shared secret sent as it is in a request header (`X-Gitlab-Token:
/// <token>`), or after an authentication scheme (`Authorization: Bearer
/// <token>`, RFC 6750 §2.1) with [`TokenHeaderVerifier::scheme`].
///
/// The header must appear once (identical repeated lines pass); its value's
/// bytes (UTF-8 or others, as sent) are compared with each configured
/// secret's (no trimming beyond what the HTTP parser does). A configured
/// token shorter than [`MIN_CREDENTIAL_BYTES`] (16 bytes) is refused when the
/// layer is built ([`KeyMaterialErrorKind::WeakCredential`]) unless
/// [`allow_short_tokens`](Self::allow_short_tokens); the header is removed
/// from the request once verified ([`Verifier::credential_headers`]). A missing header
/// is [`VerifyErrorKind::MissingHeader`]; an empty token, a value of more
/// than 4 KiB, two different values or a missing scheme are
/// [`VerifyErrorKind::MalformedHeader`]; a token no secret equals is
/// [`VerifyErrorKind::NoMatchingSignature`]. The precheck refuses the same
/// heads without the secrets.
///
/// ```
/// use webhook_idempotency::verify::generic::TokenHeaderVerifier;
/// use webhook_idempotency::verify::{Delivery, SigningSecret, Verifier};
///
/// let verifier = TokenHeaderVerifier::new(http::HeaderName::from_static("x-gitlab-token"));
/// let parts = http::Request::post("/").header("x-gitlab-token", "t0ken").body(()).unwrap().into_parts().0;
/// let secrets = [SigningSecret::from("old"), SigningSecret::from("t0ken")];
/// assert!(verifier.verify(&Delivery::new(&parts, b"{}", &secrets, std::time::SystemTime::now())).is_ok());
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct TokenHeaderVerifier {
    /// One header: [`Verifier::credential_headers`] lends it as a slice.
    header: [HeaderName; 1],
    scheme: Option<String>,
    short_tokens: bool,
}

impl TokenHeaderVerifier {
    /// A verifier reading the token from header `header`.
    pub fn new(header: HeaderName) -> Self {
        Self { header: [header], scheme: None, short_tokens: false }
    }

    /// Accepts configured tokens shorter than [`MIN_CREDENTIAL_BYTES`] (still
    /// not empty): for a provider that issues or allows shorter tokens where
    /// a longer one cannot be set (Telegram's `secret_token` is 1 to 256
    /// characters). A short token can be guessed by whoever can send
    /// requests; set a long one wherever the provider allows it.
    pub fn allow_short_tokens(mut self) -> Self {
        self.short_tokens = true;
        self
    }

    setters! {
        /// The token follows the authentication scheme `scheme` and a space
        /// (`Bearer`); the scheme is compared case-insensitively and is not part
        /// of the token.
        pub fn scheme(scheme: impl Into<String>) => scheme = Some(scheme.into());
    }

    /// The header the token is read from.
    pub fn header(&self) -> &HeaderName {
        &self.header[0]
    }

    /// The token of the delivery's head, checked for form.
    fn token<'a>(&self, parts: &'a http::request::Parts) -> Result<&'a [u8], VerifyError> {
        let value = credential_header(parts, self.header())?;
        let token = match &self.scheme {
            Some(scheme) => strip_scheme(value, scheme).ok_or(VerifyErrorKind::MalformedHeader)?,
            None => value,
        };
        if token.is_empty() {
            return Err(VerifyErrorKind::MalformedHeader.into());
        }
        Ok(token)
    }
}

impl Verifier for TokenHeaderVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        self.token(parts).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let token = self.token(delivery.parts)?;
        match_credential(delivery, token)
    }

    /// [`check_key_material`], and every token at least
    /// [`MIN_CREDENTIAL_BYTES`] unless [`allow_short_tokens`](Self::allow_short_tokens).
    ///
    /// # Errors
    /// [`KeyMaterialErrorKind::WeakCredential`] for a short token, and
    /// [`check_key_material`]'s.
    fn check_secrets(&self, secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        check_key_material(secrets)?;
        if self.short_tokens {
            return Ok(());
        }
        check_strength(secrets, |token| token, "a shared token must be at least 16 bytes: set a longer random one")
    }

    /// The token's header.
    fn credential_headers(&self) -> &[HeaderName] {
        &self.header
    }
}

/// HTTP Basic credentials (RFC 7617): `Authorization: Basic
/// base64(user-id ":" password)`.
///
/// Each configured secret is one pair written `user-id:password` (the bytes
/// the sender encodes; UTF-8, RFC 7617 §2.1); the user-id cannot contain a
/// colon, the password can. [`BasicAuthVerifier::credentials`] makes one. The
/// decoded credentials are compared whole (user and password together, so
/// no user enumeration) with each secret, in constant time.
///
/// The scheme `Basic` is matched case-insensitively (RFC 9110 §11.1); the
/// base64 is decoded strictly (standard alphabet, padding required, no
/// whitespace inside). A missing `Authorization` header is
/// [`VerifyErrorKind::MissingHeader`]; another scheme, base64 that does not
/// decode, credentials without a colon or an empty user-id and password are
/// [`VerifyErrorKind::MalformedHeader`]; wrong credentials are
/// [`VerifyErrorKind::NoMatchingSignature`]. A secret without a colon, or
/// whose password is empty or shorter than [`MIN_CREDENTIAL_BYTES`] (16
/// bytes, [`KeyMaterialErrorKind::WeakCredential`]), is refused when the
/// layer is built ([`Verifier::check_secrets`]). The `Authorization` header
/// is removed from the request once verified ([`Verifier::credential_headers`]).
///
/// The layer answers every failure with a bare 401 (no `WWW-Authenticate`
/// challenge): webhook senders send their credentials preemptively (from
/// the `https://user:pass@host/...` URL they were given) and do not answer
/// a challenge.
///
/// ```
/// use webhook_idempotency::verify::generic::BasicAuthVerifier;
/// use webhook_idempotency::verify::{Delivery, Verifier};
///
/// // RFC 7617 §2's example.
/// let parts = http::Request::post("/")
///     .header("authorization", "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
///     .body(())
///     .unwrap()
///     .into_parts()
///     .0;
/// let secrets = [BasicAuthVerifier::credentials("Aladdin", "open sesame")];
/// let d = Delivery::new(&parts, b"{}", &secrets, std::time::SystemTime::now());
/// assert!(BasicAuthVerifier::new().verify(&d).is_ok());
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct BasicAuthVerifier {
    _priv: (),
}

impl BasicAuthVerifier {
    /// A verifier of the `Authorization: Basic` header.
    pub fn new() -> Self {
        Self::default()
    }

    /// The secret to configure for the pair `user_id`, `password`:
    /// `user_id:password`.
    pub fn credentials(user_id: &str, password: &str) -> SigningSecret {
        SigningSecret::from(format!("{user_id}:{password}"))
    }

    /// The `Authorization` value a sender with these credentials sends:
    /// `Basic ` and the base64 of `user_id:password`. For tests and fixtures.
    pub fn header_value(user_id: &str, password: &str) -> String {
        use base64::Engine as _;
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user_id}:{password}")))
    }

    /// The decoded `user-id:password` bytes of the delivery's head.
    fn credentials_of(parts: &http::request::Parts) -> Result<Vec<u8>, VerifyError> {
        use base64::Engine as _;
        let value = credential_header(parts, &http::header::AUTHORIZATION)?;
        let encoded = strip_scheme(value, "Basic").ok_or(VerifyErrorKind::MalformedHeader)?.trim_ascii_end();
        let decoded =
            base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|_| VerifyErrorKind::MalformedHeader)?;
        if !decoded.contains(&b':') || decoded == b":" {
            return Err(VerifyErrorKind::MalformedHeader.into());
        }
        Ok(decoded)
    }
}

impl Verifier for BasicAuthVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        Self::credentials_of(parts).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let presented = Self::credentials_of(delivery.parts)?;
        match_credential(delivery, &presented)
    }

    /// [`check_key_material`], every secret a `user-id:password` pair, and
    /// every password at least [`MIN_CREDENTIAL_BYTES`] long.
    ///
    /// # Errors
    /// [`KeyMaterialErrorKind::Malformed`] for a secret without a colon,
    /// [`KeyMaterialErrorKind::WeakCredential`] for an empty or short
    /// password, and [`check_key_material`]'s.
    fn check_secrets(&self, secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        check_key_material(secrets)?;
        if let Some(i) = secrets.iter().position(|s| !s.expose().contains(&b':')) {
            return Err(KeyMaterialError::new(
                KeyMaterialErrorKind::Malformed,
                Some(i),
                "configure Basic credentials as user-id:password",
            ));
        }
        if let Some(i) = secrets.iter().position(|s| basic_password(s.expose()).is_empty()) {
            return Err(KeyMaterialError::new(
                KeyMaterialErrorKind::WeakCredential,
                Some(i),
                "the Basic password is empty",
            ));
        }
        check_strength(secrets, basic_password, "a Basic password must be at least 16 bytes: set a longer random one")
    }

    /// `Authorization`.
    fn credential_headers(&self) -> &[HeaderName] {
        BASIC_HEADERS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fixture_json;
    use crate::test_support::{at, NOW};

    fn parts(name: &str, values: &[&[u8]]) -> http::request::Parts {
        let mut p = http::Request::post("/").body(()).unwrap().into_parts().0;
        for v in values {
            p.headers.append(HeaderName::try_from(name).unwrap(), http::HeaderValue::from_bytes(v).unwrap());
        }
        p
    }

    fn check(
        v: &impl Verifier,
        name: &str,
        values: &[&[u8]],
        secrets: &[SigningSecret],
    ) -> Result<(), VerifyErrorKind> {
        let p = parts(name, values);
        let got = v.verify(&Delivery::new(&p, b"{}", secrets, at(NOW))).map_err(|e| e.kind());
        // The precheck refuses what the head alone shows.
        let head_only = matches!(got, Err(VerifyErrorKind::MissingHeader | VerifyErrorKind::MalformedHeader));
        assert_eq!(v.precheck(&p).map_err(|e| e.kind()), if head_only { got } else { Ok(()) }, "precheck");
        got
    }

    fn fixture() -> serde_json::Value {
        fixture_json("generic/expected.json")
    }

    /// The token cases of `scripts/fixtures/generic.py` (an exact token, a
    /// prefix of it, a trailing space), then the verifier's own.
    #[test]
    fn token_header_cases() {
        let v = TokenHeaderVerifier::new(HeaderName::from_static("x-token"));
        for case in fixture()["token"].as_array().unwrap() {
            let secret = SigningSecret::from(case["configured"].as_str().unwrap());
            let value = case["header_value"].as_str().unwrap().as_bytes();
            let want = case["accept"].as_bool().unwrap();
            assert_eq!(check(&v, "x-token", &[value], std::slice::from_ref(&secret)).is_ok(), want, "{case}");
        }
        use VerifyErrorKind::{MalformedHeader, MissingHeader, NoMatchingSignature, NoSecret};
        let (old, new) = (SigningSecret::from("old-token"), SigningSecret::from("new-token"));
        let both = [old.clone(), new.clone()];
        let long = "a".repeat(4097);
        let cases: &[(&str, &[&[u8]], &[SigningSecret], Result<(), VerifyErrorKind>)] = &[
            ("exact", &[b"new-token"], std::slice::from_ref(&new), Ok(())),
            ("rotation: second secret", &[b"new-token"], &both, Ok(())),
            ("rotation: first secret", &[b"old-token"], &both, Ok(())),
            ("same line twice", &[b"new-token", b"new-token"], &both, Ok(())),
            ("other secret only", &[b"new-token"], std::slice::from_ref(&old), Err(NoMatchingSignature)),
            ("longer", &[b"new-token-x"], &both, Err(NoMatchingSignature)),
            ("case differs", &[b"NEW-TOKEN"], &both, Err(NoMatchingSignature)),
            ("missing", &[], &both, Err(MissingHeader)),
            ("empty token", &[b""], &both, Err(MalformedHeader)),
            ("two different lines", &[b"new-token", b"old-token"], &both, Err(MalformedHeader)),
            ("a byte more", &[b"new-token\xff"], &both, Err(NoMatchingSignature)),
            ("over 4 KiB", &[long.as_bytes()], &both, Err(MalformedHeader)),
            ("no secret", &[b"new-token"], &[], Err(NoSecret)),
            ("an empty secret", &[b"new-token"], &[SigningSecret::from(""), new.clone()], Err(NoSecret)),
        ];
        for (name, values, secrets, want) in cases {
            assert_eq!(check(&v, "x-token", values, secrets), *want, "{name}");
        }
        // Another header carries nothing.
        assert_eq!(check(&v, "x-other", &[b"new-token"], &both), Err(MissingHeader));
        assert_eq!(v.header().as_str(), "x-token");
    }

    #[test]
    fn bearer_scheme() {
        let v = TokenHeaderVerifier::new(http::header::AUTHORIZATION).scheme("Bearer");
        let secret = [SigningSecret::from("abc.def")];
        use VerifyErrorKind::{MalformedHeader, NoMatchingSignature};
        let cases: &[(&str, &[u8], Result<(), VerifyErrorKind>)] = &[
            ("bearer", b"Bearer abc.def", Ok(())),
            ("scheme any case", b"bEARER abc.def", Ok(())),
            ("two spaces", b"Bearer  abc.def", Ok(())),
            ("wrong token", b"Bearer abc.deg", Err(NoMatchingSignature)),
            ("no scheme", b"abc.def", Err(MalformedHeader)),
            ("other scheme", b"Basic abc.def", Err(MalformedHeader)),
            ("scheme only", b"Bearer ", Err(MalformedHeader)),
        ];
        for (name, value, want) in cases {
            assert_eq!(check(&v, "authorization", &[value], &secret), *want, "{name}");
        }
    }

    /// RFC 7617's examples and the edge cases of `scripts/fixtures/generic.py`.
    #[test]
    fn basic_fixture() {
        let v = BasicAuthVerifier::new();
        for case in fixture()["basic"].as_array().unwrap() {
            let (user, password) = (case["user"].as_str().unwrap(), case["password"].as_str().unwrap());
            let header = case["header"].as_str().unwrap();
            let secret = BasicAuthVerifier::credentials(user, password);
            let want = case["accept"].as_bool().unwrap();
            assert_eq!(check(&v, "authorization", &[header.as_bytes()], &[secret]).is_ok(), want, "{case}");
            if want && header.starts_with("Basic ") {
                assert_eq!(BasicAuthVerifier::header_value(user, password), header, "{case}");
            }
        }
    }

    #[test]
    fn basic_cases() {
        use VerifyErrorKind::{MalformedHeader, MissingHeader, NoMatchingSignature};
        let v = BasicAuthVerifier::new();
        let good = BasicAuthVerifier::header_value("hook", "pass");
        let secrets = [BasicAuthVerifier::credentials("old", "x"), BasicAuthVerifier::credentials("hook", "pass")];
        let b64 = |s: &str| {
            use base64::Engine as _;
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(s))
        };
        let unpadded = b64("hook:pa").trim_end_matches('=').to_owned();
        let (no_colon, colon_only, other_user) = (b64("hookpass"), b64(":"), b64("hook2:pass"));
        let user_only = b64("hook:");
        let trailing = format!("{good} ");
        let cases: &[(&str, &[u8], Result<(), VerifyErrorKind>)] = &[
            ("valid, second pair", good.as_bytes(), Ok(())),
            ("trailing space", trailing.as_bytes(), Ok(())),
            ("other user", other_user.as_bytes(), Err(NoMatchingSignature)),
            ("empty password", user_only.as_bytes(), Err(NoMatchingSignature)),
            ("no colon", no_colon.as_bytes(), Err(MalformedHeader)),
            ("colon only", colon_only.as_bytes(), Err(MalformedHeader)),
            ("unpadded", unpadded.as_bytes(), Err(MalformedHeader)),
            ("no credentials", b"Basic", Err(MalformedHeader)),
            ("empty credentials", b"Basic ", Err(MalformedHeader)),
        ];
        for (name, value, want) in cases {
            assert_eq!(check(&v, "authorization", &[value], &secrets), *want, "{name}");
        }
        assert_eq!(check(&v, "authorization", &[], &secrets), Err(MissingHeader));
    }

    /// What the layer refuses to build with: a token or Basic password under
    /// 16 bytes, an empty password, a pair without a colon; the opt-out
    /// for providers that issue short tokens. Each error names the secret's
    /// position.
    #[test]
    fn weak_credentials_are_refused_unless_allowed() {
        use KeyMaterialErrorKind::{Empty, Malformed, NoSecret, WeakCredential};
        let sixteen = "0123456789abcdef";
        let fifteen = &sixteen[..15];
        let token = TokenHeaderVerifier::new(HeaderName::from_static("x-token"));
        let short_ok = token.clone().allow_short_tokens();
        let basic = BasicAuthVerifier::new();
        let pair = |p: &str| BasicAuthVerifier::credentials("hook", p);
        let s = SigningSecret::from;
        let cases: Vec<(&str, &dyn Verifier, Vec<SigningSecret>, Result<(), (KeyMaterialErrorKind, Option<usize>)>)> = vec![
            ("token of 16 bytes", &token, vec![s(sixteen)], Ok(())),
            ("token of 15 bytes", &token, vec![s(fifteen)], Err((WeakCredential, Some(0)))),
            ("short token second", &token, vec![s(sixteen), s("x")], Err((WeakCredential, Some(1)))),
            ("16 bytes in 8 characters", &token, vec![s("éééééééé")], Ok(())),
            ("short token, allowed", &short_ok, vec![s("x")], Ok(())),
            ("empty token, allowed", &short_ok, vec![s("")], Err((Empty, Some(0)))),
            ("no token, allowed", &short_ok, vec![], Err((NoSecret, None))),
            ("password of 16 bytes", &basic, vec![pair(sixteen)], Ok(())),
            ("password of 15 bytes", &basic, vec![pair(fifteen)], Err((WeakCredential, Some(0)))),
            (
                "a long user does not count",
                &basic,
                vec![s("a-very-long-user-id:short")],
                Err((WeakCredential, Some(0))),
            ),
            ("colon in the password", &basic, vec![pair("0123456789:abcdef")], Ok(())),
            ("empty password", &basic, vec![pair(sixteen), pair("")], Err((WeakCredential, Some(1)))),
            ("no colon", &basic, vec![s("a-pair-without-a-colon")], Err((Malformed, Some(0)))),
            ("nothing", &basic, vec![s("")], Err((Empty, Some(0)))),
            ("no pair", &basic, vec![], Err((NoSecret, None))),
        ];
        for (name, verifier, secrets, want) in cases {
            let got = verifier.check_secrets(&secrets).map_err(|e| (e.kind(), e.index()));
            assert_eq!(got, want, "{name}");
        }
        let empty = basic.check_secrets(&[pair("")]).unwrap_err().to_string();
        assert!(empty.contains("empty"), "{empty}");
        let short = token.check_secrets(&[s(fifteen)]).unwrap_err().to_string();
        assert!(short.contains("16 bytes") && !short.contains(fifteen), "{short}");
    }

    /// The headers the layer removes once a delivery is verified.
    #[test]
    fn credential_headers_name_the_header_read() {
        let token = TokenHeaderVerifier::new(HeaderName::from_static("x-token"));
        assert_eq!(token.credential_headers(), [HeaderName::from_static("x-token")]);
        let bearer = TokenHeaderVerifier::new(http::header::AUTHORIZATION).scheme("Bearer");
        assert_eq!(bearer.credential_headers(), [http::header::AUTHORIZATION]);
        assert_eq!(BasicAuthVerifier::new().credential_headers(), [http::header::AUTHORIZATION]);
        let closure = |_: &Delivery<'_>| -> Result<(), VerifyError> { Ok(()) };
        assert!(closure.credential_headers().is_empty(), "a closure declares none");
    }
}
