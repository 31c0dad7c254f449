//! A configurable HMAC verifier for senders without a preset.
//!
//! Most webhook schemes are one HMAC over some arrangement of the raw body,
//! a signed timestamp, a message id or the endpoint URL, written in a header
//! as hex or base64 behind a prefix, sometimes several at once during secret
//! rotation. [`HmacVerifier`] covers that family:
//!
//! ```
//! use std::time::Duration;
//! use webhook_idempotency::verify::generic::{HmacVerifier, SignedContent};
//! use webhook_idempotency::verify::{Algorithm, Encoding};
//!
//! // "X-Acme-Signature: t=..."-less scheme: hex HMAC-SHA512 of "{ts}.{body}",
//! // timestamp in X-Acme-Timestamp, several space-separated signatures.
//! let verifier = HmacVerifier::builder("x-acme-signature")
//!     .algorithm(Algorithm::Sha512)
//!     .encoding(Encoding::Hex)
//!     .prefix("v1=")
//!     .signed_content(SignedContent::TimestampBody { separator: ".".into() })
//!     .timestamp_header("x-acme-timestamp")
//!     .tolerance(Duration::from_secs(300))
//!     .signature_separator(' ')
//!     .build()
//!     .unwrap();
//! # let _ = verifier;
//! ```

use std::time::Duration;

use http::HeaderName;

use super::{
    header_values, hmac, match_any_secret, parse_unix_seconds, single_header, Algorithm, Delivery, Encoding,
    SigningSecret, Verifier, VerifyError, VerifyErrorKind,
};
use crate::ConfigError;

/// What the sender signs, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignedContent {
    /// The raw body alone (GitHub, Shopify).
    Body,
    /// `{timestamp}{separator}{body}` (Stripe uses `.`, Paddle `:`); needs
    /// [`HmacVerifierBuilder::timestamp_header`].
    TimestampBody {
        /// Bytes between the timestamp and the body.
        separator: String,
    },
    /// `{id}{separator}{timestamp}{separator}{body}` (Standard Webhooks uses
    /// `.`); needs a timestamp header and [`HmacVerifierBuilder::id_header`].
    IdTimestampBody {
        /// Bytes between the parts.
        separator: String,
    },
    /// `{url}{body}` with the URL the endpoint is registered under, from
    /// configuration (never from the request).
    UrlBody {
        /// The registered endpoint URL, byte for byte.
        url: String,
    },
}

/// A verifier built by [`HmacVerifier::builder`].
#[derive(Debug, Clone)]
pub struct HmacVerifier {
    header: HeaderName,
    algorithm: Algorithm,
    encoding: Encoding,
    prefix: String,
    content: SignedContent,
    timestamp_header: Option<HeaderName>,
    id_header: Option<HeaderName>,
    tolerance: Duration,
    separator: Option<char>,
    strict: bool,
    extra_headers: Vec<HeaderName>,
}

