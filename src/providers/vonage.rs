//! Vonage (Nexmo) Messages API: signed webhooks, a JWT in `Authorization`.
//!
//! Scheme (Vonage, "Signed webhooks",
//! <https://developer.vonage.com/en/messages/concepts/signed-webhooks>; Vonage's
//! `@vonage/jwt` `verifySignature`, which checks an HS256 token with the
//! secret): every inbound-message and message-status webhook carries
//! `Authorization: Bearer <JWT>`, a compact JWS (RFC 7515) whose header says
//! `"alg":"HS256"` and whose signature is the HMAC-SHA256, keyed with the
//! account's **signature secret** (Dashboard, API settings; the text as
//! shown, byte for byte), of `base64url(header).base64url(claims)`. The
//! claims carry `iat` (Unix seconds, the signing time), `jti`, `iss`
//! (`Vonage`), `api_key`, `application_id` and `payload_hash`, the hex
//! SHA-256 of the request body. This verifier checks the signature, then
//! `payload_hash` against the raw body (Vonage calls that second step
//! optional over TLS; here it is what binds the body, so it is required:
//! a token without `payload_hash` is refused), then `iat` within the
//! tolerance. Only `HS256` is accepted (never `none`, never another
//! algorithm named by the token). The compact JWS is decoded here with the
//! crate's `base64` and JSON reader, no JWT library: the token's three parts
//! are unpadded base64url (padding refused), at most [`MAX_TOKEN_BYTES`].
//!
//! **Tolerance:** `iat` within [`DEFAULT_TOLERANCE`] (300 seconds) either
//! way, configurable with [`VonageVerifier::tolerance`]. Vonage states no
//! acceptance window; 300 seconds is the crate's common default for a signed
//! time (Stripe's). An operator replay skips the age check only.
//!
//! **Signed / not signed:** the token's claims and, through `payload_hash`,
//! the whole body are signed, so the event key and type are. Other headers
//! are not. Rotation: configure the old and the new signature secret
//! together while Vonage may sign with either (any one that matches passes).
//!
//! **Event key.** The body's `message_uuid`, Vonage's id of the message, with
//! its `status` for a status webhook: one message reports `submitted`,
//! `delivered`, `read` in turn, each a webhook of its own with the same
//! `message_uuid`, so the key is `{message_uuid}:{status}` for those and
//! `{message_uuid}` for an inbound message (which has no `status`). The
//! event type is the `status`, or `inbound`. The JWT's `jti` is new on every
//! request and is not used.
//!
//! **Limit of the scheme:** within the tolerance a captured request (token
//! and body) verifies again; its key is signed with it, so the claim makes
//! it a duplicate. Vonage documents that on an internal error it may rarely
//! send an **unsigned** callback and that answering it with a 5xx makes it
//! retry signed later; this preset answers it 401 like any unauthenticated
//! request (shape the answer with the layer's `rejection_responder` if you
//! want the 5xx).
//!
//! **Retries:** Vonage retries a webhook that is not answered 200; the
//! research for this preset found no published span, hence
//! [`REPLAY_WINDOW`]. **Handshake:** none.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! body's `timestamp` (ISO 8601) of a status; statuses of one message may
//! arrive out of order (`read` before `delivered`).

use std::time::Duration;

use base64::Engine as _;
use sha2::Digest as _;

use crate::key::json::{self, Node};
use crate::key::{EventIdentity, KeyError, KeyErrorKind, KeyExtractor};
use crate::providers::Provider;
use crate::verify::{
    any_matches, hmac_sha256, single_header, Delivery, SigningSecret, Verifier, VerifyError, VerifyErrorKind,
};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "vonage";

/// How long a Vonage webhook can be sent again: 30 days.
///
/// Vonage retries a webhook that does not get a 200
/// (<https://developer.vonage.com/en/messages/concepts/signed-webhooks>); the
/// research for this preset found no published span, so the window is the
/// crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const REPLAY_WINDOW: Duration = super::DEFAULT_REPLAY_WINDOW;

/// Default tolerance of `iat`: 300 seconds either way.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// The most bytes of token read: 4096, as for signature headers. Vonage's
/// tokens are a few hundred bytes.
pub const MAX_TOKEN_BYTES: usize = crate::verify::MAX_SIGNATURE_HEADER_BYTES;

/// The header the token comes in (lower case).
pub const AUTHORIZATION_HEADER: &str = "authorization";

timed_verifier! {
    /// Verifies the `Authorization: Bearer` JWT of a Vonage webhook: HS256
    /// with the signature secret, `payload_hash` against the body, `iat`
    /// within the tolerance.
    pub struct VonageVerifier;
    /// A verifier with the default tolerance of 300 seconds.
    fn new();
    /// Sets how far (both directions) `iat` may be from now.
    fn tolerance();
}

