//! The service [`IdempotencyKeyLayer`](super::IdempotencyKeyLayer) builds:
//! read the key, answer from the stored response, or run the processing
//! step and store the answer with the handler's writes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use sha2::{Digest, Sha256};
use tower_service::Service;

use super::header::KeyProblem;
use super::request::IdempotentRequest;
use super::{ErrorResponses, FingerprintFn, ScopeFn};
use crate::event::ScopedEvent;
use crate::handler::{self, End, Failed, Failure};
use crate::layer::buffer::{declared_length, read_limited, ReadError};
use crate::layer::process::{self, Processed};
use crate::layer::service::{with_body, Wrapped};
use crate::layer::{ResponseBody, IDEMPOTENT_REPLAYED};
use crate::store::claim::{ClaimStore, ClaimedEvent};
use crate::store::idempotency_key::{RequestKeys, StoredKey, StoredResponse, PROVIDER};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The layer's settings, shared by every clone of the service.
pub(crate) struct Config {
    pub(crate) store: ClaimStore,
    pub(crate) keys: RequestKeys,
    pub(crate) scope: Arc<ScopeFn>,
    pub(crate) fingerprint: Arc<FingerprintFn>,
    pub(crate) methods: Vec<Method>,
    pub(crate) required: bool,
    pub(crate) replay_headers: Vec<HeaderName>,
    pub(crate) max_response_bytes: usize,
    pub(crate) body_limit: usize,
    pub(crate) body_timeout: Duration,
    pub(crate) errors: ErrorResponses,
}

/// The service built by [`IdempotencyKeyLayer`](super::IdempotencyKeyLayer)
/// around an inner service (your API handler).
///
/// The inner service receives the request with the same body bytes (built
/// with `ReqBody::from(Bytes)`) and with [`WebhookTx`](crate::WebhookTx) and
/// [`IdempotentRequest`] in its extensions. Dropping the response future
/// while the handler runs (a client disconnect) closes the claim's
/// connection: PostgreSQL rolls back, nothing is stored, and the retry runs.
#[derive(Clone)]
pub struct IdempotencyKeyService<S>(Wrapped<S, Config>);

impl<S> std::fmt::Debug for IdempotencyKeyService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyKeyService").field("methods", &self.0.config.methods).finish_non_exhaustive()
    }
}

impl<S> IdempotencyKeyService<S> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        Self(Wrapped::new(inner, config))
    }
}

wrapped_service!(IdempotencyKeyService, bounds: { ResBody::Error: Into<BoxError>, }, |wrapped, req| {
    let span = tracing::error_span!(
        "idempotency_key",
        method = %req.method(),
        path = %super::original_uri(req.uri(), req.extensions()).path(),
        scope = tracing::field::Empty,
        key = tracing::field::Empty,
    );
    wrapped.call(span, |inner, config| async move {
        let started = Instant::now();
        let (outcome, response) = handle(&config, inner, req).await?;
        crate::metrics::delivery(PROVIDER, outcome, started);
        Ok(response)
    })
});

