use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use tower_service::Service;
use tracing::{field, Instrument};

use super::buffer::{read_limited, ReadError};
use super::rejection::{self, Rejection, RejectionKind};
use super::{Config, ReplayStatus, ResponseBody, ResponseFuture};
use crate::event::WebhookEvent;
use crate::store::inbox::RequestHead;
use crate::store::{Claim, CommitErrorKind, ScopedEvent};
use crate::verify::Delivery;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The header set on answers to duplicates of a done event.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// The service built by [`WebhookLayer`](super::WebhookLayer) around an
/// inner service (the webhook handler).
///
/// The inner service receives the request with the same bytes as body (built
/// with `ReqBody::from(Bytes)`, as `axum::body::Body` and
/// `http_body_util::Full<Bytes>` allow) and with [`WebhookTx`](crate::WebhookTx)
/// and [`WebhookEvent`] in its extensions.
pub struct WebhookService<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S: Clone> Clone for WebhookService<S> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), config: Arc::clone(&self.config) }
    }
}

impl<S> std::fmt::Debug for WebhookService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookService").field("provider", &self.config.provider.name()).finish_non_exhaustive()
    }
}

impl<S> WebhookService<S> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        Self { inner, config }
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for WebhookService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqBody: http_body::Body + From<Bytes> + Send + 'static,
    ReqBody::Data: Send,
    ReqBody::Error: Into<BoxError>,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<ResBody, S::Error>;

    /// Always ready: the inner service's readiness is awaited inside the
    /// response future, and only for claimed deliveries.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = Arc::clone(&self.config);
        // An ERROR-level span: its fields reach every event inside it, WARN and
        // ERROR lines included, under any filter that shows those.
        let span = tracing::error_span!(
            "webhook",
            method = %req.method(),
            path = %req.uri().path(),
            provider = config.provider.name(),
            scope = field::Empty,
            key = field::Empty,
            event_type = field::Empty,
        );
        let started = std::time::Instant::now();
        let future = async move {
            let result = handle(Arc::clone(&config), inner, req).await;
            if let Ok(response) = &result {
                record(&config, response, started);
            }
            result
        };
        ResponseFuture { inner: Box::pin(future.instrument(span)) }
    }
}

/// A handshake the layer answered itself (nothing claimed), for metrics.
#[derive(Clone, Copy)]
struct Handshake;

/// Counts the delivery by outcome (see [`crate::metrics`]).
fn record<B>(config: &Config, response: &Response<B>, started: std::time::Instant) {
    let provider = config.provider.name();
    let outcome = if let Some(rejection) = response.extensions().get::<Rejection>() {
        crate::metrics::rejection(provider, rejection.kind().as_str());
        "rejected"
    } else if response.extensions().get::<Handshake>().is_some() {
        "handshake"
    } else if response.headers().contains_key(IDEMPOTENT_REPLAYED) {
        "duplicate"
    } else if !response.status().is_success() {
        "failed"
    } else if config.inbox.is_some() {
        "accepted"
    } else {
        "committed"
    };
    crate::metrics::delivery(provider, outcome, started);
}

/// The layer's own answer for `kind` (see [`RejectionKind`] for the table).
fn refuse<B>(config: &Config, kind: RejectionKind, reason: &'static str) -> Response<ResponseBody<B>> {
    rejection::respond(Rejection::new(kind, reason), config.rejection_responder.as_ref(), &config.retry_after)
}

