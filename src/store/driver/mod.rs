//! The driver seam: everything that talks to PostgreSQL through a driver
//! (tokio-postgres with a deadpool pool here) lives in this module, so the
//! claim, inbox, queue, admin and retention modules hold the protocol and
//! its SQL text only.
//!
//! What the seam owns:
//! - [`Db`]: the pool, the wait for a pooled connection (bounded by the pool
//!   timeout), the client-side deadline of every step, the statement mode
//!   (named statements prepared once per connection, or unnamed ones with
//!   their parameter types behind a transaction-mode pooler) and the mapping
//!   of driver errors to [`StoreError`] (with the configured `host:port` for
//!   connection errors);
//! - [`Conn`] and [`TxConn`], the connection typestate: a pooled connection
//!   outside any transaction, or one with a transaction open on it, which is
//!   never pooled again unless a `COMMIT` or `ROLLBACK` was confirmed;
//!   dropping either without a confirmed end (a timeout, a dropped future, a
//!   panic) detaches the connection from the pool, cancels its running
//!   statement and closes it, so PostgreSQL rolls back;
//! - the fenced commit ([`TxConn::commit_fenced`]): a check statement and
//!   `COMMIT` in one flight, where the check fails in an aborted transaction
//!   (25P02) or when its fence does not hold (it divides by zero: 22012), so
//!   a `COMMIT` that PostgreSQL would silently turn into `ROLLBACK`
//!   (rust-postgres#1334) is an error before anything answers 2xx, and a
//!   `NOTIFY` queued on the transaction ([`TxConn::notify_after_commit`])
//!   sent in that flight after it;
//! - under synchronous replication, the confirmation a duplicate waits for
//!   before it is answered 2xx ([`Db::confirm_replicated`]): a commit that
//!   waits for the standby, sent after the stored row was read, one in
//!   flight per pool;
//! - [`Param`] and [`Row`], the driver-neutral parameter and column values
//!   the protocol modules use, and [`DbError`] with the SQLSTATE as text;
//! - [`TxSlot`], an open transaction's connection shared by every handle on
//!   it, and [`TxClient`], the handler's borrowed connection
//!   (tokio-postgres's API, with retryable conflicts noted for the layer).
//!
//! The handler's transaction itself (`WebhookTx`: which event it holds,
//! where the crate's tables are, what a handler may do with it) is protocol,
//! not driver: it is the [`tx`](crate::tx) module's, above the store.
//!
//! # A second driver (sqlx)
//! An sqlx implementation provides the same items over `sqlx::PgPool` and
//! `PoolConnection<Postgres>`: `Db::connect` (`PgPool::acquire` under the
//! pool timeout), `Conn::{query, pair, begin, release}` and
//! `TxConn::{query, batch, end, commit_fenced, commit, rollback}` with the
//! same flights (sqlx pipelines nothing, so each flight costs one round trip
//! per statement unless it sends them as one simple-query batch), a `Drop`
//! that calls `PoolConnection::detach` and closes instead of releasing,
//! `Param` bound with `Encode<Postgres>` and `Row::get` with
//! `Decode<Postgres>`, `DbError` from `sqlx::Error::Database` (its `code()`
//! is the SQLSTATE), and a `TxClient` of its own (the handler then borrows
//! an `&mut PgConnection`). The protocol modules do not change.

mod client;
mod conn;
mod endpoint;
mod error;
mod listen;
mod param;
mod replication;
mod tx_conn;
mod wire;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;

pub use client::TxClient;
pub(crate) use client::{TxSlot, Unlent};
pub(crate) use conn::Conn;
pub(crate) use error::{unusable_code, DbError};
pub(crate) use listen::listen_loop;
pub(crate) use param::{Param, Row};
pub use replication::SynchronousReplication;
pub(crate) use replication::DETECT_SQL;
pub(crate) use tx_conn::{Fenced, TxConn};

use crate::error::{Cause, Chain, StoreError, StoreErrorKind};