type Answer<B> = (&'static str, Response<ResponseBody<B>>);

async fn handle<S, ReqBody, ResBody>(
    config: &Config,
    inner: S,
    req: Request<ReqBody>,
) -> Result<Answer<ResBody>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ReqBody: http_body::Body + From<Bytes>,
    ReqBody::Error: Into<BoxError>,
    ResBody: http_body::Body<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    if !config.methods.contains(req.method()) {
        return pass(inner, req).await;
    }
    let (mut parts, body) = req.into_parts();
    let Some(scope) = (config.scope)(&parts) else {
        // The resolver found no caller: an unauthenticated request, or an
        // authentication layer that runs after this one (it must wrap it).
        tracing::debug!("the scope resolver found no caller; 401");
        return Ok(problem(Problem::Unauthenticated, None));
    };
    if scope.is_empty() || scope.len() > 512 || scope.contains('\0') {
        tracing::error!("the scope resolver returned a scope that is not 1 to 512 bytes without NUL");
        return Ok(problem(Problem::Misconfigured, None));
    }
    let key = match super::header::read(&parts.headers) {
        Ok(key) => key,
        Err(KeyProblem::Missing) if !config.required => {
            return pass(inner, Request::from_parts(parts, body)).await;
        }
        Err(KeyProblem::Missing) => return Ok(problem(Problem::KeyMissing, None)),
        Err(KeyProblem::Malformed(why)) => return Ok(problem(Problem::KeyMalformed, Some(why))),
    };
    let span = tracing::Span::current();
    span.record("scope", scope.as_str());
    span.record("key", key.as_str());
    let body = match buffer(config, &parts, body).await {
        Ok(body) => body,
        Err(answer) => return Ok(answer),
    };
    let fingerprint: [u8; 32] = Sha256::digest((config.fingerprint)(&parts, &body)).into();
    let effects_key = effects_key(&key);
    let event = ScopedEvent::new(PROVIDER, scope, key).with_effects_key(effects_key);
    let (claimed, recovery_point) = match claim(config, &event, &fingerprint).await {
        Ok(claimed) => claimed,
        Err(answer) => return Ok(answer),
    };
    tracing::info!(outcome = "claimed", attempt = claimed.attempt(), "request claimed");
    let request =
        IdempotentRequest::new(event.clone(), fingerprint, claimed.attempt(), recovery_point, config.keys.clone());
    parts.extensions.insert(claimed.tx());
    parts.extensions.insert(request.clone());
    let req = with_body::<ReqBody>(parts, body, config.body_limit);
    let answer = handler::call(inner, req, PROVIDER).await;
    // The success rule here: the answer is stored (see `ErrorResponses`).
    let (began, marked_final) = (request.has_begun(), request.is_marked_final());
    let stores = |status| config.errors.stores(status, began, marked_final);
    match handler::decide(answer, claimed.retryable_conflict(), stores) {
        End::Commit(response) => Ok(store(config, claimed, response, &fingerprint).await),
        End::RollBack(Failed::NotSuccess(response)) if response.status().is_client_error() && !began => {
            // Refused before execution (validation): rolled back, nothing
            // recorded, not a failure; a corrected request with the key runs.
            let status = response.status().as_u16();
            tracing::info!(outcome = "rejected", status, "answered before execution began; not stored");
            claimed.discard().await;
            Ok(("rejected", response.map(ResponseBody::inner)))
        }
        // Rolled back and recorded: the next request with the key runs; a
        // panic is answered 500.
        failed @ End::RollBack(_) => match process::end(claimed, failed, None).await {
            Processed::Handled { response, .. } => Ok(("failed", response.map(ResponseBody::inner))),
            Processed::ServiceError(e) => Err(e),
            other => Ok(ended_answer(other)),
        },
    }
}

/// The key claimed for this request, after the lookup (a completed key is
/// answered from its stored response) and the claim, which reads the key's
/// row again in its flight; with the recovery point to resume from. `Err`:
/// the answer instead (stored, 409, 422 or 503).
async fn claim<B>(
    config: &Config,
    event: &ScopedEvent,
    fingerprint: &[u8; 32],
) -> Result<(ClaimedEvent, Option<String>), Answer<B>> {
    let (recovery_point, conn) = match config.keys.lookup(event).await {
        Ok((Some(stored), conn)) => match answer_stored(stored, fingerprint) {
            Ok(answer) => {
                conn.release();
                return Err(answer);
            }
            Err(phase) => (phase, conn),
        },
        Ok((None, conn)) => (None, conn),
        Err(e) => {
            tracing::error!(error = %e, "idempotency key lookup failed");
            return Err(problem(Problem::Unavailable, None));
        }
    };
    // The key's row is read again in the claim's flight, after the claim took
    // the key's lock: a recovery point or fingerprint recorded by a request
    // this one waited for is seen (the lookup above ran before the wait).
    let key = RequestKeys::key(event);
    let read = Some((config.keys.lookup_sql(), &key[..]));
    let (claimed, rows): (ClaimedEvent, _) =
        match process::claim_reading::<(), ()>(&config.store, event, read, Some(conn)).await {
            Ok(claimed) => claimed,
            // Completed between the lookup and the claim: its response is stored now.
            Err(Processed::Duplicate { .. }) => return Err(after_completion(config, event, fingerprint).await),
            Err(Processed::InFlight) => return Err(problem(Problem::InFlight, None)),
            Err(_) => return Err(problem(Problem::Unavailable, None)),
        };
    let recovery_point = match config.keys.parse(&rows, event) {
        // Stored meanwhile: answered as after a wait, from a confirmed lookup.
        Some(fresh) if fresh.response.is_some() => {
            claimed.discard().await;
            return Err(after_completion(config, event, fingerprint).await);
        }
        Some(fresh) => match answer_stored(fresh, fingerprint) {
            Ok(answer) => {
                claimed.discard().await;
                return Err(answer);
            }
            Err(phase) => phase,
        },
        None => recovery_point,
    };
    Ok((claimed, recovery_point))
}

