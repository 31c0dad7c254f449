//! Signature verification over the raw request bytes.
//!
//! A [`Verifier`] sees a [`Delivery`]: the request head, the body exactly as
//! received, the signing secrets resolved for the endpoint, and the current
//! time from the layer's [`Clock`]. It answers `Ok(())` or a [`VerifyError`]
//! whose [`kind`](VerifyError::kind) is logged; the HTTP answer is always a
//! bare 401.
//!
//! This module holds the primitives every verifier shares ([`Delivery`],
//! [`SigningSecret`], the errors, [`hmac()`], [`match_any_secret`]), one
//! file each: `secret`, `error`, `primitives`.
//! Presets live in one module per provider under [`crate::providers`]
//! ([`crate::providers::stripe`], ...; each behind its feature),
//! [`generic::HmacVerifier`] configures the common HMAC shapes, and anything
//! else can be a closure:
//!
//! ```
//! use webhook_idempotency::verify::{Delivery, Verifier, VerifyError, VerifyErrorKind};
//!
//! let shared_token = |d: &Delivery<'_>| {
//!     let got = d.parts.headers.get("x-token").ok_or(VerifyError::new(VerifyErrorKind::MissingHeader))?;
//!     if d.secrets.iter().any(|s| s.matches(got.as_bytes())) {
//!         Ok(())
//!     } else {
//!         Err(VerifyError::new(VerifyErrorKind::NoMatchingSignature))
//!     }
//! };
//! fn assert_verifier(_: &impl Verifier) {}
//! assert_verifier(&shared_token);
//! ```

use std::fmt;
use std::time::{Duration, SystemTime};

mod error;
pub mod fetch;
pub mod generic;
mod primitives;
mod secret;

pub use crate::error::{KeyMaterialError, KeyMaterialErrorKind};
pub use error::{VerifyError, VerifyErrorKind};
pub(crate) use primitives::count_entry;
pub use primitives::{
    any_matches, check_key_material, check_public_keys, check_signature_header_size, check_tolerance,
    check_tolerance_millis, check_tolerance_millis_with, check_tolerance_with, check_verifications, header_values,
    hmac, hmac_sha256, match_any_secret, parse_unix_millis, parse_unix_seconds, single_header, Algorithm, Boundary,
    Encoding, Tag, MAX_PUBLIC_KEY_VERIFICATIONS, MAX_SIGNATURE_ENTRIES, MAX_SIGNATURE_HEADER_BYTES,
};
pub use secret::SigningSecret;

/// What a [`Verifier`] checks: one delivery as received.
///
/// `Debug` shows the method, the path, the header names, the body's length
/// and the number of secrets; never header values (signatures, tokens), the
/// body or the secrets.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Delivery<'a> {
    /// The request head (method, URI, headers).
    pub parts: &'a http::request::Parts,
    /// The raw body, byte for byte as received.
    pub body: &'a [u8],
    /// The endpoint's signing secrets (or verification keys); any one that
    /// matches passes.
    pub secrets: &'a [SigningSecret],
    /// The current time, from the layer's [`Clock`].
    pub now: SystemTime,
    /// False for an operator replay: the signature is still checked, the
    /// timestamp's age is not. Use [`Delivery::check_time`], which honours it.
    pub check_timestamp: bool,
}

impl fmt::Debug for Delivery<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("method", &self.parts.method)
            .field("path", &self.parts.uri.path())
            .field("headers", &self.parts.headers.keys().collect::<Vec<_>>())
            .field("body_len", &self.body.len())
            .field("secrets", &self.secrets.len())
            .field("now", &self.now)
            .field("check_timestamp", &self.check_timestamp)
            .finish()
    }
}

impl<'a> Delivery<'a> {
    /// A delivery checked at `now`, timestamps included.
    pub fn new(parts: &'a http::request::Parts, body: &'a [u8], secrets: &'a [SigningSecret], now: SystemTime) -> Self {
        Self { parts, body, secrets, now, check_timestamp: true }
    }

    /// The same delivery without the timestamp check (an operator replay of
    /// an old, genuinely signed delivery).
    pub fn without_timestamp_check(mut self) -> Self {
        self.check_timestamp = false;
        self
    }

