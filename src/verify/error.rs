//! [`VerifyError`]: why a delivery did not verify.

use std::fmt;

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
