//! The layer's own answers: every refusal it makes, in one table.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use super::ResponseBody;

/// Why the layer answered a delivery itself instead of running the handler
/// (or instead of passing the handler's answer on). One row per refusal:
/// [`status`](Self::status) is what the sender sees, [`as_str`](Self::as_str)
/// a stable name for logs and metrics.
///
/// | kind | status | stored |
/// |---|---|---|
/// | `MethodNotAllowed` | 405 + `Allow` | nothing |
/// | `BodyTooLarge` | 413 | nothing |
/// | `UnsupportedEncoding` | 415 | nothing |
/// | `BodyTimeout` | 408 | nothing |
/// | `BodyUnreadable` | 400 | nothing |
/// | `UnknownEndpoint` | 404 | nothing |
/// | `InvalidSignature` | 401 | nothing |
/// | `InvalidEventKey` | 400 | nothing |
/// | `InFlight` | 409 + `Retry-After` | unchanged |
/// | `StoreUnavailable` | 503 + `Retry-After` | whatever PostgreSQL committed; never done |
/// | `KeyUnavailable` | 503 + `Retry-After` | nothing |
/// | `RetryableConflict` | 503 + `Retry-After` | rolled back; failed attempt recorded |
/// | `Misconfigured` | 500 | nothing |
/// | `HandlerError` | 500 | rolled back; failed attempt recorded |
///
/// The response carries a [`Rejection`] in its extensions, so an outer
/// layer (metrics, logging) can count refusals by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectionKind {
    /// A method the provider never sends ([`Provider::methods`](crate::providers::Provider::methods)).
    MethodNotAllowed,
    /// The body (declared, streamed, or inflated) is over the limit.
    BodyTooLarge,
    /// A `Content-Encoding` the layer does not decode.
    UnsupportedEncoding,
    /// The body did not arrive within `body_timeout`.
    BodyTimeout,
    /// The body could not be read (the client aborted) or decoded.
    BodyUnreadable,
    /// No endpoint for the request (the scope resolver said not found).
    UnknownEndpoint,
    /// The signature is missing or invalid, or the timestamp outside tolerance.
    InvalidSignature,
    /// No usable event key or type.
    InvalidEventKey,
    /// Another delivery of the event was still in flight after the wait.
    InFlight,
    /// The database is unavailable, or the commit failed or its outcome is unknown.
    StoreUnavailable,
    /// The signing key the delivery names (a certificate the sender
    /// publishes) could not be fetched: the host did not answer in time,
    /// answered no key, or the fetch budget is spent
    /// ([`verify::fetch`](crate::verify::fetch)). Nothing is stored; the
    /// sender retries.
    KeyUnavailable,
    /// The handler's transaction met a deadlock, serialization failure or
    /// lock timeout: the retry will succeed.
    RetryableConflict,
    /// The endpoint's configuration is unusable (a resolver's scope or key
    /// material), or verification itself failed.
    Misconfigured,
    /// The handler failed in a way the layer must answer for: it panicked
    /// (the layer catches the panic, rolls back and records the attempt), it
    /// still held the transaction when it answered, or it answered a 2xx the
    /// success predicate refuses.
    HandlerError,
}

impl RejectionKind {
    /// The status the sender gets.
    pub fn status(self) -> StatusCode {
        match self {
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedEncoding => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::BodyUnreadable | Self::InvalidEventKey => StatusCode::BAD_REQUEST,
            Self::UnknownEndpoint => StatusCode::NOT_FOUND,
            Self::InvalidSignature => StatusCode::UNAUTHORIZED,
            Self::InFlight => StatusCode::CONFLICT,
            Self::StoreUnavailable | Self::RetryableConflict | Self::KeyUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Misconfigured | Self::HandlerError => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A stable `snake_case` name for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MethodNotAllowed => "method_not_allowed",
            Self::BodyTooLarge => "body_too_large",
            Self::UnsupportedEncoding => "unsupported_encoding",
            Self::BodyTimeout => "body_timeout",
            Self::BodyUnreadable => "body_unreadable",
            Self::UnknownEndpoint => "unknown_endpoint",
            Self::InvalidSignature => "invalid_signature",
            Self::InvalidEventKey => "invalid_event_key",
            Self::InFlight => "in_flight",
            Self::StoreUnavailable => "store_unavailable",
            Self::KeyUnavailable => "key_unavailable",
            Self::RetryableConflict => "retryable_conflict",
            Self::Misconfigured => "misconfigured",
            Self::HandlerError => "handler_error",
        }
    }

