//! Signature verification over the raw request bytes.
//!
//! A [`Verifier`] sees the request head, the body exactly as received, the
//! signing secrets resolved for the endpoint, and the current time from the
//! layer's [`Clock`]. It answers `Ok(())` or a [`VerifyError`] whose
//! [`kind`](VerifyError::kind) is logged; the HTTP answer is always a bare 401.
//!
//! Presets live in one module per provider ([`stripe`](crate::verify::stripe),
//! [`github`](crate::verify::github)). Anything else can be a closure:
//!
//! ```
//! use webhook_idempotency::verify::{Verifier, VerifyError, VerifyErrorKind, SigningSecret};
//! use std::time::SystemTime;
//!
//! let shared_token = |parts: &http::request::Parts, _body: &[u8], secrets: &[SigningSecret], _now: SystemTime| {
//!     let got = parts.headers.get("x-token").ok_or(VerifyError::new(VerifyErrorKind::MissingHeader))?;
//!     if secrets.iter().any(|s| s.matches(got.as_bytes())) {
//!         Ok(())
//!     } else {
//!         Err(VerifyError::new(VerifyErrorKind::NoMatchingSignature))
//!     }
//! };
//! fn assert_verifier(_: &impl Verifier) {}
//! assert_verifier(&shared_token);
//! ```

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

#[cfg(feature = "github")]
pub mod github;
#[cfg(feature = "stripe")]
pub mod stripe;

/// Checks that a delivery was signed by the sender.
///
/// Implementations must compare signatures in constant time and must accept
/// the delivery when any one of `secrets` matches (secret rotation).
///
/// A blanket implementation covers closures and functions with the same
/// signature as [`Verifier::verify`].
pub trait Verifier: Send + Sync + 'static {
    /// Verifies `body` (the raw bytes, unchanged) against the request head.
    ///
    /// `now` comes from the layer's [`Clock`]; timestamp tolerances are
    /// measured against it.
    ///
    /// # Errors
    /// A [`VerifyError`] saying why the delivery is not authentic.
    fn verify(
        &self,
        parts: &http::request::Parts,
        body: &[u8],
        secrets: &[SigningSecret],
        now: SystemTime,
    ) -> Result<(), VerifyError>;

    /// Checks the request head before the body is read, so a delivery that
    /// cannot pass (no signature header, an unparsable one) is answered 401
    /// without buffering up to the body limit. Must not need the secrets or
    /// the body. The default accepts everything.
    ///
    /// # Errors
    /// A [`VerifyError`] when the head alone shows the delivery will fail.
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        let _ = parts;
        Ok(())
    }
}

impl<F> Verifier for F
where
    F: Fn(&http::request::Parts, &[u8], &[SigningSecret], SystemTime) -> Result<(), VerifyError>
        + Send
        + Sync
        + 'static,
{
    fn verify(
        &self,
        parts: &http::request::Parts,
        body: &[u8],
        secrets: &[SigningSecret],
        now: SystemTime,
    ) -> Result<(), VerifyError> {
        self(parts, body, secrets, now)
    }
}

/// Source of the current time for timestamp tolerance checks.
///
/// The default is [`SystemClock`]; tests inject a fixed time with a closure
/// `|| SystemTime::UNIX_EPOCH + Duration::from_secs(...)`.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> SystemTime;
}

impl<F> Clock for F
where
    F: Fn() -> SystemTime + Send + Sync + 'static,
{
    fn now(&self) -> SystemTime {
        self()
    }
}

/// The operating system's wall clock ([`SystemTime::now`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A signing secret, as the provider shows it (for example Stripe's
/// `whsec_...` string, used as the HMAC key byte for byte).
///
/// `Debug` prints `SigningSecret(<redacted>)`: secrets never reach logs.
#[derive(Clone)]
pub struct SigningSecret(Vec<u8>);

impl SigningSecret {
    /// A secret from its bytes, used as given (no trimming, no decoding).
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        Self(secret.into())
    }

    /// The secret's bytes, to key an HMAC.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// Constant-time comparison of the secret with `candidate` (for senders
    /// that send a shared token instead of a signature).
    pub fn matches(&self, candidate: &[u8]) -> bool {
        self.0.ct_eq(candidate).into()
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(<redacted>)")
    }
}

impl From<&str> for SigningSecret {
    fn from(s: &str) -> Self {
        Self::new(s.as_bytes())
    }
}

