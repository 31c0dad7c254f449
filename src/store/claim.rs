//! The claim protocol, without HTTP: claim an event, do its work inside the
//! claim's transaction, then commit (marking it done) or fail (rolling back
//! and recording the attempt).
//!
//! [`WebhookLayer`](crate::WebhookLayer) runs it for every verified
//! delivery; anything else that must process an event exactly once (a queue
//! consumer, the inbox worker) can run it the same way:
//!
//! ```no_run
//! # async fn run(pool: deadpool_postgres::Pool) -> Result<(), Box<dyn std::error::Error>> {
//! use webhook_idempotency::store::{Claim, ClaimStore, ScopedEvent};
//!
//! let store = ClaimStore::builder(pool).build()?;
//! let event = ScopedEvent::new("sqs", "orders", "msg-8f14e45f").event_type("order.paid");
//! match store.claim(&event).await? {
//!     Claim::Claimed(claimed) => {
//!         let client = claimed.tx().client().await?;
//!         client.execute("INSERT INTO paid_orders (id) VALUES ($1)", &[&"ord_1"]).await?;
//!         drop(client);
//!         claimed.commit(200).await?; // the claim and the insert, in one COMMIT
//!     }
//!     Claim::Done { .. } => {}  // processed before: nothing to do
//!     Claim::InFlight => {}     // another worker holds it: try later
//! }
//! # Ok(()) }
//! ```
//!
//! The states of one claim, and who may move between them:
//! - [`ClaimStore::claim`] begins a READ COMMITTED transaction (or the
//!   configured level) and inserts `(provider, scope, key)` with
//!   `INSERT ... ON CONFLICT`, already in the state a commit gives it
//!   (`done`, status 200): no other transaction sees the row before the
//!   commit, and a rollback removes it, so the row is written once. The
//!   primary key decides races, across processes too. A delivery in flight
//!   holds a transaction-level advisory lock on its event; a claim that
//!   cannot take it at once (`pg_try_advisory_xact_lock`) inserts nothing,
//!   waits for no row lock, and checks again without a connection, with
//!   backoff, for up to the store's in-flight wait.
//! - [`ClaimedEvent`] owns the open transaction: [`commit`](ClaimedEvent::commit)
//!   commits it (storing another status first); [`fail`](ClaimedEvent::fail) rolls
//!   back and records the failed attempt in a transaction of its own;
//!   dropping it closes the connection (PostgreSQL rolls back). A connection
//!   inside a transaction never returns to the pool.
//! - A `failed` row is claimed again by the next delivery (`attempts` + 1);
//!   a `done` row answers [`Claim::Done`] with the status the handler gave.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use deadpool_postgres::{Object, Pool};
use tokio::time::Instant;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

/// The parameter types of the lookup: scope, provider, key.
const TEXT3: [Type; 3] = [Type::TEXT, Type::TEXT, Type::TEXT];
/// The claim's: scope, provider, key, type, the assumed status.
const CLAIM_TYPES: [Type; 5] = [Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT, Type::INT2];

use super::conn::{prepare_on, query_on, Finish};
use super::statements::ASSUMED_STATUS;
use super::{IsolationLevel, Statements, TxConn};
use crate::tx::WebhookTx;

/// The first pause before checking again on an event another delivery holds.
const IN_FLIGHT_FIRST_CHECK: Duration = Duration::from_millis(10);
/// The longest pause between checks (the backoff doubles up to it).
const IN_FLIGHT_MAX_CHECK: Duration = Duration::from_millis(200);

/// SQLSTATEs of a claim attempt that met another writer of the same row:
/// its row lock not free within the session's `lock_timeout` (55P03) or
/// `statement_timeout` (57014), a committed claim newer than the
/// snapshot at REPEATABLE READ / SERIALIZABLE (40001), crossed claims
/// (40P01). Each is checked again in a new transaction.
const CLAIM_CONFLICTS: [SqlState; 4] = [
    SqlState::LOCK_NOT_AVAILABLE,
    SqlState::QUERY_CANCELED,
    SqlState::T_R_SERIALIZATION_FAILURE,
    SqlState::T_R_DEADLOCK_DETECTED,
];

