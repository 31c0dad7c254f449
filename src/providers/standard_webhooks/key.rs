//! Standard Webhooks key material: `whsec_` secrets (HMAC, `v1`) and
//! `whpk_` public keys (Ed25519, `v1a`), read once per secret, and the
//! signing helpers for fixtures.

use std::sync::Arc;

use base64::engine::general_purpose;
use base64::Engine as _;
use base64ct::{Base64, Encoding as _};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};

use crate::verify::{hmac_sha256, KeyMaterialErrorKind, SigningSecret};

pub(super) const WHSEC: &[u8] = b"whsec_";
const WHPK: &[u8] = b"whpk_";
const WHSK: &[u8] = b"whsk_";

/// Fewest bytes a `whsec_` key may decode to: the specification's symmetric
/// "Signing secret: Random. At least 24 bytes (192 bits, 512 maximum)"
/// (section "Signature scheme"). Svix issues exactly 24.
pub const MIN_SECRET_BYTES: usize = 24;

/// Most bytes a `whsec_` key may decode to: the same line's "512 maximum",
/// read as bits (64 bytes).
pub const MAX_SECRET_BYTES: usize = 64;

/// A configured secret, read by its prefix and decoded once (cached on the
/// [`SigningSecret`] through [`SigningSecret::parsed`]).
pub(super) enum Key {
    /// The decoded `whsec_` key bytes, for `v1` (HMAC-SHA256).
    Hmac(SigningSecret),
    /// The decoded `whpk_` key, for `v1a` (Ed25519).
    Public(VerifyingKey),
}

/// A secret's classification, or why it authenticates nothing.
pub(super) type Classified = Result<Key, KeyMaterialErrorKind>;

/// The secret's classification, computed on first use and cached for the
/// secret and its clones.
pub(super) fn classify(secret: &SigningSecret) -> Arc<Classified> {
    secret.parsed(classify_bytes)
}

/// Reads a secret by its prefix; see the module docs.
fn classify_bytes(raw: &[u8]) -> Classified {
    if raw.is_empty() {
        return Err(KeyMaterialErrorKind::Empty);
    }
    if [WHSEC, WHPK, WHSK].contains(&raw) {
        return Err(KeyMaterialErrorKind::OnlyPrefix);
    }
    if let Some(b64) = raw.strip_prefix(WHSEC) {
        let key = super::super::decode_secret_base64(b64).ok_or(KeyMaterialErrorKind::Malformed)?;
        return match key.len() {
            n if n < MIN_SECRET_BYTES => Err(KeyMaterialErrorKind::TooShort),
            n if n > MAX_SECRET_BYTES => Err(KeyMaterialErrorKind::TooLong),
            _ => Ok(Key::Hmac(SigningSecret::new(key))),
        };
    }
    if let Some(b64) = raw.strip_prefix(WHPK) {
        // A public key: no secret to protect, any base64 decoder would do.
        let bytes = super::super::decode_secret_base64(b64).ok_or(KeyMaterialErrorKind::Malformed)?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| KeyMaterialErrorKind::InvalidPublicKey)?;
        return match VerifyingKey::from_bytes(&bytes) {
            Ok(key) if !key.is_weak() => Ok(Key::Public(key)),
            _ => Err(KeyMaterialErrorKind::InvalidPublicKey),
        };
    }
    if raw.starts_with(WHSK) {
        // The sender's private key: never configured here.
        return Err(KeyMaterialErrorKind::Malformed);
    }
    // Unprefixed, as the official libraries also accept it (`standardwebhooks`
    // and `svix` strip an optional `whsec_`): strict base64 of 24 to 64
    // bytes, except exactly 32, the size of an Ed25519 public key pasted
    // without its `whpk_`, which must never key an HMAC.
    match super::super::decode_secret_base64(raw) {
        Some(key) if (MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&key.len()) && key.len() != 32 => {
            Ok(Key::Hmac(SigningSecret::new(key)))
        }
        _ => Err(KeyMaterialErrorKind::Malformed),
    }
}