async fn handle<S, ReqBody, ResBody>(
    config: Arc<Config>,
    mut inner: S,
    req: Request<ReqBody>,
) -> Result<Response<ResponseBody<ResBody>>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ReqBody: http_body::Body + From<Bytes>,
    ReqBody::Error: Into<BoxError>,
    ResBody: http_body::Body<Data = Bytes>,
{
    let span = tracing::Span::current();
    if req.extensions().get::<crate::inbox::FromInbox>().is_some() {
        // The worker must call the handlers without the layer: the stored
        // request carries no signature to verify.
        tracing::error!(
            "an InboxWorker was given a service with WebhookLayer on it: give the worker the handlers without \
             the layer (route_layer the layer onto a clone for the HTTP app)"
        );
        return Ok(refuse(&config, RejectionKind::Misconfigured, "layer_under_inbox_worker"));
    }
    let (parts, body) = req.into_parts();

    // Methods the provider never sends: 405 before anything else (a layer put
    // on a whole router shows up here, not as a 401 on every page).
    if !config.provider.allowed_methods().contains(&parts.method) {
        tracing::debug!(
            "{} webhooks are not sent with this method: is the layer on the webhook route only (route_layer)?",
            config.provider.name()
        );
        let mut res = refuse(&config, RejectionKind::MethodNotAllowed, "method_not_allowed");
        let allow = config.provider.allowed_methods().iter().map(http::Method::as_str).collect::<Vec<_>>().join(", ");
        if let Ok(allow) = HeaderValue::from_str(&allow) {
            res.headers_mut().insert(header::ALLOW, allow);
        }
        return Ok(res);
    }
    // 1. Size limit, from Content-Length before reading.
    let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|len| len > config.body_limit as u64) {
        return Ok(refuse(&config, RejectionKind::BodyTooLarge, "declared_too_large"));
    }
    // Content-Encoding: identity, or gzip when decoding is enabled; else 415.
    // Several header lines are one comma-separated list (RFC 9110, 5.3).
    let gzip = match content_encoding(&parts.headers, config.gzip_limit.is_some()) {
        Ok(gzip) => gzip,
        Err(()) => return Ok(refuse(&config, RejectionKind::UnsupportedEncoding, "content_encoding")),
    };
    // Signature headers that cannot pass: 401 before reading the body.
    if let Err(e) = config.provider.verifier_ref().precheck(&parts) {
        if e.kind() == crate::verify::VerifyErrorKind::MissingHeader {
            tracing::debug!(
                "no {} signature header: a request the provider did not sign, or a route that should not be \
                 behind this layer",
                config.provider.name()
            );
        }
        return Ok(refuse(&config, RejectionKind::InvalidSignature, e.kind().as_str()));
    }
    // 2. Buffer once, into one buffer; the limit also holds while streaming.
    let read = tokio::time::timeout(config.body_timeout, read_limited(body, config.body_limit, declared)).await;
    let Ok(read) = read else {
        return Ok(refuse(&config, RejectionKind::BodyTimeout, "body_timeout"));
    };
    let body: Bytes = match read {
        Ok(body) => body,
        Err(ReadError::TooLarge) => return Ok(refuse(&config, RejectionKind::BodyTooLarge, "body_too_large")),
        Err(ReadError::Unavailable) => {
            let reason = crate::verify::VerifyErrorKind::BodyUnavailable.as_str();
            return Ok(refuse(&config, RejectionKind::BodyUnreadable, reason));
        }
    };
    // gzip: verified and handed on decoded, within the inflated-size cap.
    // Inflating costs CPU in proportion to the inflated size (up to about
    // 1000:1 over the bytes received): it runs on the blocking pool, never on
    // an async worker thread.
    let mut parts = parts;
    let body = match (gzip, config.gzip_limit) {
        (true, Some(limit)) => {
            let inflated = tokio::task::spawn_blocking(move || inflate(&body, limit)).await;
            match inflated.unwrap_or(Err(Inflate::Corrupt)) {
                Ok(decoded) => {
                    parts.headers.remove(header::CONTENT_ENCODING);
                    parts.headers.remove(header::CONTENT_LENGTH);
                    decoded
                }
                Err(Inflate::TooLarge) => {
                    return Ok(refuse(&config, RejectionKind::BodyTooLarge, "inflated_too_large"))
                }
                Err(Inflate::Corrupt) => return Ok(refuse(&config, RejectionKind::BodyUnreadable, "gzip_corrupt")),
            }
        }
        _ => body,
    };

    // 3. Scope and secrets, from trusted configuration.
    let endpoint = match config.resolver.resolve(&parts).await {
        Ok(endpoint) => endpoint,
        Err(e) if e.kind() == crate::scope::ResolveErrorKind::NotFound => {
            return Ok(refuse(&config, RejectionKind::UnknownEndpoint, "unknown_endpoint"))
        }
        Err(e) => {
            tracing::error!(error = %e, "scope resolver failed");
            return Ok(refuse(&config, RejectionKind::StoreUnavailable, "scope_resolver"));
        }
    };
    if crate::key::validate(&endpoint.scope).is_err() {
        tracing::error!("scope resolver returned an unusable scope");
        return Ok(refuse(&config, RejectionKind::Misconfigured, "invalid_scope"));
    }
    span.record("scope", endpoint.scope.as_str());
    if let Err(e) = config.provider.verifier_ref().check_secrets(&endpoint.secrets) {
        tracing::error!(
            scope = endpoint.scope.as_str(),
            error = %e,
            "scope resolver returned key material that authenticates nothing; refused"
        );
        return Ok(refuse(&config, RejectionKind::Misconfigured, e.kind().as_str()));
    }

    // 4. Signature over the raw bytes; a large body is verified on the
    // blocking pool so hashing it does not stall other requests.
    let replay = config.is_operator_replay(&parts.headers);
    if let Some((name, _)) = &config.operator_replay {
        // The token is for the layer only: the handler never sees it.
        parts.headers.remove(name);
    }
    if replay {
        // Signature checked as always; only the timestamp's age is not.
        tracing::info!(outcome = "operator_replay", "operator replay: timestamp tolerance not applied");
    }
    let costly = body.len() >= OFFLOAD_VERIFY_BYTES || config.provider.verifier_ref().costly(&parts);
    // A costly delivery's key is read on the blocking pool too (a 1 MiB JSON
    // body takes milliseconds to parse).
    let (parts, verified, identified) = if costly {
        let (shared, body) = (Arc::clone(&config), body.clone());
        let secrets = endpoint.secrets.clone();
        let task = tokio::task::spawn_blocking(move || {
            let verified = verify(&shared, &parts, &body, &secrets, replay);
            let identified = matches!(verified, Ok(None)).then(|| shared.provider.identify(&parts, &body));
            (parts, verified, identified)
        });
        match task.await {
            Ok(done) => done,
            Err(_) => {
                return Ok(refuse(&config, RejectionKind::Misconfigured, "verifier_panicked"));
            }
        }
    } else {
        let verified = verify(&config, &parts, &body, &endpoint.secrets, replay);
        (parts, verified, None)
    };
    match verified {
        Err(e) => return Ok(refuse(&config, RejectionKind::InvalidSignature, e.kind().as_str())),
        Ok(Some(answer)) => {
            tracing::info!(outcome = "challenge", "endpoint verification handshake answered; nothing claimed");
            let mut answer = answer.map(ResponseBody::bytes);
            answer.extensions_mut().insert(Handshake);
            return Ok(answer);
        }
        Ok(None) => {}
    }
    let mut parts = parts;

    // 5. Event key and type.
    let identity = match identified.unwrap_or_else(|| config.provider.identify(&parts, &body)) {
        Ok(identity) => identity,
        Err(e) => return Ok(refuse(&config, RejectionKind::InvalidEventKey, e.kind().as_str())),
    };
    span.record("key", identity.key.as_str());
    if let Some(t) = &identity.event_type {
        span.record("event_type", t.as_str());
    }
    let event = ScopedEvent::new(config.provider.name(), endpoint.scope, identity.key).with_type(identity.event_type);

    // Inbox mode: store the delivery as pending; answer once that committed.
    if let Some((inbox, status, ack, drop_headers)) = &config.inbox {
        let head = RequestHead::of(&parts, drop_headers);
        let accepted = match inbox.accept(&event, &body, &head).await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::error!(error = %e, "inbox: the delivery could not be stored");
                return Ok(refuse(&config, RejectionKind::StoreUnavailable, "inbox_accept"));
            }
        };
        let mut res = Response::new(ResponseBody::bytes(ack.clone()));
        *res.status_mut() = *status;
        if accepted {
            tracing::info!(outcome = "accepted", "webhook event stored in the inbox");
        } else {
            tracing::info!(outcome = "duplicate", "webhook event already in the inbox; replayed");
            res.headers_mut().insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        }
        return Ok(res);
    }

    // 6. Claim: a pooled connection, a transaction, `INSERT ... ON CONFLICT`.
    let claim_started = std::time::Instant::now();
    let claim = config.store.claim(&event).await;
    crate::metrics::claim(config.provider.name(), claim_started.elapsed());
    let claimed = match claim {
        Ok(Claim::Claimed(claimed)) => claimed,
        Ok(Claim::Done { status }) => {
            tracing::info!(outcome = "duplicate", "webhook event already processed; replayed");
            let status = match config.replay_status {
                ReplayStatus::Stored => status.and_then(|s| StatusCode::from_u16(s).ok()).unwrap_or(StatusCode::OK),
                ReplayStatus::Ok => StatusCode::OK,
            };
            let mut res = Response::new(ResponseBody::layer("event already processed\n"));
            *res.status_mut() = status;
            res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
            res.headers_mut().insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
            return Ok(res);
        }
        Ok(Claim::InFlight) => {
            return Ok(refuse(&config, RejectionKind::InFlight, "in_flight"));
        }
        Err(e) => {
            tracing::error!(error = %e, "claim failed");
            return Ok(refuse(&config, RejectionKind::StoreUnavailable, "claim"));
        }
    };
    let attempt = claimed.attempt();
    tracing::info!(outcome = "claimed", attempt, "webhook event claimed");

    // 7. Run the handler inside the claim's transaction.
    parts.extensions.insert(claimed.tx());
    parts.extensions.insert(WebhookEvent {
        provider: event.provider().to_owned(),
        scope: event.scope().to_owned(),
        key: event.key().to_owned(),
        event_type: event.get_event_type().map(str::to_owned),
        attempt,
        body: body.clone(),
    });
    #[cfg(feature = "axum")]
    let body_len = body.len();
    #[allow(unused_mut)]
    let mut req = Request::from_parts(parts, ReqBody::from(body));
    // axum's body extractors (`Json`, `Bytes`, `String`) read the same bytes
    // under the layer's limit, not axum's own 2 MB default: a body the layer
    // accepted and claimed is never refused after the claim for its size.
    #[cfg(feature = "axum")]
    axum_core::extract::DefaultBodyLimit::max(config.body_limit.max(body_len)).apply(&mut req);
    let handler_started = std::time::Instant::now();
    let result = match poll_fn(|cx| inner.poll_ready(cx)).await {
        Ok(()) => inner.call(req).await,
        Err(e) => Err(e),
    };
    crate::metrics::handler(config.provider.name(), handler_started.elapsed());

    // 8. Commit on success, roll back and record the attempt otherwise.
    let (response, failure) = match result {
        Err(e) => (Err(e), Some(("inner service returned an error", None))),
        Ok(response) => {
            let status = response.status();
            let failure = if claimed.retryable_conflict().is_some() {
                Some(("retryable conflict in the handler's transaction", Some(status)))
            } else if !(config.success)(status) {
                Some(("handler answered a non-success status", Some(status)))
            } else {
                None
            };
            (Ok(response), failure)
        }
    };
    let retryable = claimed.retryable_conflict();
    let Some((error, status)) = failure else {
        let Ok(response) = response else { unreachable!("a service error is a failure") };
        let status = response.status();
        return match claimed.commit(status.as_u16()).await {
            Ok(()) => {
                tracing::info!(outcome = "committed", status = status.as_u16(), "webhook event processed");
                Ok(response.map(ResponseBody::inner))
            }
            Err(e) if e.kind() == CommitErrorKind::StillInUse => Ok(still_in_use(&config)),
            Err(e) => {
                tracing::error!(error = %e, "not committed");
                Ok(refuse(&config, RejectionKind::StoreUnavailable, "commit"))
            }
        };
    };
    if claimed.fail(error, status.map(|s| s.as_u16())).await.is_err() {
        return Ok(still_in_use(&config));
    }
    let response = response?;
    if let Some(code) = retryable {
        // A deadlock, serialization failure or lock timeout in the handler:
        // the sender's retry will succeed, so say so instead of passing on the
        // handler's failure (or a success over an aborted transaction).
        return Ok(refuse(&config, RejectionKind::RetryableConflict, code));
    }
    tracing::warn!(outcome = "failed", status = response.status().as_u16(), "handler did not succeed; rolled back");
    Ok(response.map(ResponseBody::inner))
}

