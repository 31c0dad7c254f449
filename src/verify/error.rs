//! [`VerifyError`]: why a delivery did not verify.

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

kind_names!(VerifyErrorKind {
    MissingHeader => "missing_header",
    MissingField => "missing_field",
    MalformedHeader => "malformed_header",
    NoMatchingSignature => "no_matching_signature",
    TimestampTooOld => "timestamp_too_old",
    TimestampInFuture => "timestamp_in_future",
    NoSecret => "no_secret",
    BodyUnavailable => "body_unavailable",
});

kind_error! {
    /// A failed verification. Carries a [`VerifyErrorKind`] and never the
    /// signature, the secret or the payload.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct VerifyError(VerifyErrorKind);
    /// An error of the given kind.
    fn new();
    /// Why verification failed.
    fn kind();
    display: |kind, f| write!(f, "webhook signature verification failed: {kind}");
}