/// A token's parts: the signed text, the signature, the claims' bytes.
struct Token<'a> {
    signed: &'a str,
    signature: [u8; 32],
    claims: Vec<u8>,
}

fn b64(text: &str) -> Result<Vec<u8>, VerifyError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).map_err(|_| VerifyErrorKind::MalformedHeader.into())
}

/// The token of the head: `Bearer` (any case) and a compact HS256 JWS.
fn token(parts: &http::request::Parts) -> Result<Token<'_>, VerifyError> {
    let malformed = || VerifyError::from(VerifyErrorKind::MalformedHeader);
    let value = single_header(parts, AUTHORIZATION_HEADER)?;
    if value.len() > MAX_TOKEN_BYTES {
        return Err(malformed());
    }
    let (scheme, jwt) = value.split_once(' ').ok_or_else(malformed)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(malformed());
    }
    let jwt = jwt.trim_start_matches(' ');
    let mut pieces = jwt.split('.');
    let (Some(header), Some(claims), Some(signature), None) =
        (pieces.next(), pieces.next(), pieces.next(), pieces.next())
    else {
        return Err(malformed());
    };
    let header = b64(header)?;
    let header = json::parse(&header).map_err(|_| malformed())?;
    if !matches!(header.pointer("/alg"), Some(Node::String(alg)) if alg == "HS256") {
        return Err(malformed());
    }
    let signature: [u8; 32] = b64(signature)?.try_into().map_err(|_| malformed())?;
    // Three pieces: the last dot ends the signed text.
    let signed = &jwt[..jwt.rfind('.').ok_or_else(malformed)?];
    Ok(Token { signed, signature, claims: b64(claims)? })
}

/// The claims this scheme checks: `iat` and `payload_hash`.
fn claims(bytes: &[u8]) -> Result<(u64, [u8; 32]), VerifyError> {
    let malformed = || VerifyError::from(VerifyErrorKind::MalformedHeader);
    let claims = json::parse(bytes).map_err(|_| malformed())?;
    let iat = match claims.pointer("/iat") {
        Some(Node::Number(n)) => crate::verify::parse_unix_seconds(n)?,
        _ => return Err(malformed()),
    };
    let mut hash = [0u8; 32];
    match claims.pointer("/payload_hash") {
        Some(Node::String(h)) => hex::decode_to_slice(h.as_bytes(), &mut hash).map_err(|_| malformed())?,
        _ => return Err(malformed()),
    }
    Ok((iat, hash))
}

impl Verifier for VonageVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        token(parts).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let token = token(delivery.parts)?;
        let mut matched = false;
        for secret in delivery.require_secrets()? {
            matched |= any_matches(&hmac_sha256(secret, &[token.signed.as_bytes()]), [&token.signature[..]]);
        }
        if !matched {
            return Err(VerifyErrorKind::NoMatchingSignature.into());
        }
        // Read only once signed: the claims are Vonage's.
        let (iat, payload_hash) = claims(&token.claims)?;
        let body_hash: [u8; 32] = sha2::Sha256::digest(delivery.body).into();
        if !any_matches(&body_hash, [&payload_hash[..]]) {
            return Err(VerifyErrorKind::NoMatchingSignature.into());
        }
        delivery.check_time(iat, self.tolerance)
    }
}