/// The handler's `response`, one the error policy stores, stored and
/// committed with its writes.
async fn store<B>(config: &Config, claimed: ClaimedEvent, response: Response<B>, fingerprint: &[u8; 32]) -> Answer<B>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let status = response.status();
    // 2xx and 3xx are results (a 303 after a write is POST/redirect/GET).
    let result = status.is_success() || status.is_redirection();
    let (head, body) = response.into_parts();
    // The body is the handler's work too (a stream, a serialiser): a panic
    // while reading it ends the claim as a panic of the handler does.
    let body = match handler::catching(Limited::new(body, config.max_response_bytes).collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Err(_panic) => {
            return ended_answer(process::end::<B, ()>(claimed, End::RollBack(Failed::Panicked), None).await)
        }
        Ok(Err(e)) => {
            let too_large = e.downcast_ref::<LengthLimitError>().is_some();
            let why = if too_large { "response body over max_response_bytes" } else { "response body unreadable" };
            tracing::error!(
                status = status.as_u16(),
                max_response_bytes = config.max_response_bytes,
                "{why}; rolled back"
            );
            let _ = claimed.fail(why, Some(status.as_u16())).await;
            return problem(Problem::ResponseNotStored, Some(why));
        }
    };
    let stored = StoredResponse { status: status.as_u16(), headers: kept_headers(config, &head.headers), body };
    let flat = stored.flat_headers();
    let more = stored.params(fingerprint, &flat);
    let response = Response::from_parts(head, ResponseBody::<B>::bytes(stored.body.clone()));
    let commit = Some((config.keys.commit_sql(), &more[..]));
    match process::end::<_, ()>(claimed, End::Commit(response), commit).await {
        Processed::Handled { response, committed: true } => ("committed", response),
        // An error answer that could not be stored (typically a statement of
        // the handler failed and aborted the transaction): nothing committed,
        // so the handler's own answer goes out, not stored; a retry runs.
        Processed::Unavailable("commit") if !result => ("failed", answer_of(stored)),
        other => ended_answer(other),
    }
}

/// The request passed through untouched (a method the layer does not cover,
/// or no key where none is required).
async fn pass<S, ReqBody, ResBody>(inner: S, req: Request<ReqBody>) -> Result<Answer<ResBody>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    match handler::call(inner, req, PROVIDER).await {
        Ok(response) => Ok(("passed", response.map(ResponseBody::inner))),
        Err(Failure::Error(e)) => Err(e),
        // No claim, nothing to roll back: the panic goes on, as without the layer.
        Err(Failure::Panicked(panic)) => std::panic::resume_unwind(panic),
    }
}

/// The request body in one buffer (the webhook layer's: about its size
/// whatever its framing): 413 past the body limit, 408 past the body
/// timeout, 400 when unreadable.
async fn buffer<B, ReqBody>(config: &Config, parts: &Parts, body: ReqBody) -> Result<Bytes, Answer<B>>
where
    ReqBody: http_body::Body,
{
    let declared = declared_length(&parts.headers);
    if declared.is_some_and(|n| n > config.body_limit as u64) {
        return Err(problem(Problem::BodyTooLarge, None));
    }
    let read = read_limited(body, config.body_limit, declared);
    match tokio::time::timeout(config.body_timeout, read).await {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(ReadError::TooLarge)) => Err(problem(Problem::BodyTooLarge, None)),
        Ok(Err(ReadError::Unavailable)) => Err(problem(Problem::BodyUnreadable, None)),
        Err(_) => {
            tracing::info!(
                body_timeout = ?config.body_timeout,
                "the request body did not arrive within body_timeout; 408, nothing claimed"
            );
            Err(problem(Problem::BodyTimeout, None))
        }
    }
}

