//! The pieces every verifier shares: HMAC over parts, constant-time
//! matching against every configured secret, the signed-timestamp
//! tolerance, header parsing, and the default key-material check.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::{Delivery, KeyMaterialError, KeyMaterialErrorKind, SigningSecret, VerifyError, VerifyErrorKind};

/// Prefixes providers print in front of key material; a secret that is only
/// one of them holds no key.
const BARE_PREFIXES: [&[u8]; 3] = [b"whsec_", b"whpk_", b"whsk_"];

/// The default [`Verifier::check_secrets`](crate::verify::Verifier::check_secrets): at least one secret, and none
/// empty or only a provider prefix (`whsec_`, `whpk_`, `whsk_`).
///
/// # Errors
/// [`KeyMaterialErrorKind::NoSecret`], [`KeyMaterialErrorKind::Empty`] or
/// [`KeyMaterialErrorKind::OnlyPrefix`].
pub fn check_key_material(secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
    if secrets.is_empty() {
        let hint = "configure the signing secret the provider shows for this endpoint";
        return Err(KeyMaterialError::new(KeyMaterialErrorKind::NoSecret, None, hint));
    }
    for (i, secret) in secrets.iter().enumerate() {
        let bytes = secret.expose();
        if bytes.is_empty() {
            let hint = "the secret is empty (an unset environment variable?); anyone can sign with an empty key";
            return Err(KeyMaterialError::new(KeyMaterialErrorKind::Empty, Some(i), hint));
        }
        if BARE_PREFIXES.contains(&bytes) {
            let hint = "the secret is only a prefix; copy the whole secret";
            return Err(KeyMaterialError::new(KeyMaterialErrorKind::OnlyPrefix, Some(i), hint));
        }
    }
    Ok(())
}

/// [`Verifier::check_secrets`](super::Verifier::check_secrets) for a scheme
/// that verifies with public keys: [`check_key_material`], then every secret
/// must be a key `is_key` accepts (a wrong one would otherwise fail every
/// delivery as a signature mismatch); `hint` says what the provider shows.
///
/// # Errors
/// [`KeyMaterialErrorKind::NoSecret`], [`KeyMaterialErrorKind::Empty`], or
/// [`KeyMaterialErrorKind::InvalidPublicKey`] for the first secret that is no key.
pub fn check_public_keys(
    secrets: &[SigningSecret],
    is_key: impl Fn(&SigningSecret) -> bool,
    hint: &'static str,
) -> Result<(), KeyMaterialError> {
    check_key_material(secrets)?;
    match secrets.iter().position(|s| !is_key(s)) {
        Some(i) => Err(KeyMaterialError::new(KeyMaterialErrorKind::InvalidPublicKey, Some(i), hint)),
        None => Ok(()),
    }
}

/// HMAC-SHA256 (RFC 2104, FIPS 180-4) of the concatenation of `parts`,
/// keyed by `secret`: 32 bytes.
///
/// Feeding the parts one by one avoids copying the body into a new buffer;
/// custom verifiers can build a scheme's signed content the same way
/// (`&[timestamp, b".", body]`).
pub fn hmac_sha256(secret: &SigningSecret, parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.expose()).expect("HMAC accepts keys of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// The hash functions webhook senders use in HMAC signatures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// HMAC-SHA1 (20 bytes): Twilio, Intercom's legacy header.
    Sha1,
    /// HMAC-SHA256 (32 bytes): most senders.
    Sha256,
    /// HMAC-SHA512 (64 bytes).
    Sha512,
}

impl Algorithm {
    /// The tag's length in bytes: 20, 32 or 64.
    pub fn tag_len(self) -> usize {
        match self {
            Self::Sha1 => 20,
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }
}

/// An HMAC tag, up to 64 bytes; `as_ref()` gives its bytes.
#[derive(Clone, Copy)]
pub struct Tag {
    bytes: [u8; 64],
    len: usize,
}

impl AsRef<[u8]> for Tag {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl fmt::Debug for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tag(<redacted>)")
    }
}

fn mac_of<M: Mac + KeyInit>(key: &[u8], parts: &[&[u8]]) -> Tag {
    let mut mac = <M as KeyInit>::new_from_slice(key).expect("HMAC accepts keys of any length");
    for part in parts {
        mac.update(part);
    }
    let out = mac.finalize().into_bytes();
    let mut tag = Tag { bytes: [0; 64], len: out.len() };
    tag.bytes[..out.len()].copy_from_slice(&out);
    tag
}