    /// The default body: one short line that says nothing of the setup.
    fn text(self) -> &'static str {
        match self {
            Self::MethodNotAllowed => "method not allowed\n",
            Self::BodyTooLarge => "payload too large\n",
            Self::UnsupportedEncoding => "unsupported Content-Encoding\n",
            Self::BodyTimeout => "request body not received in time\n",
            Self::BodyUnreadable => "could not read the request body\n",
            Self::UnknownEndpoint => "no webhook endpoint here\n",
            Self::InvalidSignature => "invalid webhook signature\n",
            Self::InvalidEventKey => "no usable event id\n",
            Self::InFlight => "event in flight, retry later\n",
            Self::StoreUnavailable => "webhook store unavailable, retry later\n",
            Self::KeyUnavailable => "signing key unavailable, retry later\n",
            Self::RetryableConflict => "conflict with a concurrent delivery, retry later\n",
            Self::Misconfigured => "webhook endpoint misconfigured\n",
            Self::HandlerError => "webhook handler error\n",
        }
    }

    /// Whether the sender should retry later: `Retry-After` is set.
    fn retry_later(self) -> bool {
        matches!(self, Self::InFlight | Self::StoreUnavailable | Self::RetryableConflict | Self::KeyUnavailable)
    }

    /// Refusals of unauthenticated or malformed traffic (scanners, wrong
    /// routes) are routine: logged at DEBUG. The rest at WARN or ERROR.
    fn level(self) -> tracing::Level {
        match self {
            Self::MethodNotAllowed
            | Self::BodyTooLarge
            | Self::UnsupportedEncoding
            | Self::BodyTimeout
            | Self::BodyUnreadable
            | Self::UnknownEndpoint
            | Self::InvalidSignature
            | Self::InvalidEventKey => tracing::Level::DEBUG,
            Self::InFlight => tracing::Level::INFO,
            Self::RetryableConflict | Self::KeyUnavailable => tracing::Level::WARN,
            Self::StoreUnavailable | Self::Misconfigured | Self::HandlerError => tracing::Level::ERROR,
        }
    }
}

impl fmt::Display for RejectionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal by the layer: its [`kind`](Self::kind) and the detailed
/// [`reason`](Self::reason) (for an invalid signature the verifier's kind,
/// such as `timestamp_too_old`; for a store failure the SQLSTATE class).
/// Found in the response's extensions, and passed to the
/// [`rejection_response`](crate::layer::WebhookLayerBuilder::rejection_response) hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejection {
    kind: RejectionKind,
    reason: &'static str,
}

impl Rejection {
    pub(crate) fn new(kind: RejectionKind, reason: &'static str) -> Self {
        Self { kind, reason }
    }

    /// What kind of refusal.
    pub fn kind(&self) -> RejectionKind {
        self.kind
    }

    /// The detailed reason, a stable `snake_case` name.
    pub fn reason(&self) -> &'static str {
        self.reason
    }

    /// The status the sender gets ([`RejectionKind::status`]).
    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }
}

/// Shapes the body of the layer's refusals (JSON problem details, say). The
/// layer keeps the status and adds `Retry-After`, `Allow` and the
/// [`Rejection`] extension itself.
pub(crate) type RejectionResponder = Arc<dyn Fn(&Rejection) -> Response<Bytes> + Send + Sync>;

/// Builds the layer's response for `rejection` and logs it at its kind's level.
pub(crate) fn respond<B>(
    rejection: Rejection,
    responder: Option<&RejectionResponder>,
    retry_after: &HeaderValue,
) -> Response<ResponseBody<B>> {
    let kind = rejection.kind;
    let (status, reason) = (kind.status().as_u16(), rejection.reason);
    match kind.level() {
        tracing::Level::DEBUG => tracing::debug!(outcome = "rejected", kind = kind.as_str(), reason, status, "refused"),
        tracing::Level::INFO => tracing::info!(outcome = "rejected", kind = kind.as_str(), reason, status, "refused"),
        tracing::Level::WARN => tracing::warn!(outcome = "rejected", kind = kind.as_str(), reason, status, "refused"),
        _ => tracing::error!(outcome = "rejected", kind = kind.as_str(), reason, status, "refused"),
    }
    let mut res = match responder {
        Some(shape) => shape(&rejection).map(ResponseBody::bytes),
        None => {
            let mut res = Response::new(ResponseBody::layer(kind.text()));
            res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
            res
        }
    };
    *res.status_mut() = kind.status();
    if kind.retry_later() {
        res.headers_mut().insert(header::RETRY_AFTER, retry_after.clone());
    }
    res.extensions_mut().insert(rejection);
    res
}