/// SQLSTATEs the protocol modules and the seam name (PostgreSQL docs,
/// Appendix A "PostgreSQL Error Codes").
pub(crate) mod code {
    /// `division_by_zero`: a fence check that did not hold.
    pub(crate) const DIVISION_BY_ZERO: &str = "22012";
    /// `lock_not_available`: `lock_timeout` elapsed.
    pub(crate) const LOCK_NOT_AVAILABLE: &str = "55P03";
    /// `query_canceled`: `statement_timeout` elapsed (or a cancel request).
    pub(crate) const QUERY_CANCELED: &str = "57014";
    /// `serialization_failure`.
    pub(crate) const SERIALIZATION_FAILURE: &str = "40001";
    /// `deadlock_detected`.
    pub(crate) const DEADLOCK_DETECTED: &str = "40P01";
    /// `invalid_schema_name`: the schema does not exist.
    pub(crate) const INVALID_SCHEMA_NAME: &str = "3F000";
    /// `undefined_table`.
    pub(crate) const UNDEFINED_TABLE: &str = "42P01";
    /// `undefined_column`: a schema older than the crate.
    pub(crate) const UNDEFINED_COLUMN: &str = "42703";
    /// `read_only_sql_transaction`: a server demoted to a standby.
    pub(crate) const READ_ONLY_SQL_TRANSACTION: &str = "25006";
    /// `invalid_catalog_name`: the database does not exist.
    pub(crate) const INVALID_CATALOG_NAME: &str = "3D000";
    /// `invalid_authorization_specification`: no such role, no `pg_hba.conf` entry.
    pub(crate) const INVALID_AUTHORIZATION: &str = "28000";
    /// `invalid_password`.
    pub(crate) const INVALID_PASSWORD: &str = "28P01";
    /// `admin_shutdown`, `crash_shutdown`, `cannot_connect_now`.
    pub(crate) const SHUTTING_DOWN: [&str; 3] = ["57P01", "57P02", "57P03"];
    /// `invalid_sql_statement_name`: the named prepared statement does not
    /// exist on this server session (a transaction-mode pooler ran the
    /// statement on another session than the one it was prepared on).
    pub(crate) const INVALID_SQL_STATEMENT_NAME: &str = "26000";
    /// `duplicate_prepared_statement`: a statement of that name is already
    /// prepared on this server session (another client's, behind a
    /// transaction-mode pooler).
    pub(crate) const DUPLICATE_PREPARED_STATEMENT: &str = "42P05";
}

/// SQLSTATEs a named prepared statement meets behind a transaction-mode
/// pooler (26000, 42P05): the sign that the pool must send unnamed
/// statements ([`Db::named_statement_failed`]).
const NAMED_STATEMENT_FAILURES: [&str; 2] = [code::INVALID_SQL_STATEMENT_NAME, code::DUPLICATE_PREPARED_STATEMENT];

/// SQLSTATEs after which a retry of the whole transaction will succeed
/// (PostgreSQL docs, "Serialization Failure Handling"): deadlock,
/// serialization failure, lock timeout.
const RETRYABLE: [&str; 3] = [code::DEADLOCK_DETECTED, code::SERIALIZATION_FAILURE, code::LOCK_NOT_AVAILABLE];

/// The database a store configuration names: the pool and the rules every
/// step follows. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Db {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    pool_timeout: Duration,
    /// The client-side deadline of each step; `None` for operator actions,
    /// retention and migrations, which may run long.
    deadline: Option<Duration>,
    /// `StoreConfig::transaction_pooler` as configured.
    transaction_pooler: bool,
    /// `StoreConfig::synchronous_replication` as configured.
    replication: SynchronousReplication,
    /// What every `Db` over this pool shares.
    state: Arc<PoolState>,
    /// `host:port` of the pool's configuration, for connection errors.
    endpoint: Option<String>,
    /// Sends a cancel request with the pool's TLS ([`cancel_with`]); plain
    /// TCP when `None`.
    cancel: Option<CancelFn>,
}

