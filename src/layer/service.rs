use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use deadpool_postgres::Object;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio_postgres::error::SqlState;
use tokio_postgres::SimpleQueryMessage;
use tower_service::Service;
use tracing::{field, Instrument};

use super::{Config, ReplayStatus, ResponseBody, ResponseFuture};
use crate::event::WebhookEvent;
use crate::key::KeyErrorKind;
use crate::tx::{TxConn, WebhookTx};
use crate::verify::Delivery;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// SQLSTATEs of a claim that lost to another delivery of the same event:
/// answered 409 + `Retry-After` (a duplicate is never a 5xx).
const CLAIM_CONFLICTS: [SqlState; 4] = [
    SqlState::LOCK_NOT_AVAILABLE,
    SqlState::QUERY_CANCELED,
    SqlState::T_R_SERIALIZATION_FAILURE,
    SqlState::T_R_DEADLOCK_DETECTED,
];

/// The header set on answers to duplicates of a done event.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// The service built by [`WebhookLayer`](super::WebhookLayer) around an
/// inner service (the webhook handler).
///
/// The inner service receives the request with the same bytes as body (built
/// with `ReqBody::from(Bytes)`, as `axum::body::Body` and
/// `http_body_util::Full<Bytes>` allow) and with [`WebhookTx`] and
/// [`WebhookEvent`] in its extensions.
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
        let span = tracing::info_span!(
            "webhook",
            provider = config.provider.name(),
            scope = field::Empty,
            key = field::Empty,
            event_type = field::Empty,
        );
        ResponseFuture { inner: Box::pin(handle(config, inner, req).instrument(span)) }
    }
}

/// The identity columns of the claim, borrowed for statement parameters.
struct Ids<'a> {
    scope: &'a str,
    provider: &'a str,
    key: &'a str,
    event_type: Option<&'a str>,
}

enum Claim {
    /// `started`: the claim transaction's `now()`, to check the handler did
    /// not end it.
    Claimed {
        attempt: i32,
        started: SystemTime,
    },
    Done {
        status: Option<i16>,
    },
    InFlight,
}

fn layer_response<B>(status: StatusCode, text: &'static str) -> Response<ResponseBody<B>> {
    let mut res = Response::new(ResponseBody::layer(text));
    *res.status_mut() = status;
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    res
}

fn retry_later<B>(config: &Config, status: StatusCode, text: &'static str) -> Response<ResponseBody<B>> {
    let mut res = layer_response(status, text);
    res.headers_mut().insert(header::RETRY_AFTER, config.retry_after.clone());
    res
}

fn unavailable<B>(config: &Config) -> Response<ResponseBody<B>> {
    retry_later(config, StatusCode::SERVICE_UNAVAILABLE, "webhook store unavailable, retry later\n")
}

fn reject<B>(status: StatusCode, reason: &'static str, text: &'static str) -> Response<ResponseBody<B>> {
    tracing::warn!(outcome = "rejected", reason, status = status.as_u16(), "webhook delivery rejected");
    layer_response(status, text)
}