/// An event as the store knows it: `(provider, scope, key)` is its identity,
/// the event type is stored beside it. Each part is 1 to 512 bytes without
/// NUL (checked by the layer; the database refuses NUL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopedEvent {
    provider: String,
    scope: String,
    key: String,
    event_type: Option<String>,
}

impl ScopedEvent {
    /// The event `key` from `provider` in `scope`.
    pub fn new(provider: impl Into<String>, scope: impl Into<String>, key: impl Into<String>) -> Self {
        Self { provider: provider.into(), scope: scope.into(), key: key.into(), event_type: None }
    }

    /// With its event type (`payment_intent.succeeded`, `push`).
    #[must_use]
    pub fn event_type(mut self, event_type: impl Into<String>) -> Self {
        self.event_type = Some(event_type.into());
        self
    }

    /// The provider name.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The scope (tenant).
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The idempotency key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The event type, if known.
    pub fn get_event_type(&self) -> Option<&str> {
        self.event_type.as_deref()
    }

    pub(crate) fn scope_ref(&self) -> &String {
        &self.scope
    }

    pub(crate) fn provider_ref(&self) -> &String {
        &self.provider
    }

    pub(crate) fn key_ref(&self) -> &String {
        &self.key
    }

    pub(crate) fn with_type(mut self, event_type: Option<String>) -> Self {
        self.event_type = event_type;
        self
    }
}

/// Builds a [`ClaimStore`].
#[derive(Debug)]
#[must_use]
pub struct ClaimStoreBuilder {
    pool: Pool,
    schema: String,
    isolation: IsolationLevel,
    pool_timeout: Duration,
    in_flight_wait: Duration,
    database_timeout: Duration,
    transaction_pooler: bool,
    lookup_first: bool,
}

impl ClaimStoreBuilder {
    /// The schema holding the tables (default [`DEFAULT_SCHEMA`](super::DEFAULT_SCHEMA)).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The claim transaction's isolation level (default READ COMMITTED).
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.isolation = level;
        self
    }

    /// How long to wait for a pooled connection (default 5 s).
    pub fn pool_timeout(mut self, timeout: Duration) -> Self {
        self.pool_timeout = timeout;
        self
    }

    /// How long a claim keeps checking an event another claim holds before
    /// answering [`Claim::InFlight`] (default 5 s; zero: check once). No
    /// connection is held between checks.
    pub fn in_flight_wait(mut self, wait: Duration) -> Self {
        self.in_flight_wait = wait;
        self
    }

    /// The client-side deadline of each database step on the request path
    /// (one claim attempt, the check with its COMMIT, the failure
    /// record), default 2 s: well under the senders' own timeouts (Slack 3 s,
    /// Shopify 5 s, GitHub 10 s). A step past it has its connection discarded
    /// (detached from the pool, its statement cancelled, closed), never
    /// pooled; a claim answers [`ClaimErrorKind::Timeout`], a commit
    /// [`CommitErrorKind::Unknown`]. It covers what PostgreSQL's own timeouts
    /// cannot: a network that stops answering without closing (a NAT or
    /// firewall dropping the connection's mapping), where the server never
    /// sees the statement.
    pub fn database_timeout(mut self, timeout: Duration) -> Self {
        self.database_timeout = timeout;
        self
    }

    /// Set when the pool's connections go through a transaction-mode pooler
    /// (PgBouncer `pool_mode = transaction`, Supavisor, RDS Proxy), which may
    /// run each transaction on another server session: the store then sends
    /// its statements unnamed, with their parameter types, in one round trip
    /// each, and caches no prepared statement on the connection
    /// ([`TxClient::prepare_cached`](crate::TxClient::prepare_cached) prepares
    /// afresh too). Default off: statements are prepared once per pooled
    /// connection.
    pub fn transaction_pooler(mut self, behind_pooler: bool) -> Self {
        self.transaction_pooler = behind_pooler;
        self
    }

    /// Whether a claim first looks for a `done` row outside any transaction
    /// (default `true`).
    ///
    /// - `true`: a duplicate of a done event costs one autocommit `SELECT`
    ///   (one round trip, no transaction, no WAL); a new event costs that
    ///   lookup too, then `BEGIN` + the claim in one flight.
    /// - `false`, for traffic where duplicates are rare: a new event is
    ///   claimed in the first flight (one statement and one round trip fewer);
    ///   a duplicate costs `BEGIN` + the claim (which finds the `done` row and
    ///   writes nothing: no transaction id, no WAL), then the lookup +
    ///   `ROLLBACK`: two round trips and four statements.
    ///
    /// Exactly-once does not depend on it: the primary key and the claim's
    /// advisory lock decide in both. BENCHMARKS.md compares the two. With
    /// `false`, keep the claim at READ COMMITTED (the default): at
    /// SERIALIZABLE the claim's read of the `done` row takes predicate locks,
    /// and claims of neighbouring keys may fail each other's COMMIT (40001,
    /// answered 503 and retried by the sender).
    pub fn lookup_first(mut self, lookup_first: bool) -> Self {
        self.lookup_first = lookup_first;
        self
    }

    /// Builds the store.
    ///
    /// # Errors
    /// [`ConfigError`](crate::ConfigError) for a schema name that is not a
    /// plain identifier.
    pub fn build(self) -> Result<ClaimStore, crate::ConfigError> {
        super::check_schema_name(&self.schema)
            .map_err(|m| crate::ConfigError::of(crate::layer::ConfigErrorKind::InvalidSchema, m))?;
        Ok(ClaimStore {
            inner: Arc::new(Inner {
                sql: Statements::new(&self.schema, self.isolation, !self.lookup_first),
                pool: self.pool,
                pool_timeout: self.pool_timeout,
                in_flight_wait: self.in_flight_wait,
                database_timeout: self.database_timeout,
                transaction_pooler: self.transaction_pooler,
                lookup_first: self.lookup_first,
            }),
        })
    }
}