/// The handler answered while a clone of `WebhookTx` (a task it spawned)
/// still holds the connection: rolled back when that clone drops.
fn still_in_use<B>(config: &Config) -> Response<ResponseBody<B>> {
    tracing::error!("the handler answered while still holding WebhookTx; rolled back");
    refuse(config, RejectionKind::HandlerError, "tx_still_in_use")
}

/// Bodies of this many bytes or more are verified on tokio's blocking pool:
/// an HMAC-SHA256 over 64 KiB takes about 50 µs, the budget above which
/// tokio's docs advise against blocking an async worker thread.
const OFFLOAD_VERIFY_BYTES: usize = 64 * 1024;

/// Verifies the delivery and answers the provider's handshake: `Ok(None)`
/// for an ordinary verified delivery, `Ok(Some(answer))` for a verified
/// handshake, `Err` when the signature does not verify.
fn verify(
    config: &Config,
    parts: &http::request::Parts,
    body: &[u8],
    secrets: &[crate::verify::SigningSecret],
    operator_replay: bool,
) -> Result<Option<http::Response<Bytes>>, crate::verify::VerifyError> {
    let mut delivery = Delivery::new(parts, body, secrets, config.clock.now());
    if operator_replay {
        delivery = delivery.without_timestamp_check();
    }
    config.provider.verifier_ref().verify(&delivery)?;
    Ok(config.provider.challenge_ref().and_then(|c| c.respond(&delivery)))
}