/// HMAC (RFC 2104) with `algorithm` of the concatenation of `parts`, keyed
/// by `secret`, without copying the parts into one buffer.
pub fn hmac(algorithm: Algorithm, secret: &SigningSecret, parts: &[&[u8]]) -> Tag {
    match algorithm {
        Algorithm::Sha1 => mac_of::<Hmac<sha1::Sha1>>(secret.expose(), parts),
        Algorithm::Sha256 => mac_of::<Hmac<Sha256>>(secret.expose(), parts),
        Algorithm::Sha512 => mac_of::<Hmac<sha2::Sha512>>(secret.expose(), parts),
    }
}

/// How a signature is written in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Encoding {
    /// Hexadecimal, either case.
    Hex,
    /// Standard base64 with padding (RFC 4648 section 4).
    Base64,
    /// URL-safe base64 without padding (RFC 4648 section 5; Sanity's
    /// `sanity-webhook-signature`): `-` and `_`, padding refused.
    Base64Url,
}

impl Encoding {
    /// Decodes a signature; `None` when it is not valid in this encoding.
    pub fn decode(self, text: &str) -> Option<Vec<u8>> {
        use base64::Engine as _;
        match self {
            Self::Hex => hex::decode(text).ok(),
            Self::Base64 => base64::engine::general_purpose::STANDARD.decode(text).ok(),
            Self::Base64Url => base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok(),
        }
    }

    /// Encodes a tag the way a sender writes it (hex in lower case).
    pub fn encode(self, bytes: &[u8]) -> String {
        use base64::Engine as _;
        match self {
            Self::Hex => hex::encode(bytes),
            Self::Base64 => base64::engine::general_purpose::STANDARD.encode(bytes),
            Self::Base64Url => base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes),
        }
    }
}

/// Parses a signed Unix timestamp in seconds: ASCII digits only, at most 20.
///
/// # Errors
/// [`VerifyErrorKind::MalformedHeader`] for anything else (signs, spaces,
/// fractions, empty).
pub fn parse_unix_seconds(text: &str) -> Result<u64, VerifyError> {
    parse_digits(text)
}

/// ASCII digits only, at most 20, as a `u64`; the unit is the caller's.
fn parse_digits(text: &str) -> Result<u64, VerifyError> {
    if text.is_empty() || text.len() > 20 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyErrorKind::MalformedHeader.into());
    }
    text.parse().map_err(|_| VerifyErrorKind::MalformedHeader.into())
}

/// Parses a signed Unix timestamp in **milliseconds** (HubSpot): the same
/// text rules as [`parse_unix_seconds`] (ASCII digits only, at most 20),
/// the value in milliseconds.
///
/// # Errors
/// [`VerifyErrorKind::MalformedHeader`] for anything else.
pub fn parse_unix_millis(text: &str) -> Result<u64, VerifyError> {
    parse_digits(text)
}

/// The single value of header `name`, as text.
///
/// # Errors
/// [`VerifyErrorKind::MissingHeader`] when absent,
/// [`VerifyErrorKind::MalformedHeader`] when not visible ASCII or when
/// repeated with different values.
pub fn single_header<'a>(parts: &'a http::request::Parts, name: &str) -> Result<&'a str, VerifyError> {
    let mut values = parts.headers.get_all(name).iter();
    let first = values.next().ok_or(VerifyErrorKind::MissingHeader)?;
    if values.any(|v| v != first) {
        return Err(VerifyErrorKind::MalformedHeader.into());
    }
    first.to_str().map_err(|_| VerifyErrorKind::MalformedHeader.into())
}

/// Passes when, for any of the delivery's secrets, `mac(secret)` equals any
/// of `candidates`: every secret and every candidate is compared, each in
/// constant time ([`any_matches`]), so the time does not reveal which pair
/// matched. The shared end of every HMAC preset.
///
/// # Errors
/// [`VerifyErrorKind::NoSecret`] without secrets,
/// [`VerifyErrorKind::NoMatchingSignature`] when nothing matches.
pub fn match_any_secret<'c, T, I>(
    delivery: &Delivery<'_>,
    candidates: I,
    mac: impl Fn(&SigningSecret) -> T,
) -> Result<(), VerifyError>
where
    T: AsRef<[u8]>,
    I: IntoIterator<Item = &'c [u8]> + Clone,
{
    let mut matched = false;
    for secret in delivery.require_secrets()? {
        matched |= any_matches(mac(secret).as_ref(), candidates.clone());
    }
    if matched {
        Ok(())
    } else {
        Err(VerifyErrorKind::NoMatchingSignature.into())
    }
}

