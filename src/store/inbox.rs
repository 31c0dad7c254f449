//! The inbox's SQL: accepting a verified delivery as a `pending` row,
//! leasing due rows to workers, and ending each lease (done, retry later,
//! dead, or released), every end fenced by the lease's token.
//!
//! The protocol, after River and Oban (one narrow table; claim with one
//! `UPDATE ... WHERE key IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT n)
//! RETURNING`; completion only while the lease is still this worker's):
//! - [`Inbox::accept`]: one autocommit statement inserts the row as
//!   `pending` (`INSERT ... ON CONFLICT`), and a second one, sent in the same
//!   flight, `pg_notify`s the workers. Only the insert's confirmed commit lets
//!   the layer answer 2xx; a conflict is a duplicate, in whatever state.
//! - [`Inbox::lease`]: due `pending` rows, and `running` rows whose lease
//!   expired (a crashed worker's), become `running` with `attempts + 1`,
//!   `locked_until = now() + lease` and a fresh `lease_token`, in one
//!   statement; rows another worker is leasing at that moment are skipped.
//! - [`LeasedEvent::begin`] opens the work's transaction; [`InboxTx::complete`]
//!   marks the row `done` in it (only if `lease_token` still matches, so a
//!   worker whose lease was taken over cannot complete the row: its business
//!   writes roll back with it) and commits.
//! - [`Inbox::heartbeat`] extends a live lease; [`Inbox::retry_later`] puts a
//!   failed row back to `pending` at a later `run_at`, or `dead` past the
//!   maximum attempts; [`Inbox::release`] hands a row back untouched
//!   (graceful shutdown: the attempt is not counted).

use std::fmt;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use deadpool_postgres::{Object, Pool};
use tokio_postgres::types::{ToSql, Type};

use super::claim::{sqlstate, ClaimError, ClaimErrorKind, CommitError, CommitErrorKind, ScopedEvent};
use super::conn::Finish;
use super::TxConn;
use crate::tx::WebhookTx;
use tokio_postgres::error::SqlState;

/// The request head kept with a pending event, to rebuild the request for
/// the handler: method, URI and the headers the handler may read.
///
/// Headers whose name contains `signature` or `hmac`, `authorization`,
/// `cookie` and `proxy-authorization` are not kept (the signature was
/// verified before the row was written), nor values that are not visible
/// ASCII or UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RequestHead {
    /// The request method (`POST`).
    pub method: String,
    /// The request URI as received (path and query).
    pub uri: String,
    /// The kept headers, in order, names in lower case.
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// The head of `parts` without the headers that must not be stored, nor
    /// those in `drop_also` (headers a custom verifier reads a shared token
    /// from: [`WebhookLayerBuilder::inbox_drop_header`](crate::WebhookLayerBuilder::inbox_drop_header)).
    pub fn of(parts: &http::request::Parts, drop_also: &[http::HeaderName]) -> Self {
        let headers = parts
            .headers
            .iter()
            .filter(|(name, _)| keep_header(name.as_str()) && !drop_also.contains(name))
            .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
            .collect();
        Self { method: parts.method.to_string(), uri: parts.uri.to_string(), headers }
    }

    /// Rebuilds a request with this head and `body`.
    ///
    /// # Errors
    /// When the stored method, URI or a header no longer parses (a row
    /// written by hand).
    pub fn to_request<B>(&self, body: B) -> Result<http::Request<B>, http::Error> {
        let mut req = http::Request::builder().method(self.method.as_str()).uri(self.uri.as_str());
        for (name, value) in &self.headers {
            req = req.header(name.as_str(), value.as_str());
        }
        req.body(body)
    }
}

/// Whether a header may be stored: not a signature, nor a credential.
fn keep_header(name: &str) -> bool {
    !(name.contains("signature")
        || name.contains("hmac")
        || name == "authorization"
        || name == "proxy-authorization"
        || name == "cookie")
}