/// The `Authorization` value Vonage would send for `body` at `iat` (Unix
/// seconds), signed with `secret`: `Bearer` and an HS256 JWT with `iat`,
/// `jti`, `iss`, `api_key`, `application_id` and `payload_hash`. For tests
/// and fixtures.
pub fn sign(secret: &SigningSecret, iat: u64, jti: &str, body: &[u8]) -> String {
    let enc = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let header = enc(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = serde_json::json!({
        "iat": iat, "jti": jti, "iss": "Vonage", "payload_hash": hex::encode(sha2::Sha256::digest(body)),
        "api_key": "abcd1234", "application_id": "aaaaaaaa-bbbb-cccc-dddd-0123456789ab",
    });
    let signed = format!("{header}.{}", enc(claims.to_string().as_bytes()));
    format!("Bearer {signed}.{}", enc(&hmac_sha256(secret, &[signed.as_bytes()])))
}

/// Reads the key `{message_uuid}:{status}` (`{message_uuid}` for an inbound
/// message) and the `status` (or `inbound`) as the type.
#[derive(Debug, Clone, Copy, Default)]
pub struct VonageKey;

impl KeyExtractor for VonageKey {
    /// # Errors
    /// [`KeyErrorKind::BodyNotJson`] for a body that is not strict JSON;
    /// [`KeyErrorKind::Missing`] without `message_uuid`;
    /// [`KeyErrorKind::Invalid`] for one (or a `status`) that is not text.
    fn extract(&self, _parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let root = json::parse(body)?;
        let text = |pointer: &str| match root.pointer(pointer) {
            None | Some(Node::Null) => Ok(None),
            Some(Node::String(s)) if !s.is_empty() => Ok(Some(s.to_string())),
            Some(_) => Err(KeyError::from(KeyErrorKind::Invalid)),
        };
        let uuid = text("/message_uuid")?.ok_or(KeyErrorKind::Missing)?;
        Ok(match text("/status")? {
            Some(status) => EventIdentity { key: format!("{uuid}:{status}"), event_type: Some(status) },
            None => EventIdentity { key: uuid, event_type: Some("inbound".to_owned()) },
        })
    }
}

impl Provider {
    /// Vonage Messages API (`Authorization: Bearer` HS256 JWT with
    /// `payload_hash`, 300 s; key = `message_uuid[:status]`). See
    /// [`crate::providers::vonage`].
    ///
    /// The Vonage preset: [`VonageVerifier`] (300 s), key [`VonageKey`].
    pub fn vonage() -> Self {
        Provider::new(NAME, VonageVerifier::new(), VonageKey)
    }
}

/// [`PresetInfo::sign`](super::PresetInfo::sign) for Vonage: a signed JWT
/// (HS256, `iat` the signing time, `jti` the id, `payload_hash` of the body)
/// as `Authorization: Bearer`.
fn send(key: &str, d: &super::Signing<'_>) -> Result<super::Example, super::SignError> {
    let secret = SigningSecret::from(key);
    let jti = if d.id.is_empty() { "jti-webhook-dev" } else { d.id };
    let headers = vec![
        (AUTHORIZATION_HEADER, sign(&secret, super::unix_seconds(d.at), jti, d.body)),
        ("content-type", "application/json".to_owned()),
    ];
    super::signed_delivery(Provider::vonage(), secret, d, headers, d.body.to_vec())
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[AUTHORIZATION_HEADER],
    |_| Provider::vonage(),
    super::ExampleOf::Whole(|id, at, body| {
        // A status webhook of the message `id`, carrying `body`.
        let status = serde_json::json!({
            "message_uuid": if id.is_empty() { "message-1" } else { id }, "status": "delivered",
            "timestamp": "2024-06-10T06:13:20Z", "channel": "sms", "pad": String::from_utf8_lossy(body),
        });
        let body = status.to_string().into_bytes();
        let header = sign(&super::example_secret(), super::unix_seconds(at), "jti-example", &body);
        super::hmac_example(Provider::vonage(), &body, vec![(AUTHORIZATION_HEADER, header)])
    }),
)
.sends(send)
.signs("`Authorization: Bearer` HS256 JWT (`iat`; `payload_hash` = hex SHA-256 of the body)")
.key_from("the body's message_uuid:status (JSON)")
.fixture(super::Fixture::formula(&[]));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_body_identity, at, headers, NOW};
    use crate::verify::VerifyErrorKind::{MalformedHeader, MissingHeader, NoMatchingSignature};

    fn enc(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    /// A token of `header` and `claims` (JSON texts) signed with `secret`.
    fn token(secret: &SigningSecret, header: &str, claims: &str) -> String {
        let signed = format!("{}.{}", enc(header.as_bytes()), enc(claims.as_bytes()));
        format!("Bearer {signed}.{}", enc(&hmac_sha256(secret, &[signed.as_bytes()])))
    }

    fn check(value: Option<&str>, body: &[u8], secrets: &[SigningSecret], now: u64) -> Result<(), VerifyErrorKind> {
        let p = headers(&value.map(|v| vec![(AUTHORIZATION_HEADER, v)]).unwrap_or_default());
        let v = VonageVerifier::new();
        let got = v.verify(&Delivery::new(&p, body, secrets, at(now))).map_err(|e| e.kind());
        if got == Err(MissingHeader) {
            assert_eq!(v.precheck(&p).map_err(|e| e.kind()), got);
        }
        got
    }

    #[test]
    fn verifies_and_rejects() {
        let key = SigningSecret::from("vonage-signature-secret");
        let body = br#"{"message_uuid":"m1","status":"delivered"}"#;
        let good = sign(&key, NOW, "j1", body);
        let hash = hex::encode(sha2::Sha256::digest(body));
        let claims = |extra: &str| format!(r#"{{"iat":{NOW},"payload_hash":"{hash}"{extra}}}"#);
        let hs = r#"{"alg":"HS256","typ":"JWT"}"#;
        let no_hash = token(&key, hs, &format!(r#"{{"iat":{NOW}}}"#));
        let no_iat = token(&key, hs, &format!(r#"{{"payload_hash":"{hash}"}}"#));
        let none_alg = token(&key, r#"{"alg":"none"}"#, &claims(""));
        let hs512 = token(&key, r#"{"alg":"HS512"}"#, &claims(""));
        let float_iat = token(&key, hs, &format!(r#"{{"iat":{NOW}.5,"payload_hash":"{hash}"}}"#));
        let padded = format!("{}=", good);
        let lower_scheme = good.replacen("Bearer", "bearer", 1);
        let other_claims = token(&key, hs, &claims(r#","iss":"Vonage""#));
        let by_other = sign(&SigningSecret::from("other"), NOW, "j1", body);
        let four = format!("{good}.x");
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES));
        let k = std::slice::from_ref(&key);
        let cases: Vec<(&str, Option<&str>, &[u8], u64, Result<(), VerifyErrorKind>)> = vec![
            ("valid", Some(&good), body, NOW, Ok(())),
            ("scheme in lower case", Some(&lower_scheme), body, NOW, Ok(())),
            ("other claims ignored", Some(&other_claims), body, NOW, Ok(())),
            (
                "tampered body: payload_hash",
                Some(&good),
                br#"{"message_uuid":"m2","status":"delivered"}"#,
                NOW,
                Err(NoMatchingSignature),
            ),
            ("wrong secret", Some(&by_other), body, NOW, Err(NoMatchingSignature)),
            ("edge past", Some(&good), body, NOW + 300, Ok(())),
            ("stale", Some(&good), body, NOW + 301, Err(VerifyErrorKind::TimestampTooOld)),
            ("future", Some(&good), body, NOW - 301, Err(VerifyErrorKind::TimestampInFuture)),
            ("missing", None, body, NOW, Err(MissingHeader)),
            ("Basic, not Bearer", Some("Basic dXNlcjpwYXNz"), body, NOW, Err(MalformedHeader)),
            ("two pieces", Some("Bearer a.b"), body, NOW, Err(MalformedHeader)),
            ("four pieces", Some(&four), body, NOW, Err(MalformedHeader)),
            ("padded base64url", Some(&padded), body, NOW, Err(MalformedHeader)),
            ("alg none", Some(&none_alg), body, NOW, Err(MalformedHeader)),
            ("alg HS512", Some(&hs512), body, NOW, Err(MalformedHeader)),
            ("no payload_hash", Some(&no_hash), body, NOW, Err(MalformedHeader)),
            ("no iat", Some(&no_iat), body, NOW, Err(MalformedHeader)),
            ("fractional iat", Some(&float_iat), body, NOW, Err(MalformedHeader)),
            ("a long header", Some(&long), body, NOW, Err(MalformedHeader)),
        ];
        for (name, value, body, now, want) in cases {
            assert_eq!(check(value, body, k, now), want, "{name}");
        }
        // Rotation and an operator replay (the age alone skipped).
        assert_eq!(check(Some(&good), body, &[SigningSecret::from("old"), key.clone()], NOW), Ok(()));
        let p = headers(&[(AUTHORIZATION_HEADER, &good)]);
        let late = Delivery::new(&p, body, k, at(NOW + 86_400)).without_timestamp_check();
        assert_eq!(VonageVerifier::new().verify(&late), Ok(()));
        let wide = VonageVerifier::new().tolerance(Duration::from_secs(600));
        assert_eq!(wide.verify(&Delivery::new(&p, body, k, at(NOW + 600))), Ok(()));
    }

    /// The claims are read only once the signature matches: a forged token
    /// with garbage claims is a mismatch, not a parse error.
    #[test]
    fn claims_are_read_after_the_signature() {
        let forged = format!("Bearer {}.{}.{}", enc(br#"{"alg":"HS256"}"#), enc(b"not json"), enc(&[0u8; 32]));
        assert_eq!(check(Some(&forged), b"{}", &[SigningSecret::from("k")], NOW), Err(NoMatchingSignature));
    }

    #[test]
    fn key_and_type() {
        let p = Provider::vonage();
        assert_body_identity(&p, br#"{"message_uuid":"m1","status":"submitted"}"#, "m1:submitted", Some("submitted"));
        assert_body_identity(&p, br#"{"message_uuid":"m1","status":"delivered"}"#, "m1:delivered", Some("delivered"));
        assert_body_identity(&p, br#"{"message_uuid":"m2","message_type":"text","text":"hi"}"#, "m2", Some("inbound"));
        let bare = headers(&[]);
        let cases: &[(&[u8], KeyErrorKind)] = &[
            (br#"{"uuid":"call-1"}"#, KeyErrorKind::Missing),
            (br#"{"message_uuid":1}"#, KeyErrorKind::Invalid),
            (br#"{"message_uuid":"m","status":2}"#, KeyErrorKind::Invalid),
            (b"message_uuid=m", KeyErrorKind::BodyNotJson),
        ];
        for (body, want) in cases {
            assert_eq!(VonageKey.extract(&bare, body).unwrap_err().kind(), *want);
        }
    }
}
