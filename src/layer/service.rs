use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Request, Response, StatusCode};
use tower_service::Service;
use tracing::{field, Instrument};

use super::abandoned::Watch;
use super::answer::{Answer, Outcome};
use super::config::Config;
use super::process::{self, Processed};
use super::rejection::RejectionKind;
use super::{accept, authenticate, read, ReplayStatus, ResponseBody, ResponseFuture};
use crate::event::{ScopedEvent, WebhookEvent};
use crate::store::claim::ClaimedEvent;

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
#[derive(Clone)]
pub struct WebhookService<S>(Wrapped<S, Config>);

impl<S> std::fmt::Debug for WebhookService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookService").field("provider", &self.0.config.provider.name()).finish_non_exhaustive()
    }
}

impl<S> WebhookService<S> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        Self(Wrapped::new(inner, config))
    }
}

wrapped_service!(WebhookService, |wrapped, req| {
    // An ERROR-level span: its fields reach every event inside it, WARN and
    // ERROR lines included, under any filter that shows those.
    let span = tracing::error_span!(
        "webhook",
        method = %req.method(),
        path = %req.uri().path(),
        provider = wrapped.config.provider.name(),
        scope = field::Empty,
        key = field::Empty,
        event_type = field::Empty,
    );
    wrapped.call(span, |inner, config| {
        let started = std::time::Instant::now();
        async move {
            // Counts the delivery if this future is dropped before an answer.
            let mut watch = Watch::new(&config, started);
            let answer = handle(&config, inner, req, &mut watch).await;
            watch.finish();
            let answer = answer?;
            record(&config, answer.outcome, started);
            Ok(answer.response)
        }
    })
});

/// Counts the delivery by outcome (see [`crate::metrics`]).
fn record(config: &Config, outcome: Outcome, started: std::time::Instant) {
    let provider = config.provider.name();
    if let Outcome::Rejected(kind) = outcome {
        crate::metrics::rejection(provider, kind.as_str());
    }
    crate::metrics::delivery(provider, outcome.as_str(), started);
}

/// The delivery's pipeline: each step answers for itself or hands on.
async fn handle<S, ReqBody, ResBody>(
    config: &Arc<Config>,
    inner: S,
    req: Request<ReqBody>,
    watch: &mut Watch,
) -> Result<Answer<ResBody>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ReqBody: http_body::Body + From<Bytes>,
    ReqBody::Error: Into<BoxError>,
    ResBody: http_body::Body<Data = Bytes>,
{
    if req.extensions().get::<crate::store::inbox::FromInbox>().is_some() {
        // The worker must call the handlers without the layer: the stored
        // request carries no signature to verify.
        tracing::error!(
            "an InboxWorker was given a service with WebhookLayer on it: give the worker the handlers without \
             the layer (route_layer the layer onto a clone for the HTTP app)"
        );
        return Ok(config.refuse(RejectionKind::Misconfigured, "layer_under_inbox_worker"));
    }
    let (parts, body) = req.into_parts();
    let (parts, body) = match read::read(config, parts, body).await {
        Ok(read) => read,
        Err(answer) => return Ok(*answer),
    };
    let (parts, event) = match authenticate::authenticate(config, parts, &body).await {
        Ok(verified) => verified,
        Err(answer) => return Ok(*answer),
    };
    let digest = match config.body_digest_guard {
        true => Some(body_digest(&body).await),
        false => None,
    };
    if let Some(mode) = &config.inbox {
        return Ok(accept::accept(config, mode, &parts, &event, &body, digest.as_ref()).await);
    }
    watch.event = Some(event.clone());
    let request = |claimed: &ClaimedEvent| {
        watch.handler_started.store(true, std::sync::atomic::Ordering::Relaxed);
        handler_request::<ReqBody>(config, parts, &event, body, claimed)
    };
    let processed = process::run(&config.store, &event, &config.success, inner, request, digest).await;
    answer(config, processed)
}

/// The body's SHA-256 for the body-digest guard; a large body's on the
/// blocking pool (as its signature: about 50 µs per 64 KiB).
async fn body_digest(body: &Bytes) -> [u8; 32] {
    if body.len() < 64 * 1024 {
        return crate::store::digest::digest(body);
    }
    let owned = body.clone();
    match tokio::task::spawn_blocking(move || crate::store::digest::digest(&owned)).await {
        Ok(digest) => digest,
        Err(_) => crate::store::digest::digest(body),
    }
}

