//! [`HmacVerifierBuilder`]: an HMAC scheme described piece by piece, checked
//! once at build.

use std::time::Duration;

use http::HeaderName;

use super::{HmacVerifier, Quirks, SignedContent, TimestampFormat};
use crate::error::ConfigError;
use crate::verify::{Algorithm, Boundary, Encoding};

/// Builder for [`HmacVerifier`]; defaults: HMAC-SHA256, hex, no prefix, the
/// body alone, one signature per header line, timestamps in Unix seconds,
/// tolerance 300 seconds.
#[derive(Debug, Clone)]
#[must_use]
pub struct HmacVerifierBuilder {
    header: Result<HeaderName, String>,
    inner: HmacVerifier,
    timestamp_header: Option<Result<HeaderName, String>>,
    id_header: Option<Result<HeaderName, String>>,
    extra_headers: Vec<Result<HeaderName, String>>,
}

fn header_name(name: &str) -> Result<HeaderName, String> {
    HeaderName::try_from(name).map_err(|_| format!("invalid header name {name:?}"))
}

impl HmacVerifier {
    /// Starts a verifier reading signatures from header `signature_header`
    /// (case-insensitive).
    pub fn builder(signature_header: &str) -> HmacVerifierBuilder {
        HmacVerifierBuilder {
            header: header_name(signature_header),
            inner: HmacVerifier {
                header: HeaderName::from_static("x-signature"),
                algorithm: Algorithm::Sha256,
                encoding: Encoding::Hex,
                prefix: String::new(),
                signature_key: None,
                timestamp_key: None,
                content: SignedContent::Body,
                content_prefix: String::new(),
                timestamp_header: None,
                timestamp_format: TimestampFormat::UnixSeconds,
                id_header: None,
                tolerance: Duration::from_secs(300),
                boundary: Boundary::Inclusive,
                separator: None,
                strict: false,
                extra_headers: Vec::new(),
                quirks: Quirks::NONE,
            },
            timestamp_header: None,
            id_header: None,
            extra_headers: Vec::new(),
        }
    }
}

impl HmacVerifierBuilder {
    setters! {
        /// The HMAC hash (default SHA-256).
        pub fn algorithm(algorithm: Algorithm) => inner.algorithm = algorithm;

        /// How signatures are written (default hex).
        pub fn encoding(encoding: Encoding) => inner.encoding = encoding;

        /// Text before each signature (`sha256=`, `v1=`, `v1,`); entries without
        /// it are ignored as other schemes. Not with [`key_value`](Self::key_value).
        pub fn prefix(prefix: impl Into<String>) => inner.prefix = prefix.into();

        /// The signature header is a list of `key=value` entries (Stripe's
        /// `t=...,v1=...`, Paddle's `ts=...;h1=...`, PagerDuty's `v1=...,v1=...`,
        /// Zoom's `v0=...`), separated by
        /// [`signature_separator`](Self::signature_separator) if set: values
        /// under `signature_key` are signatures, each exactly one tag (a value
        /// that is not is skipped, or malformed when [`strict`](Self::strict));
        /// other keys are ignored; an entry without `=` is
        /// [`VerifyErrorKind::MalformedHeader`](crate::verify::VerifyErrorKind::MalformedHeader).
        /// A header with no signature under the key is
        /// [`VerifyErrorKind::NoMatchingSignature`](crate::verify::VerifyErrorKind::NoMatchingSignature).
        pub fn key_value(signature_key: impl Into<String>) => inner.signature_key = Some(signature_key.into());

        /// The signed timestamp is the `key=value` header's entry under
        /// `timestamp_key` (Stripe's `t`, Paddle's `ts`) instead of a header of
        /// its own; missing, or given twice with different values, it is
        /// [`VerifyErrorKind::MalformedHeader`](crate::verify::VerifyErrorKind::MalformedHeader). Needs
        /// [`key_value`](Self::key_value) and
        /// [`signature_separator`](Self::signature_separator).
        pub fn timestamp_key(timestamp_key: impl Into<String>) => inner.timestamp_key = Some(timestamp_key.into());

        /// What is signed (default: the body alone).
        pub fn signed_content(content: SignedContent) => inner.content = content;

        /// Literal text signed before the [`SignedContent`] (Slack's and Zoom's
        /// `v0:` in `v0:{timestamp}:{body}`).
        pub fn content_prefix(literal: impl Into<String>) => inner.content_prefix = literal.into();

        /// The header carrying the signed timestamp (in the
        /// [`timestamp_format`](Self::timestamp_format), Unix seconds by default).
        pub fn timestamp_header(name: &str) => timestamp_header = Some(header_name(name));

        /// How the signed timestamp is written (default Unix seconds).
        pub fn timestamp_format(format: TimestampFormat) => inner.timestamp_format = format;

        /// The header carrying the message id that is signed.
        pub fn id_header(name: &str) => id_header = Some(header_name(name));

        /// How far the timestamp may be from now, both directions (default 300 s).
        pub fn tolerance(tolerance: Duration) => inner.tolerance = tolerance;

        /// What a timestamp exactly the tolerance away gets, as the sender's
        /// SDK decides it (default [`Boundary::Inclusive`]: accepted).
        pub fn tolerance_boundary(boundary: Boundary) => inner.boundary = boundary;

        /// Several signatures in one header value, separated by `separator`
        /// (`' '` for Standard Webhooks, `','` for PagerDuty). Any one matching
        /// passes.
        pub fn signature_separator(separator: char) => inner.separator = Some(separator);
    }