/// What every [`Db`] over one deadpool pool shares, whichever part built it
/// (the layer, the workers, the operator API, each from its own
/// `StoreConfig`): found by the pool's identity in [`PoolState::of`].
#[derive(Default)]
struct PoolState {
    /// Set at the first named statement that failed with 26000 or 42P05:
    /// from then on every step on this pool sends unnamed statements, as
    /// with `StoreConfig::transaction_pooler(true)`. Never unset.
    unnamed: AtomicBool,
    /// The commits that confirm duplicates under synchronous replication
    /// ([`Db::confirm_replicated`]): one in flight per pool.
    rounds: Arc<replication::Rounds>,
}

impl PoolState {
    /// The state of `pool`, shared with every `Db` over it, for as long as
    /// the pool lives (also while no `Db` does: a part built again later
    /// finds the switch made).
    ///
    /// The identity is the address of the pool's manager, which lives in the
    /// pool's shared allocation (deadpool's `Pool` is an `Arc`): unique
    /// while the pool lives. An entry whose pool is gone (its `WeakPool`
    /// no longer upgrades) is dropped first, so a later pool at the same
    /// address starts afresh.
    fn of(pool: &Pool) -> Arc<Self> {
        type Entry = (usize, deadpool_postgres::WeakPool, Arc<PoolState>);
        static STATES: OnceLock<Mutex<Vec<Entry>>> = OnceLock::new();
        let id = std::ptr::from_ref(pool.manager()).addr();
        let mut states = STATES.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
        states.retain(|(_, pool, _)| pool.upgrade().is_some());
        if let Some((_, _, state)) = states.iter().find(|(at, _, _)| *at == id) {
            return Arc::clone(state);
        }
        let state = Arc::new(Self::default());
        states.push((id, pool.weak(), Arc::clone(&state)));
        state
    }
}

/// Sends the cancel request of a discarded connection's running statement.
pub(crate) type CancelFn = Arc<
    dyn Fn(tokio_postgres::CancelToken) -> Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send>>
        + Send
        + Sync,
>;

/// A [`CancelFn`] sending cancel requests through `tls`: a server that
/// requires TLS (`sslmode=require`) refuses plain-TCP cancel requests.
pub(crate) fn cancel_with<T>(tls: T) -> CancelFn
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket> + Clone + Send + Sync + 'static,
    T::Stream: Send,
    T::TlsConnect: Send,
    <T::TlsConnect as tokio_postgres::tls::TlsConnect<tokio_postgres::Socket>>::Future: Send,
{
    Arc::new(move |token: tokio_postgres::CancelToken| {
        let tls = tls.clone();
        Box::pin(async move { token.cancel_query(tls).await })
    })
}