/// Builder for [`HmacVerifier`]; defaults: HMAC-SHA256, hex, no prefix, the
/// body alone, one signature per header line, tolerance 300 seconds.
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
                content: SignedContent::Body,
                timestamp_header: None,
                id_header: None,
                tolerance: Duration::from_secs(300),
                separator: None,
                strict: false,
                extra_headers: Vec::new(),
            },
            timestamp_header: None,
            id_header: None,
            extra_headers: Vec::new(),
        }
    }

    /// Every signature in the header(s), decoded. Entries without the prefix
    /// (other schemes, other versions) are ignored, unless
    /// [`HmacVerifierBuilder::strict`] makes them malformed.
    fn signatures(&self, parts: &http::request::Parts) -> Result<Vec<Vec<u8>>, VerifyError> {
        let mut found = Vec::new();
        let mut seen_header = false;
        let mut seen_entry = false;
        let tag_len = self.algorithm.tag_len();
        // The longest encoding of a tag of this length (hex; base64 is shorter).
        let max_encoded = 2 * tag_len;
        for name in std::iter::once(&self.header).chain(&self.extra_headers) {
            for value in header_values(parts, name.as_str()) {
                seen_header = true;
                let value = value?;
                let entries: Box<dyn Iterator<Item = &str>> = match self.separator {
                    Some(sep) => Box::new(value.split(sep)),
                    None => Box::new(std::iter::once(value)),
                };
                for entry in entries.map(str::trim).filter(|e| !e.is_empty()) {
                    let Some(encoded) = entry.strip_prefix(self.prefix.as_str()) else {
                        if self.strict {
                            return Err(VerifyErrorKind::MalformedHeader.into());
                        }
                        continue;
                    };
                    seen_entry = true;
                    if self.strict {
                        // Exactly one tag of the algorithm's length; a long
                        // value is refused before it is decoded.
                        let sig = (encoded.len() <= max_encoded)
                            .then(|| self.encoding.decode(encoded))
                            .flatten()
                            .filter(|sig| sig.len() == tag_len)
                            .ok_or(VerifyErrorKind::MalformedHeader)?;
                        found.push(sig);
                    } else if let Some(sig) = self.encoding.decode(encoded) {
                        found.push(sig);
                    }
                }
            }
        }
        match (seen_header, seen_entry, found.is_empty()) {
            (false, _, _) => Err(VerifyErrorKind::MissingHeader.into()),
            (true, false, _) | (true, true, true) => Err(VerifyErrorKind::MalformedHeader.into()),
            _ => Ok(found),
        }
    }

    /// The header value this scheme would carry for `body` (and `id`,
    /// `timestamp` in Unix seconds where the content includes them), signed
    /// with `secret`. For tests and fixtures.
    pub fn sign(&self, secret: &SigningSecret, id: &str, timestamp: u64, body: &[u8]) -> String {
        let ts = timestamp.to_string();
        let tag = hmac(self.algorithm, secret, &self.content_parts(id.as_bytes(), ts.as_bytes(), body));
        format!("{}{}", self.prefix, self.encoding.encode(tag.as_ref()))
    }

    fn content_parts<'a>(&'a self, id: &'a [u8], ts: &'a [u8], body: &'a [u8]) -> Vec<&'a [u8]> {
        match &self.content {
            SignedContent::Body => vec![body],
            SignedContent::TimestampBody { separator } => vec![ts, separator.as_bytes(), body],
            SignedContent::IdTimestampBody { separator } => {
                vec![id, separator.as_bytes(), ts, separator.as_bytes(), body]
            }
            SignedContent::UrlBody { url } => vec![url.as_bytes(), body],
        }
    }
}

impl HmacVerifierBuilder {
    /// The HMAC hash (default SHA-256).
    pub fn algorithm(mut self, algorithm: Algorithm) -> Self {
        self.inner.algorithm = algorithm;
        self
    }

    /// How signatures are written (default hex).
    pub fn encoding(mut self, encoding: Encoding) -> Self {
        self.inner.encoding = encoding;
        self
    }

    /// Text before each signature (`sha256=`, `v1=`, `v1,`); entries without
    /// it are ignored as other schemes.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.inner.prefix = prefix.into();
        self
    }

    /// What is signed (default: the body alone).
    pub fn signed_content(mut self, content: SignedContent) -> Self {
        self.inner.content = content;
        self
    }

    /// The header carrying the signed Unix timestamp in seconds.
    pub fn timestamp_header(mut self, name: &str) -> Self {
        self.timestamp_header = Some(header_name(name));
        self
    }

    /// The header carrying the message id that is signed.
    pub fn id_header(mut self, name: &str) -> Self {
        self.id_header = Some(header_name(name));
        self
    }

    /// How far the timestamp may be from now, both directions (default 300 s).
    pub fn tolerance(mut self, tolerance: Duration) -> Self {
        self.inner.tolerance = tolerance;
        self
    }

    /// Several signatures in one header value, separated by `separator`
    /// (`' '` for Standard Webhooks, `','` for PagerDuty). Any one matching
    /// passes.
    pub fn signature_separator(mut self, separator: char) -> Self {
        self.inner.separator = Some(separator);
        self
    }

    /// Every entry must carry the prefix and decode to exactly one tag of
    /// the algorithm's length (20, 32 or 64 bytes); anything else in the
    /// header is [`VerifyErrorKind::MalformedHeader`] instead of being
    /// skipped as another scheme. For senders with a single documented
    /// format (GitHub's `sha256=`, Shopify's base64), where a stray value
    /// is a broken sender or a forgery, not a future version.
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

    /// Checks the configuration.
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid header name, a timestamped content
    /// without a timestamp header, an id content without an id header, or
    /// an empty URL.
    pub fn build(self) -> Result<HmacVerifier, ConfigError> {
        let mut v = self.inner;
        v.header = self.header.map_err(ConfigError::new)?;
        v.timestamp_header = self.timestamp_header.transpose().map_err(ConfigError::new)?;
        v.id_header = self.id_header.transpose().map_err(ConfigError::new)?;
        v.extra_headers = self.extra_headers.into_iter().collect::<Result<_, _>>().map_err(ConfigError::new)?;
        let needs_ts = matches!(v.content, SignedContent::TimestampBody { .. } | SignedContent::IdTimestampBody { .. });
        if needs_ts && v.timestamp_header.is_none() {
            return Err(ConfigError::new("this signed content includes a timestamp: set timestamp_header"));
        }
        if matches!(v.content, SignedContent::IdTimestampBody { .. }) && v.id_header.is_none() {
            return Err(ConfigError::new("this signed content includes a message id: set id_header"));
        }
        // A timestamp or id the signature does not cover would be a window the
        // sender's attacker sets: refuse the configuration.
        if !needs_ts && v.timestamp_header.is_some() {
            return Err(ConfigError::new("timestamp_header is set but the signed content has no timestamp"));
        }
        if !matches!(v.content, SignedContent::IdTimestampBody { .. }) && v.id_header.is_some() {
            return Err(ConfigError::new("id_header is set but the signed content has no id"));
        }
        if matches!(&v.content, SignedContent::UrlBody { url } if url.is_empty()) {
            return Err(ConfigError::new("the signed URL is empty"));
        }
        Ok(v)
    }
}