/// Claims events in PostgreSQL: the protocol the layer and the workers share.
/// Cheap to clone. See the [module docs](self).
#[derive(Clone)]
pub struct ClaimStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    sql: Statements,
    pool_timeout: Duration,
    in_flight_wait: Duration,
    database_timeout: Duration,
    transaction_pooler: bool,
    lookup_first: bool,
}

impl fmt::Debug for ClaimStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimStore").field("in_flight_wait", &self.inner.in_flight_wait).finish_non_exhaustive()
    }
}

/// What [`ClaimStore::claim`] found.
#[derive(Debug)]
#[must_use]
pub enum Claim {
    /// This caller owns the event: do its work in [`ClaimedEvent::tx`], then
    /// commit or fail.
    Claimed(ClaimedEvent),
    /// Processed before; `status` is the HTTP status the handler answered
    /// then (absent for rows written without one).
    Done {
        /// The stored response status.
        status: Option<u16>,
    },
    /// Another claim still held it when the in-flight wait ran out.
    InFlight,
}

/// Why a claim could not be made. Nothing was stored.
#[derive(Debug)]
pub struct ClaimError {
    kind: ClaimErrorKind,
    source: Option<tokio_postgres::Error>,
}

/// See [`ClaimError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClaimErrorKind {
    /// No pooled connection could be had (the server is down, refused the
    /// login, or the pool is closed).
    Unavailable,
    /// No pooled connection within the pool timeout.
    PoolTimeout,
    /// A claim statement failed on the server or the connection broke.
    Database,
    /// The database did not answer within the step timeout
    /// ([`ClaimStoreBuilder::database_timeout`]); the connection was discarded.
    Timeout,
}

impl ClaimError {
    pub(crate) fn of(kind: ClaimErrorKind, source: Option<tokio_postgres::Error>) -> Self {
        Self { kind, source }
    }

    /// What went wrong.
    pub fn kind(&self) -> ClaimErrorKind {
        self.kind
    }

    /// The SQLSTATE of the failed statement, when the server answered one.
    pub fn sqlstate(&self) -> Option<&str> {
        self.source.as_ref().and_then(|e| e.code()).map(SqlState::code)
    }
}

