//! The claim protocol, without HTTP: claim an event, do its work inside the
//! claim's transaction, then commit (marking it done) or fail (rolling back
//! and recording the attempt).
//!
//! [`WebhookLayer`](crate::layer::WebhookLayer) runs it for every verified
//! delivery in synchronous mode; anything else that must process an event
//! exactly once (a queue consumer, a cron job) can run it the same way. (The
//! inbox worker does not: its rows are accepted first and leased later, see
//! [`inbox`](crate::inbox).)
//!
//! ```no_run
//! # async fn run(config: webhook_idempotency::StoreConfig) -> Result<(), Box<dyn std::error::Error>> {
//! use webhook_idempotency::store::claim::{Claim, ClaimStore};
//! use webhook_idempotency::ScopedEvent;
//!
//! let store = ClaimStore::builder(config).build()?; // a StoreConfig, or a bare pool
//! let event = ScopedEvent::new("sqs", "orders", "msg-8f14e45f").event_type("order.paid");
//! match store.claim(&event).await? {
//!     Claim::Acquired(claimed) => {
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
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::driver::{code, Conn, Db, DbError, Fenced, Param, Row};
use super::statements::ASSUMED_STATUS;
use super::{IsolationLevel, Statements, StoreConfig};
use crate::error::{Cause, ConfigError, StoreError, StoreErrorKind};
use crate::event::ScopedEvent;
use crate::store::driver::TxSlot;
use crate::store::queue::TxTables;

/// The first pause before checking again on an event another delivery holds.
const IN_FLIGHT_FIRST_CHECK: Duration = Duration::from_millis(10);
/// The longest pause between checks (the backoff doubles up to it).
const IN_FLIGHT_MAX_CHECK: Duration = Duration::from_millis(200);
/// The default of [`ClaimStoreBuilder::in_flight_wait`]: 5 seconds.
pub const DEFAULT_IN_FLIGHT_WAIT: Duration = Duration::from_secs(5);

/// SQLSTATEs of a claim attempt that met another writer of the same row:
/// its row lock not free within the session's `lock_timeout` (55P03) or
/// `statement_timeout` (57014), a committed claim newer than the
/// snapshot at REPEATABLE READ / SERIALIZABLE (40001), crossed claims
/// (40P01). Each is checked again in a new transaction.
const CLAIM_CONFLICTS: [&str; 4] =
    [code::LOCK_NOT_AVAILABLE, code::QUERY_CANCELED, code::SERIALIZATION_FAILURE, code::DEADLOCK_DETECTED];

/// Builds a [`ClaimStore`].
#[derive(Debug)]
#[must_use]
pub struct ClaimStoreBuilder {
    store: StoreConfig,
    isolation: IsolationLevel,
    in_flight_wait: Duration,
    order: ClaimOrder,
}

/// Whether a claim looks for a `done` row before it opens the claim's
/// transaction ([`ClaimStoreBuilder::order`]).
///
/// | | new event | duplicate of a done event |
/// |---|---|---|
/// | lookup first | 4 round trips, 6 statements (a one-statement handler) | 1 round trip, 1 statement, no transaction |
/// | claim first | 3 round trips, 5 statements | 2 round trips, 4 statements, a transaction that writes nothing |
///
/// Counted on the wire by `tests/it/claim/budget.rs`. Claim first saves
/// a round trip per new event and costs one per duplicate; by statements
/// it pays off below about one duplicate in three. Exactly-once does not
/// depend on the order: the primary key and the claim's advisory lock decide
/// in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ClaimOrder {
    /// The default: claim first while fewer than one delivery in three of
    /// the recent ones (an exponentially weighted average over about the
    /// last 16 claims of this store) was a duplicate of a done event, lookup
    /// first above that. At REPEATABLE READ or SERIALIZABLE it is always
    /// lookup first (see [`ClaimOrder::ClaimFirst`]).
    #[default]
    Adaptive,
    /// Always look up first.
    LookupFirst,
    /// Always claim first. Keep the claim at READ COMMITTED (the default)
    /// then: at SERIALIZABLE the claim's read of the `done` row takes
    /// predicate locks, and claims of neighbouring keys may fail each other's
    /// COMMIT (40001, answered 503 and retried by the sender).
    ClaimFirst,
}

/// The duplicate share above which [`ClaimOrder::Adaptive`] looks up first:
/// one in three, in units of 1/65,536.
const LOOKUP_FIRST_ABOVE: u32 = 65_536 / 3;