/// The fix to suggest for a refused secret.
pub(super) fn hint(raw: &[u8], kind: KeyMaterialErrorKind) -> &'static str {
    match kind {
        KeyMaterialErrorKind::TooShort => "a whsec_ key must decode to at least 24 bytes (Standard Webhooks)",
        KeyMaterialErrorKind::TooLong => "a whsec_ key must decode to at most 64 bytes (Standard Webhooks)",
        KeyMaterialErrorKind::InvalidPublicKey => "a whpk_ key must be base64 of a valid 32-byte Ed25519 public key",
        KeyMaterialErrorKind::Malformed if raw.starts_with(WHSK) => {
            "whsk_ is the sender's private key; configure the whpk_ public key"
        }
        KeyMaterialErrorKind::Malformed if raw.starts_with(WHSEC) || raw.starts_with(WHPK) => {
            "the text after the prefix is not base64"
        }
        KeyMaterialErrorKind::Malformed => {
            "copy the secret with its whsec_ (or whpk_) prefix; without it, only base64 of 24 to 64 bytes other \
             than 32 (the size of a public key) is read as a secret"
        }
        _ => "copy the whole secret, with its whsec_ or whpk_ prefix",
    }
}

/// The [`SecretError`] for a secret [`classify_bytes`] refused.
fn secret_error(raw: &[u8], kind: KeyMaterialErrorKind) -> SecretError {
    if raw.starts_with(WHPK) || raw.starts_with(WHSK) {
        return SecretErrorKind::WrongKind.into();
    }
    SecretError::from(match kind {
        KeyMaterialErrorKind::TooShort => SecretErrorKind::TooShort,
        KeyMaterialErrorKind::TooLong => SecretErrorKind::TooLong,
        KeyMaterialErrorKind::Empty | KeyMaterialErrorKind::OnlyPrefix => SecretErrorKind::Empty,
        KeyMaterialErrorKind::Malformed if raw.starts_with(WHSEC) => SecretErrorKind::NotBase64,
        _ => SecretErrorKind::MissingPrefix,
    })
}

/// What a [`SecretError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SecretErrorKind {
    /// The text after the prefix is not base64 (whitespace included).
    NotBase64,
    /// The secret decodes to no bytes.
    Empty,
    /// A key of another kind: a `whpk_`/`whsk_` key where a `whsec_` secret
    /// was expected, or the reverse.
    WrongKind,
    /// Not a 32-byte Ed25519 public key (or a weak one).
    NotAPublicKey,
    /// A symmetric secret without its `whsec_` prefix. Unprefixed text is
    /// refused: it cannot be told from a public key pasted without `whpk_`.
    MissingPrefix,
    /// A `whsec_` key of fewer than [`MIN_SECRET_BYTES`] bytes.
    TooShort,
    /// A `whsec_` key of more than [`MAX_SECRET_BYTES`] bytes.
    TooLong,
}

impl std::fmt::Display for SecretErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NotBase64 => "the secret is not base64 after its prefix",
            Self::Empty => "the secret is empty",
            Self::WrongKind => "a key of another kind (whsec_, whpk_ and whsk_ are not interchangeable)",
            Self::NotAPublicKey => "not a valid 32-byte Ed25519 public key",
            Self::MissingPrefix => {
                "a Standard Webhooks secret starts with whsec_ (without it: base64 of 24 to 64 bytes, not 32); copy it \
                 whole"
            }
            Self::TooShort => "the whsec_ key is shorter than 24 bytes",
            Self::TooLong => "the whsec_ key is longer than 64 bytes",
        })
    }
}

kind_error! {
    /// A secret or key [`secret`], [`public_key`] or [`sign`] refused: see
    /// [`kind`](Self::kind). The message never contains the key.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct SecretError(SecretErrorKind);
    /// What is wrong.
    fn kind();
    display: |kind, f| kind.fmt(f);
}