/// The inbox store: the statements of inbox mode on one pool and schema.
/// Cheap to clone.
#[derive(Clone)]
pub struct Inbox {
    inner: std::sync::Arc<Inner>,
}

struct Inner {
    pool: Pool,
    schema: String,
    sql: Sql,
    pool_timeout: Duration,
    database_timeout: Duration,
    cache: bool,
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox").field("schema", &self.inner.schema).finish_non_exhaustive()
    }
}

struct Sql {
    accept: String,
    notify: &'static str,
    lease: String,
    heartbeat: String,
    complete: String,
    retry_later: String,
    release: String,
    stats: String,
    oldest_pending: String,
    list: String,
    requeue: String,
}

impl Sql {
    fn new(schema: &str) -> Self {
        let t = format!("{schema}.webhook_events");
        let pk = "scope = $1 AND provider = $2 AND event_key = $3";
        let fence = "state = 'running' AND lease_token = $4::text::uuid";
        Self {
            // The insert commits alone; the notification goes in a transaction of
            // its own, sent in the same flight: a transaction that notifies takes a
            // cluster-wide lock through its commit's WAL flush, so notifying inside
            // the accept would serialise every accept's durable commit.
            accept: format!(
                "INSERT INTO {t} AS e (scope, provider, event_key, event_type, state, attempts, payload,
                                       request_head, run_at)
                 VALUES ($1, $2, $3, $4, 'pending', 0, $5, $6::text::jsonb, now())
                 -- A row a synchronous-mode delivery left `failed` (a route switched
                 -- to inbox mode) is taken over; any other row is a duplicate.
                 ON CONFLICT (scope, provider, event_key) DO UPDATE
                    SET state = 'pending', payload = excluded.payload, request_head = excluded.request_head,
                        run_at = now(), event_type = coalesce(excluded.event_type, e.event_type)
                  WHERE e.state = 'failed'
                 RETURNING 1"
            ),
            notify: "SELECT pg_notify($1, $2)",
            // Rows whose lease expired after their last allowed run (the worker
            // died each time: a payload that crashes workers) are buried as `dead`
            // instead of leased again.
            // One locking subquery per partial index (`run_at`, `locked_until`), so
            // neither scans the table; at most 2 x $2 rows are locked for the
            // statement and $2 leased.
            lease: format!(
                "WITH pending AS (
                     SELECT scope, provider, event_key, state, attempts, run_at AS at FROM {t}
                     WHERE state = 'pending' AND run_at <= now()
                       AND ($3::text IS NULL OR provider = $3) AND ($4::text IS NULL OR scope = $4)
                     ORDER BY run_at LIMIT $2 FOR UPDATE SKIP LOCKED),
                 expired AS (
                     SELECT scope, provider, event_key, state, attempts, locked_until AS at FROM {t}
                     WHERE state = 'running' AND locked_until < now()
                       AND ($3::text IS NULL OR provider = $3) AND ($4::text IS NULL OR scope = $4)
                     ORDER BY locked_until LIMIT $2 FOR UPDATE SKIP LOCKED),
                 due AS (
                     SELECT * FROM (SELECT * FROM expired UNION ALL SELECT * FROM pending) c ORDER BY at LIMIT $2),
                 buried AS (
                     UPDATE {t} e SET state = 'dead', run_at = NULL, locked_until = NULL, lease_token = NULL,
                            last_failed_at = now(),
                            last_error = 'the worker lost its lease on the last allowed attempt (crashed or killed)'
                     FROM due
                     WHERE (e.scope, e.provider, e.event_key) = (due.scope, due.provider, due.event_key)
                       AND due.state = 'running' AND due.attempts >= $5
                     RETURNING 1)
                 UPDATE {t} e SET state = 'running', attempts = e.attempts + 1, run_at = NULL,
                        locked_until = now() + make_interval(secs => $1), lease_token = gen_random_uuid()
                 FROM due
                 WHERE (e.scope, e.provider, e.event_key) = (due.scope, due.provider, due.event_key)
                   AND NOT (due.state = 'running' AND due.attempts >= $5)
                 RETURNING e.scope, e.provider, e.event_key, e.event_type, e.attempts, e.payload,
                           e.request_head::text, e.lease_token::text"
            ),
            heartbeat: format!(
                "UPDATE {t} SET locked_until = now() + make_interval(secs => $5) WHERE {pk} AND {fence} RETURNING 1"
            ),
            // Fails (22012) when the lease is no longer this worker's, so the
            // COMMIT sent in the same flight ends an aborted transaction.
            complete: format!(
                "WITH done AS (
                     UPDATE {t} SET state = 'done', response_status = $5, completed_at = now(),
                            locked_until = NULL, lease_token = NULL
                     WHERE {pk} AND {fence} AND now() = $6 RETURNING 1)
                 SELECT 1 / count(*)::int FROM done"
            ),
            retry_later: format!(
                "UPDATE {t} SET state = CASE WHEN attempts >= $5 THEN 'dead' ELSE 'pending' END,
                        run_at = CASE WHEN attempts >= $5 THEN NULL ELSE now() + make_interval(secs => $6) END,
                        last_error = $7, response_status = $8,
                        last_failed_at = now(), locked_until = NULL, lease_token = NULL
                 WHERE {pk} AND {fence} RETURNING state"
            ),
            release: format!(
                "UPDATE {t} SET state = 'pending', attempts = greatest(attempts - 1, 0), run_at = now(),
                        locked_until = NULL, lease_token = NULL
                 WHERE {pk} AND {fence} RETURNING 1"
            ),
            stats: format!("SELECT provider, state, count(*) FROM {t} GROUP BY provider, state ORDER BY 1, 2"),
            oldest_pending: format!(
                "SELECT extract(epoch FROM now() - min(received_at))::float8 FROM {t} WHERE state = 'pending'"
            ),
            list: format!(
                "SELECT provider, scope, event_key, event_type, state, attempts, last_error, response_status,
                        received_at, last_failed_at
                 FROM {t} WHERE state = $1 AND ($2::text IS NULL OR provider = $2)
                 ORDER BY received_at LIMIT $3"
            ),
            requeue: format!(
                "UPDATE {t} SET state = 'pending', attempts = 0, run_at = now(), locked_until = NULL,
                        lease_token = NULL
                 WHERE state = 'dead' AND ($1::text IS NULL OR scope = $1) AND ($2::text IS NULL OR provider = $2)
                   AND ($3::text IS NULL OR event_key = $3)
                 RETURNING 1"
            ),
        }
    }
}