    /// Checks a signed Unix timestamp (seconds) against [`Delivery::now`]
    /// with `tolerance` in both directions; always passes for an operator
    /// replay. See [`check_tolerance`].
    ///
    /// # Errors
    /// [`VerifyErrorKind::TimestampTooOld`] or [`VerifyErrorKind::TimestampInFuture`].
    pub fn check_time(&self, timestamp: u64, tolerance: Duration) -> Result<(), VerifyError> {
        self.check_time_with(timestamp, tolerance, Boundary::Inclusive)
    }

    /// [`Delivery::check_time`] with the scheme's [`Boundary`] (what a
    /// timestamp exactly `tolerance` away gets). See [`check_tolerance_with`].
    ///
    /// # Errors
    /// [`VerifyErrorKind::TimestampTooOld`] or [`VerifyErrorKind::TimestampInFuture`].
    pub fn check_time_with(&self, timestamp: u64, tolerance: Duration, boundary: Boundary) -> Result<(), VerifyError> {
        if self.check_timestamp {
            check_tolerance_with(timestamp, self.now, tolerance, boundary)
        } else {
            Ok(())
        }
    }

    /// [`Delivery::check_time`] for a signed Unix timestamp in
    /// **milliseconds**, compared to the millisecond; always passes for an
    /// operator replay. See [`check_tolerance_millis`].
    ///
    /// # Errors
    /// [`VerifyErrorKind::TimestampTooOld`] or [`VerifyErrorKind::TimestampInFuture`].
    pub fn check_time_millis(&self, millis: u64, tolerance: Duration) -> Result<(), VerifyError> {
        self.check_time_millis_with(millis, tolerance, Boundary::Inclusive)
    }

    /// [`Delivery::check_time_millis`] with the scheme's [`Boundary`]. See
    /// [`check_tolerance_millis_with`].
    ///
    /// # Errors
    /// [`VerifyErrorKind::TimestampTooOld`] or [`VerifyErrorKind::TimestampInFuture`].
    pub fn check_time_millis_with(
        &self,
        millis: u64,
        tolerance: Duration,
        boundary: Boundary,
    ) -> Result<(), VerifyError> {
        if self.check_timestamp {
            check_tolerance_millis_with(millis, self.now, tolerance, boundary)
        } else {
            Ok(())
        }
    }

    /// The secrets to verify with. Fails with [`VerifyErrorKind::NoSecret`]
    /// when none is configured or one is empty: an empty HMAC key
    /// authenticates nothing (the layer refuses such key material before
    /// verifying; this keeps direct users of a verifier safe too).
    ///
    /// # Errors
    /// As above.
    pub fn require_secrets(&self) -> Result<&'a [SigningSecret], VerifyError> {
        if self.secrets.is_empty() || self.secrets.iter().any(|s| s.expose().is_empty()) {
            Err(VerifyErrorKind::NoSecret.into())
        } else {
            Ok(self.secrets)
        }
    }
}