impl From<String> for SigningSecret {
    fn from(s: String) -> Self {
        Self::new(s.into_bytes())
    }
}

/// Why a delivery failed verification. Used in logs and metrics; the HTTP
/// answer does not reveal it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VerifyErrorKind {
    /// The signature (or timestamp) header is absent.
    MissingHeader,
    /// The header is present but cannot be parsed.
    MalformedHeader,
    /// No signature in the header matches any configured secret.
    NoMatchingSignature,
    /// The signed timestamp is older than the tolerance allows.
    TimestampTooOld,
    /// The signed timestamp is further in the future than the tolerance allows.
    TimestampInFuture,
    /// No signing secret is configured for the endpoint.
    NoSecret,
}

impl VerifyErrorKind {
    /// A stable `snake_case` name for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissingHeader => "missing_header",
            Self::MalformedHeader => "malformed_header",
            Self::NoMatchingSignature => "no_matching_signature",
            Self::TimestampTooOld => "timestamp_too_old",
            Self::TimestampInFuture => "timestamp_in_future",
            Self::NoSecret => "no_secret",
        }
    }
}

impl fmt::Display for VerifyErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed verification. Carries a [`VerifyErrorKind`] and never the
/// signature, the secret or the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyError {
    kind: VerifyErrorKind,
}

impl VerifyError {
    /// An error of the given kind.
    pub fn new(kind: VerifyErrorKind) -> Self {
        Self { kind }
    }

    /// Why verification failed.
    pub fn kind(&self) -> VerifyErrorKind {
        self.kind
    }
}

impl From<VerifyErrorKind> for VerifyError {
    fn from(kind: VerifyErrorKind) -> Self {
        Self::new(kind)
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "webhook signature verification failed: {}", self.kind)
    }
}

impl std::error::Error for VerifyError {}

/// HMAC-SHA256 (RFC 2104, FIPS 180-4) of the concatenation of `parts`,
/// keyed by `secret`: 32 bytes.
///
/// Feeding the parts one by one avoids copying the body into a new buffer;
/// custom verifiers can build a scheme's signed content the same way
/// (`&[timestamp, b".", body]`).
pub fn hmac_sha256(secret: &SigningSecret, parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose()).expect("HMAC accepts keys of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
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

/// Checks a signed Unix timestamp (seconds) against `now`, `tolerance` in
/// both directions.
///
/// # Errors
/// [`VerifyErrorKind::TimestampTooOld`] or [`VerifyErrorKind::TimestampInFuture`].
pub fn check_tolerance(timestamp: u64, now: SystemTime, tolerance: Duration) -> Result<(), VerifyError> {
    // Past what SystemTime can hold: certainly in the future.
    let Some(signed) = UNIX_EPOCH.checked_add(Duration::from_secs(timestamp)) else {
        return Err(VerifyErrorKind::TimestampInFuture.into());
    };
    match now.duration_since(signed) {
        Ok(age) if age > tolerance => Err(VerifyErrorKind::TimestampTooOld.into()),
        Ok(_) => Ok(()),
        Err(ahead) if ahead.duration() > tolerance => Err(VerifyErrorKind::TimestampInFuture.into()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerance_is_symmetric() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let tol = Duration::from_secs(300);
        let cases = [
            ("exact", 1_000_000, Ok(())),
            ("edge past", 1_000_000 - 300, Ok(())),
            ("edge future", 1_000_000 + 300, Ok(())),
            ("too old", 1_000_000 - 301, Err(VerifyErrorKind::TimestampTooOld)),
            ("too new", 1_000_000 + 301, Err(VerifyErrorKind::TimestampInFuture)),
            ("beyond SystemTime", u64::MAX, Err(VerifyErrorKind::TimestampInFuture)),
        ];
        for (name, ts, want) in cases {
            assert_eq!(check_tolerance(ts, now, tol).map_err(|e| e.kind()), want, "{name}");
        }
    }

    #[test]
    fn secret_debug_is_redacted() {
        let s = SigningSecret::from("whsec_supersecret");
        assert_eq!(format!("{s:?}"), "SigningSecret(<redacted>)");
    }

    #[test]
    fn any_matches_finds_any_position() {
        assert!(any_matches(b"abc", [&b"xyz"[..], b"abc"]));
        assert!(!any_matches(b"abc", [&b"xyz"[..], b"ab"]));
        assert!(!any_matches(b"abc", []));
    }
}