/// The answer of statements run on `obj` under the database timeout: a
/// connection that timed out or cannot serve writes is closed, never pooled.
fn settle(
    obj: Object,
    result: Result<Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>, tokio::time::error::Elapsed>,
) -> Result<Vec<tokio_postgres::Row>, ClaimError> {
    match result {
        Ok(Ok(rows)) => Ok(rows),
        Ok(Err(e)) => {
            if super::claim::session_unusable(&e) {
                drop(Object::take(obj));
            }
            Err(ClaimError::of(ClaimErrorKind::Database, Some(e)))
        }
        Err(_) => {
            drop(Object::take(obj));
            Err(ClaimError::of(ClaimErrorKind::Timeout, None))
        }
    }
}

/// The channel the inbox notifies on, per schema: a digest of the schema's
/// name, so that any valid schema name (up to 63 bytes) gives a channel
/// name within PostgreSQL's 63-byte identifier limit.
pub(crate) fn channel(schema: &str) -> String {
    use sha2::{Digest as _, Sha256};
    format!("webhook_inbox_{}", &hex::encode(Sha256::digest(schema.as_bytes()))[..16])
}

/// A row leased to this worker: its event, payload and lease token.
#[derive(Debug, Clone)]
pub struct LeasedEvent {
    event: ScopedEvent,
    attempt: u32,
    payload: Bytes,
    head: Option<RequestHead>,
    token: String,
}