/// Checks that a delivery was signed by the sender.
///
/// Implementations must compare signatures in constant time and must accept
/// the delivery when any one of the secrets matches (secret rotation).
///
/// A blanket implementation covers closures `Fn(&Delivery<'_>) ->
/// Result<(), VerifyError>`.
pub trait Verifier: Send + Sync + 'static {
    /// Verifies the delivery's raw body against its head and secrets.
    ///
    /// # Errors
    /// A [`VerifyError`] saying why the delivery is not authentic.
    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError>;

    /// Fetches what verifying this delivery needs from the network before
    /// [`verify`](Verifier::verify) runs (a signing certificate the sender
    /// publishes at a URL the delivery names: AWS SNS's `SigningCertURL`),
    /// through a [`fetch::KeyFetcher`], whose checks run before any network
    /// access. The layer awaits it first, then verifies; `verify` reads the
    /// key from the fetcher's cache and never waits on the network. `None`
    /// (the default): nothing to fetch. A wrapper verifier forwards it.
    ///
    /// The layer answers [`FetchErrorKind::NotAllowed`](fetch::FetchErrorKind::NotAllowed)
    /// 401 and every other [`fetch::FetchError`] 503 + `Retry-After` (the
    /// sender retries; nothing is stored).
    fn prepare<'a>(&'a self, _parts: &'a http::request::Parts, _body: &'a [u8]) -> Option<fetch::BoxPrepare<'a>> {
        None
    }

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

    /// True when verifying this delivery may cost enough CPU (public-key
    /// signatures: Ed25519, ECDSA, several candidates) that the layer should
    /// run it on tokio's blocking pool rather than an async worker thread.
    /// The layer also does so for any body of 64 KiB or more. Default false.
    fn costly(&self, parts: &http::request::Parts) -> bool {
        let _ = parts;
        false
    }

    /// Checks that the endpoint's key material can authenticate anything:
    /// called by [`WebhookLayerBuilder::build`](crate::layer::WebhookLayerBuilder::build)
    /// for fixed secrets (a failure is a [`ConfigError`](crate::error::ConfigError)
    /// naming the provider) and by the layer for every endpoint a
    /// [`ScopeResolver`](crate::scope::ScopeResolver) returns (a failure is
    /// answered 500 and logged at ERROR with the scope; nothing is stored).
    ///
    /// The default is [`check_key_material`]: at least one secret, none
    /// empty, none that is only a provider prefix such as a bare `whsec_`.
    /// Presets with a documented format override it (Standard Webhooks: the
    /// `whsec_` prefix and 24 to 64 key bytes; Discord and SendGrid: a valid
    /// public key) and may decode the secrets here, once, through
    /// [`SigningSecret::parsed`].
    ///
    /// # Errors
    /// A [`KeyMaterialError`] saying which secret is unusable and why (never
    /// the secret itself).
    fn check_secrets(&self, secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        check_key_material(secrets)
    }

    /// The request headers this verifier reads a credential from: a header
    /// whose value alone authenticates any delivery (a shared token, HTTP
    /// Basic credentials), unlike a signature, which authenticates one body.
    ///
    /// Once the delivery is verified and its event key read, the layer
    /// removes these headers from the request: the handler never sees them
    /// (synchronous mode) and inbox mode never stores them, so the request a
    /// worker rebuilds has none either. Whoever reads the table, a backup or
    /// a replica, or the handler's logs, would otherwise hold the credential
    /// and could forge deliveries.
    ///
    /// The default is none: a closure verifier declares nothing, so declare
    /// its token header on the provider
    /// ([`Provider::credentials_in`](crate::Provider::credentials_in)), or
    /// implement this trait. The layer strips the union of both
    /// ([`providers::credential_headers`](crate::providers::credential_headers)),
    /// so a preset whose verifier is wrapped in a closure (or in a wrapper
    /// that does not forward this method) still has its token removed: the
    /// shared-token presets declare it on the provider too. Implemented by
    /// [`TokenHeaderVerifier`](generic::TokenHeaderVerifier) (its header),
    /// [`BasicAuthVerifier`](generic::BasicAuthVerifier) (`Authorization`)
    /// and the presets built on them (GitLab, Telegram).
    fn credential_headers(&self) -> &[http::HeaderName] {
        &[]
    }
}