/// Whether the body is gzip (`Ok(true)`), identity (`Ok(false)`), or in an
/// encoding the layer does not decode (`Err`). Every `Content-Encoding` line
/// counts, as one comma-separated list (RFC 9110, section 5.3): `identity`
/// entries are ignored, one `gzip` (or `x-gzip`) is accepted when `gzip` is
/// enabled, anything else (a second `gzip` included) is refused.
fn content_encoding(headers: &http::HeaderMap, gzip_enabled: bool) -> Result<bool, ()> {
    let mut gzip = false;
    for line in headers.get_all(header::CONTENT_ENCODING) {
        for coding in line.as_bytes().split(|&b| b == b',').map(<[u8]>::trim_ascii) {
            if coding.is_empty() || coding.eq_ignore_ascii_case(b"identity") {
                continue;
            }
            let is_gzip = coding.eq_ignore_ascii_case(b"gzip") || coding.eq_ignore_ascii_case(b"x-gzip");
            if !is_gzip || !gzip_enabled || gzip {
                return Err(());
            }
            gzip = true;
        }
    }
    Ok(gzip)
}

enum Inflate {
    TooLarge,
    Corrupt,
}

/// Decodes a gzip body, stopping one byte past `limit` decoded bytes.
fn inflate(body: &[u8], limit: usize) -> Result<Bytes, Inflate> {
    use std::io::Read as _;
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    // Every member (RFC 1952 allows several); bytes after the last member
    // that do not form one are corrupt.
    flate2::read::MultiGzDecoder::new(body).take(cap).read_to_end(&mut out).map_err(|_| Inflate::Corrupt)?;
    if out.len() > limit {
        Err(Inflate::TooLarge)
    } else {
        Ok(out.into())
    }
}