/// True when any of `candidates` equals `expected`. Each comparison is
/// constant-time (`subtle::ConstantTimeEq`) and every candidate is compared,
/// so the time does not reveal which one matched or how much of it did.
pub fn any_matches<'a>(expected: &[u8], candidates: impl IntoIterator<Item = &'a [u8]>) -> bool {
    let mut found = subtle::Choice::from(0);
    for candidate in candidates {
        found |= expected.ct_eq(candidate);
    }
    found.into()
}

/// What a signed time exactly at the tolerance gets: each scheme decides it
/// as its provider's SDK does (`>` or `>=` in the SDK's comparison), in both
/// directions.
///
/// Most SDKs refuse only a time **further** than the tolerance (Stripe's
/// `timestampAge > tolerance`, Standard Webhooks' `now - timestamp >
/// tolerance`): [`Boundary::Inclusive`], the default. HubSpot's Python SDK
/// accepts only a time **nearer** than it (`current_time - request_time <
/// timedelta(seconds=300)`): [`Boundary::Exclusive`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Boundary {
    /// A time exactly at the tolerance is accepted; one unit further is
    /// refused (`age > tolerance` refused).
    #[default]
    Inclusive,
    /// A time exactly at the tolerance is refused (`age >= tolerance`
    /// refused).
    Exclusive,
}

impl Boundary {
    /// True when a signed time `distance` away (into the past or the future)
    /// is past the limit `tolerance` set.
    pub fn exceeds(self, distance: Duration, tolerance: Duration) -> bool {
        match self {
            Self::Inclusive => distance > tolerance,
            Self::Exclusive => distance >= tolerance,
        }
    }
}

/// Checks a signed Unix timestamp (seconds) against `now`, `tolerance` in
/// both directions, a time exactly at it accepted ([`Boundary::Inclusive`];
/// [`check_tolerance_with`] for the other boundary).
///
/// # Errors
/// [`VerifyErrorKind::TimestampTooOld`] or [`VerifyErrorKind::TimestampInFuture`].
pub fn check_tolerance(timestamp: u64, now: SystemTime, tolerance: Duration) -> Result<(), VerifyError> {
    check_tolerance_with(timestamp, now, tolerance, Boundary::Inclusive)
}

/// [`check_tolerance`] with the scheme's [`Boundary`]: what a timestamp
/// exactly `tolerance` away gets.
///
/// # Errors
/// [`VerifyErrorKind::TimestampTooOld`] or [`VerifyErrorKind::TimestampInFuture`].
pub fn check_tolerance_with(
    timestamp: u64,
    now: SystemTime,
    tolerance: Duration,
    boundary: Boundary,
) -> Result<(), VerifyError> {
    check_signed_at(UNIX_EPOCH.checked_add(Duration::from_secs(timestamp)), now, tolerance, boundary)
}

/// Checks a signed Unix timestamp in **milliseconds** against `now`,
/// `tolerance` in both directions, to the millisecond (HubSpot, Linear), a
/// time exactly at it accepted ([`check_tolerance_millis_with`] for the other
/// boundary).
///
/// # Errors
/// [`VerifyErrorKind::TimestampTooOld`] or [`VerifyErrorKind::TimestampInFuture`].
pub fn check_tolerance_millis(millis: u64, now: SystemTime, tolerance: Duration) -> Result<(), VerifyError> {
    check_tolerance_millis_with(millis, now, tolerance, Boundary::Inclusive)
}

/// [`check_tolerance_millis`] with the scheme's [`Boundary`].
///
/// # Errors
/// [`VerifyErrorKind::TimestampTooOld`] or [`VerifyErrorKind::TimestampInFuture`].
pub fn check_tolerance_millis_with(
    millis: u64,
    now: SystemTime,
    tolerance: Duration,
    boundary: Boundary,
) -> Result<(), VerifyError> {
    check_signed_at(UNIX_EPOCH.checked_add(Duration::from_millis(millis)), now, tolerance, boundary)
}