impl<F> Verifier for F
where
    F: Fn(&Delivery<'_>) -> Result<(), VerifyError> + Send + Sync + 'static,
{
    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        self(delivery)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

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

    /// The exclusive boundary refuses exactly at the tolerance, both ways, to
    /// the second and to the millisecond.
    #[test]
    fn exclusive_boundary_refuses_at_the_limit() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let tol = Duration::from_secs(300);
        let ex = Boundary::Exclusive;
        let kind = |r: Result<(), VerifyError>| r.map_err(|e| e.kind());
        assert_eq!(kind(check_tolerance_with(1_000_000 - 299, now, tol, ex)), Ok(()));
        assert_eq!(kind(check_tolerance_with(1_000_000 - 300, now, tol, ex)), Err(VerifyErrorKind::TimestampTooOld));
        assert_eq!(kind(check_tolerance_with(1_000_000 + 299, now, tol, ex)), Ok(()));
        assert_eq!(kind(check_tolerance_with(1_000_000 + 300, now, tol, ex)), Err(VerifyErrorKind::TimestampInFuture));
        let ms = 1_000_000_000;
        assert_eq!(kind(check_tolerance_millis_with(ms - 299_999, now, tol, ex)), Ok(()));
        assert_eq!(
            kind(check_tolerance_millis_with(ms - 300_000, now, tol, ex)),
            Err(VerifyErrorKind::TimestampTooOld)
        );
        assert_eq!(kind(check_tolerance_millis_with(ms - 300_000, now, tol, Boundary::Inclusive)), Ok(()));
        assert_eq!(
            kind(check_tolerance_millis_with(ms - 300_001, now, tol, Boundary::Inclusive)),
            Err(VerifyErrorKind::TimestampTooOld)
        );
        assert_eq!(Boundary::default(), Boundary::Inclusive);
    }

    #[test]
    fn delivery_debug_shows_no_values() {
        let (parts, ()) = http::Request::post("/hook?token=q")
            .header("stripe-signature", "t=1,v1=deadbeef")
            .header("x-replay-token", "operator-secret-token")
            .body(())
            .unwrap()
            .into_parts();
        let secrets = [SigningSecret::from("whsec_supersecret")];
        let shown = format!("{:?}", Delivery::new(&parts, b"{\"card\":\"4242\"}", &secrets, UNIX_EPOCH));
        for hidden in ["deadbeef", "operator-secret-token", "4242", "supersecret", "token=q"] {
            assert!(!shown.contains(hidden), "{hidden} in {shown}");
        }
        assert!(shown.contains("stripe-signature") && shown.contains("body_len: 15"), "{shown}");
    }

    #[test]
    fn secret_debug_is_redacted() {
        let s = SigningSecret::from("whsec_supersecret");
        assert_eq!(format!("{s:?}"), "SigningSecret(<redacted>)");
        assert_eq!(s.to_string(), "<redacted>");
    }

    #[test]
    fn hmac_known_answers() {
        // RFC 4231 test case 2 (SHA-256, SHA-512) and RFC 2202 test case 2 (SHA-1).
        let key = SigningSecret::from("Jefe");
        let data: &[&[u8]] = &[b"what do ya want ", b"for nothing?"];
        let cases = [
            (Algorithm::Sha1, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
            (Algorithm::Sha256, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
            (
                Algorithm::Sha512,
                "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
            ),
        ];
        for (alg, want) in cases {
            assert_eq!(hex::encode(hmac(alg, &key, data)), want, "{alg:?}");
        }
        assert_eq!(hmac(Algorithm::Sha256, &key, data).as_ref(), &hmac_sha256(&key, data)[..]);
    }

    #[test]
    fn unix_seconds_parsing() {
        for ok in ["0", "1700000000", "18446744073709551615"] {
            assert!(parse_unix_seconds(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-1", "+1", " 1", "1.5", "18446744073709551616", "abc", "123456789012345678901"] {
            assert!(parse_unix_seconds(bad).is_err(), "{bad}");
        }
    }

    /// The names logs and metrics use; changing one breaks dashboards.
    #[test]
    fn kind_names_are_stable() {
        let cases = [
            (VerifyErrorKind::MissingHeader, "missing_header"),
            (VerifyErrorKind::MissingField, "missing_field"),
            (VerifyErrorKind::MalformedHeader, "malformed_header"),
            (VerifyErrorKind::NoMatchingSignature, "no_matching_signature"),
            (VerifyErrorKind::TimestampTooOld, "timestamp_too_old"),
            (VerifyErrorKind::TimestampInFuture, "timestamp_in_future"),
            (VerifyErrorKind::NoSecret, "no_secret"),
            (VerifyErrorKind::BodyUnavailable, "body_unavailable"),
        ];
        for (kind, name) in cases {
            assert_eq!(kind.as_str(), name, "{kind:?}");
            assert_eq!(kind.to_string(), name, "{kind:?}");
        }
    }

    #[test]
    fn millisecond_tolerance() {
        let now = UNIX_EPOCH + Duration::from_millis(1_000_000_000);
        let tol = Duration::from_secs(1);
        let cases = [
            ("edge past", 1_000_000_000 - 1_000, Ok(())),
            ("edge future", 1_000_000_000 + 1_000, Ok(())),
            ("a millisecond too old", 1_000_000_000 - 1_001, Err(VerifyErrorKind::TimestampTooOld)),
            ("a millisecond too new", 1_000_000_000 + 1_001, Err(VerifyErrorKind::TimestampInFuture)),
        ];
        for (name, ms, want) in cases {
            assert_eq!(check_tolerance_millis(ms, now, tol).map_err(|e| e.kind()), want, "{name}");
        }
        assert_eq!(parse_unix_millis("1700000000123").unwrap(), 1_700_000_000_123);
        assert!(parse_unix_millis("1.5").is_err());
    }

    #[test]
    fn any_matches_finds_any_position() {
        assert!(any_matches(b"abc", [&b"xyz"[..], b"abc"]));
        assert!(!any_matches(b"abc", [&b"xyz"[..], b"ab"]));
        assert!(!any_matches(b"abc", []));
    }
}