impl LeasedEvent {
    /// The event.
    pub fn event(&self) -> &ScopedEvent {
        &self.event
    }

    /// Which run this is: 1 the first time, higher after failures.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The raw body as received and verified.
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// The stored request head (absent for rows written without one).
    pub fn head(&self) -> Option<&RequestHead> {
        self.head.as_ref()
    }

    fn key_params(&self) -> [&(dyn ToSql + Sync); 4] {
        [self.event.scope_ref(), self.event.provider_ref(), self.event.key_ref(), &self.token]
    }
}

/// One state count: see [`Inbox::stats`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateCount {
    /// The provider.
    pub provider: String,
    /// `pending`, `running`, `done`, `failed` or `dead`.
    pub state: String,
    /// Rows in that state.
    pub count: i64,
}

/// A row as an operator sees it: see [`Inbox::list`].
#[derive(Debug, Clone)]
pub struct EventRow {
    /// The provider.
    pub provider: String,
    /// The scope.
    pub scope: String,
    /// The idempotency key.
    pub key: String,
    /// The event type.
    pub event_type: Option<String>,
    /// The state.
    pub state: String,
    /// Runs of the handler so far.
    pub attempts: i32,
    /// The last failure's description (never a payload or secret).
    pub last_error: Option<String>,
    /// The last HTTP status the handler answered.
    pub response_status: Option<i16>,
    /// When the first delivery arrived.
    pub received_at: SystemTime,
    /// When the last failure was recorded.
    pub last_failed_at: Option<SystemTime>,
}

/// Where a failed row went: see [`Inbox::retry_later`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AfterFailure {
    /// Back to `pending`, due again after the delay.
    Retry,
    /// `dead`: past the maximum attempts, kept for an operator.
    Dead,
    /// The lease was no longer this worker's: nothing changed.
    LeaseLost,
}

impl Inbox {
    /// The inbox on `pool`'s database, tables under `schema` (a checked,
    /// plain identifier), each statement bounded by `database_timeout`.
    pub(crate) fn new(
        pool: Pool,
        schema: &str,
        pool_timeout: Duration,
        database_timeout: Duration,
        transaction_pooler: bool,
    ) -> Self {
        Self {
            inner: std::sync::Arc::new(Inner {
                pool,
                schema: schema.to_owned(),
                sql: Sql::new(schema),
                pool_timeout,
                database_timeout,
                cache: !transaction_pooler,
            }),
        }
    }

    /// The inbox under [`DEFAULT_SCHEMA`](super::DEFAULT_SCHEMA) with the
    /// default timeouts (pool 5 s, each statement 2 s).
    ///
    /// # Errors
    /// [`ConfigError`](crate::ConfigError) for an invalid schema name.
    pub fn with_schema(pool: Pool, schema: &str) -> Result<Self, crate::ConfigError> {
        super::check_schema_name(schema)
            .map_err(|m| crate::ConfigError::of(crate::layer::ConfigErrorKind::InvalidSchema, m))?;
        Ok(Self::new(pool, schema, Duration::from_secs(5), super::DEFAULT_DATABASE_TIMEOUT, false))
    }

    /// The notification channel of this inbox (`webhook_inbox_` and 16 hex
    /// digits of the schema name's SHA-256).
    pub fn channel(&self) -> String {
        channel(&self.inner.schema)
    }

    async fn connection(&self) -> Result<Object, ClaimError> {
        match tokio::time::timeout(self.inner.pool_timeout, self.inner.pool.get()).await {
            Ok(Ok(obj)) => Ok(obj),
            Ok(Err(e)) => {
                tracing::error!(error = %e, "no database connection");
                Err(ClaimError::of(ClaimErrorKind::Unavailable, None))
            }
            Err(_) => Err(ClaimError::of(ClaimErrorKind::PoolTimeout, None)),
        }
    }