impl Verifier for HmacVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        self.signatures(parts)?;
        if let Some(ts) = &self.timestamp_header {
            parse_unix_seconds(single_header(parts, ts.as_str())?)?;
        }
        if let Some(id) = &self.id_header {
            single_header(parts, id.as_str())?;
        }
        Ok(())
    }

    fn verify(&self, d: &Delivery<'_>) -> Result<(), VerifyError> {
        let signatures = self.signatures(d.parts)?;
        let ts_text = self.timestamp_header.as_ref().map(|h| single_header(d.parts, h.as_str())).transpose()?;
        let timestamp = ts_text.map(parse_unix_seconds).transpose()?;
        let id = self.id_header.as_ref().map(|h| single_header(d.parts, h.as_str())).transpose()?;
        let parts =
            self.content_parts(id.unwrap_or_default().as_bytes(), ts_text.unwrap_or_default().as_bytes(), d.body);
        match_any_secret(d, signatures.iter().map(Vec::as_slice), |secret| hmac(self.algorithm, secret, &parts))?;
        match timestamp {
            Some(ts) => d.check_time(ts, self.tolerance),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;

    const NOW: u64 = 1_700_000_000;

    fn parts(headers: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::builder();
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// The generic builder reproduces the Stripe and GitHub presets.
    #[test]
    fn reproduces_github_and_stripe() {
        let gh = HmacVerifier::builder("x-hub-signature-256").prefix("sha256=").build().unwrap();
        let secret = SigningSecret::from("It's a Secret to Everybody");
        assert_eq!(
            gh.sign(&secret, "", 0, b"Hello, World!"),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
        let stripe_like = HmacVerifier::builder("x-sig")
            .prefix("v1=")
            .signed_content(SignedContent::TimestampBody { separator: ".".into() })
            .timestamp_header("x-ts")
            .signature_separator(',')
            .build()
            .unwrap();
        let s = SigningSecret::from("whsec_x");
        let expected = crate::verify::hmac_sha256(&s, &[b"1700000000", b".", b"{}"]);
        assert_eq!(stripe_like.sign(&s, "", NOW, b"{}"), format!("v1={}", hex::encode(expected)));
    }

    #[test]
    fn verify_cases() {
        let v = HmacVerifier::builder("webhook-signature")
            .encoding(Encoding::Base64)
            .prefix("v1,")
            .signed_content(SignedContent::IdTimestampBody { separator: ".".into() })
            .timestamp_header("webhook-timestamp")
            .id_header("webhook-id")
            .signature_separator(' ')
            .build()
            .unwrap();
        let secret = SigningSecret::from("k");
        let other = SigningSecret::from("other");
        let body: &[u8] = b"{\"a\":1}";
        let good = v.sign(&secret, "msg_1", NOW, body);
        let theirs = v.sign(&other, "msg_1", NOW, body);
        let rotated = format!("v1a,AAAA {theirs} {good}");
        let ts = NOW.to_string();
        let with =
            |sig: &str| parts(&[("webhook-signature", sig), ("webhook-timestamp", &ts), ("webhook-id", "msg_1")]);
        let cases: Vec<(&str, http::request::Parts, &[u8], u64, Result<(), VerifyErrorKind>)> = vec![
            ("valid", with(&good), body, NOW, Ok(())),
            ("rotation, unknown scheme ignored", with(&rotated), body, NOW, Ok(())),
            ("tampered", with(&good), b"{\"a\":2}", NOW, Err(VerifyErrorKind::NoMatchingSignature)),
            ("wrong secret", with(&theirs), body, NOW, Err(VerifyErrorKind::NoMatchingSignature)),
            ("stale", with(&good), body, NOW + 301, Err(VerifyErrorKind::TimestampTooOld)),
            ("future", with(&good), body, NOW - 301, Err(VerifyErrorKind::TimestampInFuture)),
            ("only other schemes", with("v2,abc"), body, NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("bad base64", with("v1,!!!"), body, NOW, Err(VerifyErrorKind::MalformedHeader)),
            (
                "missing",
                parts(&[("webhook-timestamp", &ts), ("webhook-id", "msg_1")]),
                body,
                NOW,
                Err(VerifyErrorKind::MissingHeader),
            ),
            (
                "other id",
                parts(&[("webhook-signature", &good), ("webhook-timestamp", &ts), ("webhook-id", "msg_2")]),
                body,
                NOW,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
        ];
        for (name, p, body, now, want) in cases {
            let got = v.verify(&Delivery::new(&p, body, std::slice::from_ref(&secret), at(now)));
            assert_eq!(got.map_err(|e| e.kind()), want, "{name}");
        }
    }

    #[test]
    fn strict_entries_and_extra_headers() {
        let strict = HmacVerifier::builder("x-sig").prefix("sha256=").strict().also_header("x-sig-2").build().unwrap();
        let lenient = HmacVerifier::builder("x-sig").prefix("sha256=").build().unwrap();
        let secret = SigningSecret::from("k");
        let good = strict.sign(&secret, "", 0, b"{}");
        let short = format!("sha256={}", "ab".repeat(31));
        let long = format!("sha256={}", "ab".repeat(33));
        type Want = (Result<(), VerifyErrorKind>, Result<(), VerifyErrorKind>);
        let cases: Vec<(&str, Vec<(&str, &str)>, Want)> = vec![
            ("valid", vec![("x-sig", &good)], (Ok(()), Ok(()))),
            ("extra header", vec![("x-sig-2", &good)], (Ok(()), Err(VerifyErrorKind::MissingHeader))),
            (
                "other prefix beside a good line",
                vec![("x-sig", "sha1=00"), ("x-sig", &good)],
                (Err(VerifyErrorKind::MalformedHeader), Ok(())),
            ),
            (
                "short tag",
                vec![("x-sig", &short)],
                (Err(VerifyErrorKind::MalformedHeader), Err(VerifyErrorKind::NoMatchingSignature)),
            ),
            (
                "long tag",
                vec![("x-sig", &long)],
                (Err(VerifyErrorKind::MalformedHeader), Err(VerifyErrorKind::NoMatchingSignature)),
            ),
            ("missing", vec![], (Err(VerifyErrorKind::MissingHeader), Err(VerifyErrorKind::MissingHeader))),
        ];
        for (name, headers, (want_strict, want_lenient)) in cases {
            let p = parts(&headers);
            let d = Delivery::new(&p, b"{}", std::slice::from_ref(&secret), at(NOW));
            assert_eq!(strict.verify(&d).map_err(|e| e.kind()), want_strict, "{name} strict");
            assert_eq!(lenient.verify(&d).map_err(|e| e.kind()), want_lenient, "{name} lenient");
        }
    }

    #[test]
    fn build_errors() {
        let cases = [
            ("bad header", HmacVerifier::builder("bad header").build().err()),
            (
                "timestamp content without header",
                HmacVerifier::builder("x")
                    .signed_content(SignedContent::TimestampBody { separator: ".".into() })
                    .build()
                    .err(),
            ),
            (
                "id content without id header",
                HmacVerifier::builder("x")
                    .signed_content(SignedContent::IdTimestampBody { separator: ".".into() })
                    .timestamp_header("t")
                    .build()
                    .err(),
            ),
            ("unsigned timestamp header", HmacVerifier::builder("x").timestamp_header("x-ts").build().err()),
            ("unsigned id header", HmacVerifier::builder("x").id_header("x-id").build().err()),
            (
                "empty url",
                HmacVerifier::builder("x").signed_content(SignedContent::UrlBody { url: String::new() }).build().err(),
            ),
        ];
        for (name, err) in cases {
            assert!(err.is_some(), "{name}");
        }
    }
}
