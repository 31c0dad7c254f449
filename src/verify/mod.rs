//! Signature verification over the raw request bytes.
//!
//! A [`Verifier`] sees a [`Delivery`]: the request head, the body exactly as
//! received, the signing secrets resolved for the endpoint, and the current
//! time from the layer's [`Clock`]. It answers `Ok(())` or a [`VerifyError`]
//! whose [`kind`](VerifyError::kind) is logged; the HTTP answer is always a
//! bare 401.
//!
//! This module holds the primitives every verifier shares ([`Delivery`],
//! [`SigningSecret`], the errors, [`hmac()`], [`match_any_secret`]).
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

use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

pub mod generic;

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
        if self.check_timestamp {
            check_tolerance(timestamp, self.now, tolerance)
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
        if self.check_timestamp {
            check_tolerance_millis(millis, self.now, tolerance)
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
    /// called by [`WebhookLayerBuilder::build`](crate::WebhookLayerBuilder::build)
    /// for fixed secrets (a failure is a [`ConfigError`](crate::ConfigError)
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

/// A signing secret, as the provider shows it (for example Stripe's
/// `whsec_...` string, used as the HMAC key byte for byte).
///
/// `Debug` prints `SigningSecret(<redacted>)`: secrets never reach logs.
///
/// A verifier that must decode or parse the secret (a base64 `whsec_` key, an
/// Ed25519 or P-256 public key) does it once per secret with
/// [`SigningSecret::parsed`]; clones share that cache, so a secret fixed on
/// the layer is decoded when the layer is built (by
/// [`Verifier::check_secrets`]), never per delivery.
#[derive(Clone)]
pub struct SigningSecret {
    bytes: Vec<u8>,
    parsed: Arc<OnceLock<Arc<dyn Any + Send + Sync>>>,
}

impl SigningSecret {
    /// A secret from its bytes, used as given (no trimming, no decoding).
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        Self { bytes: secret.into(), parsed: Arc::default() }
    }

    /// The secret's bytes, to key an HMAC.
    pub fn expose(&self) -> &[u8] {
        &self.bytes
    }

    /// The secret parsed by `parse` (a decoded key, a public key), computed
    /// on the first call and cached for this secret and its clones. When the
    /// cache already holds another type (two verifiers parsing one secret
    /// differently), the result is computed again and not cached.
    pub fn parsed<T: Any + Send + Sync>(&self, parse: impl FnOnce(&[u8]) -> T) -> Arc<T> {
        if let Some(cached) = self.parsed.get() {
            return Arc::clone(cached).downcast::<T>().unwrap_or_else(|_| Arc::new(parse(&self.bytes)));
        }
        let value = Arc::new(parse(&self.bytes));
        let _ = self.parsed.set(Arc::clone(&value) as Arc<dyn Any + Send + Sync>);
        value
    }

    /// True when the secret starts or ends with ASCII whitespace, almost
    /// always a configuration mistake (a trailing newline from a file or an
    /// environment variable). The layer refuses such fixed secrets at build.
    pub fn has_surrounding_whitespace(&self) -> bool {
        let ws = |b: &u8| b.is_ascii_whitespace();
        self.bytes.first().is_some_and(ws) || self.bytes.last().is_some_and(ws)
    }

    /// Constant-time comparison of the secret with `candidate` (for senders
    /// that send a shared token instead of a signature).
    pub fn matches(&self, candidate: &[u8]) -> bool {
        self.bytes.ct_eq(candidate).into()
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(<redacted>)")
    }
}

/// Redacted, like `Debug`.
impl fmt::Display for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
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
    /// A field the scheme reads from the body is absent (Mailgun's
    /// `signature` object, Linear's `webhookTimestamp`).
    MissingField,
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
    /// The body could not be read in full (the client aborted or the
    /// connection failed), so there was nothing to verify. The layer answers
    /// 400 for it.
    BodyUnavailable,
}