/// The inner service's request: the same bytes as body, the claim's
/// transaction and the event in its extensions.
fn handler_request<ReqBody: From<Bytes>>(
    config: &Config,
    mut parts: Parts,
    event: &ScopedEvent,
    body: Bytes,
    claimed: &ClaimedEvent,
) -> Request<ReqBody> {
    parts.extensions.insert(claimed.tx());
    parts.extensions.insert(WebhookEvent::new(event.clone(), claimed.attempt(), body.clone()));
    with_body(parts, body, config.body_limit)
}

/// The request rebuilt around the buffered `body`. axum's body extractors
/// (`Json`, `Bytes`, `String`) read the same bytes under the layer's `limit`,
/// not axum's own 2 MB default: a body the layer accepted and claimed is
/// never refused after the claim for its size.
pub(crate) fn with_body<ReqBody: From<Bytes>>(parts: Parts, body: Bytes, limit: usize) -> Request<ReqBody> {
    let limit = limit.max(body.len());
    #[allow(unused_mut)]
    let mut req = Request::from_parts(parts, ReqBody::from(body));
    #[cfg(feature = "axum")]
    axum_core::extract::DefaultBodyLimit::max(limit).apply(&mut req);
    #[cfg(not(feature = "axum"))]
    let _ = limit;
    req
}

/// What [`WebhookService`] and
/// [`IdempotencyKeyService`](crate::idempotency_key::IdempotencyKeyService)
/// hold: the inner service, and the layer's settings (`C`) that every clone
/// shares.
pub(crate) struct Wrapped<S, C> {
    inner: S,
    pub(crate) config: Arc<C>,
}

impl<S: Clone, C> Clone for Wrapped<S, C> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), config: Arc::clone(&self.config) }
    }
}

impl<S, C> Wrapped<S, C> {
    pub(crate) fn new(inner: S, config: Arc<C>) -> Self {
        Self { inner, config }
    }

    /// The response future of a `call`: `pipeline`'s future, given the
    /// inner service to call now and the settings, run in `span`. The
    /// inner service is taken leaving a clone in its place (tower's
    /// guidance: the clone taken in `call` may not be ready, the one polled
    /// ready is).
    pub(crate) fn call<B, E, Fut>(
        &mut self,
        span: tracing::Span,
        pipeline: impl FnOnce(S, Arc<C>) -> Fut,
    ) -> ResponseFuture<B, E>
    where
        S: Clone,
        Fut: Future<Output = Result<Response<ResponseBody<B>>, E>> + Send + 'static,
    {
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let future = pipeline(inner, Arc::clone(&self.config));
        ResponseFuture { inner: Box::pin(future.instrument(span)) }
    }
}

/// The sender's answer for what the processing step did.
fn answer<ResBody, E>(config: &Config, processed: Processed<Response<ResBody>, E>) -> Result<Answer<ResBody>, E> {
    Ok(match processed {
        Processed::Handled { response, committed } => {
            let outcome = if committed { Outcome::Committed } else { Outcome::Failed };
            Answer { outcome, response: response.map(ResponseBody::inner) }
        }
        Processed::Duplicate { status } => replayed(config, status),
        Processed::InFlight => config.refuse(RejectionKind::InFlight, "in_flight"),
        Processed::Unavailable(step) => config.refuse(RejectionKind::StoreUnavailable, step),
        Processed::Conflict(code) => config.refuse(RejectionKind::RetryableConflict, code),
        Processed::StillInUse => {
            tracing::error!("the handler answered while still holding WebhookTx; rolled back");
            config.refuse(RejectionKind::HandlerError, "tx_still_in_use")
        }
        Processed::RefusedSuccess => config.refuse(RejectionKind::HandlerError, "refused_success"),
        Processed::Panicked => config.refuse(RejectionKind::HandlerError, "handler_panicked"),
        Processed::ServiceError(e) => return Err(e),
    })
}

/// The answer to a duplicate of a done event: 200 (or the stored status)
/// with `Idempotent-Replayed: true`.
fn replayed<B>(config: &Config, stored: Option<u16>) -> Answer<B> {
    let status = match config.replay_status {
        ReplayStatus::Stored => stored.and_then(|s| StatusCode::from_u16(s).ok()).unwrap_or(StatusCode::OK),
        ReplayStatus::Ok => StatusCode::OK,
    };
    let mut response = Response::new(ResponseBody::layer("event already processed\n"));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response.headers_mut().insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    Answer { outcome: Outcome::Duplicate, response }
}