impl fmt::Display for ClaimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind, self.sqlstate()) {
            (ClaimErrorKind::Unavailable, _) => f.write_str("claim failed: no database connection"),
            (ClaimErrorKind::PoolTimeout, _) => {
                f.write_str("claim failed: no database connection within the pool timeout")
            }
            (ClaimErrorKind::Timeout, _) => {
                f.write_str("claim failed: the database did not answer within the step timeout")
            }
            (_, Some(code)) => write!(f, "claim failed: SQLSTATE {code}"),
            (_, None) => f.write_str("claim failed: the connection broke"),
        }
    }
}

impl std::error::Error for ClaimError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

impl ClaimStore {
    /// A store on `pool`'s database; see [`ClaimStoreBuilder`] for the defaults.
    pub fn builder(pool: Pool) -> ClaimStoreBuilder {
        ClaimStoreBuilder {
            pool,
            schema: super::DEFAULT_SCHEMA.to_owned(),
            isolation: IsolationLevel::ReadCommitted,
            pool_timeout: Duration::from_secs(5),
            in_flight_wait: Duration::from_secs(5),
            database_timeout: DEFAULT_DATABASE_TIMEOUT,
            transaction_pooler: false,
            lookup_first: true,
        }
    }

    async fn connection(&self) -> Result<Object, ClaimError> {
        let started = std::time::Instant::now();
        let got = tokio::time::timeout(self.inner.pool_timeout, self.inner.pool.get()).await;
        metrics::histogram!("webhook_pool_wait_seconds").record(started.elapsed().as_secs_f64());
        match got {
            Ok(Ok(obj)) => Ok(obj),
            Ok(Err(e)) => {
                tracing::error!(error = %e, "no database connection");
                Err(ClaimError { kind: ClaimErrorKind::Unavailable, source: None })
            }
            Err(_) => Err(ClaimError { kind: ClaimErrorKind::PoolTimeout, source: None }),
        }
    }

    /// Claims `event`.
    ///
    /// A pooled connection found dead (the server restarted, its backend was
    /// terminated) is closed and the claim tried once more on a fresh one.
    /// An event another claim holds is checked again with backoff (10 ms
    /// doubling to 200 ms) until the in-flight wait runs out, holding no
    /// connection between checks.
    ///
    /// # Errors
    /// [`ClaimError`]: no connection, or a claim statement failed (the
    /// schema missing, the database read-only, ...). Nothing was claimed.
    pub async fn claim(&self, event: &ScopedEvent) -> Result<Claim, ClaimError> {
        let deadline = Instant::now() + self.inner.in_flight_wait;
        let mut backoff = IN_FLIGHT_FIRST_CHECK;
        let mut retried = false;
        loop {
            let obj = self.connection().await?;
            let Ok(attempted) = tokio::time::timeout(self.inner.database_timeout, self.attempt(obj, event)).await
            else {
                // The attempt's connection was dropped with it: discarded.
                tracing::error!(timeout = ?self.inner.database_timeout, "claim: no answer from the database in time");
                return Err(ClaimError { kind: ClaimErrorKind::Timeout, source: None });
            };
            let conflict = match attempted {
                Ok(Attempt::Claimed(conn, attempt, started)) => {
                    let attempt = u32::try_from(attempt).unwrap_or(0);
                    return Ok(Claim::Claimed(ClaimedEvent {
                        tx: WebhookTx::new(*conn),
                        attempt,
                        started,
                        event: event.clone(),
                        store: self.clone(),
                    }));
                }
                Ok(Attempt::Done(status)) => {
                    return Ok(Claim::Done { status: status.and_then(|s| u16::try_from(s).ok()) });
                }
                Ok(Attempt::InFlight) => None,
                Err(e) if e.code().is_some_and(|c| CLAIM_CONFLICTS.contains(c)) => Some(e),
                Err(e) if session_unusable(&e) && !retried => {
                    tracing::warn!(
                        sqlstate = sqlstate(&e),
                        "pooled connection cannot serve the claim (closed, read-only, shutting down); \
                         discarded, claiming on a fresh one"
                    );
                    retried = true;
                    continue;
                }
                Err(e) => {
                    super::report_unmigrated(&self.inner.sql, &e);
                    return Err(ClaimError { kind: ClaimErrorKind::Database, source: Some(e) });
                }
            };
            let now = Instant::now();
            if now >= deadline {
                tracing::info!(
                    sqlstate = conflict.as_ref().and_then(|e| e.code()).map(SqlState::code),
                    "another delivery of this event is still in flight after the wait bound"
                );
                return Ok(Claim::InFlight);
            }
            if backoff == IN_FLIGHT_FIRST_CHECK {
                tracing::debug!(outcome = "waiting", "another delivery of this event is in flight; checking again");
            }
            // No connection is held while waiting.
            tokio::time::sleep(backoff.min(deadline - now)).await;
            backoff = (backoff * 2).min(IN_FLIGHT_MAX_CHECK);
        }
    }

