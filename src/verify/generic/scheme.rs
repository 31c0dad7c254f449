//! [`HmacScheme`]: an HMAC scheme as a value, the facts a preset states
//! (header, hash, encoding, prefix, what is signed, the timestamp and its
//! tolerance), read by the one [`HmacVerifier`] as its builder would be told
//! them.

use std::time::Duration;

use super::{HmacVerifier, HmacVerifierBuilder, Quirks, SignedContent, TimestampFormat};
use crate::error::ConfigError;
use crate::verify::{Algorithm, Boundary, Encoding};

/// What an [`HmacScheme`] signs, in order, after its `content_prefix`: the
/// constant form of [`SignedContent`] (a scheme that signs a URL from the
/// configuration is built with [`HmacVerifierBuilder`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signed {
    /// [`SignedContent::Body`].
    Body,
    /// [`SignedContent::TimestampBody`], with this separator.
    TimestampBody {
        /// Bytes between the timestamp and the body.
        separator: &'static str,
    },
    /// [`SignedContent::IdTimestampBody`], with this separator.
    IdTimestampBody {
        /// Bytes between the parts.
        separator: &'static str,
    },
}

impl From<Signed> for SignedContent {
    fn from(signed: Signed) -> Self {
        match signed {
            Signed::Body => Self::Body,
            Signed::TimestampBody { separator } => Self::TimestampBody { separator: separator.to_owned() },
            Signed::IdTimestampBody { separator } => Self::IdTimestampBody { separator: separator.to_owned() },
        }
    }
}

/// How far a signed timestamp may be from the clock, in both directions,
/// and where that number comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tolerance {
    /// The tolerance: the delivery's signed time may be this far in the past
    /// or the future.
    pub duration: Duration,
    /// Why this value: the provider's page or SDK default it follows.
    pub evidence: &'static str,
    /// What a time exactly `duration` away gets, as the provider's SDK
    /// decides it ([`HmacVerifierBuilder::tolerance_boundary`]).
    pub boundary: Boundary,
}

/// An HMAC scheme as data: each field is one setting of
/// [`HmacVerifierBuilder`] (same name, same meaning), so a scheme is written
/// once, as a constant, and read by the one generic [`HmacVerifier`]
/// (`HmacVerifier::try_from(&scheme)`). The presets state theirs in their
/// facts (`providers::stripe::FACTS.scheme`).
///
/// ```
/// # #[cfg(feature = "stripe")] {
/// use webhook_idempotency::providers::stripe;
/// use webhook_idempotency::verify::generic::HmacVerifier;
///
/// let scheme = &stripe::FACTS.scheme;
/// assert_eq!(scheme.header, "stripe-signature");
/// assert_eq!(scheme.tolerance.map(|t| t.duration.as_secs()), Some(300));
/// let verifier = HmacVerifier::try_from(scheme).unwrap();
/// # let _ = verifier;
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct HmacScheme {
    /// The signature header, in lower case.
    pub header: &'static str,
    /// Another header carrying signatures in the same format
    /// ([`HmacVerifierBuilder::also_header`]).
    pub also_header: Option<&'static str>,
    /// The HMAC hash ([`HmacVerifierBuilder::algorithm`]).
    pub algorithm: Algorithm,
    /// How signatures are written ([`HmacVerifierBuilder::encoding`]).
    pub encoding: Encoding,
    /// Text before each signature ([`HmacVerifierBuilder::prefix`]).
    pub prefix: &'static str,
    /// The signature key of a `key=value` header
    /// ([`HmacVerifierBuilder::key_value`]).
    pub key_value: Option<&'static str>,
    /// The timestamp key of a `key=value` header
    /// ([`HmacVerifierBuilder::timestamp_key`]).
    pub timestamp_key: Option<&'static str>,
    /// Between several signatures of one header value
    /// ([`HmacVerifierBuilder::signature_separator`]).
    pub separator: Option<char>,
    /// Every signature exactly one tag, every entry prefixed
    /// ([`HmacVerifierBuilder::strict`]).
    pub strict: bool,
    /// Literal text signed first ([`HmacVerifierBuilder::content_prefix`]).
    pub content_prefix: &'static str,
    /// What is signed ([`HmacVerifierBuilder::signed_content`]).
    pub signed: Signed,
    /// The header of the signed timestamp
    /// ([`HmacVerifierBuilder::timestamp_header`]).
    pub timestamp_header: Option<&'static str>,
    /// How the timestamp is written ([`HmacVerifierBuilder::timestamp_format`]).
    pub timestamp_format: TimestampFormat,
    /// The header of the signed message id ([`HmacVerifierBuilder::id_header`]).
    pub id_header: Option<&'static str>,
    /// The default tolerance of the signed timestamp and its source
    /// ([`HmacVerifierBuilder::tolerance`]); `None` for a scheme that signs
    /// no time.
    pub tolerance: Option<Tolerance>,
    /// A preset's departures from the uniform behaviour.
    pub(crate) quirks: Quirks,
}

