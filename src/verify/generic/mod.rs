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
//!
//! The same settings as a constant value: [`HmacScheme`] (one field per
//! builder setting, with the tolerance's source), which
//! `HmacVerifier::try_from(&scheme)` builds and checks. The HMAC presets are
//! such schemes in their facts (`providers::stripe::FACTS.scheme`), read by
//! this one verifier.
//!
//! Senders that send a static credential instead of a signature:
//! [`TokenHeaderVerifier`] (a shared token in a header) and
//! [`BasicAuthVerifier`] (HTTP Basic, RFC 7617).
//!
//! **Limits.** The signature header(s) may hold at most
//! [`MAX_SIGNATURE_HEADER_BYTES`](super::MAX_SIGNATURE_HEADER_BYTES) (4 KiB)
//! over all lines and [`MAX_SIGNATURE_ENTRIES`](super::MAX_SIGNATURE_ENTRIES)
//! (16) entries, else the delivery is
//! [`MalformedHeader`](super::VerifyErrorKind::MalformedHeader) before any
//! entry is decoded; the timestamp's age is checked before the HMAC.
//!
//! **Retention.** A preset states how long its provider can send one event
//! again (`providers::<name>::FACTS.replay_window`, with its source); a generic
//! provider has no such constant, since only you know the sender's retry
//! schedule and manual redelivery. State it where the keys are purged, with
//! [`RetentionBuilder::window`](crate::store::retention::RetentionBuilder::window)
//! under the provider's name; otherwise its rows are kept
//! [`DEFAULT_REPLAY_WINDOW`](crate::providers::DEFAULT_REPLAY_WINDOW)
//! (30 days), or the builder's
//! [`default_window`](crate::store::retention::RetentionBuilder::default_window).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderName;

mod builder;
mod scheme;
mod token;

pub use builder::HmacVerifierBuilder;
pub use scheme::{HmacScheme, Signed, Tolerance};
pub use token::{BasicAuthVerifier, TokenHeaderVerifier, MIN_CREDENTIAL_BYTES};

use super::{
    check_signature_header_size, count_entry, hmac, match_any_secret, parse_unix_millis, parse_unix_seconds,
    single_header, Algorithm, Boundary, Delivery, Encoding, SigningSecret, Verifier, VerifyError, VerifyErrorKind,
};

/// What the sender signs, in order, after the
/// [`content_prefix`](HmacVerifierBuilder::content_prefix) if one is set.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignedContent {
    /// The raw body alone (GitHub, Shopify).
    Body,
    /// `{timestamp}{separator}{body}` (Stripe uses `.`, Paddle `:`); needs
    /// [`HmacVerifierBuilder::timestamp_header`] or
    /// [`HmacVerifierBuilder::timestamp_key`]. The timestamp is signed as
    /// the text the sender sent, byte for byte.
    TimestampBody {
        /// Bytes between the timestamp and the body.
        separator: String,
    },
    /// `{id}{separator}{timestamp}{separator}{body}` (Standard Webhooks uses
    /// `.`, Twitch nothing); needs a timestamp and
    /// [`HmacVerifierBuilder::id_header`].
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

/// How the signed timestamp is written (default [`TimestampFormat::UnixSeconds`]).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum TimestampFormat {
    /// Unix seconds, ASCII digits only ([`parse_unix_seconds`]).
    UnixSeconds,
    /// Unix milliseconds, ASCII digits only ([`parse_unix_millis`]),
    /// checked against the tolerance to the millisecond.
    UnixMilliseconds,
    /// Other text (RFC 3339 `date-time`, as Twitch sends), read by a
    /// function returning Unix seconds (negative before 1970) or `None` when
    /// the text is not a timestamp, which is
    /// [`VerifyErrorKind::MalformedHeader`]. A time before 1970 is checked as
    /// 1970-01-01T00:00:00Z, as old as the check can tell. For RFC 3339,
    /// `time::OffsetDateTime::parse(text, &Rfc3339)` (crate `time`) is such
    /// a parser. [`HmacVerifier::sign`] writes such a timestamp as decimal
    /// seconds; [`TimestampFormat::Text`] says how to write it.
    Custom(fn(&str) -> Option<i64>),
    /// Other text read by `parse`, as [`TimestampFormat::Custom`], and
    /// written by `write` from Unix seconds for [`HmacVerifier::sign`] (RFC
    /// 3339 for Twitch and Zendesk).
    Text {
        /// Reads the text as Unix seconds; `None` when it is not a timestamp.
        parse: fn(&str) -> Option<i64>,
        /// Writes Unix seconds as the sender does.
        write: fn(u64) -> String,
    },
}