    /// One claim attempt on `obj`: a transaction that either stays open
    /// (claimed) or is ended before returning. On error the connection is
    /// closed unless the rollback was confirmed.
    async fn attempt(&self, obj: Object, event: &ScopedEvent) -> Result<Attempt, tokio_postgres::Error> {
        let sql = &self.inner.sql;
        let cache = !self.inner.transaction_pooler;
        let keys: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&event.scope, &event.provider, &event.key];
        // The connection is closed, never pooled, if this attempt is dropped
        // before an answer (the database timeout on a dead network).
        let conn = TxConn::opening(obj, cache);
        let client = conn.client();
        let lookup = prepare_on(client, &sql.lookup, cache).await?;
        if self.inner.lookup_first {
            // Flight 0, outside any transaction: a done event is answered
            // from here (one round trip, no transaction id, no WAL).
            let found = query_on(client, lookup.as_ref(), &sql.lookup, &keys, &TEXT3).await?;
            if let Some(row) = found.first() {
                if row.get::<_, &str>(0) == "done" {
                    let status = row.get(1);
                    conn.release_idle();
                    return Ok(Attempt::Done(status));
                }
            }
        }
        // Flight 1: BEGIN and the claim (which inserts only if it takes the
        // event's advisory lock at once): one round trip. The claim is
        // prepared first, so both leave in order.
        let claim = prepare_on(client, &sql.claim, cache).await?;
        let claim_params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&event.scope, &event.provider, &event.key, &event.event_type, &ASSUMED_STATUS];
        let (begun, claimed) = tokio::join!(
            client.batch_execute(&sql.begin),
            query_on(client, claim.as_ref(), &sql.claim, &claim_params, &CLAIM_TYPES),
        );
        match begun.and(claimed) {
            Ok(rows) if !rows.is_empty() => Ok(Attempt::Claimed(Box::new(conn), rows[0].get(0), rows[0].get(1))),
            Ok(_) => {
                // Another delivery's row stands: done or in flight. End the
                // transaction and look, in one flight.
                let found = conn.finish_with(None, lookup.as_ref(), &sql.lookup, &keys, &TEXT3, "ROLLBACK").await;
                Ok(match found.ok().as_ref().and_then(|rows| rows.first()) {
                    Some(row) if row.get::<_, &str>(0) == "done" => Attempt::Done(row.get(1)),
                    _ => Attempt::InFlight,
                })
            }
            Err(e) => {
                // A session that cannot serve writes (a demoted primary) or is
                // going away is discarded; otherwise a failed rollback closes it.
                if !session_unusable(&e) {
                    let _ = conn.rollback().await;
                }
                Err(e)
            }
        }
    }
}

enum Attempt {
    Claimed(Box<TxConn>, i32, SystemTime),
    Done(Option<i16>),
    InFlight,
}

/// An event this caller claimed: its transaction is open. Do the event's
/// work through [`tx`](Self::tx), then [`commit`](Self::commit) or
/// [`fail`](Self::fail). Dropping it instead closes the connection and
/// PostgreSQL rolls back (nothing recorded; the next delivery claims again).
#[must_use = "a claimed event is rolled back when dropped: commit or fail it"]
pub struct ClaimedEvent {
    tx: WebhookTx,
    attempt: u32,
    /// The claim transaction's `now()`: the commit checks it is still in
    /// this very transaction.
    started: SystemTime,
    event: ScopedEvent,
    store: ClaimStore,
}

