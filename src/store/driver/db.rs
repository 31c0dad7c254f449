//! [`Db`]: the database a store configuration names (a pool of one of the
//! compiled-in drivers) and the rules every step on it follows: the pool
//! timeout, the client-side deadline, the statement mode and its switch,
//! synchronous replication, the mapping of errors to [`StoreError`].

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::any::AnyPool;
use super::error::DbError;
use super::replication::{Rounds, SynchronousReplication};
use super::seam::{Pool, PoolIdentity};
use crate::error::{StoreError, StoreErrorKind};

/// SQLSTATEs a named prepared statement meets behind a transaction-mode
/// pooler (26000, 42P05): the sign that the pool must send unnamed
/// statements ([`Db::named_statement_failed`]).
const NAMED_STATEMENT_FAILURES: [&str; 2] =
    [super::code::INVALID_SQL_STATEMENT_NAME, super::code::DUPLICATE_PREPARED_STATEMENT];

/// The database a store configuration names: the pool and the rules every
/// step follows. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Db {
    inner: Arc<Inner>,
}

struct Inner {
    pool: AnyPool,
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
}

/// What every [`Db`] over one pool shares, whichever part built it (the
/// layer, the workers, the operator API, each from its own `StoreConfig`):
/// found by the pool's identity in [`PoolState::of`].
#[derive(Default)]
struct PoolState {
    /// Set at the first named statement that failed with 26000 or 42P05:
    /// from then on every step on this pool sends unnamed statements, as
    /// with `StoreConfig::transaction_pooler(true)`. Never unset.
    unnamed: AtomicBool,
    /// The commits that confirm duplicates under synchronous replication
    /// (`Db::confirm_replicated`): one in flight per pool.
    rounds: Arc<Rounds>,
    /// Whether the pool's database has the `citus` extension, once looked
    /// up ([`Conn::on_citus`](super::conn::Conn::on_citus)).
    citus: OnceLock<bool>,
}

impl PoolState {
    /// The state of the pool `identity` names, shared with every `Db` over
    /// it, for as long as the pool lives (also while no `Db` does: a part
    /// built again later finds the switch made). An entry whose pool is gone
    /// is dropped first, so a later pool of the same identity starts afresh.
    fn of(identity: PoolIdentity) -> Arc<Self> {
        static STATES: OnceLock<Mutex<Vec<(PoolIdentity, Arc<PoolState>)>>> = OnceLock::new();
        let mut states = STATES.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
        states.retain(|(pool, _)| (pool.alive)());
        if let Some((_, state)) = states.iter().find(|(pool, _)| pool.id == identity.id) {
            return Arc::clone(state);
        }
        let state = Arc::new(Self::default());
        states.push((identity, Arc::clone(&state)));
        state
    }
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
    pub(crate) fn new(pool: AnyPool, pool_timeout: Duration, deadline: Duration, transaction_pooler: bool) -> Self {
        let endpoint = pool.endpoint();
        let deadline = Some(deadline);
        let state = PoolState::of(pool.identity());
        let replication = SynchronousReplication::default();
        let inner = Inner { pool, pool_timeout, deadline, transaction_pooler, replication, state, endpoint };
        Self { inner: Arc::new(inner) }
    }

    /// The same database with duplicates confirmed by the synchronous
    /// standby as `replication` says (`Db::confirm_replicated`).
    pub(crate) fn with_replication(&self, replication: SynchronousReplication) -> Self {
        self.rebuilt(self.inner.deadline, replication)
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
            }),
        }
    }

    /// Whether the pool's database has the `citus` extension, when a
    /// connection of the pool looked it up already.
    pub(crate) fn citus(&self) -> Option<bool> {
        self.inner.state.citus.get().copied()
    }

    /// Records what [`citus`](Self::citus) answers from now on.
    pub(super) fn set_citus(&self, citus: bool) {
        let _ = self.inner.state.citus.set(citus);
    }

    /// Whether the database has the `citus` extension: looked up once per
    /// pool, on a pooled connection, then answered from memory.
    ///
    /// # Errors
    /// As [`query`](Self::query).
    pub(crate) async fn on_citus(&self, step: &str) -> Result<bool, StoreError> {
        if let Some(citus) = self.citus() {
            return Ok(citus);
        }
        let conn = self.connect(step).await?;
        let found = conn.on_citus().await;
        conn.release();
        found.map_err(|e| self.error(&e, step))
    }

    /// The pool.
    pub(super) fn pool(&self) -> &AnyPool {
        &self.inner.pool
    }

    /// How long a step waits for a pooled connection.
    pub(super) fn pool_timeout(&self) -> Duration {
        self.inner.pool_timeout
    }

    /// The synchronous-replication mode.
    pub(super) fn replication(&self) -> SynchronousReplication {
        self.inner.replication
    }

    /// The confirming commits of this pool.
    pub(super) fn rounds(&self) -> &Arc<Rounds> {
        &self.inner.state.rounds
    }

    /// The database the pool connects to (host, port and name), as a key
    /// (the workers' isolation of crashes is per process and database).
    pub(crate) fn database(&self) -> String {
        self.inner.pool.database().unwrap_or_default()
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

    /// A named statement returned rows its text cannot have produced (a
    /// lookup's row that is not the event it looked up): another client's
    /// statement of the same name ran instead, as behind a transaction-mode
    /// pooler shared with other clients, where no error code shows it. The
    /// pool switches to unnamed statements as on 26000, with one WARN per
    /// pool whichever of the two showed first (a step already in flight
    /// when the pool switched may still meet either).
    pub(crate) fn named_statement_ran_other_sql(&self) {
        if !self.inner.state.unnamed.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "a named statement returned rows its text cannot have produced: it ran other SQL of the same name \
                 (a transaction-mode pooler shared with other clients?); this pool now sends unnamed statements; \
                 set StoreConfig::transaction_pooler(true)"
            );
        }
    }

    /// The switch of [`named_statement_failed`](Self::named_statement_failed)
    /// for a failure with SQLSTATE `code`, whatever the step sent: `code`
    /// (as a static string) when it is 26000 or 42P05, after switching.
    pub(super) fn switch_on(&self, code: &str) -> Option<&'static str> {
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
    pub(super) fn configured_for_pooler(&self) -> bool {
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
    /// idle longer than the step deadline ([`Pool::close_idle_since`]).
    ///
    /// It applies to every part's steps alike (the layer's, the inbox and
    /// outbox workers', which run theirs through the same seam): to the
    /// pool whose connection timed out, so a worker's timeout heals the
    /// layer's pool too when they share one.
    fn discard_idle_since(&self, checked_out: Instant) {
        let closed = self.inner.pool.close_idle_since(checked_out);
        if closed > 0 {
            tracing::warn!(
                closed,
                "a database step timed out: closing the pooled connections idle since before it (they may be \
                 silenced the same way); fresh ones are opened as needed"
            );
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

    /// The configured `host:port`, for errors raised before a session
    /// existed.
    pub(super) fn endpoint(&self) -> Option<String> {
        self.inner.endpoint.clone()
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
        names_server.then(|| self.endpoint()).flatten()
    }
}

/// Runs `fut`, a step on a pooled connection checked out at `checked_out`,
/// within `db`'s deadline (when there is one): past it the future is
/// dropped, the step fails with [`DbError::timeout`], and the idle
/// connections not checked out since are closed
/// ([`Db::discard_idle_since`]).
pub(super) async fn bounded<T>(
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