impl HmacScheme {
    /// The builder's defaults for signatures in `header`: hex HMAC-SHA256
    /// of the body alone, no prefix, one signature per line, lenient. The
    /// presets' schemes start from it (`..HmacScheme::new("x-signature")`).
    pub(crate) const fn new(header: &'static str) -> Self {
        Self {
            header,
            also_header: None,
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
            prefix: "",
            key_value: None,
            timestamp_key: None,
            separator: None,
            strict: false,
            content_prefix: "",
            signed: Signed::Body,
            timestamp_header: None,
            timestamp_format: TimestampFormat::UnixSeconds,
            id_header: None,
            tolerance: None,
            quirks: Quirks::NONE,
        }
    }

    /// The scheme in one line, as the docs' table of presets gives it: the
    /// header, how signatures are written in it, and the signed bytes, for
    /// example `` `stripe-signature`: `t=`, `v1=` entries (`,`), hex
    /// HMAC-SHA256 of `{t}.{body}` ``.
    pub fn describe(&self) -> String {
        let mut out = format!("`{}`", self.header);
        if let Some(also) = self.also_header {
            out.push_str(&format!(" (or `{also}`)"));
        }
        let list = self.separator.map(|c| format!(" (`{c}`)")).unwrap_or_default();
        match (self.key_value, self.timestamp_key) {
            (Some(key), Some(ts)) => out.push_str(&format!(": `{ts}=`, `{key}=` entries{list},")),
            (Some(key), None) => out.push_str(&format!(": `{key}=` entries{list},")),
            (None, _) if self.prefix.is_empty() => out.push_str(&format!("{list}:")),
            (None, _) => out.push_str(&format!(": `{}`{list}", self.prefix)),
        }
        let algorithm = match self.algorithm {
            Algorithm::Sha1 => "HMAC-SHA1",
            Algorithm::Sha256 => "HMAC-SHA256",
            Algorithm::Sha512 => "HMAC-SHA512",
        };
        let encoding = match self.encoding {
            Encoding::Hex => "hex",
            Encoding::Base64 => "base64",
            Encoding::Base64Url => "base64url",
        };
        let ts = match (self.timestamp_key, self.timestamp_header) {
            (Some(key), _) => format!("{{{key}}}"),
            (None, Some(header)) => format!("{{{header}}}"),
            (None, None) => String::new(),
        };
        let id = self.id_header.map(|h| format!("{{{h}}}")).unwrap_or_default();
        let signed = match self.signed {
            Signed::Body if self.content_prefix.is_empty() => {
                return format!("{out} {encoding} {algorithm} of the body")
            }
            Signed::Body => "{body}".to_owned(),
            Signed::TimestampBody { separator } => format!("{ts}{separator}{{body}}"),
            Signed::IdTimestampBody { separator } => format!("{id}{separator}{ts}{separator}{{body}}"),
        };
        format!("{out} {encoding} {algorithm} of `{}{signed}`", self.content_prefix)
    }