    /// Every signature must decode to exactly one tag of the algorithm's
    /// length (20, 32 or 64 bytes), and, for a prefixed header, every entry
    /// must carry the prefix; anything else in the header is
    /// [`VerifyErrorKind::MalformedHeader`](crate::verify::VerifyErrorKind::MalformedHeader) instead of being skipped as
    /// another scheme. For senders with a single documented format
    /// (GitHub's `sha256=`, Shopify's base64, Zoom's `v0=`), where a stray
    /// value is a broken sender or a forgery, not a future version.
    pub fn strict(mut self) -> Self {
        self.inner.strict = true;
        self
    }

    /// Another header carrying signatures in the same format (Shopify's
    /// `Shopify-Hmac-Sha256` next to `X-Shopify-Hmac-Sha256`); the
    /// signatures of all of them are tried.
    pub fn also_header(mut self, name: &str) -> Self {
        self.extra_headers.push(header_name(name));
        self
    }

    setters! {
        /// A preset's departures from the uniform behaviour
        /// ([`Quirks::SLACK`], [`Quirks::STRIPE`], [`Quirks::SQUARE`]).
        #[cfg_attr(not(any(feature = "slack", feature = "stripe", feature = "square")), allow(dead_code))]
        pub(crate) fn quirks(quirks: Quirks) => inner.quirks = quirks;
    }

    /// Checks the configuration.
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid header name; a timestamped content
    /// without a timestamp header or key, or with both; a timestamp header or
    /// key without a timestamped content; an id content without an id
    /// header, or an id header without one; a timestamp key without
    /// `key_value` or a separator, or equal to the signature key; a prefix
    /// with `key_value`; an empty URL.
    pub fn build(self) -> Result<HmacVerifier, ConfigError> {
        let mut v = self.inner;
        v.header = self.header.map_err(ConfigError::new)?;
        v.timestamp_header = self.timestamp_header.transpose().map_err(ConfigError::new)?;
        v.id_header = self.id_header.transpose().map_err(ConfigError::new)?;
        v.extra_headers = self.extra_headers.into_iter().collect::<Result<_, _>>().map_err(ConfigError::new)?;
        let needs_ts = matches!(v.content, SignedContent::TimestampBody { .. } | SignedContent::IdTimestampBody { .. });
        let has_ts = v.timestamp_header.is_some() || v.timestamp_key.is_some();
        if needs_ts && !has_ts {
            return Err(ConfigError::new(
                "this signed content includes a timestamp: set timestamp_header or timestamp_key",
            ));
        }
        if v.timestamp_header.is_some() && v.timestamp_key.is_some() {
            return Err(ConfigError::new("set timestamp_header or timestamp_key, not both"));
        }
        if matches!(v.content, SignedContent::IdTimestampBody { .. }) && v.id_header.is_none() {
            return Err(ConfigError::new("this signed content includes a message id: set id_header"));
        }
        // A timestamp or id the signature does not cover would be a window the
        // sender's attacker sets: refuse the configuration.
        if !needs_ts && has_ts {
            return Err(ConfigError::new("a timestamp is read but the signed content has no timestamp"));
        }
        if !matches!(v.content, SignedContent::IdTimestampBody { .. }) && v.id_header.is_some() {
            return Err(ConfigError::new("id_header is set but the signed content has no id"));
        }
        match (&v.signature_key, &v.timestamp_key) {
            (None, Some(_)) => return Err(ConfigError::new("timestamp_key needs key_value")),
            (Some(_), _) if !v.prefix.is_empty() => {
                return Err(ConfigError::new("a prefix and key_value exclude each other"));
            }
            (Some(key), Some(ts_key)) if key == ts_key => {
                return Err(ConfigError::new("timestamp_key equals the signature key"));
            }
            (Some(_), Some(_)) if v.separator.is_none() => {
                return Err(ConfigError::new("timestamp_key needs signature_separator"));
            }
            _ => {}
        }
        if matches!(&v.content, SignedContent::UrlBody { url } if url.is_empty()) && !v.quirks.empty_url {
            return Err(ConfigError::new("the signed URL is empty"));
        }
        Ok(v)
    }
}