fn check_signed_at(
    signed: Option<SystemTime>,
    now: SystemTime,
    tolerance: Duration,
    boundary: Boundary,
) -> Result<(), VerifyError> {
    // Past what SystemTime can hold: certainly in the future.
    let Some(signed) = signed else {
        return Err(VerifyErrorKind::TimestampInFuture.into());
    };
    match now.duration_since(signed) {
        Ok(age) if boundary.exceeds(age, tolerance) => Err(VerifyErrorKind::TimestampTooOld.into()),
        Ok(_) => Ok(()),
        Err(ahead) if boundary.exceeds(ahead.duration(), tolerance) => Err(VerifyErrorKind::TimestampInFuture.into()),
        Err(_) => Ok(()),
    }
}

/// Every value of header `name` (case-insensitive), in order, across
/// repeated header lines; a value that is not visible ASCII is
/// [`VerifyErrorKind::MalformedHeader`].
pub fn header_values<'a>(
    parts: &'a http::request::Parts,
    name: &'a str,
) -> impl Iterator<Item = Result<&'a str, VerifyError>> + 'a {
    parts.headers.get_all(name).iter().map(|v| v.to_str().map_err(|_| VerifyErrorKind::MalformedHeader.into()))
}

/// The most bytes of signature header a scheme reads, over all its lines:
/// 4096 (4 KiB). A genuine header holds a few signatures during a secret
/// rotation (Stripe: one `v1=` of 64 hex digits per secret; Standard
/// Webhooks: `v1,` + 44 base64 characters, `v1a,` + 88), so well under 1 KiB;
/// past this cap the delivery is [`VerifyErrorKind::MalformedHeader`] before
/// any entry is split or decoded, so the parse of an unauthenticated header
/// costs microseconds whatever it holds (a 340 KB `Stripe-Signature` of 5,000
/// `v1=` entries cost 4.6 ms per request before the cap).
pub const MAX_SIGNATURE_HEADER_BYTES: usize = 4096;

/// The most entries (`key=value` items, prefixed signatures, `version,sig`
/// pairs; every entry counts, known or not) a signature header may hold over
/// all its lines: 16. Past it the delivery is
/// [`VerifyErrorKind::MalformedHeader`]. See [`MAX_SIGNATURE_HEADER_BYTES`].
pub const MAX_SIGNATURE_ENTRIES: usize = 16;

/// The most public-key verifications (Ed25519, ECDSA P-256) one delivery may
/// cost: its signatures of a public-key scheme times the public keys
/// configured for the endpoint, 8. A delivery that would need more is
/// [`VerifyErrorKind::MalformedHeader`] before any verification (an Ed25519
/// verification takes about 50 µs in release, so a request costs at most
/// about 0.4 ms of CPU on the blocking pool). A genuine delivery carries one
/// signature per key the sender signs with, and the receiver configures one
/// or two keys during a rotation.
pub const MAX_PUBLIC_KEY_VERIFICATIONS: usize = 8;

/// Checks that the signature header `name` is within
/// [`MAX_SIGNATURE_HEADER_BYTES`] over all its lines; cost proportional to
/// the number of lines, not their length.
///
/// # Errors
/// [`VerifyErrorKind::MalformedHeader`] past the cap.
pub fn check_signature_header_size(parts: &http::request::Parts, name: &str) -> Result<(), VerifyError> {
    let mut total = 0usize;
    for value in parts.headers.get_all(name) {
        total = total.saturating_add(value.len());
        if total > MAX_SIGNATURE_HEADER_BYTES {
            return Err(VerifyErrorKind::MalformedHeader.into());
        }
    }
    Ok(())
}

/// Counts one more signature-header entry against [`MAX_SIGNATURE_ENTRIES`].
///
/// # Errors
/// [`VerifyErrorKind::MalformedHeader`] past the cap.
pub(crate) fn count_entry(seen: &mut usize) -> Result<(), VerifyError> {
    *seen += 1;
    if *seen > MAX_SIGNATURE_ENTRIES {
        return Err(VerifyErrorKind::MalformedHeader.into());
    }
    Ok(())
}

/// Checks that `signatures` public-key signatures against `keys` keys stay
/// within [`MAX_PUBLIC_KEY_VERIFICATIONS`]: call it in a custom public-key
/// verifier after the cheap checks (format, timestamp) and before the first
/// verification, as the Standard Webhooks, Discord and SendGrid presets do.
///
/// # Errors
/// [`VerifyErrorKind::MalformedHeader`] past the cap.
pub fn check_verifications(signatures: usize, keys: usize) -> Result<(), VerifyError> {
    if signatures.saturating_mul(keys) > MAX_PUBLIC_KEY_VERIFICATIONS {
        return Err(VerifyErrorKind::MalformedHeader.into());
    }
    Ok(())
}