/// The event key of the outbox effects one claim of `key` enqueues: the key,
/// `#` and a claim id of 32 lowercase hex digits (128 random bits), so that a
/// key claimed anew after it expired (24 hours) never meets the effects, or
/// the downstream keys, of an earlier claim of the same key (kept 30 days).
/// Within one claim the effects are its own and stay the same on every
/// delivery attempt (they are rows, written once with the claim's commit).
fn effects_key(key: &str) -> String {
    format!("{key}#{:032x}", fastrand::u128(..))
}

/// A stored key's answer: the replay, or 422 for another fingerprint; `Err`
/// with the recovery point when the key has none yet (a run recorded a
/// phase, then failed or crashed).
fn answer_stored<B>(stored: StoredKey, fingerprint: &[u8; 32]) -> Result<Answer<B>, Option<String>> {
    if &stored.fingerprint != fingerprint {
        tracing::info!(outcome = "rejected", "Idempotency-Key reused with another request; 422");
        return Ok(problem(Problem::KeyReused, None));
    }
    match stored.response {
        Some(response) => Ok(("duplicate", replay(response))),
        None => Err(stored.phase),
    }
}

/// After a claim found the key completed by a request that was in flight.
async fn after_completion<B>(config: &Config, event: &ScopedEvent, fingerprint: &[u8; 32]) -> Answer<B> {
    match config.keys.lookup(event).await {
        Ok((Some(stored), conn)) => {
            conn.release();
            match answer_stored(stored, fingerprint) {
                Ok(answer) => answer,
                Err(_) => problem(Problem::NoStoredResponse, None),
            }
        }
        Ok((None, conn)) => {
            conn.release();
            problem(Problem::NoStoredResponse, None)
        }
        Err(e) => {
            tracing::error!(error = %e, "idempotency key lookup failed");
            problem(Problem::Unavailable, None)
        }
    }
}

/// The stored response, with `Idempotent-Replayed: true`.
fn replay<B>(stored: StoredResponse) -> Response<ResponseBody<B>> {
    tracing::info!(
        outcome = "duplicate",
        status = stored.status,
        "Idempotency-Key seen before; stored response replayed"
    );
    let mut response = answer_of(stored);
    response.headers_mut().insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    response
}

/// A response from stored parts: the status, the kept headers, the body.
fn answer_of<B>(stored: StoredResponse) -> Response<ResponseBody<B>> {
    let mut response = Response::new(ResponseBody::bytes(stored.body));
    *response.status_mut() = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in stored.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::from_bytes(value.as_bytes())) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// The response headers kept for replays: the configured names whose values
/// are text (a value that is not is left out, with a WARN).
fn kept_headers(config: &Config, headers: &http::HeaderMap) -> Vec<(String, String)> {
    let mut kept = Vec::new();
    for name in &config.replay_headers {
        for value in headers.get_all(name) {
            // UTF-8 is kept as it is (`Location: /café/1`); other bytes
            // cannot be stored in the text column and are left out.
            match std::str::from_utf8(value.as_bytes()) {
                Ok(text) => kept.push((name.as_str().to_owned(), text.to_owned())),
                Err(_) => tracing::warn!(header = name.as_str(), "response header value is not UTF-8; not stored"),
            }
        }
    }
    kept
}

/// The answer for a processing step that did not end in the handler's
/// own response.
fn ended_answer<R, E, B>(processed: Processed<R, E>) -> Answer<B> {
    match processed {
        Processed::Conflict(_) | Processed::Unavailable(_) | Processed::InFlight => problem(Problem::Unavailable, None),
        Processed::StillInUse => {
            tracing::error!("the handler answered while still holding WebhookTx; rolled back");
            problem(Problem::HandlerError, None)
        }
        _ => problem(Problem::HandlerError, None),
    }
}