impl fmt::Debug for ClaimedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimedEvent").field("event", &self.event).field("attempt", &self.attempt).finish()
    }
}

/// Why [`ClaimedEvent::commit`] did not commit. The event is not done; where
/// the connection survived, the failed attempt is recorded.
#[derive(Debug)]
pub struct CommitError {
    kind: CommitErrorKind,
    source: Option<tokio_postgres::Error>,
}

/// See [`CommitError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CommitErrorKind {
    /// A clone of the [`WebhookTx`] still holds the connection (a task the
    /// handler spawned): rolled back when that clone drops.
    StillInUse,
    /// The transaction was already aborted (a statement failed and the error
    /// was swallowed): PostgreSQL would have turned COMMIT into ROLLBACK
    /// (rust-postgres#1334). Rolled back.
    Aborted,
    /// The claim row was not found in this transaction: the work ended the
    /// transaction itself (sent COMMIT or ROLLBACK). Rolled back.
    ClaimLost,
    /// COMMIT was sent and no answer came, or it failed: PostgreSQL may or
    /// may not have committed. The next claim finds out (done, or claims again).
    Unknown,
    /// An inbox lease was taken over (it expired): another worker owns the
    /// row now, and this work was rolled back.
    LeaseLost,
}

impl CommitError {
    pub(crate) fn of(kind: CommitErrorKind, source: Option<tokio_postgres::Error>) -> Self {
        Self { kind, source }
    }

    /// What went wrong.
    pub fn kind(&self) -> CommitErrorKind {
        self.kind
    }

    /// The SQLSTATE of the failed statement, when there was one.
    pub fn sqlstate(&self) -> Option<&str> {
        self.source.as_ref().and_then(|e| e.code()).map(SqlState::code)
    }
}

impl fmt::Display for CommitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            CommitErrorKind::StillInUse => "the transaction handle is still in use",
            CommitErrorKind::Aborted => "the transaction was aborted by a failed statement",
            CommitErrorKind::ClaimLost => "the claim is no longer in this transaction",
            CommitErrorKind::Unknown => "the commit failed or its outcome is unknown",
            CommitErrorKind::LeaseLost => "the inbox lease was taken over",
        };
        match self.sqlstate() {
            Some(code) => write!(f, "not committed: {what} (SQLSTATE {code})"),
            None => write!(f, "not committed: {what}"),
        }
    }
}

impl std::error::Error for CommitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

impl ClaimedEvent {
    /// The transaction holding the claim: the event's writes go through it
    /// and commit with it. Clones are the same transaction.
    pub fn tx(&self) -> WebhookTx {
        self.tx.clone()
    }

    /// Which run this is for the event: 1 the first time, higher after
    /// recorded failures.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The claimed event.
    pub fn event(&self) -> &ScopedEvent {
        &self.event
    }