/// The SQLSTATE of a database error, for logs (never the message, which may
/// quote values).
fn sqlstate(e: &tokio_postgres::Error) -> &str {
    e.code().map_or("connection", SqlState::code)
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
    let (parts, body) = req.into_parts();

    // 1. Size limit, from Content-Length before reading.
    let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|len| len > config.body_limit as u64) {
        return Ok(reject(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", "payload too large\n"));
    }
    // Content-Encoding: identity, or gzip when decoding is enabled; else 415.
    let gzip = match parts.headers.get(header::CONTENT_ENCODING).map(|v| v.as_bytes().trim_ascii()) {
        None => false,
        Some(v) if v.eq_ignore_ascii_case(b"identity") => false,
        Some(v)
            if config.gzip_limit.is_some()
                && (v.eq_ignore_ascii_case(b"gzip") || v.eq_ignore_ascii_case(b"x-gzip")) =>
        {
            true
        }
        Some(_) => {
            return Ok(reject(StatusCode::UNSUPPORTED_MEDIA_TYPE, "content_encoding", "unsupported Content-Encoding\n"))
        }
    };
    // Signature headers that cannot pass: 401 before reading the body.
    if let Err(e) = config.provider.verifier_ref().precheck(&parts) {
        return Ok(reject(StatusCode::UNAUTHORIZED, e.kind().as_str(), "invalid webhook signature\n"));
    }
    // 2. Buffer once; the limit also holds while streaming.
    let read = tokio::time::timeout(config.body_timeout, Limited::new(body, config.body_limit).collect()).await;
    let Ok(read) = read else {
        return Ok(reject(StatusCode::REQUEST_TIMEOUT, "body_timeout", "request body not received in time\n"));
    };
    let body: Bytes = match read {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<LengthLimitError>() => {
            return Ok(reject(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", "payload too large\n"))
        }
        Err(_) => {
            let reason = crate::verify::VerifyErrorKind::BodyUnavailable.as_str();
            return Ok(reject(StatusCode::BAD_REQUEST, reason, "could not read the request body\n"));
        }
    };
    // gzip: verified and handed on decoded, within the inflated-size cap.
    let mut parts = parts;
    let body = match (gzip, config.gzip_limit) {
        (true, Some(limit)) => match inflate(&body, limit) {
            Ok(decoded) => {
                parts.headers.remove(header::CONTENT_ENCODING);
                parts.headers.remove(header::CONTENT_LENGTH);
                decoded
            }
            Err(Inflate::TooLarge) => {
                return Ok(reject(StatusCode::PAYLOAD_TOO_LARGE, "inflated_too_large", "payload too large\n"))
            }
            Err(Inflate::Corrupt) => {
                return Ok(reject(StatusCode::BAD_REQUEST, "gzip_corrupt", "could not decode the gzip body\n"))
            }
        },
        _ => body,
    };

    // 3. Scope and secrets, from trusted configuration.
    let endpoint = match config.resolver.resolve(&parts).await {
        Ok(endpoint) => endpoint,
        Err(e) if e.is_not_found() => {
            return Ok(reject(StatusCode::NOT_FOUND, "unknown_endpoint", "no webhook endpoint here\n"))
        }
        Err(e) => {
            tracing::error!(outcome = "failed", reason = "scope_resolver", error = %e, "scope resolver failed");
            return Ok(unavailable(&config));
        }
    };
    if crate::key::validate(&endpoint.scope).is_err() {
        tracing::error!(outcome = "failed", reason = "invalid_scope", "scope resolver returned an unusable scope");
        return Ok(layer_response(StatusCode::INTERNAL_SERVER_ERROR, "webhook endpoint misconfigured\n"));
    }
    span.record("scope", endpoint.scope.as_str());
    if let Err(e) = config.provider.verifier_ref().check_secrets(&endpoint.secrets) {
        tracing::error!(
            outcome = "failed",
            reason = "unusable_secret",
            scope = endpoint.scope.as_str(),
            error = %e,
            "scope resolver returned key material that authenticates nothing; refused"
        );
        return Ok(layer_response(StatusCode::INTERNAL_SERVER_ERROR, "webhook endpoint misconfigured\n"));
    }

    // 4. Signature over the raw bytes.
    let now = config.clock.now();
    let mut delivery = Delivery::new(&parts, &body, &endpoint.secrets, now);
    if config.is_operator_replay(&parts.headers) {
        // Signature checked as always; only the timestamp's age is not.
        tracing::info!(outcome = "operator_replay", "operator replay: timestamp tolerance not applied");
        delivery = delivery.without_timestamp_check();
    }
    if let Err(e) = config.provider.verifier_ref().verify(&delivery) {
        return Ok(reject(StatusCode::UNAUTHORIZED, e.kind().as_str(), "invalid webhook signature\n"));
    }
    if let Some(answer) = config.provider.challenge_ref().and_then(|c| c.respond(&delivery)) {
        tracing::info!(outcome = "challenge", "endpoint verification handshake answered; nothing claimed");
        return Ok(answer.map(ResponseBody::bytes));
    }

    // 5. Event key and type.
    let identity = match config.provider.extractor_ref().extract(&parts, &body) {
        Ok(identity) => identity,
        Err(e) => return Ok(reject(StatusCode::BAD_REQUEST, e.kind().as_str(), "no usable event id\n")),
    };
    let checked = crate::key::validate(&identity.key)
        .and_then(|()| identity.event_type.as_deref().map_or(Ok(()), crate::key::validate));
    if let Err(kind) = checked {
        let reason = if kind == KeyErrorKind::Missing { "event_type_empty" } else { kind.as_str() };
        return Ok(reject(StatusCode::BAD_REQUEST, reason, "no usable event id\n"));
    }
    span.record("key", identity.key.as_str());
    if let Some(t) = &identity.event_type {
        span.record("event_type", t.as_str());
    }
    let ids = Ids {
        scope: &endpoint.scope,
        provider: config.provider.name(),
        key: &identity.key,
        event_type: identity.event_type.as_deref(),
    };

    // 6. Connection, transaction, claim. A pooled connection found dead (the
    // server restarted, a backend was terminated) is closed and the claim
    // tried once more on a fresh one: nothing commits on a dead connection.
    let mut retried = false;
    let (conn, attempt, started) = loop {
        let obj = match tokio::time::timeout(config.pool_timeout, config.pool.get()).await {
            Ok(Ok(obj)) => obj,
            Ok(Err(e)) => {
                tracing::error!(outcome = "failed", reason = "pool", error = %e, "no database connection");
                return Ok(unavailable(&config));
            }
            Err(_) => {
                tracing::error!(
                    outcome = "failed",
                    reason = "pool_timeout",
                    "no database connection within the pool timeout"
                );
                return Ok(unavailable(&config));
            }
        };
        let mut conn = TxConn::new(obj);
        conn.set_open(true);
        match claim(conn.client(), &config, &ids).await {
            Ok(Claim::Claimed { attempt, started }) => break (conn, attempt, started),
            Ok(Claim::Done { status }) => {
                end_unclaimed(conn, &config).await;
                tracing::info!(outcome = "duplicate", "webhook event already processed; replayed");
                let status = match config.replay_status {
                    ReplayStatus::Stored => {
                        status.and_then(|s| StatusCode::from_u16(u16::try_from(s).ok()?).ok()).unwrap_or(StatusCode::OK)
                    }
                    ReplayStatus::Ok => StatusCode::OK,
                };
                let mut res = layer_response(status, "event already processed\n");
                res.headers_mut().insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
                return Ok(res);
            }
            Ok(Claim::InFlight) => {
                end_unclaimed(conn, &config).await;
                tracing::info!(outcome = "in_flight", "another delivery of this event is in flight");
                return Ok(retry_later(&config, StatusCode::CONFLICT, "event in flight, retry later\n"));
            }
            // The wait for an in-flight delivery ran out: lock_timeout, or a
            // statement_timeout shorter than it.
            // At REPEATABLE READ / SERIALIZABLE a claim that waited for a
            // committed one fails with 40001; crossed claims deadlock with 40P01.
            Err(e) if e.code().is_some_and(|c| CLAIM_CONFLICTS.contains(c)) => {
                end_unclaimed(conn, &config).await;
                tracing::info!(
                    outcome = "in_flight",
                    sqlstate = sqlstate(&e),
                    "another delivery of this event is still in flight after the wait bound"
                );
                return Ok(retry_later(&config, StatusCode::CONFLICT, "event in flight, retry later\n"));
            }
            Err(e) if e.code().is_none() && !retried => {
                tracing::warn!(error = %e, "pooled connection unusable; claiming on a fresh one");
                retried = true;
                drop(conn); // marked open: closed, not pooled
            }
            Err(e) => {
                end_unclaimed(conn, &config).await;
                crate::store::report_unmigrated(&config.sql, &e); // 3F000/42P01: says to run migrate, once
                tracing::error!(outcome = "failed", reason = "claim", sqlstate = sqlstate(&e), "claim failed");
                return Ok(unavailable(&config));
            }
        }
    };
    tracing::info!(outcome = "claimed", attempt, "webhook event claimed");

    // 7. Run the handler inside the claim's transaction.
    let tx = WebhookTx::new(conn);
    parts.extensions.insert(tx.clone());
    parts.extensions.insert(WebhookEvent {
        provider: ids.provider.to_owned(),
        scope: ids.scope.to_owned(),
        key: ids.key.to_owned(),
        event_type: ids.event_type.map(str::to_owned),
        attempt: u32::try_from(attempt).unwrap_or(0),
        body: body.clone(),
    });
    let req = Request::from_parts(parts, ReqBody::from(body));
    let result = match poll_fn(|cx| inner.poll_ready(cx)).await {
        Ok(()) => inner.call(req).await,
        Err(e) => Err(e),
    };

    let conn = match tx.take() {
        Ok(Some(conn)) => conn,
        Ok(None) | Err(()) => {
            // A clone of WebhookTx still holds the connection (a task the handler
            // spawned). It is closed, never pooled, when that clone drops.
            tracing::error!(
                outcome = "failed",
                reason = "tx_still_in_use",
                "the handler answered while still holding WebhookTx; rolled back"
            );
            return Ok(layer_response(StatusCode::INTERNAL_SERVER_ERROR, "webhook handler error\n"));
        }
    };
    drop(tx);

    let response = match result {
        Ok(response) => response,
        Err(e) => {
            let conn = rollback(conn, &config).await;
            record_failure(conn, &config, &ids, "inner service returned an error", None).await;
            tracing::error!(outcome = "failed", reason = "service_error", "inner service failed; rolled back");
            return Err(e);
        }
    };
    let status = response.status();
    if let Some(code) = conn.retryable().cloned() {
        // A deadlock, serialization failure or lock timeout in the handler:
        // the sender's retry will succeed, so say so instead of passing on the
        // handler's failure (or a success over an aborted transaction).
        let conn = rollback(conn, &config).await;
        record_failure(conn, &config, &ids, "retryable conflict in the handler's transaction", Some(status)).await;
        tracing::warn!(
            outcome = "failed",
            reason = "retryable_conflict",
            sqlstate = code.code(),
            "handler hit a retryable conflict; rolled back"
        );
        return Ok(retry_later(
            &config,
            StatusCode::SERVICE_UNAVAILABLE,
            "conflict with a concurrent delivery, retry later\n",
        ));
    }
    if !(config.success)(status) {
        let conn = rollback(conn, &config).await;
        record_failure(conn, &config, &ids, "handler answered a non-success status", Some(status)).await;
        tracing::warn!(outcome = "failed", status = status.as_u16(), "handler did not succeed; rolled back");
        return Ok(response.map(|body| ResponseBody::inner(body)));
    }

    // Success: mark done and commit; only a confirmed COMMIT lets the response out.
    match commit(conn, &config, &ids, status, started).await {
        Ok(()) => {
            tracing::info!(outcome = "committed", status = status.as_u16(), "webhook event processed");
            Ok(response.map(|body| ResponseBody::inner(body)))
        }
        Err(conn) => {
            record_failure(conn, &config, &ids, "transaction could not be committed", Some(status)).await;
            Ok(unavailable(&config))
        }
    }
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
    flate2::read::GzDecoder::new(body).take(cap).read_to_end(&mut out).map_err(|_| Inflate::Corrupt)?;
    if out.len() > limit {
        Err(Inflate::TooLarge)
    } else {
        Ok(out.into())
    }
}

/// BEGIN (READ COMMITTED, bounded lock wait) and claim the event.
async fn claim(client: &Object, config: &Config, ids: &Ids<'_>) -> Result<Claim, tokio_postgres::Error> {
    let sql = &config.sql;
    let session_lock_timeout = client
        .simple_query(&sql.begin)
        .await?
        .into_iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .unwrap_or_else(|| "0".to_owned());
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&ids.scope, &ids.provider, &ids.key, &ids.event_type];
    let claimed = |row: tokio_postgres::Row| Claim::Claimed { attempt: row.get(0), started: row.get(1) };
    let insert = client.prepare_cached(&sql.claim).await?;
    // Two rounds at most: a row removed by retention between the conflict and
    // the lookup is claimed again.
    for _ in 0..2 {
        if let Some(row) = client.query_opt(&insert, &params).await? {
            restore_lock_timeout(client, config, &session_lock_timeout).await?;
            return Ok(claimed(row));
        }
        let lookup = client.prepare_cached(&sql.lookup).await?;
        let Some(row) = client.query_opt(&lookup, &params[..3]).await? else { continue };
        let state: &str = row.get(0);
        match state {
            "done" => return Ok(Claim::Done { status: row.get(1) }),
            "failed" => {
                // The last delivery failed and was recorded: take the row over.
                // Concurrent re-claims serialise on its row lock.
                let reclaim = client.prepare_cached(&sql.reclaim).await?;
                if let Some(row) = client.query_opt(&reclaim, &params).await? {
                    restore_lock_timeout(client, config, &session_lock_timeout).await?;
                    return Ok(claimed(row));
                }
                // Another delivery re-claimed it first; see how that ended.
                let Some(row) = client.query_opt(&lookup, &params[..3]).await? else { continue };
                return Ok(match row.get::<_, &str>(0) {
                    "done" => Claim::Done { status: row.get(1) },
                    _ => Claim::InFlight,
                });
            }
            _ => return Ok(Claim::InFlight),
        }
    }
    Ok(Claim::InFlight)
}

/// Gives the handler the connection's own `lock_timeout` back.
async fn restore_lock_timeout(client: &Object, config: &Config, value: &str) -> Result<(), tokio_postgres::Error> {
    let stmt = client.prepare_cached(config.sql.restore_lock_timeout).await?;
    client.query_one(&stmt, &[&value]).await.map(drop)
}

/// Ends a transaction that claimed nothing. On failure the connection is
/// dropped while marked open, so it is closed instead of pooled.
async fn end_unclaimed(mut conn: TxConn, config: &Config) {
    if conn.client().batch_execute(config.sql.rollback).await.is_ok() {
        conn.set_open(false);
    }
}

/// Rolls back and returns the connection if it is reusable.
async fn rollback(mut conn: TxConn, config: &Config) -> Option<TxConn> {
    match conn.client().batch_execute(config.sql.rollback).await {
        Ok(()) => {
            conn.set_open(false);
            Some(conn)
        }
        Err(e) => {
            tracing::warn!(sqlstate = sqlstate(&e), "rollback failed; closing the connection");
            None
        }
    }
}

/// Marks the claim done and commits. `Err` carries the connection when it is
/// still usable (the transaction was rolled back), `None` when it was closed.
async fn commit(
    mut conn: TxConn,
    config: &Config,
    ids: &Ids<'_>,
    status: StatusCode,
    started: SystemTime,
) -> Result<(), Option<TxConn>> {
    let sql = &config.sql;
    let client = conn.client();
    let code = i16::try_from(status.as_u16()).unwrap_or(i16::MAX);
    // A handler that swallowed a failed statement left the transaction aborted:
    // this UPDATE then fails with 25P02, where a bare COMMIT would be silently
    // turned into ROLLBACK (rust-postgres#1334).
    let marked = match client.prepare_cached(&sql.done).await {
        Ok(done) => client.execute(&done, &[&ids.scope, &ids.provider, &ids.key, &code, &started]).await,
        Err(e) => Err(e),
    };
    match marked {
        Ok(1) => {}
        Ok(n) => {
            tracing::error!(
                outcome = "failed",
                reason = "claim_lost",
                rows = n,
                "the claim row is gone from the transaction; rolled back"
            );
            return Err(rollback(conn, config).await);
        }
        Err(e) => {
            tracing::error!(
                outcome = "failed",
                reason = "tx_aborted",
                sqlstate = sqlstate(&e),
                "transaction unusable after the handler; rolled back"
            );
            return Err(rollback(conn, config).await);
        }
    }
    match client.batch_execute(sql.commit).await {
        Ok(()) => {
            conn.set_open(false);
            Ok(())
        }
        Err(e) => {
            // Unknown outcome: PostgreSQL may or may not have committed. The
            // connection is closed; a retry finds out (done → replayed).
            tracing::error!(
                outcome = "failed",
                reason = "commit",
                sqlstate = sqlstate(&e),
                "commit failed or its result is unknown"
            );
            Err(None)
        }
    }
}

/// Records a failed attempt outside the rolled-back transaction, on `conn`
/// when it survived, else on a fresh pooled connection. Best effort: a
/// failure to record is logged, never turned into the response.
async fn record_failure(conn: Option<TxConn>, config: &Config, ids: &Ids<'_>, error: &str, status: Option<StatusCode>) {
    let mut conn = match conn {
        Some(conn) => conn,
        None => match tokio::time::timeout(config.pool_timeout, config.pool.get()).await {
            Ok(Ok(obj)) => TxConn::new(obj),
            _ => {
                tracing::warn!("failed attempt not recorded: no database connection");
                return;
            }
        },
    };
    let sql = &config.sql;
    let code = status.map(|s| i16::try_from(s.as_u16()).unwrap_or(i16::MAX));
    conn.set_open(true);
    let client = conn.client();
    let result = async {
        client.batch_execute(sql.begin_failure).await?;
        let stmt = client.prepare_cached(&sql.record_failure).await?;
        client.execute(&stmt, &[&ids.scope, &ids.provider, &ids.key, &ids.event_type, &error, &code]).await?;
        client.batch_execute(sql.commit).await
    }
    .await;
    match result {
        Ok(()) => conn.set_open(false),
        Err(e) => {
            // Typically another delivery holds the event (lock timeout): it
            // will record its own outcome.
            tracing::warn!(sqlstate = sqlstate(&e), "failed attempt not recorded");
            end_unclaimed(conn, config).await;
        }
    }
}