/// The layer's own answers, as RFC 9457 problem details.
#[derive(Debug, Clone, Copy)]
enum Problem {
    Unauthenticated,
    Misconfigured,
    KeyMissing,
    KeyMalformed,
    KeyReused,
    InFlight,
    NoStoredResponse,
    BodyTooLarge,
    BodyTimeout,
    BodyUnreadable,
    Unavailable,
    ResponseNotStored,
    HandlerError,
}

const DOCS: &str = "https://docs.rs/webhook-idempotency/latest/webhook_idempotency/idempotency_key/index.html";
const CORRECT_USE: &str = "This operation is idempotent and it requires correct usage of Idempotency Key.";

/// A problem answer (`application/problem+json`), with its outcome label.
fn problem<B>(problem: Problem, detail: Option<&str>) -> Answer<B> {
    let (outcome, status, slug, title, default_detail) = match problem {
        Problem::Unauthenticated => (
            "rejected",
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "Caller not authenticated",
            "No caller could be identified for this request.",
        ),
        Problem::Misconfigured => (
            "rejected",
            StatusCode::INTERNAL_SERVER_ERROR,
            "misconfigured",
            "Internal Server Error",
            "The server is misconfigured.",
        ),
        Problem::KeyMissing => {
            ("rejected", StatusCode::BAD_REQUEST, "key-missing", "Idempotency-Key is missing", CORRECT_USE)
        }
        Problem::KeyMalformed => {
            ("rejected", StatusCode::BAD_REQUEST, "key-malformed", "Idempotency-Key is malformed", CORRECT_USE)
        }
        Problem::KeyReused => (
            "rejected",
            StatusCode::UNPROCESSABLE_ENTITY,
            "key-reused",
            "Idempotency-Key is already used",
            "This operation is idempotent and it requires correct usage of Idempotency Key. Idempotency Key MUST \
             not be reused across different payloads of this operation.",
        ),
        Problem::InFlight => (
            "in_flight",
            StatusCode::CONFLICT,
            "in-flight",
            "A request is outstanding for this Idempotency-Key",
            "A request with the same Idempotency-Key for the same operation is being processed or is outstanding.",
        ),
        Problem::NoStoredResponse => (
            "rejected",
            StatusCode::UNPROCESSABLE_ENTITY,
            "key-used",
            "Idempotency-Key is already used",
            "A request with this Idempotency-Key completed and its response is no longer stored; use a new key.",
        ),
        Problem::BodyTooLarge => (
            "rejected",
            StatusCode::PAYLOAD_TOO_LARGE,
            "body-too-large",
            "Request body too large",
            "The request body is over the limit.",
        ),
        Problem::BodyTimeout => (
            "rejected",
            StatusCode::REQUEST_TIMEOUT,
            "body-timeout",
            "Request body timeout",
            "The request body did not arrive in time; nothing was processed.",
        ),
        Problem::BodyUnreadable => (
            "rejected",
            StatusCode::BAD_REQUEST,
            "body-unreadable",
            "Request body unreadable",
            "The request body could not be read.",
        ),
        Problem::Unavailable => (
            "unavailable",
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service Unavailable",
            "The request was not processed; retry it with the same Idempotency-Key.",
        ),
        Problem::ResponseNotStored => (
            "failed",
            StatusCode::INTERNAL_SERVER_ERROR,
            "response-not-stored",
            "Internal Server Error",
            "The response could not be stored for replays; nothing was committed.",
        ),
        Problem::HandlerError => (
            "failed",
            StatusCode::INTERNAL_SERVER_ERROR,
            "handler-error",
            "Internal Server Error",
            "Nothing was committed.",
        ),
    };
    let body = serde_json::json!({
        "type": format!("{DOCS}#{slug}"),
        "title": title,
        "status": status.as_u16(),
        "detail": detail.unwrap_or(default_detail),
    });
    let mut response = Response::new(ResponseBody::bytes(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
    if matches!(problem, Problem::InFlight | Problem::Unavailable) {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    crate::metrics::rejection(PROVIDER, slug);
    (outcome, response)
}