/// Departures from the builder's uniform behaviour that some presets keep so
/// their answers stay as they were (see `providers::conformance`). Set only
/// by the crate's presets, one preset's set each, through the `pub(crate)`
/// builder method `quirks`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quirks {
    /// The signature header must appear once (identical repeated lines
    /// allowed), else malformed: Slack.
    single_line: bool,
    /// The timestamp header's value is trimmed before it is parsed and
    /// signed: Slack.
    trim_timestamp: bool,
    /// The precheck passes a header holding no signature of the signature
    /// key (another version); `verify` still fails: Slack.
    precheck_without_signature: bool,
    /// Unix seconds may carry a leading `+` (Rust's `u64` parser): Stripe.
    plus_sign: bool,
    /// The timestamp is parsed by `verify` only, after the signatures are
    /// found, not by the precheck: Stripe.
    timestamp_in_verify_only: bool,
    /// An empty [`SignedContent::UrlBody`] URL is accepted: Square.
    empty_url: bool,
}

#[allow(dead_code)] // each preset uses its own set
impl Quirks {
    /// Slack's: the signature header must appear once (identical repeated
    /// lines pass), else it is malformed; the timestamp header is trimmed
    /// before it is parsed and signed; the precheck passes a header without
    /// a signature under the signature key (another version), which `verify`
    /// fails.
    pub(crate) const SLACK: Self =
        Self { single_line: true, trim_timestamp: true, precheck_without_signature: true, ..Self::NONE };
    /// Stripe's: Unix seconds may carry a leading `+`, and the timestamp is
    /// parsed by `verify` only, once a signature was found (the precheck
    /// checks it is present).
    pub(crate) const STRIPE: Self = Self { plus_sign: true, timestamp_in_verify_only: true, ..Self::NONE };
    /// Square's: an empty [`SignedContent::UrlBody`] URL is accepted (its
    /// verifier's constructor is infallible).
    pub(crate) const SQUARE: Self = Self { empty_url: true, ..Self::NONE };
    /// None: the builder's uniform behaviour, every other preset's.
    pub(crate) const NONE: Self = Self {
        single_line: false,
        trim_timestamp: false,
        precheck_without_signature: false,
        plus_sign: false,
        timestamp_in_verify_only: false,
        empty_url: false,
    };
}

/// A verifier built by [`HmacVerifier::builder`].
#[derive(Debug, Clone)]
pub struct HmacVerifier {
    header: HeaderName,
    algorithm: Algorithm,
    encoding: Encoding,
    prefix: String,
    signature_key: Option<String>,
    timestamp_key: Option<String>,
    content: SignedContent,
    content_prefix: String,
    timestamp_header: Option<HeaderName>,
    timestamp_format: TimestampFormat,
    id_header: Option<HeaderName>,
    tolerance: Duration,
    boundary: Boundary,
    separator: Option<char>,
    strict: bool,
    extra_headers: Vec<HeaderName>,
    quirks: Quirks,
}

/// What the signature header(s) hold: the decoded signatures and, for a
/// `key=value` header with a timestamp key, the timestamp as sent.
struct Found<'a> {
    signatures: Vec<Vec<u8>>,
    timestamp: Option<&'a str>,
}

/// A delivery's head, read: signatures, the signed id and timestamp text as
/// sent, and the timestamp in Unix seconds when it was parsed.
struct Parsed<'a> {
    signatures: Vec<Vec<u8>>,
    id: Option<&'a str>,
    timestamp: Option<&'a str>,
    time: Option<SignedTime>,
}

/// A parsed signed timestamp, in the unit it was sent in.
#[derive(Clone, Copy)]
enum SignedTime {
    Seconds(u64),
    Millis(u64),
}

impl HmacVerifier {
    /// One tag of the algorithm's length (20, 32 or 64 bytes) from `encoded`;
    /// a value longer than any encoding of one is refused before decoding.
    fn decode_exact(&self, encoded: &str) -> Option<Vec<u8>> {
        let tag_len = self.algorithm.tag_len();
        // The longest encoding of a tag of this length (hex; base64 is shorter).
        (encoded.len() <= 2 * tag_len)
            .then(|| self.encoding.decode(encoded))
            .flatten()
            .filter(|sig| sig.len() == tag_len)
    }