    /// Runs one autocommit statement under the database timeout.
    async fn run(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        types: &[Type],
    ) -> Result<Vec<tokio_postgres::Row>, ClaimError> {
        let obj = self.connection().await?;
        let cache = self.inner.cache;
        let statement = async {
            let prepared = super::conn::prepare_on(&obj, sql, cache).await?;
            super::conn::query_on(&obj, prepared.as_ref(), sql, params, types).await
        };
        let result = tokio::time::timeout(self.inner.database_timeout, statement).await;
        settle(obj, result)
    }

    /// Stores a verified delivery as `pending` and notifies the workers, in
    /// two autocommit statements sent in one flight. `Ok(true)`: accepted and committed (answer
    /// 2xx); `Ok(false)`: a row for the event exists already (a duplicate:
    /// nothing written), except a `failed` one a synchronous-mode delivery
    /// left, which is taken over (`Ok(true)`).
    ///
    /// # Errors
    /// [`ClaimError`] when the database is unavailable or the statement
    /// failed: nothing is stored, and the sender must get a 5xx.
    pub async fn accept(&self, event: &ScopedEvent, payload: &[u8], head: &RequestHead) -> Result<bool, ClaimError> {
        let head = serde_json::to_string(head).expect("a RequestHead serialises");
        let channel = self.channel();
        let params: [&(dyn ToSql + Sync); 6] =
            [event.scope_ref(), event.provider_ref(), event.key_ref(), &event.get_event_type(), &payload, &head];
        let types = [Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT, Type::BYTEA, Type::TEXT];
        let notify: [&(dyn ToSql + Sync); 2] = [&channel, event.provider_ref()];
        let obj = self.connection().await?;
        let cache = self.inner.cache;
        let sql = &self.inner.sql;
        let statements = async {
            let insert = super::conn::prepare_on(&obj, &sql.accept, cache).await?;
            let wake = super::conn::prepare_on(&obj, sql.notify, cache).await?;
            // One flight: the insert, then the notification in a transaction of
            // its own (a spurious wake-up for a duplicate costs the workers one
            // empty lease).
            let (inserted, notified) = tokio::join!(
                super::conn::query_on(&obj, insert.as_ref(), &sql.accept, &params, &types),
                super::conn::query_on(&obj, wake.as_ref(), sql.notify, &notify, &[Type::TEXT, Type::TEXT]),
            );
            if let Err(e) = notified {
                tracing::warn!(
                    sqlstate = sqlstate(&e),
                    "inbox: notification not sent; workers find the row by polling"
                );
            }
            inserted
        };
        let result = tokio::time::timeout(self.inner.database_timeout, statements).await;
        settle(obj, result).map(|rows| !rows.is_empty())
    }

    /// Leases up to `limit` due rows for `lease` (optionally of one provider
    /// and scope): each becomes `running` with `attempts + 1` and a fresh
    /// lease token. Rows other workers are leasing are skipped.
    ///
    /// # Errors
    /// [`ClaimError`] when the database is unavailable.
    pub async fn lease(
        &self,
        limit: usize,
        lease: Duration,
        provider: Option<&str>,
        scope: Option<&str>,
    ) -> Result<Vec<LeasedEvent>, ClaimError> {
        self.lease_bounded(limit, lease, provider, scope, u32::MAX).await
    }