    /// The builder told every setting of this scheme.
    fn builder(&self) -> HmacVerifierBuilder {
        let mut b = HmacVerifier::builder(self.header)
            .algorithm(self.algorithm)
            .encoding(self.encoding)
            .prefix(self.prefix)
            .content_prefix(self.content_prefix)
            .signed_content(self.signed.into())
            .timestamp_format(self.timestamp_format)
            .quirks(self.quirks);
        let settings: [(Option<&'static str>, fn(HmacVerifierBuilder, &'static str) -> HmacVerifierBuilder); 5] = [
            (self.also_header, |b, h| b.also_header(h)),
            (self.key_value, |b, k| b.key_value(k)),
            (self.timestamp_key, |b, k| b.timestamp_key(k)),
            (self.timestamp_header, |b, h| b.timestamp_header(h)),
            (self.id_header, |b, h| b.id_header(h)),
        ];
        for (value, set) in settings {
            if let Some(value) = value {
                b = set(b, value);
            }
        }
        if let Some(separator) = self.separator {
            b = b.signature_separator(separator);
        }
        if let Some(tolerance) = self.tolerance {
            b = b.tolerance(tolerance.duration).tolerance_boundary(tolerance.boundary);
        }
        if self.strict {
            b = b.strict();
        }
        b
    }
}

impl TryFrom<&HmacScheme> for HmacVerifier {
    type Error = ConfigError;

    /// The verifier of `scheme`, checked as [`HmacVerifierBuilder::build`]
    /// checks it; besides, a timestamp read without a tolerance stated, or
    /// a tolerance stated for a scheme that signs no time, is refused.
    ///
    /// # Errors
    /// [`ConfigError`] as [`HmacVerifierBuilder::build`], or for a missing
    /// or unused tolerance.
    fn try_from(scheme: &HmacScheme) -> Result<Self, ConfigError> {
        let signs_time = scheme.timestamp_header.is_some() || scheme.timestamp_key.is_some();
        if signs_time != scheme.tolerance.is_some() {
            return Err(ConfigError::new("a scheme states its tolerance exactly when it signs a timestamp"));
        }
        scheme.builder().build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{at, headers, NOW};
    use crate::verify::{Delivery, SigningSecret, Verifier as _, VerifyErrorKind};

    const TOLERANCE: Option<Tolerance> =
        Some(Tolerance { duration: Duration::from_secs(60), evidence: "a test", boundary: Boundary::Inclusive });

    /// A scheme that signs `{ts}.{body}`, the timestamp in `x-ts`.
    const TIMED: HmacScheme = HmacScheme {
        timestamp_header: Some("x-ts"),
        signed: Signed::TimestampBody { separator: "." },
        tolerance: TOLERANCE,
        ..HmacScheme::new("x-sig")
    };

    /// The verifier of a scheme is the builder's, checked as it is, and the
    /// tolerance is stated exactly when a time is signed.
    #[test]
    fn a_scheme_builds_as_its_builder_would_and_states_its_tolerance_when_it_signs_a_time() {
        let cases: [(&str, HmacScheme, bool); 5] = [
            ("body only", HmacScheme::new("x-sig"), true),
            ("timed", TIMED, true),
            ("timed, no tolerance", HmacScheme { tolerance: None, ..TIMED }, false),
            ("body only, a tolerance", HmacScheme { tolerance: TOLERANCE, ..HmacScheme::new("x-sig") }, false),
            ("bad header", HmacScheme::new("bad header"), false),
        ];
        for (name, scheme, ok) in cases {
            assert_eq!(HmacVerifier::try_from(&scheme).is_ok(), ok, "{name}");
        }
        // The tolerance is the scheme's: 60 s passes, 61 s is too old.
        let v = HmacVerifier::try_from(&TIMED).unwrap();
        let secret = SigningSecret::from("k");
        let sig = v.sign(&secret, "", NOW, b"{}");
        let p = headers(&[("x-sig", &sig), ("x-ts", &NOW.to_string())]);
        let verify =
            |now| v.verify(&Delivery::new(&p, b"{}", std::slice::from_ref(&secret), at(now))).map_err(|e| e.kind());
        assert_eq!(verify(NOW + 60), Ok(()));
        assert_eq!(verify(NOW + 61), Err(VerifyErrorKind::TimestampTooOld));
    }
}