    /// Every signature in the header(s), decoded, and the timestamp of a
    /// `key=value` header.
    ///
    /// Prefixed entries: those without the prefix (other schemes, other
    /// versions) are ignored, unless [`HmacVerifierBuilder::strict`] makes
    /// them malformed; none left is malformed.
    ///
    /// `key=value` entries: an entry without `=` is malformed; other keys are
    /// ignored; a signature value that is not exactly one tag is skipped, or
    /// malformed when strict.
    fn signatures<'a>(&self, parts: &'a http::request::Parts) -> Result<Found<'a>, VerifyError> {
        let mut found = Found { signatures: Vec::new(), timestamp: None };
        let mut seen_header = false;
        let mut entries_seen = 0usize;
        for name in std::iter::once(&self.header).chain(&self.extra_headers) {
            check_signature_header_size(parts, name.as_str())?;
            let lines: Vec<Result<&str, VerifyError>> = if self.quirks.single_line {
                match single_header(parts, name.as_str()) {
                    Err(e) if e.kind() == VerifyErrorKind::MissingHeader => Vec::new(),
                    line => vec![line],
                }
            } else {
                // Not `header_values`, whose items borrow the name (`self`).
                let malformed = |_| VerifyError::from(VerifyErrorKind::MalformedHeader);
                parts.headers.get_all(name).iter().map(|v| v.to_str().map_err(malformed)).collect()
            };
            for value in lines {
                seen_header = true;
                let value = value?;
                let entries: Box<dyn Iterator<Item = &str>> = match self.separator {
                    Some(sep) => Box::new(value.split(sep)),
                    None => Box::new(std::iter::once(value)),
                };
                let counted: Vec<&str> =
                    entries.map(|entry| count_entry(&mut entries_seen).map(|()| entry)).collect::<Result<_, _>>()?;
                match &self.signature_key {
                    None => self.prefixed_entries(counted.into_iter(), &mut found.signatures)?,
                    Some(key) => self.key_value_entries(key, counted.into_iter(), &mut found)?,
                }
            }
        }
        if !seen_header {
            return Err(VerifyErrorKind::MissingHeader.into());
        }
        if self.signature_key.is_none() && found.signatures.is_empty() {
            return Err(VerifyErrorKind::MalformedHeader.into());
        }
        Ok(found)
    }

    fn prefixed_entries<'a>(
        &self,
        entries: impl Iterator<Item = &'a str>,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(), VerifyError> {
        for entry in entries.map(str::trim).filter(|e| !e.is_empty()) {
            let Some(encoded) = entry.strip_prefix(self.prefix.as_str()) else {
                if self.strict {
                    return Err(VerifyErrorKind::MalformedHeader.into());
                }
                continue;
            };
            if self.strict {
                out.push(self.decode_exact(encoded).ok_or(VerifyErrorKind::MalformedHeader)?);
            } else if let Some(sig) = self.encoding.decode(encoded) {
                out.push(sig);
            }
        }
        Ok(())
    }

    fn key_value_entries<'a>(
        &self,
        signature_key: &str,
        entries: impl Iterator<Item = &'a str>,
        found: &mut Found<'a>,
    ) -> Result<(), VerifyError> {
        for entry in entries.map(str::trim) {
            let (key, value) = entry.split_once('=').ok_or(VerifyErrorKind::MalformedHeader)?;
            if Some(key) == self.timestamp_key.as_deref() {
                // Two different timestamps make the header ambiguous.
                if found.timestamp.replace(value).is_some_and(|prev| prev != value) {
                    return Err(VerifyErrorKind::MalformedHeader.into());
                }
            } else if key == signature_key {
                match self.decode_exact(value) {
                    Some(sig) => found.signatures.push(sig),
                    None if self.strict => return Err(VerifyErrorKind::MalformedHeader.into()),
                    // Can never match: skipped like another version.
                    None => {}
                }
            }
        }
        Ok(())
    }

    /// The timestamp text, parsed in its format.
    fn parse_timestamp(&self, text: &str) -> Result<SignedTime, VerifyError> {
        let malformed = || VerifyError::from(VerifyErrorKind::MalformedHeader);
        match self.timestamp_format {
            TimestampFormat::UnixSeconds if self.quirks.plus_sign => {
                text.parse().map(SignedTime::Seconds).map_err(|_| malformed())
            }
            TimestampFormat::UnixSeconds => parse_unix_seconds(text).map(SignedTime::Seconds),
            TimestampFormat::UnixMilliseconds => parse_unix_millis(text).map(SignedTime::Millis),
            // Before 1970: as old as the check can tell.
            TimestampFormat::Custom(parse) | TimestampFormat::Text { parse, .. } => {
                parse(text).map(|s| SignedTime::Seconds(u64::try_from(s).unwrap_or(0))).ok_or_else(malformed)
            }
        }
    }

    /// Reads the head in a fixed order: the signature header(s), the id
    /// header, the timestamp, then whether any signature was found (with the
    /// Stripe quirk, the timestamp is parsed last).
    fn parse<'a>(&self, parts: &'a http::request::Parts, precheck: bool) -> Result<Parsed<'a>, VerifyError> {
        let found = self.signatures(parts)?;
        let id = self.id_header.as_ref().map(|h| single_header(parts, h.as_str())).transpose()?;
        let timestamp = match &self.timestamp_header {
            Some(h) => {
                let text = single_header(parts, h.as_str())?;
                Some(if self.quirks.trim_timestamp { text.trim() } else { text })
            }
            None if self.timestamp_key.is_some() => Some(found.timestamp.ok_or(VerifyErrorKind::MalformedHeader)?),
            None => None,
        };
        let late = self.quirks.timestamp_in_verify_only;
        let mut time = match timestamp {
            Some(text) if !late => Some(self.parse_timestamp(text)?),
            _ => None,
        };
        if found.signatures.is_empty() && !(precheck && self.quirks.precheck_without_signature) {
            return Err(VerifyErrorKind::NoMatchingSignature.into());
        }
        if let Some(text) = timestamp.filter(|_| late && !precheck) {
            time = Some(self.parse_timestamp(text)?);
        }
        Ok(Parsed { signatures: found.signatures, id, timestamp, time })
    }

    /// The header value this scheme would carry for `body` (and `id`,
    /// `timestamp` in Unix seconds where the content includes them), signed
    /// with `secret`: `{prefix}{tag}`, or `{timestamp key}={timestamp}
    /// {separator}{signature key}={tag}` for a `key=value` header. The
    /// timestamp is written in the configured format (decimal seconds for a
    /// [`TimestampFormat::Custom`] one). For tests and fixtures.
    pub fn sign(&self, secret: &SigningSecret, id: &str, timestamp: u64, body: &[u8]) -> String {
        let ts = self.write_time(timestamp, u128::from(timestamp) * 1000);
        self.sign_text(secret, id, &ts, body)
    }

    /// The timestamp text the sender writes for `at`, in the configured
    /// format: Unix seconds or milliseconds (rounded down; 0 before 1970),
    /// or the [`TimestampFormat::Text`] writer's (decimal seconds for a
    /// [`TimestampFormat::Custom`] one): the timestamp header of a test
    /// delivery signed at `at`.
    pub fn timestamp_text(&self, at: SystemTime) -> String {
        let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
        self.write_time(since.as_secs(), since.as_millis())
    }

    /// A time given both in Unix seconds and milliseconds, written in the
    /// configured format.
    fn write_time(&self, seconds: u64, millis: u128) -> String {
        match self.timestamp_format {
            TimestampFormat::UnixMilliseconds => millis.to_string(),
            TimestampFormat::Text { write, .. } => write(seconds),
            TimestampFormat::UnixSeconds | TimestampFormat::Custom(_) => seconds.to_string(),
        }
    }

    /// [`HmacVerifier::sign`] with the timestamp's text as sent, byte for byte.
    pub(crate) fn sign_text(&self, secret: &SigningSecret, id: &str, ts: &str, body: &[u8]) -> String {
        let tag = hmac(self.algorithm, secret, &self.content_parts(id.as_bytes(), ts.as_bytes(), body));
        let tag = self.encoding.encode(tag.as_ref());
        match (&self.signature_key, &self.timestamp_key) {
            (Some(key), Some(ts_key)) => format!("{ts_key}={ts}{}{key}={tag}", self.separator.unwrap_or(',')),
            (Some(key), None) => format!("{key}={tag}"),
            (None, _) => format!("{}{tag}", self.prefix),
        }
    }

    /// Sets how far, in both directions, the signed timestamp may be from
    /// the clock: a preset's verifier at another tolerance
    /// (`stripe::FACTS.verifier().tolerance(d)`). No effect on a scheme
    /// that signs no timestamp.
    pub fn tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// The scheme's [`Boundary`]: what a timestamp exactly the tolerance
    /// away gets (accepted unless the scheme states otherwise).
    pub fn boundary(&self) -> Boundary {
        self.boundary
    }

    fn content_parts<'a>(&'a self, id: &'a [u8], ts: &'a [u8], body: &'a [u8]) -> Vec<&'a [u8]> {
        let mut parts: Vec<&[u8]> = Vec::with_capacity(6);
        if !self.content_prefix.is_empty() {
            parts.push(self.content_prefix.as_bytes());
        }
        match &self.content {
            SignedContent::Body => parts.push(body),
            SignedContent::TimestampBody { separator } => parts.extend([ts, separator.as_bytes(), body]),
            SignedContent::IdTimestampBody { separator } => {
                parts.extend([id, separator.as_bytes(), ts, separator.as_bytes(), body]);
            }
            SignedContent::UrlBody { url } => parts.extend([url.as_bytes(), body]),
        }
        parts
    }
}