    /// [`lease`](Self::lease), and a row whose lease expired after run
    /// `max_attempts` (its worker died every time) becomes `dead` instead of
    /// running again.
    ///
    /// # Errors
    /// [`ClaimError`] when the database is unavailable.
    pub async fn lease_bounded(
        &self,
        limit: usize,
        lease: Duration,
        provider: Option<&str>,
        scope: Option<&str>,
        max_attempts: u32,
    ) -> Result<Vec<LeasedEvent>, ClaimError> {
        let secs = lease.as_secs_f64();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let max = i32::try_from(max_attempts).unwrap_or(i32::MAX);
        let params: [&(dyn ToSql + Sync); 5] = [&secs, &limit, &provider, &scope, &max];
        let types = [Type::FLOAT8, Type::INT8, Type::TEXT, Type::TEXT, Type::INT4];
        let rows = self.run(&self.inner.sql.lease, &params, &types).await?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let head: Option<String> = row.get(6);
                LeasedEvent {
                    event: ScopedEvent::new(row.get::<_, String>(1), row.get::<_, String>(0), row.get::<_, String>(2))
                        .with_type(row.get(3)),
                    attempt: u32::try_from(row.get::<_, i32>(4)).unwrap_or(0),
                    payload: row.get::<_, Option<Vec<u8>>>(5).map(Bytes::from).unwrap_or_default(),
                    head: head.and_then(|h| serde_json::from_str(&h).ok()),
                    token: row.get(7),
                }
            })
            .collect())
    }

    /// Extends `leased`'s lease to `lease` from now. `Ok(false)`: the lease
    /// is no longer this worker's (it expired and another worker took the
    /// row, or the row ended).
    ///
    /// # Errors
    /// [`ClaimError`] when the database is unavailable.
    pub async fn heartbeat(&self, leased: &LeasedEvent, lease: Duration) -> Result<bool, ClaimError> {
        let secs = lease.as_secs_f64();
        let [a, b, c, d] = leased.key_params();
        let params: [&(dyn ToSql + Sync); 5] = [a, b, c, d, &secs];
        let types = [Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT, Type::FLOAT8];
        Ok(!self.run(&self.inner.sql.heartbeat, &params, &types).await?.is_empty())
    }

    /// Puts a failed row back to `pending`, due after `delay`, or `dead` when
    /// it has run `max_attempts` times; records `error` (never a payload)
    /// and the handler's `status`. Fenced by the lease.
    ///
    /// # Errors
    /// [`ClaimError`] when the database is unavailable.
    pub async fn retry_later(
        &self,
        leased: &LeasedEvent,
        max_attempts: u32,
        delay: Duration,
        error: &str,
        status: Option<u16>,
    ) -> Result<AfterFailure, ClaimError> {
        let max = i32::try_from(max_attempts).unwrap_or(i32::MAX);
        let secs = delay.as_secs_f64();
        let status = status.map(|s| i16::try_from(s).unwrap_or(i16::MAX));
        let [a, b, c, d] = leased.key_params();
        let params: [&(dyn ToSql + Sync); 8] = [a, b, c, d, &max, &secs, &error, &status];
        let types = [Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT, Type::INT4, Type::FLOAT8, Type::TEXT, Type::INT2];
        let rows = self.run(&self.inner.sql.retry_later, &params, &types).await?;
        Ok(match rows.first().map(|r| r.get::<_, String>(0)) {
            Some(state) if state == "dead" => AfterFailure::Dead,
            Some(_) => AfterFailure::Retry,
            None => AfterFailure::LeaseLost,
        })
    }

    /// Hands a leased row back untouched: `pending`, due now, the attempt not
    /// counted (graceful shutdown). `Ok(false)` when the lease was no longer
    /// this worker's.
    ///
    /// # Errors
    /// [`ClaimError`] when the database is unavailable.
    pub async fn release(&self, leased: &LeasedEvent) -> Result<bool, ClaimError> {
        let params = leased.key_params();
        let types = [Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT];
        Ok(!self.run(&self.inner.sql.release, &params, &types).await?.is_empty())
    }

    /// Rows by provider and state.
    ///
    /// # Errors
    /// [`ClaimError`] when the database is unavailable.
    pub async fn stats(&self) -> Result<Vec<StateCount>, ClaimError> {
        let rows = self.run(&self.inner.sql.stats, &[], &[]).await?;
        Ok(rows.iter().map(|r| StateCount { provider: r.get(0), state: r.get(1), count: r.get(2) }).collect())
    }

    /// How long the oldest `pending` row has waited since it was received;
    /// `None` when nothing is pending.
    ///
    /// # Errors
    /// [`ClaimError`] when the database is unavailable.
    pub async fn oldest_pending_age(&self) -> Result<Option<Duration>, ClaimError> {
        let rows = self.run(&self.inner.sql.oldest_pending, &[], &[]).await?;
        Ok(rows.first().and_then(|r| r.get::<_, Option<f64>>(0)).map(|s| Duration::from_secs_f64(s.max(0.0))))
    }

    /// Up to `limit` rows in `state` (`failed`, `dead`, `pending`, `running`,
    /// `done`), oldest first, optionally of one provider, with their last
    /// error.
    ///
    /// # Errors
    /// [`ClaimError`] when the database is unavailable.
    pub async fn list(&self, state: &str, provider: Option<&str>, limit: usize) -> Result<Vec<EventRow>, ClaimError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let params: [&(dyn ToSql + Sync); 3] = [&state, &provider, &limit];
        let rows = self.run(&self.inner.sql.list, &params, &[Type::TEXT, Type::TEXT, Type::INT8]).await?;
        Ok(rows
            .iter()
            .map(|r| EventRow {
                provider: r.get(0),
                scope: r.get(1),
                key: r.get(2),
                event_type: r.get(3),
                state: r.get(4),
                attempts: r.get(5),
                last_error: r.get(6),
                response_status: r.get(7),
                received_at: r.get(8),
                last_failed_at: r.get(9),
            })
            .collect())
    }

    /// Puts `dead` rows back to `pending` with a fresh attempt budget: one
    /// event (`scope`, `provider`, `key` all given) or every dead row
    /// matching the given parts. Returns how many.
    ///
    /// # Errors
    /// [`ClaimError`] when the database is unavailable.
    pub async fn requeue_dead(
        &self,
        scope: Option<&str>,
        provider: Option<&str>,
        key: Option<&str>,
    ) -> Result<u64, ClaimError> {
        let params: [&(dyn ToSql + Sync); 3] = [&scope, &provider, &key];
        let rows = self.run(&self.inner.sql.requeue, &params, &[Type::TEXT, Type::TEXT, Type::TEXT]).await?;
        Ok(rows.len() as u64)
    }
}