/// An endpoint's symmetric signing secret as the sender shows it: `whsec_`
/// followed by base64 (padding optional) of [`MIN_SECRET_BYTES`] to
/// [`MAX_SECRET_BYTES`] bytes. Without the prefix, as the official
/// `standardwebhooks` and `svix` libraries also take it, the same base64 is
/// accepted unless it decodes to exactly 32 bytes: that is the size of an
/// Ed25519 public key, and a `whpk_` key pasted without its prefix, used as
/// an HMAC key, would let anyone who reads it sign `v1` deliveries (add
/// `whsec_` to such a secret). Returned in its canonical form (`whsec_` +
/// padded base64), decoded once.
///
/// # Errors
/// [`SecretErrorKind::MissingPrefix`], [`SecretErrorKind::NotBase64`],
/// [`SecretErrorKind::Empty`], [`SecretErrorKind::TooShort`],
/// [`SecretErrorKind::TooLong`], or [`SecretErrorKind::WrongKind`] for a
/// `whpk_`/`whsk_` key. Whitespace is not trimmed.
pub fn secret(whsec: &str) -> Result<SigningSecret, SecretError> {
    let raw = whsec.as_bytes();
    match classify_bytes(raw) {
        Ok(Key::Hmac(key)) => Ok(SigningSecret::from(format!("whsec_{}", Base64::encode_string(key.expose())))),
        Ok(Key::Public(_)) => Err(SecretErrorKind::WrongKind.into()),
        Err(kind) => Err(secret_error(raw, kind)),
    }
}

/// An endpoint's Ed25519 public key as the sender shows it (`whpk_` +
/// base64 of 32 bytes; the prefix may be omitted, since reading any text as
/// a public key gives nobody a way to sign), checked and returned in its
/// canonical `whpk_` form for the verifier.
///
/// # Errors
/// [`SecretErrorKind::NotBase64`], [`SecretErrorKind::NotAPublicKey`], or
/// [`SecretErrorKind::WrongKind`] for a `whsec_`/`whsk_` secret.
pub fn public_key(whpk: &str) -> Result<SigningSecret, SecretError> {
    if whpk.starts_with("whsec_") || whpk.starts_with("whsk_") {
        return Err(SecretErrorKind::WrongKind.into());
    }
    let b64 = whpk.strip_prefix("whpk_").unwrap_or(whpk);
    let bytes = super::super::decode_secret_base64(b64.as_bytes()).ok_or(SecretErrorKind::NotBase64)?;
    let bytes: [u8; 32] = bytes.try_into().map_err(|_| SecretErrorKind::NotAPublicKey)?;
    let key = VerifyingKey::from_bytes(&bytes).map_err(|_| SecretErrorKind::NotAPublicKey)?;
    if key.is_weak() {
        return Err(SecretErrorKind::NotAPublicKey.into());
    }
    Ok(SigningSecret::from(format!("whpk_{}", general_purpose::STANDARD.encode(bytes))))
}

/// The `whpk_` public key of the Ed25519 key with this 32-byte seed (the
/// seed is what a `whsk_` private key encodes). For tests and fixtures.
pub fn public_key_of(seed: &[u8; 32]) -> String {
    format!("whpk_{}", general_purpose::STANDARD.encode(SigningKey::from_bytes(seed).verifying_key().as_bytes()))
}

/// The `v1` entry a sender would put in the signature header for `body`
/// with message `id` at `timestamp` (Unix seconds): `v1,{base64}`. `secret`
/// is read like the verifier reads it: `whsec_` text, as [`secret`] returns
/// it. Join several entries with a space for a rotation header. For tests
/// and fixtures.
///
/// # Errors
/// As [`secret`]: [`SecretErrorKind::WrongKind`] for a `whpk_`/`whsk_` key,
/// [`SecretErrorKind::NotBase64`], [`SecretErrorKind::MissingPrefix`], ...
pub fn sign(secret: &SigningSecret, id: &str, timestamp: u64, body: &[u8]) -> Result<String, SecretError> {
    let key = match &*classify(secret) {
        Ok(Key::Hmac(key)) => hmac_sha256(key, &[id.as_bytes(), b".", timestamp.to_string().as_bytes(), b".", body]),
        Ok(Key::Public(_)) => return Err(SecretErrorKind::WrongKind.into()),
        Err(kind) => return Err(secret_error(secret.expose(), *kind)),
    };
    Ok(format!("v1,{}", general_purpose::STANDARD.encode(key)))
}

/// The `v1a` entry a sender would put in the signature header for `body`
/// with message `id` at `timestamp`, signed with the Ed25519 key whose
/// 32-byte seed is `seed`: `v1a,{base64}`. For tests and fixtures.
pub fn sign_ed25519(seed: &[u8; 32], id: &str, timestamp: u64, body: &[u8]) -> String {
    let content = [id.as_bytes(), b".", timestamp.to_string().as_bytes(), b".", body].concat();
    format!("v1a,{}", general_purpose::STANDARD.encode(SigningKey::from_bytes(seed).sign(&content).to_bytes()))
}