impl ClaimStoreBuilder {
    setters! {
        /// The claim transaction's isolation level (default READ COMMITTED).
        pub fn isolation_level(level: IsolationLevel) => isolation = level;

        /// How long a claim keeps checking an event another claim holds before
        /// answering [`Claim::InFlight`] (default 5 s; zero: check once). No
        /// connection is held between checks.
        pub fn in_flight_wait(wait: Duration) => in_flight_wait = wait;

        /// Whether a claim looks up a `done` row first or claims first (default
        /// [`ClaimOrder::Adaptive`]: chosen from the recent share of duplicates);
        /// see [`ClaimOrder`] for what each costs. BENCHMARKS.md compares them.
        pub fn order(order: ClaimOrder) => order = order;
    }

    /// Pins the order: `true` is [`ClaimOrder::LookupFirst`], `false`
    /// [`ClaimOrder::ClaimFirst`] (the default adapts; see [`order`](Self::order)).
    pub fn lookup_first(self, lookup_first: bool) -> Self {
        self.order(if lookup_first { ClaimOrder::LookupFirst } else { ClaimOrder::ClaimFirst })
    }

    /// The database the store is built on, for what shares it (the inbox
    /// and request keys of the layers that claim through this builder).
    pub(crate) fn store_config(&self) -> &StoreConfig {
        &self.store
    }

    /// The in-flight wait set so far, for a caller that bounds it further.
    pub(crate) fn current_in_flight_wait(&self) -> Duration {
        self.in_flight_wait
    }

    /// Builds the store.
    ///
    /// # Errors
    /// [`ConfigError`] for a schema name that is not a plain identifier.
    pub fn build(self) -> Result<ClaimStore, ConfigError> {
        let (db, schema) = self.store.open()?;
        Ok(ClaimStore {
            inner: Arc::new(Inner {
                sql: Statements::new(schema, self.isolation),
                tables: super::queue::tables(schema),
                db,
                in_flight_wait: self.in_flight_wait,
                // A stricter level than READ COMMITTED never claims first.
                order: match (self.order, self.isolation) {
                    (ClaimOrder::Adaptive, IsolationLevel::ReadCommitted) => ClaimOrder::Adaptive,
                    (ClaimOrder::Adaptive, _) => ClaimOrder::LookupFirst,
                    (order, _) => order,
                },
                duplicates: AtomicU32::new(0),
            }),
        })
    }
}

/// Claims events in PostgreSQL: the synchronous protocol the layer runs.
/// Cheap to clone. See the [module docs](self).
#[derive(Clone)]
pub struct ClaimStore {
    inner: Arc<Inner>,
}

struct Inner {
    db: Db,
    sql: Statements,
    tables: Arc<TxTables>,
    in_flight_wait: Duration,
    order: ClaimOrder,
    /// The recent share of duplicates, in units of 1/65,536 (an
    /// exponentially weighted average, weight 1/16 for each new claim).
    duplicates: AtomicU32,
}

impl Inner {
    /// Whether this claim looks up first.
    fn lookup_first(&self) -> bool {
        match self.order {
            ClaimOrder::LookupFirst => true,
            ClaimOrder::ClaimFirst => false,
            ClaimOrder::Adaptive => self.duplicates.load(Ordering::Relaxed) >= LOOKUP_FIRST_ABOVE,
        }
    }

    /// Counts one claim's outcome into the recent share of duplicates.
    fn observe(&self, duplicate: bool) {
        if self.order != ClaimOrder::Adaptive {
            return;
        }
        let _ = self.duplicates.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |share| {
            let target = if duplicate { 65_536 } else { 0 };
            Some(share - share / 16 + target / 16)
        });
    }
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
    /// Acquired: this caller owns the event (its transaction is open in the
    /// [`ClaimedEvent`]): do its work in [`ClaimedEvent::tx`], then commit or fail.
    Acquired(ClaimedEvent),
    /// Processed before; `status` is the HTTP status the handler answered
    /// then (absent for rows written without one). Under synchronous
    /// replication, only once the standby confirmed that commit
    /// ([`StoreConfig::synchronous_replication`]).
    Done {
        /// The stored response status.
        status: Option<u16>,
    },
    /// Another claim still held it when the in-flight wait ran out.
    InFlight,
}