impl LeasedEvent {
    /// Opens the transaction the event's work runs in (READ COMMITTED).
    ///
    /// # Errors
    /// [`ClaimError`] when no connection can be had or `BEGIN` fails.
    pub async fn begin(&self, inbox: &Inbox) -> Result<InboxTx, ClaimError> {
        let obj = inbox.connection().await?;
        let conn = TxConn::opening(obj, inbox.inner.cache);
        // BEGIN and the transaction's now() in one flight: the completion
        // matches only inside this very transaction.
        let begin = async {
            let client = conn.client();
            let (begun, now) = tokio::join!(
                client.batch_execute("BEGIN ISOLATION LEVEL READ COMMITTED"),
                client.query_typed("SELECT now()", &[])
            );
            begun?;
            now.map(|rows| rows.first().map(|r| r.get::<_, SystemTime>(0)))
        };
        match tokio::time::timeout(inbox.inner.database_timeout, begin).await {
            Ok(Ok(Some(started))) => {
                Ok(InboxTx { tx: WebhookTx::new(conn), leased: self.clone(), inbox: inbox.clone(), started })
            }
            Ok(Ok(None)) => Err(ClaimError::of(ClaimErrorKind::Database, None)),
            Ok(Err(e)) => Err(ClaimError::of(ClaimErrorKind::Database, Some(e))),
            Err(_) => Err(ClaimError::of(ClaimErrorKind::Timeout, None)),
        }
    }
}