impl fmt::Debug for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Db")
            .field("endpoint", &self.inner.endpoint)
            .field("deadline", &self.inner.deadline)
            .field("transaction_pooler", &self.inner.transaction_pooler)
            .field("synchronous_replication", &self.inner.replication)
            .field("switched_to_unnamed", &self.inner.state.unnamed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Db {
    pub(crate) fn new(
        pool: Pool,
        pool_timeout: Duration,
        deadline: Duration,
        transaction_pooler: bool,
        cancel: Option<CancelFn>,
    ) -> Self {
        let endpoint = endpoint::of_pool(&pool);
        let deadline = Some(deadline);
        let state = PoolState::of(&pool);
        let replication = SynchronousReplication::default();
        let inner = Inner { pool, pool_timeout, deadline, transaction_pooler, replication, state, endpoint, cancel };
        Self { inner: Arc::new(inner) }
    }

    /// The same database with duplicates confirmed by the synchronous
    /// standby as `replication` says ([`Db::confirm_replicated`]).
    pub(crate) fn with_replication(&self, replication: SynchronousReplication) -> Self {
        self.rebuilt(self.inner.deadline, replication)
    }

    /// Cancels the statement `token`'s session is running, with the
    /// configured TLS (plain TCP by default).
    pub(crate) async fn cancel(&self, token: tokio_postgres::CancelToken) -> Result<(), tokio_postgres::Error> {
        match &self.inner.cancel {
            Some(cancel) => cancel(token).await,
            None => token.cancel_query(tokio_postgres::NoTls).await,
        }
    }

    /// The same database without a client-side step deadline (operator
    /// actions, retention, migrations: their statements may take longer).
    pub(crate) fn without_deadline(&self) -> Self {
        self.with_deadline(None)
    }

    /// The same database with each step's deadline `factor` times the
    /// configured one (a retried end that timed out gets more time).
    pub(crate) fn patient(&self, factor: u32) -> Self {
        self.with_deadline(self.inner.deadline.map(|d| d.saturating_mul(factor)))
    }

    fn with_deadline(&self, deadline: Option<Duration>) -> Self {
        self.rebuilt(deadline, self.inner.replication)
    }

    fn rebuilt(&self, deadline: Option<Duration>, replication: SynchronousReplication) -> Self {
        let i = &self.inner;
        Self {
            inner: Arc::new(Inner {
                pool: i.pool.clone(),
                pool_timeout: i.pool_timeout,
                deadline,
                transaction_pooler: i.transaction_pooler,
                replication,
                state: Arc::clone(&i.state),
                endpoint: i.endpoint.clone(),
                cancel: i.cancel.clone(),
            }),
        }
    }

    /// The database the pool connects to (host, port and name), as a key
    /// (the workers' isolation of crashes is per process and database).
    pub(crate) fn database(&self) -> String {
        endpoint::database_of(&self.inner.pool).unwrap_or_default()
    }

    /// The client-side deadline of each step.
    pub(crate) fn deadline(&self) -> Option<Duration> {
        self.inner.deadline
    }

    /// Whether the pool goes through a transaction-mode pooler: configured
    /// so, or switched at the first named statement that failed there
    /// ([`named_statement_failed`](Self::named_statement_failed)). Read at
    /// each step, so a switch applies from the next step on.
    pub(crate) fn transaction_pooler(&self) -> bool {
        self.inner.transaction_pooler || self.inner.state.unnamed.load(Ordering::Relaxed)
    }

    /// Whether `e`, met by a step that sent named statements (`named`), is
    /// the failure a transaction-mode pooler causes: SQLSTATE 26000 (the
    /// statement was prepared on another server session than the one it ran
    /// on) or 42P05 (another client's statement of that name exists on this
    /// session). If so the pool switches to unnamed statements for good
    /// (every `Db` over it, from the next step on), with one WARN per pool
    /// naming `StoreConfig::transaction_pooler(true)`; the caller decides
    /// whether its step may be re-run (see `Conn::query`, `Conn::begin`).
    /// Steps that sent unnamed statements never switch anything.
    pub(crate) fn named_statement_failed(&self, e: &DbError, named: bool) -> bool {
        named && e.code().and_then(|c| self.switch_on(c)).is_some()
    }

    /// The switch of [`named_statement_failed`](Self::named_statement_failed)
    /// for a failure with SQLSTATE `code`, whatever the step sent: `code`
    /// (as a static string) when it is 26000 or 42P05, after switching.
    pub(crate) fn switch_on(&self, code: &str) -> Option<&'static str> {
        let code = NAMED_STATEMENT_FAILURES.iter().copied().find(|c| *c == code)?;
        if !self.inner.state.unnamed.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                sqlstate = code,
                "a named prepared statement failed as it does behind a transaction-mode pooler (PgBouncer \
                 pool_mode = transaction, Supavisor, RDS Proxy): this pool now sends unnamed statements; set \
                 StoreConfig::transaction_pooler(true) to make this explicit and spare the first deliveries a retry"
            );
        }
        Some(code)
    }

    /// Whether `StoreConfig::transaction_pooler(true)` was configured (not
    /// merely switched to).
    pub(crate) fn configured_for_pooler(&self) -> bool {
        self.inner.transaction_pooler
    }

    /// After a step on a pooled connection checked out at `checked_out`
    /// timed out: the connections idle in the pool that nobody checked out
    /// since then are closed, and the pool opens fresh ones as needed.
    ///
    /// A step that times out most often met a network that stopped
    /// answering without closing (a NAT or firewall that dropped its
    /// mappings), which silences every connection opened before it: without
    /// this each dead pooled connection costs one delivery its whole
    /// database timeout, so healing would take (dead connections) × timeout.
    /// Every connection in use since `checked_out` has either proven itself
    /// (it came back from a step that answered) or times out on its own, so
    /// the pool heals within two database timeouts whatever its size: one
    /// for the first dead connection, at most one more for a connection
    /// that answered between `checked_out` and the network's death. On a
    /// slow but reachable server it costs new sessions only for connections
    /// idle longer than the step deadline. deadpool's
    /// [`Pool::retain`](https://docs.rs/deadpool/0.13.1/deadpool/managed/struct.Pool.html#method.retain)
    /// detaches them under the pool's lock (no I/O there); [`Metrics::recycled`](https://docs.rs/deadpool/0.13.1/deadpool/managed/struct.Metrics.html)
    /// is the instant a connection was last checked out (deadpool sets it
    /// when it recycles an object at checkout), `created` for one never
    /// reused. Closing them is dropping them (their connection tasks end).
    ///
    /// It applies to every part's steps alike (the layer's, the inbox and
    /// outbox workers', which run theirs through the same seam): to the
    /// pool whose connection timed out, so a worker's timeout heals the
    /// layer's pool too when they share one.
    fn discard_idle_since(&self, checked_out: Instant) {
        let stale = self.inner.pool.retain(|_, m| m.recycled.unwrap_or(m.created) >= checked_out).removed;
        if !stale.is_empty() {
            tracing::warn!(
                closed = stale.len(),
                "a database step timed out: closing the pooled connections idle since before it (they may be \
                 silenced the same way); fresh ones are opened as needed"
            );
        }
    }

    /// A pooled connection, within the pool timeout.
    ///
    /// # Errors
    /// [`StoreErrorKind::PoolTimeout`] past the pool timeout,
    /// [`StoreErrorKind::Unavailable`] (or `Authentication`,
    /// `DatabaseMissing`) when no connection could be made.
    pub(crate) async fn connect(&self, step: &str) -> Result<Conn, StoreError> {
        let started = Instant::now();
        let got = tokio::time::timeout(self.inner.pool_timeout, self.inner.pool.get()).await;
        crate::metrics::pool_wait(started.elapsed());
        match got {
            Ok(Ok(obj)) => Ok(Conn::new(obj, self.clone())),
            Ok(Err(deadpool_postgres::PoolError::Backend(e))) => Err(self.error(&DbError::pg(e), step)),
            Ok(Err(e)) => {
                tracing::error!(error = %Chain(&e), "no database connection");
                Err(StoreError::new(StoreErrorKind::Unavailable, step, "no database connection")
                    .with_cause(Cause::of(&e))
                    .with_endpoint(self.inner.endpoint.clone()))
            }
            Err(_) => Err(StoreError::new(
                StoreErrorKind::PoolTimeout,
                step,
                format!("timed out: no database connection within the pool timeout ({:?})", self.inner.pool_timeout),
            )
            .with_endpoint(self.inner.endpoint.clone())),
        }
    }

    /// One autocommit statement on a pooled connection, within the deadline.
    ///
    /// # Errors
    /// As [`connect`](Self::connect), and the statement's failure.
    pub(crate) async fn query(&self, step: &str, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, StoreError> {
        let conn = self.connect(step).await?;
        let rows = conn.query(sql, params).await;
        conn.release(); // or discarded, after a step that left the session unusable
        rows.map_err(|e| self.error(&e, step))
    }

    /// [`query`](Self::query) for an autocommit statement that writes, whose
    /// outcome the caller answers from (an inbox accept): past the deadline
    /// its connection is closed without a cancel request
    /// ([`Conn::query_commit`]).
    ///
    /// # Errors
    /// As [`query`](Self::query); after a timeout the statement may still
    /// commit.
    pub(crate) async fn query_commit(
        &self,
        step: &str,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Vec<Row>, StoreError> {
        let conn = self.connect(step).await?;
        let rows = conn.query_commit(sql, params).await;
        conn.release();
        rows.map_err(|e| self.error(&e, step))
    }

    /// `begin`, one statement and `COMMIT` in one flight on a pooled
    /// connection, within the deadline. A named statement failing as behind
    /// a transaction-mode pooler (26000, 42P05) switches the pool to unnamed
    /// statements and the transaction runs once more from the start, on a
    /// fresh checkout (the failed one committed nothing).
    ///
    /// # Errors
    /// As [`connect`](Self::connect), and the statement's or the commit's
    /// failure (nothing committed, or the outcome unknown when COMMIT itself
    /// went unanswered).
    pub(crate) async fn transact(
        &self,
        step: &str,
        begin: &str,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Vec<Row>, StoreError> {
        let named = !self.transaction_pooler();
        let conn = self.connect(step).await?;
        match conn.transact(begin, sql, params).await {
            // The statement failed at Parse or Bind: nothing ran, the COMMIT
            // was answered as a ROLLBACK (or never sent). Once more, unnamed.
            Err(e) if self.named_statement_failed(&e, named) => {
                let conn = self.connect(step).await?;
                conn.transact(begin, sql, params).await.map_err(|e| self.error(&e, step))
            }
            result => result.map_err(|e| self.error(&e, step)),
        }
    }

    /// `e` as the crate's error in `step`, naming the server for connection
    /// errors and timeouts.
    pub(crate) fn error(&self, e: &DbError, step: &str) -> StoreError {
        e.to_store(step, false, self.inner.deadline).with_endpoint(self.endpoint_for(e))
    }

    /// [`error`](Self::error) with the server's detail and hint (statements
    /// that carry no event data: migrations, schema checks).
    pub(crate) fn error_verbose(&self, e: &DbError, step: &str) -> StoreError {
        e.to_store(step, true, self.inner.deadline).with_endpoint(self.endpoint_for(e))
    }

    fn endpoint_for(&self, e: &DbError) -> Option<String> {
        let kind = e.store_kind();
        let names_server = matches!(
            kind,
            StoreErrorKind::Unavailable
                | StoreErrorKind::Authentication
                | StoreErrorKind::DatabaseMissing
                | StoreErrorKind::Timeout
        );
        names_server.then(|| self.inner.endpoint.clone()).flatten()
    }
}

/// When `obj` was checked out of its pool: deadpool's
/// [`Metrics::recycled`](https://docs.rs/deadpool/0.13.1/deadpool/managed/struct.Metrics.html),
/// set when it recycles an object at checkout, or `created` for a
/// connection opened by this checkout.
fn checked_out(obj: &deadpool_postgres::Object) -> Instant {
    let m = deadpool_postgres::Object::metrics(obj);
    m.recycled.unwrap_or(m.created)
}

/// Runs `fut`, a step on a pooled connection checked out at `checked_out`,
/// within `db`'s deadline (when there is one): past it the future is
/// dropped, the step fails with [`DbError::timeout`], and the idle
/// connections not checked out since are closed
/// ([`Db::discard_idle_since`]).
async fn bounded<T>(
    db: &Db,
    checked_out: Instant,
    fut: impl std::future::Future<Output = Result<T, DbError>>,
) -> Result<T, DbError> {
    let Some(deadline) = db.deadline() else { return fut.await };
    match tokio::time::timeout(deadline, fut).await {
        Ok(result) => result,
        Err(_) => {
            db.discard_idle_since(checked_out);
            Err(DbError::timeout())
        }
    }
}