impl VerifyErrorKind {
    /// A stable `snake_case` name for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissingHeader => "missing_header",
            Self::MissingField => "missing_field",
            Self::MalformedHeader => "malformed_header",
            Self::NoMatchingSignature => "no_matching_signature",
            Self::TimestampTooOld => "timestamp_too_old",
            Self::TimestampInFuture => "timestamp_in_future",
            Self::NoSecret => "no_secret",
            Self::BodyUnavailable => "body_unavailable",
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

/// Why configured key material cannot authenticate deliveries. See
/// [`KeyMaterialError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyMaterialErrorKind {
    /// No secret is configured at all.
    NoSecret,
    /// A secret of zero bytes (what `${VAR}` gives for an unset variable):
    /// anyone can compute an HMAC with an empty key.
    Empty,
    /// A secret that is only a provider prefix (a bare `whsec_`), so no key
    /// follows it.
    OnlyPrefix,
    /// Not in the format the provider issues (a missing `whsec_` prefix,
    /// text that is not base64, a private key where a public one belongs).
    Malformed,
    /// Fewer key bytes than the provider's documented minimum.
    TooShort,
    /// More key bytes than the provider's documented maximum.
    TooLong,
    /// A public key that does not decode to a valid key (Ed25519, P-256).
    InvalidPublicKey,
}

impl KeyMaterialErrorKind {
    /// A stable `snake_case` name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSecret => "no_secret",
            Self::Empty => "empty_secret",
            Self::OnlyPrefix => "only_prefix",
            Self::Malformed => "malformed_secret",
            Self::TooShort => "secret_too_short",
            Self::TooLong => "secret_too_long",
            Self::InvalidPublicKey => "invalid_public_key",
        }
    }
}

impl fmt::Display for KeyMaterialErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Unusable key material, from [`Verifier::check_secrets`]: which secret (its
/// position in the configured list) and why, with a hint; never the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyMaterialError {
    kind: KeyMaterialErrorKind,
    index: Option<usize>,
    hint: &'static str,
}

impl KeyMaterialError {
    /// An error of `kind` about the secret at `index` (0-based; `None` for
    /// the list as a whole), with a short `hint` on how to fix it.
    pub fn new(kind: KeyMaterialErrorKind, index: Option<usize>, hint: &'static str) -> Self {
        Self { kind, index, hint }
    }

    /// Why the key material is unusable.
    pub fn kind(&self) -> KeyMaterialErrorKind {
        self.kind
    }

    /// The position of the offending secret in the configured list, 0-based.
    pub fn index(&self) -> Option<usize> {
        self.index
    }
}

impl fmt::Display for KeyMaterialError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "signing secret #{} is unusable ({}): {}", i + 1, self.kind, self.hint),
            None => write!(f, "signing secrets unusable ({}): {}", self.kind, self.hint),
        }
    }
}

impl std::error::Error for KeyMaterialError {}

/// Prefixes providers print in front of key material; a secret that is only
/// one of them holds no key.
const BARE_PREFIXES: [&[u8]; 3] = [b"whsec_", b"whpk_", b"whsk_"];

/// The default [`Verifier::check_secrets`]: at least one secret, and none
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
}

impl Encoding {
    /// Decodes a signature; `None` when it is not valid in this encoding.
    pub fn decode(self, text: &str) -> Option<Vec<u8>> {
        use base64::Engine as _;
        match self {
            Self::Hex => hex::decode(text).ok(),
            Self::Base64 => base64::engine::general_purpose::STANDARD.decode(text).ok(),
        }
    }

    /// Encodes a tag the way a sender writes it (hex in lower case).
    pub fn encode(self, bytes: &[u8]) -> String {
        use base64::Engine as _;
        match self {
            Self::Hex => hex::encode(bytes),
            Self::Base64 => base64::engine::general_purpose::STANDARD.encode(bytes),
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

/// Checks a signed Unix timestamp (seconds) against `now`, `tolerance` in
/// both directions.
///
/// # Errors
/// [`VerifyErrorKind::TimestampTooOld`] or [`VerifyErrorKind::TimestampInFuture`].
pub fn check_tolerance(timestamp: u64, now: SystemTime, tolerance: Duration) -> Result<(), VerifyError> {
    check_signed_at(UNIX_EPOCH.checked_add(Duration::from_secs(timestamp)), now, tolerance)
}

/// Checks a signed Unix timestamp in **milliseconds** against `now`,
/// `tolerance` in both directions, to the millisecond (HubSpot, Linear).
///
/// # Errors
/// [`VerifyErrorKind::TimestampTooOld`] or [`VerifyErrorKind::TimestampInFuture`].
pub fn check_tolerance_millis(millis: u64, now: SystemTime, tolerance: Duration) -> Result<(), VerifyError> {
    check_signed_at(UNIX_EPOCH.checked_add(Duration::from_millis(millis)), now, tolerance)
}

fn check_signed_at(signed: Option<SystemTime>, now: SystemTime, tolerance: Duration) -> Result<(), VerifyError> {
    // Past what SystemTime can hold: certainly in the future.
    let Some(signed) = signed else {
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