/// The transaction a leased event's work runs in. [`complete`](Self::complete)
/// commits the work with the row marked `done`, only while the lease is
/// still this worker's; dropping it rolls the work back.
#[must_use = "dropping the transaction rolls the work back"]
pub struct InboxTx {
    tx: WebhookTx,
    leased: LeasedEvent,
    inbox: Inbox,
    /// The work transaction's `now()`: the completion checks it runs there.
    started: SystemTime,
}

impl fmt::Debug for InboxTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InboxTx").field("event", &self.leased.event).finish_non_exhaustive()
    }
}

impl InboxTx {
    /// The transaction handle for the work (the handler's `WebhookTx`).
    pub fn tx(&self) -> WebhookTx {
        self.tx.clone()
    }

    /// The SQLSTATE of a retryable conflict a statement through the handle
    /// met (40P01, 40001, 55P03).
    pub fn retryable_conflict(&self) -> Option<&'static str> {
        self.tx.peek(TxConn::retryable).flatten()
    }

    /// Marks the row `done` with `status` inside the work's transaction,
    /// fenced by the lease token, and commits.
    ///
    /// # Errors
    /// [`CommitErrorKind::LeaseLost`] when the lease was taken over, or the
    /// work ended its transaction itself (the work is rolled back, the row is
    /// left to its lease), [`CommitErrorKind::Aborted`] for a transaction a
    /// failed statement aborted, [`CommitErrorKind::Unknown`] when COMMIT's
    /// answer never came, [`CommitErrorKind::StillInUse`] when a clone of the
    /// handle still holds the connection.
    pub async fn complete(self, status: u16) -> Result<(), CommitError> {
        let conn = match self.tx.take() {
            Ok(Some(conn)) => conn,
            _ => return Err(CommitError::of(CommitErrorKind::StillInUse, None)),
        };
        let code = i16::try_from(status).unwrap_or(i16::MAX);
        let sql = &self.inbox.inner.sql.complete;
        let [a, b, c, d] = self.leased.key_params();
        let started = self.started;
        let params: [&(dyn ToSql + Sync); 6] = [a, b, c, d, &code, &started];
        let types = [Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT, Type::INT2, Type::TIMESTAMPTZ];
        let finish = async move {
            let prepared = match conn.prepare(sql).await {
                Ok(prepared) => prepared,
                Err(e) => return Err(CommitError::of(CommitErrorKind::Aborted, Some(e))),
            };
            // The fenced marking and COMMIT in one flight.
            match conn.finish_with(None, prepared.as_ref(), sql, &params, &types, "COMMIT").await {
                Ok(_) => Ok(()),
                Err(Finish::Statement(e)) if e.code() == Some(&SqlState::DIVISION_BY_ZERO) => {
                    Err(CommitError::of(CommitErrorKind::LeaseLost, None))
                }
                Err(Finish::Statement(e)) => Err(CommitError::of(CommitErrorKind::Aborted, Some(e))),
                Err(Finish::Commit(e)) => {
                    tracing::error!(sqlstate = sqlstate(&e), "inbox commit failed or its result is unknown");
                    Err(CommitError::of(CommitErrorKind::Unknown, Some(e)))
                }
            }
        };
        match tokio::time::timeout(self.inbox.inner.database_timeout, finish).await {
            Ok(result) => result,
            Err(_) => Err(CommitError::of(CommitErrorKind::Unknown, None)),
        }
    }

    /// Rolls the work back (the row stays leased; end it with
    /// [`Inbox::retry_later`] or [`Inbox::release`]).
    pub async fn rollback(self) {
        if let Ok(Some(conn)) = self.tx.take() {
            let _ = tokio::time::timeout(self.inbox.inner.database_timeout, conn.rollback()).await;
        }
    }
}