impl Verifier for HmacVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        self.parse(parts, true).map(drop)
    }

    fn verify(&self, d: &Delivery<'_>) -> Result<(), VerifyError> {
        let p = self.parse(d.parts, false)?;
        // Cheap checks first: the timestamp's age before any HMAC over the body.
        match p.time {
            Some(SignedTime::Seconds(ts)) => d.check_time_with(ts, self.tolerance, self.boundary)?,
            Some(SignedTime::Millis(ms)) => d.check_time_millis_with(ms, self.tolerance, self.boundary)?,
            None => {}
        }
        let parts =
            self.content_parts(p.id.unwrap_or_default().as_bytes(), p.timestamp.unwrap_or_default().as_bytes(), d.body);
        match_any_secret(d, p.signatures.iter().map(Vec::as_slice), |secret| hmac(self.algorithm, secret, &parts))
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::test_support::{at, headers as parts, NOW};

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

    /// `key=value` headers: the timestamp inside the header, a literal
    /// content prefix, milliseconds, and a custom timestamp parser.
    #[test]
    fn key_value_and_timestamp_formats() {
        let secret = SigningSecret::from("k");
        let body: &[u8] = b"{}";
        let inside = HmacVerifier::builder("x-sig")
            .key_value("v1")
            .timestamp_key("t")
            .signature_separator(',')
            .signed_content(SignedContent::TimestampBody { separator: ".".into() })
            .build()
            .unwrap();
        let good = inside.sign(&secret, "", NOW, body);
        assert_eq!(
            good,
            format!(
                "t={NOW},v1={}",
                hex::encode(crate::verify::hmac_sha256(&secret, &[NOW.to_string().as_bytes(), b".", body]))
            )
        );
        let millis = HmacVerifier::builder("x-sig")
            .key_value("v0")
            .strict()
            .timestamp_header("x-ts")
            .timestamp_format(TimestampFormat::UnixMilliseconds)
            .content_prefix("v0:")
            .signed_content(SignedContent::TimestampBody { separator: ":".into() })
            .build()
            .unwrap();
        let ms = (NOW * 1000).to_string();
        let ms_sig = millis.sign(&secret, "", NOW, body);
        let expected = crate::verify::hmac_sha256(&secret, &[b"v0:", ms.as_bytes(), b":", body]);
        assert_eq!(ms_sig, format!("v0={}", hex::encode(expected)));
        fn day_number(text: &str) -> Option<i64> {
            text.strip_prefix("day ")?.parse::<i64>().ok().map(|d| d * 86_400)
        }
        let custom = HmacVerifier::builder("x-sig")
            .key_value("v0")
            .timestamp_header("x-ts")
            .timestamp_format(TimestampFormat::Custom(day_number))
            .signed_content(SignedContent::TimestampBody { separator: ":".into() })
            .build()
            .unwrap();
        let day = NOW / 86_400;
        let day_text = format!("day {day}");
        let day_sig =
            format!("v0={}", hex::encode(crate::verify::hmac_sha256(&secret, &[day_text.as_bytes(), b":", body])));
        let old_sig = format!("v0={}", hex::encode(crate::verify::hmac_sha256(&secret, &[b"day -1", b":", body])));
        let short = format!("v0={}", "ab".repeat(31));
        use VerifyErrorKind::{MalformedHeader, NoMatchingSignature, TimestampTooOld};
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, u64, Result<(), VerifyErrorKind>);
        let check = |label: &str, v: &HmacVerifier, cases: Vec<Case<'_>>| {
            for (name, headers, now, want) in cases {
                let p = parts(&headers);
                let d = Delivery::new(&p, body, std::slice::from_ref(&secret), at(now));
                assert_eq!(v.verify(&d).map_err(|e| e.kind()), want, "{label}: {name}");
            }
        };
        check(
            "inside",
            &inside,
            vec![
                ("valid", vec![("x-sig", &good)], NOW, Ok(())),
                ("no t", vec![("x-sig", "v1=00")], NOW, Err(MalformedHeader)),
                ("no v1", vec![("x-sig", "t=1")], NOW, Err(NoMatchingSignature)),
                ("entry without =", vec![("x-sig", "t=1,junk")], NOW, Err(MalformedHeader)),
                ("two timestamps", vec![("x-sig", "t=1,t=2")], NOW, Err(MalformedHeader)),
                ("stale", vec![("x-sig", &good)], NOW + 301, Err(TimestampTooOld)),
            ],
        );
        check(
            "millis",
            &millis,
            vec![
                ("valid", vec![("x-sig", &ms_sig), ("x-ts", &ms)], NOW, Ok(())),
                // Read as milliseconds: January 1970, refused by the age check before any HMAC.
                ("seconds sent", vec![("x-sig", &ms_sig), ("x-ts", "1700000000")], NOW, Err(TimestampTooOld)),
                ("short tag, strict", vec![("x-sig", &short), ("x-ts", &ms)], NOW, Err(MalformedHeader)),
                ("another version", vec![("x-sig", "v9=00"), ("x-ts", &ms)], NOW, Err(NoMatchingSignature)),
                ("a fraction", vec![("x-sig", &ms_sig), ("x-ts", "1.7e12")], NOW, Err(MalformedHeader)),
            ],
        );
        check(
            "custom",
            &custom,
            vec![
                ("valid", vec![("x-sig", &day_sig), ("x-ts", &day_text)], day * 86_400, Ok(())),
                ("unparsable", vec![("x-sig", &day_sig), ("x-ts", "yesterday")], NOW, Err(MalformedHeader)),
                ("before 1970 is old", vec![("x-sig", &old_sig), ("x-ts", "day -1")], NOW, Err(TimestampTooOld)),
            ],
        );
        // To the millisecond: 300.000 s passes, 300.001 s is too old.
        let p = parts(&[("x-sig", &ms_sig), ("x-ts", &ms)]);
        let secrets = std::slice::from_ref(&secret);
        let edge = Delivery::new(&p, body, secrets, UNIX_EPOCH + Duration::from_millis(NOW * 1000 + 300_000));
        let past = Delivery::new(&p, body, secrets, UNIX_EPOCH + Duration::from_millis(NOW * 1000 + 300_001));
        assert_eq!(millis.verify(&edge).map_err(|e| e.kind()), Ok(()));
        assert_eq!(millis.verify(&past).map_err(|e| e.kind()), Err(VerifyErrorKind::TimestampTooOld));
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
            ("timestamp key without key_value", HmacVerifier::builder("x").timestamp_key("t").build().err()),
            (
                "timestamp header and key",
                HmacVerifier::builder("x")
                    .key_value("v1")
                    .timestamp_key("t")
                    .signature_separator(',')
                    .timestamp_header("x-ts")
                    .signed_content(SignedContent::TimestampBody { separator: ".".into() })
                    .build()
                    .err(),
            ),
            (
                "timestamp key without separator",
                HmacVerifier::builder("x")
                    .key_value("v1")
                    .timestamp_key("t")
                    .signed_content(SignedContent::TimestampBody { separator: ".".into() })
                    .build()
                    .err(),
            ),
            (
                "timestamp key equals signature key",
                HmacVerifier::builder("x")
                    .key_value("v1")
                    .timestamp_key("v1")
                    .signature_separator(',')
                    .signed_content(SignedContent::TimestampBody { separator: ".".into() })
                    .build()
                    .err(),
            ),
            ("prefix with key_value", HmacVerifier::builder("x").prefix("v1=").key_value("v1").build().err()),
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