    /// The SQLSTATE of a retryable conflict (deadlock 40P01, serialization
    /// failure 40001, lock timeout 55P03) a statement through
    /// [`tx`](Self::tx) met: the work should fail and be retried.
    pub fn retryable_conflict(&self) -> Option<&'static str> {
        self.tx.peek(TxConn::retryable).flatten()
    }

    /// Marks the event done with `status` (the HTTP status of the work's
    /// answer, kept for replays) and commits, together with every write made
    /// through [`tx`](Self::tx). Only `Ok` means committed.
    ///
    /// A check runs first inside the transaction, in the same flight as
    /// `COMMIT`: in an aborted transaction it fails (25P02), where a bare
    /// COMMIT would be answered ROLLBACK without an error
    /// (rust-postgres#1334); and it passes only when the transaction's
    /// `now()` is the claim's, so work that ended the transaction itself is
    /// caught ([`CommitErrorKind::ClaimLost`]; a claim row that work
    /// committed is turned `failed`, so the next delivery runs again). A
    /// status other than 200 is stored on the row by that check.
    ///
    /// # Errors
    /// [`CommitError`]; the failed attempt is recorded unless the handle is
    /// still in use.
    pub async fn commit(self, status: u16) -> Result<(), CommitError> {
        let conn = self.take()?;
        let step = self.store.inner.database_timeout;
        let result = match tokio::time::timeout(step, self.check_and_commit(conn, status)).await {
            Ok(result) => result,
            Err(_) => {
                // The connection went with the dropped step: discarded. Whether
                // COMMIT reached the server is unknown; the next claim finds out.
                tracing::error!(timeout = ?step, "commit: no answer from the database in time");
                Err(CommitError { kind: CommitErrorKind::Unknown, source: None })
            }
        };
        if let Err(e) = &result {
            // Only when the work ended the transaction itself may the claim
            // row it committed be turned `failed`; after an unknown COMMIT
            // outcome a `done` row is ours and stays.
            let own = (e.kind == CommitErrorKind::ClaimLost).then_some(self.started);
            self.store.record_failure(&self.event, "transaction could not be committed", Some(status), own).await;
        }
        result
    }

    async fn check_and_commit(&self, conn: TxConn, status: u16) -> Result<(), CommitError> {
        let sql = &self.store.inner.sql;
        let code = i16::try_from(status).unwrap_or(i16::MAX);
        let ev = &self.event;
        // The row was written `done` with the assumed status; another status
        // is stored by a HOT update, in the same flight.
        let (stmt, params, types): (&str, Vec<&(dyn tokio_postgres::types::ToSql + Sync)>, &[Type]) =
            if code == ASSUMED_STATUS {
                (&sql.check, vec![&self.started], &[Type::TIMESTAMPTZ])
            } else {
                (
                    &sql.set_status,
                    vec![&ev.scope, &ev.provider, &ev.key, &code, &self.started],
                    &[Type::TEXT, Type::TEXT, Type::TEXT, Type::INT2, Type::TIMESTAMPTZ],
                )
            };
        let prepared = match conn.prepare(stmt).await {
            Ok(prepared) => prepared,
            Err(e) => {
                tracing::error!(sqlstate = sqlstate(&e), "transaction unusable after the work; rolled back");
                if !session_unusable(&e) {
                    rollback(conn).await;
                }
                return Err(CommitError { kind: CommitErrorKind::Aborted, source: Some(e) });
            }
        };
        // The check and COMMIT in one flight. In a transaction a swallowed
        // error aborted, the check fails (25P02) and PostgreSQL answers the
        // COMMIT with ROLLBACK (rust-postgres#1334); when the transaction is
        // no longer the claim's (the work ended it), the check divides by
        // zero (22012): either way nothing commits.
        match conn.finish_with(None, prepared.as_ref(), stmt, &params, types, "COMMIT").await {
            Ok(_) => Ok(()),
            Err(Finish::Statement(e)) if e.code() == Some(&SqlState::DIVISION_BY_ZERO) => {
                tracing::error!("the claim's transaction was ended by the work; not committed here");
                Err(CommitError { kind: CommitErrorKind::ClaimLost, source: None })
            }
            Err(Finish::Statement(e)) => {
                tracing::error!(sqlstate = sqlstate(&e), "transaction unusable after the work; rolled back");
                Err(CommitError { kind: CommitErrorKind::Aborted, source: Some(e) })
            }
            Err(Finish::Commit(e)) => {
                // The connection is closed; a retry finds out (done → replayed).
                tracing::error!(sqlstate = sqlstate(&e), "commit failed or its result is unknown");
                Err(CommitError { kind: CommitErrorKind::Unknown, source: Some(e) })
            }
        }
    }

    /// Rolls back the work and records a failed attempt (`attempts`, the
    /// error text, the status if any, the time) in a transaction of its own,
    /// so the next delivery claims the event again.
    ///
    /// # Errors
    /// [`CommitErrorKind::StillInUse`] when a clone of the handle still
    /// holds the connection (it is rolled back when that clone drops;
    /// nothing is recorded).
    pub async fn fail(self, error: &str, status: Option<u16>) -> Result<(), CommitError> {
        let conn = self.take()?;
        if tokio::time::timeout(self.store.inner.database_timeout, rollback(conn)).await.is_err() {
            tracing::error!("rollback: no answer from the database in time; connection discarded");
        }
        // This path never commits: a `done` row with the claim's time was
        // committed by the work itself, and is turned `failed`.
        self.store.record_failure(&self.event, error, status, Some(self.started)).await;
        Ok(())
    }

    fn take(&self) -> Result<TxConn, CommitError> {
        match self.tx.take() {
            Ok(Some(conn)) => Ok(conn),
            Ok(None) | Err(crate::tx::InUse) => Err(CommitError { kind: CommitErrorKind::StillInUse, source: None }),
        }
    }
}