impl ClaimStore {
    /// A store on `store`'s database (a [`StoreConfig`], or a bare pool for
    /// the defaults); see [`ClaimStoreBuilder`] for the claim's own settings.
    pub fn builder(store: impl Into<StoreConfig>) -> ClaimStoreBuilder {
        ClaimStoreBuilder {
            store: store.into(),
            isolation: IsolationLevel::ReadCommitted,
            in_flight_wait: DEFAULT_IN_FLIGHT_WAIT,
            order: ClaimOrder::default(),
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
    /// [`StoreError`]: no connection ([`StoreErrorKind::Unavailable`],
    /// [`StoreErrorKind::PoolTimeout`]), no answer in time
    /// ([`StoreErrorKind::Timeout`]), a claim statement failed (the
    /// schema missing, the database read-only, ...), or the event is done
    /// but the synchronous standby did not confirm it in time
    /// ([`StoreErrorKind::Unconfirmed`]). Nothing was claimed.
    pub async fn claim(&self, event: &ScopedEvent) -> Result<Claim, StoreError> {
        self.claim_reading(event, None, None).await.map(|(claim, _)| claim)
    }

    /// [`claim`](Self::claim), and when claimed, `read` (a statement and its
    /// parameters) in the claim's transaction, in the claim's flight: its
    /// rows see everything committed before the claim took the event's lock
    /// (the `Idempotency-Key` layer reads the key's recovery point this way,
    /// after any in-flight wait). No rows unless claimed. The first attempt
    /// runs on `first` when given (a connection the caller already holds: one
    /// checkout per request, as a hand-written handler does).
    pub(crate) async fn claim_reading(
        &self,
        event: &ScopedEvent,
        read: Option<(&str, &[Param<'_>])>,
        mut first: Option<Conn>,
    ) -> Result<(Claim, Vec<Row>), StoreError> {
        let deadline = Instant::now() + self.inner.in_flight_wait;
        let mut backoff = IN_FLIGHT_FIRST_CHECK;
        let mut retried = false;
        loop {
            let conn = match first.take() {
                Some(conn) => conn,
                None => self.inner.db.connect("claim").await?,
            };
            let conflict = match self.attempt(conn, event, read).await {
                Ok(Attempt::Acquired(tx, attempt, started, rows)) => {
                    self.inner.observe(false);
                    let attempt = u32::try_from(attempt).unwrap_or(0);
                    let claimed = ClaimedEvent {
                        slot: TxSlot::new(*tx),
                        attempt,
                        started,
                        event: event.clone(),
                        store: self.clone(),
                    };
                    return Ok((Claim::Acquired(claimed), rows));
                }
                Ok(Attempt::Done(status, synchronous)) => {
                    self.inner.observe(true);
                    // Under synchronous replication, done once the standby has it.
                    self.inner.db.confirm_replicated(synchronous, "claim: duplicate").await?;
                    return Ok((Claim::Done { status: status.and_then(|s| u16::try_from(s).ok()) }, Vec::new()));
                }
                Ok(Attempt::InFlight) => None,
                Err(e) if e.timed_out() => {
                    // The attempt's connection was dropped with it: discarded.
                    tracing::error!(timeout = ?self.inner.db.deadline(), "claim: no answer from the database in time");
                    return Err(self.inner.db.error(&e, "claim"));
                }
                Err(e) if e.code().is_some_and(|c| CLAIM_CONFLICTS.contains(&c)) => Some(e),
                Err(e) if e.unusable() && !retried => {
                    tracing::warn!(
                        sqlstate = e.sqlstate(),
                        error = %e,
                        "pooled connection cannot serve the claim (closed, read-only, shutting down); \
                         discarded, claiming on a fresh one"
                    );
                    retried = true;
                    continue;
                }
                Err(e) => {
                    super::report_unmigrated(&self.inner.sql.schema, &e);
                    return Err(self.inner.db.error(&e, "claim"));
                }
            };
            let now = Instant::now();
            if now >= deadline {
                tracing::info!(
                    sqlstate = conflict.as_ref().and_then(DbError::code),
                    "another delivery of this event is still in flight after the wait bound"
                );
                return Ok((Claim::InFlight, Vec::new()));
            }
            if backoff == IN_FLIGHT_FIRST_CHECK {
                tracing::debug!(outcome = "waiting", "another delivery of this event is in flight; checking again");
            }
            // No connection is held while waiting.
            tokio::time::sleep(backoff.min(deadline - now)).await;
            backoff = (backoff * 2).min(IN_FLIGHT_MAX_CHECK);
        }
    }

    /// One claim attempt on `conn`: a transaction that either stays open
    /// (claimed) or is ended before returning. On error the connection is
    /// closed unless the rollback was confirmed.
    async fn attempt(
        &self,
        conn: Conn,
        event: &ScopedEvent,
        read: Option<(&str, &[Param<'_>])>,
    ) -> Result<Attempt, DbError> {
        let sql = &self.inner.sql;
        let keys = [Param::Text(event.scope()), Param::Text(event.provider()), Param::Text(event.key())];
        let lookup_first = self.inner.lookup_first();
        if lookup_first {
            // Flight 0, outside any transaction: a done event is answered
            // from here (one round trip, no transaction id, no WAL).
            let found = match conn.query(&sql.lookup, &keys).await {
                Ok(found) => found,
                Err(e) => {
                    // An ordinary error (55P03 behind a migration's lock) leaves
                    // the session fine: pooled again; an unusable one, closed.
                    conn.release();
                    return Err(e);
                }
            };
            if let Some((status, synchronous)) = self.done_status(&found, event) {
                conn.release();
                return Ok(Attempt::Done(status, synchronous));
            }
        }
        // Flight 1: BEGIN and the claim (which inserts only if it takes the
        // event's advisory lock at once): one round trip. On Citus the lock
        // is a statement of its own before a claim Citus routes whole to the
        // event's shard (`Statements::claim_routed`): the claim's transaction
        // then commits on one worker, never in two phases.
        let citus = match conn.on_citus().await {
            Ok(citus) => citus,
            Err(e) => {
                conn.release();
                return Err(e);
            }
        };
        let [scope, provider, key, event_type] = Param::event(event);
        let claim = [scope, provider, key, event_type, Param::I16(ASSUMED_STATUS)];
        let (lock, statement) = match (citus, lookup_first) {
            (true, _) => (Some((sql.claim_lock.as_str(), &keys[..])), &sql.claim_routed),
            (false, true) => (None, &sql.claim),
            (false, false) => (None, &sql.claim_guarded),
        };
        let (tx, rows, read) = match conn.begin_then(&sql.begin, lock, statement, &claim, read).await {
            Ok(opened) => opened,
            // The lock is another delivery's: in flight (rolled back).
            Err(e) if e.is(code::DIVISION_BY_ZERO) => return Ok(Attempt::InFlight),
            Err(e) => return Err(e),
        };
        if let Some(row) = rows.first() {
            return Ok(Attempt::Acquired(Box::new(tx), row.get(0), row.get(1), read));
        }
        // Another delivery's row stands: done or in flight. End the
        // transaction and look, in one flight.
        let found = tx.end(&sql.lookup, &keys, "ROLLBACK").await;
        Ok(match found.ok().and_then(|rows| self.done_status(&rows, event)) {
            Some((status, synchronous)) => Attempt::Done(status, synchronous),
            None => Attempt::InFlight,
        })
    }

    /// The stored status when the lookup's rows show `event` done, and
    /// whether the session waits for synchronous standbys. Rows that
    /// are not the event's (a named statement that ran another client's SQL
    /// of the same name, behind a transaction-mode pooler with several
    /// clients: no error code shows it) never count as done: the pool
    /// switches to unnamed statements and the delivery goes on to its claim.
    fn done_status(&self, rows: &[Row], event: &ScopedEvent) -> Option<(Option<i16>, bool)> {
        let row = rows.first()?;
        let read = (row.try_get::<&str>(0), row.try_get::<Option<i16>>(1), row.try_get::<&str>(2));
        let (state, status, key) = match read {
            (Some(state), Some(status), Some(key)) => (state, status, key),
            _ => ("", None, ""),
        };
        if key != event.key() {
            self.inner.db.named_statement_ran_other_sql();
            return None;
        }
        (state == "done").then(|| (status, row.try_get::<bool>(3).unwrap_or(true)))
    }
}

enum Attempt {
    Acquired(Box<super::driver::TxConn>, i32, SystemTime, Vec<Row>),
    /// The stored status, and whether commits wait for synchronous standbys.
    Done(Option<i16>, bool),
    InFlight,
}

mod claimed;
pub use claimed::{ClaimedEvent, CommitError, CommitErrorKind};

impl ClaimStore {
    /// Records the failed attempt of a delivery whose client went away while
    /// its handler ran (the layer's response future was dropped, so its
    /// transaction rolled back): a `failed` row with `error`, no status. Does
    /// nothing to a `done` row. Best effort, as [`fail`](ClaimedEvent::fail).
    pub(crate) async fn record_abandoned(&self, event: &ScopedEvent, error: &str) {
        self.record_failure(event, error, None, None).await;
    }

    /// Records a failed attempt outside the rolled-back transaction, on a
    /// pooled connection: `BEGIN`, the record and `COMMIT` in one flight.
    /// Best effort: a failure to record is logged.
    async fn record_failure(
        &self,
        event: &ScopedEvent,
        error: &str,
        status: Option<u16>,
        committed_claim: Option<SystemTime>,
    ) {
        let sql = &self.inner.sql;
        let code = status.map(|s| i16::try_from(s).unwrap_or(i16::MAX));
        let [scope, provider, key, event_type] = Param::event(event);
        let params = [
            scope,
            provider,
            key,
            event_type,
            Param::Text(error),
            Param::OptI16(code),
            Param::OptTime(committed_claim),
        ];
        let recorded = self.inner.db.transact("record failure", sql.begin_failure, &sql.record_failure, &params).await;
        if let Err(e) = recorded {
            // Typically another delivery holds the event (lock timeout): it
            // will record its own outcome.
            match e.kind() {
                StoreErrorKind::Timeout => {
                    tracing::warn!("failed attempt not recorded: no answer from the database in time")
                }
                _ => tracing::warn!(error = %e, "failed attempt not recorded"),
            }
        }
    }
}