/// Rolls back; a confirmed ROLLBACK returns the connection to the pool,
/// a failed one closes it.
async fn rollback(conn: TxConn) {
    if let Err(e) = conn.rollback().await {
        tracing::warn!(sqlstate = sqlstate(&e), "rollback failed; closing the connection");
    }
}

impl ClaimStore {
    /// Records a failed attempt outside the rolled-back transaction, on a
    /// pooled connection. Best effort: a failure to record is logged.
    async fn record_failure(
        &self,
        event: &ScopedEvent,
        error: &str,
        status: Option<u16>,
        committed_claim: Option<SystemTime>,
    ) {
        let Ok(obj) = self.connection().await else {
            tracing::warn!("failed attempt not recorded: no database connection");
            return;
        };
        let sql = &self.inner.sql;
        let code = status.map(|s| i16::try_from(s).unwrap_or(i16::MAX));
        let cache = !self.inner.transaction_pooler;
        let record = async {
            let prepared = prepare_on(&obj, &sql.record_failure, cache).await?;
            let conn = TxConn::opening(obj, cache);
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] =
                [&event.scope, &event.provider, &event.key, &event.event_type, &error, &code, &committed_claim];
            let types = [Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT, Type::INT2, Type::TIMESTAMPTZ];
            // BEGIN, the record and COMMIT in one flight.
            let begin = Some(sql.begin_failure);
            let finished =
                conn.finish_with(begin, prepared.as_ref(), &sql.record_failure, &params, &types, "COMMIT").await;
            finished.map(drop).map_err(|f| match f {
                Finish::Statement(e) | Finish::Commit(e) => e,
            })
        };
        let Ok(result) = tokio::time::timeout(self.inner.database_timeout, record).await else {
            tracing::warn!("failed attempt not recorded: no answer from the database in time");
            return;
        };
        if let Err(e) = result {
            // Typically another delivery holds the event (lock timeout): it
            // will record its own outcome.
            tracing::warn!(sqlstate = sqlstate(&e), "failed attempt not recorded");
        }
    }
}

/// The default of [`ClaimStoreBuilder::database_timeout`].
pub const DEFAULT_DATABASE_TIMEOUT: Duration = Duration::from_secs(2);

/// True when the error says this session cannot serve the claim and must not
/// go back to the pool: no SQLSTATE (the connection closed or broke), a
/// read-only transaction (25006: the server was demoted to a replica after a
/// failover while new sessions reach the new primary), a connection
/// exception (class 08), an administrator or crash shutdown, or a server not
/// accepting connections yet (57P01, 57P02, 57P03). PostgreSQL docs,
/// "PostgreSQL Error Codes".
pub(crate) fn session_unusable(e: &tokio_postgres::Error) -> bool {
    match e.code() {
        None => true,
        Some(code) => {
            code == &SqlState::READ_ONLY_SQL_TRANSACTION
                || code.code().starts_with("08")
                || [SqlState::ADMIN_SHUTDOWN, SqlState::CRASH_SHUTDOWN, SqlState::CANNOT_CONNECT_NOW].contains(code)
        }
    }
}

/// The SQLSTATE of a database error, for logs (never the message, which may
/// quote values).
pub(crate) fn sqlstate(e: &tokio_postgres::Error) -> &str {
    e.code().map_or("connection", SqlState::code)
}
