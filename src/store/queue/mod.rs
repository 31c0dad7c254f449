//! The workers' side of a queue table: lease due rows, keep leases alive,
//! and end each one (done inside the work's transaction, retry later, dead,
//! released), every end fenced by the lease's token. One implementation for
//! every kind of work; a kind ([`QueueKind`]) names its table, its identity
//! columns and what a leased row carries.
//!
//! The protocol, after River and Oban (one narrow table; claim with one
//! `UPDATE ... WHERE key IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT n)
//! RETURNING`; completion only while the lease is still this worker's,
//! River's "set state if running"):
//! - [`TableQueue::lease`]: due `pending` rows become `running` with
//!   `attempts + 1`, `locked_until = now() + lease` and a fresh
//!   `lease_token`, in one statement; rows another worker is leasing at that
//!   moment are skipped. A `running` row whose lease expired (its worker's
//!   process died, was killed or could not renew the lease) goes back due at
//!   a backoff with full jitter, marked `run_alone`: which row of that
//!   process's batch killed it is unknown, so it next runs alone, leased by
//!   a worker whose process has nothing else in hand (the runtime's
//!   isolation, `worker::isolation`). A row whose lease expired while it ran
//!   alone killed its process itself: on its last allowed run it is buried
//!   as `dead` instead, with that reason.
//! - [`TableQueue::begin`] opens the work's transaction; [`WorkTx::complete`]
//!   marks the row `done` in it, only if `lease_token` still matches (a
//!   worker whose lease was taken over cannot complete the row: its writes
//!   roll back with it), and commits, in one flight
//!   ([`TxConn::commit_fenced`](super::driver::TxConn::commit_fenced)).
//! - [`TableQueue::heartbeat`] extends a live lease;
//!   [`TableQueue::retry_later`] puts a failed row back to `pending` at a
//!   later `run_at`, or `dead` past the maximum attempts;
//!   [`TableQueue::release`] hands a row back untouched (graceful shutdown:
//!   the attempt is not counted).
//!
//! A queue table has the columns `scope`, `provider`, `event_key` (the first
//! identity columns, text), `state` (`pending`, `running`, `done`, `dead`,
//! ...), `attempts`, `run_at`, `locked_until`, `lease_token` (uuid),
//! `last_error`, `last_failed_at`, `response_status` (smallint) and
//! `run_alone` (boolean), with partial indexes on `run_at` and
//! `locked_until` (migration 4) and on `run_at` of the rows that run alone
//! (migration 12).

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

mod sql;

use super::driver::{Db, Fenced, Param, Row, TxSlot, FENCE_ON};
use crate::error::{Cause, StoreError};
use crate::event::ScopedEvent;
#[cfg(test)]
pub(crate) use sql::statement_texts;
use sql::QueueSql;

/// A kind of work's table: what the generic queue statements need to know.
pub(crate) trait QueueKind: Send + Sync + 'static {
    /// The kind's name, in metrics (`kind` label), logs and the
    /// notification channel: `inbox`, `outbox`.
    const NAME: &'static str;
    /// The table, inside the configured schema.
    const TABLE: &'static str;
    /// The identity columns, in primary-key order, starting with `scope`,
    /// `provider`, `event_key`; text unless written `name:type`
    /// (`ordinal:integer`), which the statements cast to and from text.
    const KEY: &'static [&'static str];
    /// The column a row's retry budget runs from unless `retry_from` is set
    /// (when the row arrived).
    const BORN: &'static str;
    /// The states a row is due in at its `run_at` (SQL list).
    const DUE_STATES: &'static str = "'pending'";
    /// The state a row whose lease expired goes back to (SQL over the table
    /// alias `e`).
    const EXPIRED_STATE: &'static str = "'pending'";
    /// A condition a due row (table alias `c`) must also meet to be leased,
    /// starting with `AND`; `{t}` stands for the table (the outbox's ordering
    /// key: no earlier row of the same key unfinished). Empty: none.
    const ORDER_GUARD: &'static str = "";
    /// The column a worker's `only` list filters on (the outbox's `effect`),
    /// if the kind has one.
    const FILTER_COLUMN: Option<&'static str> = None;
    /// The columns a leased row returns besides its identity, attempt and
    /// token (SQL over the table alias `e`; `{schema}` stands for the
    /// schema).
    const PAYLOAD_COLUMNS: &'static str;
    /// The kind's large columns (SQL over the table alias `e`), read per item
    /// instead of by the lease: in the BEGIN flight of its work transaction
    /// ([`WorkTx::read`], the inbox), or by a fenced statement of its own
    /// ([`TableQueue::read`], the outbox, which runs outside any
    /// transaction). One statement leasing n rows never carries n payloads,
    /// and a payload too slow to read fails its own item only (counted as an
    /// attempt). Empty: none.
    const BODY_COLUMNS: &'static str = "";
    /// The `SET` items of the fenced completion besides the state and the
    /// lease; `{status}` stands for the handler's status parameter
    /// (smallint).
    const DONE_SET: &'static str;
    /// What a leased row carries.
    type Payload: Send + Sync + 'static;
    /// Reads the payload from `row`, whose [`PAYLOAD_COLUMNS`](Self::PAYLOAD_COLUMNS)
    /// start at column `first`.
    fn payload(row: &Row, first: usize) -> Self::Payload;
    /// The state a failed run of this row goes back to for its retry.
    fn retry_state(_payload: &Self::Payload) -> &'static str {
        "pending"
    }

    /// Counts how a run of an item of `provider` ended, in the kind's own
    /// metrics (the runtime counts every kind's runs already); `filter` is
    /// the row's [`FILTER_COLUMN`](Self::FILTER_COLUMN) value, if the kind
    /// has one.
    fn count(_provider: &str, _filter: Option<&str>, _outcome: &'static str) {}
}

/// An identity column of `K::KEY`: its name and its SQL type.
fn key_column(entry: &'static str) -> (&'static str, &'static str) {
    entry.split_once(':').unwrap_or((entry, "text"))
}

/// A row leased to this worker: its identity, attempt, lease token and the
/// kind's payload. Cheap to clone.
pub(crate) struct Leased<P> {
    inner: Arc<LeasedInner<P>>,
}

struct LeasedInner<P> {
    key: Vec<String>,
    attempt: u32,
    token: String,
    payload: P,
}

impl<P> Clone for Leased<P> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

impl<P> fmt::Debug for Leased<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leased").field("key", &self.inner.key).field("attempt", &self.inner.attempt).finish()
    }
}

impl<P> Leased<P> {
    /// The scope (the first identity column).
    pub(crate) fn scope(&self) -> &str {
        &self.inner.key[0]
    }

    /// The provider (the second).
    pub(crate) fn provider(&self) -> &str {
        &self.inner.key[1]
    }

    /// The event key (the third).
    pub(crate) fn event_key(&self) -> &str {
        &self.inner.key[2]
    }

    /// The identity column `i` ([`QueueKind::KEY`]'s order), as text.
    pub(crate) fn key_part(&self, i: usize) -> &str {
        &self.inner.key[i]
    }

    /// The identity column named `column`, if the key has it.
    pub(crate) fn column(&self, key: &'static [&'static str], column: &str) -> Option<&str> {
        key.iter().position(|c| key_column(c).0 == column).map(|i| self.key_part(i))
    }

    /// Which run this is: 1 the first time, higher after failures.
    pub(crate) fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    pub(crate) fn payload(&self) -> &P {
        &self.inner.payload
    }

    /// The lease's token.
    pub(crate) fn token(&self) -> &str {
        &self.inner.token
    }

    /// The identity and the token: `$1..$k` and `$k+1` of every fenced
    /// statement.
    pub(crate) fn fence(&self) -> Vec<Param<'_>> {
        let mut params: Vec<Param<'_>> = self.inner.key.iter().map(|k| Param::Text(k)).collect();
        params.push(Param::Text(&self.inner.token));
        params
    }
}

/// What one lease statement did: the rows leased to this worker, the rows
/// it buried as `dead` instead (their lease expired while they ran alone,
/// on their last allowed run: each killed its worker's process), when the
/// earliest row whose lease expired is due again, and whether rows that
/// must run alone are due for this worker.
pub(crate) struct Leases<P> {
    pub(crate) leased: Vec<Leased<P>>,
    pub(crate) buried: Vec<Buried>,
    /// In how long the earliest row this statement found with an expired
    /// lease is due again (it went back at a backoff, to run alone).
    pub(crate) requeued_due_in: Option<Duration>,
    /// Rows that must run alone are due: lease them with `alone` once this
    /// process has nothing else in hand.
    pub(crate) alone_due: bool,
}

/// Which rows a worker leases: of one provider, one scope, and (the
/// outbox) the effects it has functions for; `None`: all.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LeaseFilter<'a> {
    pub(crate) provider: Option<&'a str>,
    pub(crate) scope: Option<&'a str>,
    pub(crate) only: Option<&'a [String]>,
}

/// A row the lease buried.
#[derive(Debug)]
pub(crate) struct Buried {
    pub(crate) provider: String,
    pub(crate) key: String,
    /// The kind's filter column's value (the outbox's effect).
    pub(crate) filter: Option<String>,
}

/// How long a row keeps being retried: at most `max_attempts` runs, and not
/// past `retry_for` after it arrived (or was requeued); and the backoff
/// (`base`, `cap`) of a row whose lease expired, which the lease statement
/// schedules itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    pub(crate) max_attempts: u32,
    pub(crate) retry_for: Duration,
    pub(crate) base: Duration,
    pub(crate) cap: Duration,
}

/// Where a failed row went: see [`TableQueue::retry_later`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    /// Back to `pending`, due again after the delay.
    Retry,
    /// `dead`: past the maximum attempts, kept for an operator.
    Dead,
    /// `dead`: its retry budget (`retry_for` since it arrived) is spent.
    Expired,
    /// The lease was no longer this worker's: nothing changed.
    LeaseLost,
}

/// The first body column of [`WorkTx::read`]'s row (after `mine`).
pub(crate) const BODY_FIRST: usize = 1;

/// The channel a kind's producers notify on, per schema: a digest of the
/// schema's name, so that any valid schema name (up to 63 bytes) gives a
/// channel name within PostgreSQL's 63-byte identifier limit
/// (`webhook_inbox_` and 16 hex digits of the schema name's SHA-256).
pub(crate) fn channel(kind: &str, schema: &str) -> String {
    use sha2::{Digest as _, Sha256};
    format!("webhook_{kind}_{}", &hex::encode(Sha256::digest(schema.as_bytes()))[..16])
}

/// The outbox's kind name (its queue kind's `NAME`).
pub(crate) const OUTBOX: &str = "outbox";

/// Where the crate's tables are, for the statements a handler's transaction
/// runs (`WebhookTx`'s enqueue, business keys, versions): built once per
/// store, shared by its transactions.
#[derive(Debug)]
pub(crate) struct TxTables {
    /// The checked schema name.
    pub(crate) schema: String,
    /// The channel a commit that enqueued effects notifies.
    pub(crate) outbox_channel: String,
}

/// The tables of `schema` for the transactions a store opens.
pub(crate) fn tables(schema: &str) -> Arc<TxTables> {
    Arc::new(TxTables { schema: schema.to_owned(), outbox_channel: channel(OUTBOX, schema) })
}

/// One kind's queue on one database and schema. Cheap to clone.
pub(crate) struct TableQueue<K> {
    inner: Arc<QueueInner>,
    kind: PhantomData<fn() -> K>,
}

struct QueueInner {
    db: Db,
    /// The database's key ([`Db::database`]).
    database: String,
    sql: QueueSql,
    channel: String,
    tables: Arc<TxTables>,
}

impl<K> Clone for TableQueue<K> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner), kind: PhantomData }
    }
}

impl<K: QueueKind> TableQueue<K> {
    /// The queue of kind `K` under `schema` (a checked identifier).
    pub(crate) fn new(db: Db, schema: &str) -> Self {
        let inner = QueueInner {
            sql: QueueSql::new::<K>(schema),
            channel: channel(K::NAME, schema),
            tables: tables(schema),
            database: db.database(),
            db,
        };
        Self { inner: Arc::new(inner), kind: PhantomData }
    }

    /// The database the queue is on (host, port and name), as a key.
    pub(crate) fn database(&self) -> &str {
        &self.inner.database
    }

    /// The channel producers `pg_notify` when they add rows.
    pub(crate) fn channel(&self) -> &str {
        &self.inner.channel
    }

    /// Leases up to `limit` due rows for `lease` (those `filter` names): each
    /// becomes `running` with `attempts + 1` and a fresh lease token. With
    /// `alone`, leases at most one row that must run alone (its last run ended
    /// by its lease expiring) and nothing else; without, only rows that need
    /// not. A row whose lease expired goes back due at a backoff, to run alone;
    /// one whose lease expired while it ran alone, on run `max_attempts` or
    /// past its retry budget (`retry_for` since it arrived), is buried as
    /// `dead`. Rows other workers are leasing are skipped.
    ///
    /// # Errors
    /// [`StoreError`] when the database is unavailable.
    pub(crate) async fn lease(
        &self,
        limit: usize,
        lease: Duration,
        filter: LeaseFilter<'_>,
        budget: Budget,
        alone: bool,
    ) -> Result<Leases<K::Payload>, StoreError> {
        if filter.scope.is_some() || !self.on_citus().await? {
            return self.lease_in(limit, lease, filter, budget, alone).await;
        }
        // Citus refuses `FOR UPDATE` over several shards: lease scope by
        // scope (each statement on one shard), the scopes with due rows or
        // expired leases read first (one statement over every shard).
        let scopes = self
            .inner
            .db
            .query("lease: due scopes", &self.inner.sql.due_scopes, &[Param::OptText(filter.provider)])
            .await?;
        let mut all = Leases { leased: Vec::new(), buried: Vec::new(), requeued_due_in: None, alone_due: false };
        for row in scopes {
            let scope: String = row.get(0);
            let left = if alone { 1 } else { limit.saturating_sub(all.leased.len()) };
            if left == 0 || (alone && !all.leased.is_empty()) {
                break;
            }
            let one = self.lease_in(left, lease, LeaseFilter { scope: Some(&scope), ..filter }, budget, alone).await?;
            all.leased.extend(one.leased);
            all.buried.extend(one.buried);
            all.requeued_due_in = all.requeued_due_in.into_iter().chain(one.requeued_due_in).min();
            all.alone_due |= one.alone_due;
        }
        Ok(all)
    }

    /// Whether the database has the `citus` extension (looked up once per
    /// pool, at the first lease or claim: `Db::on_citus`): a worker serving
    /// every scope then leases scope by scope.
    async fn on_citus(&self) -> Result<bool, StoreError> {
        self.inner.db.on_citus("lease: look for citus").await
    }

    /// [`lease`](Self::lease) in one statement.
    async fn lease_in(
        &self,
        limit: usize,
        lease: Duration,
        filter: LeaseFilter<'_>,
        budget: Budget,
        alone: bool,
    ) -> Result<Leases<K::Payload>, StoreError> {
        let token = lease_token();
        let params = [
            Param::F64(lease.as_secs_f64()),
            Param::I64(i64::try_from(if alone { 1 } else { limit }).unwrap_or(i64::MAX)),
            Param::OptText(filter.provider),
            Param::OptText(filter.scope),
            Param::I32(i32::try_from(budget.max_attempts).unwrap_or(i32::MAX)),
            Param::OptTexts(filter.only),
            Param::F64(budget.retry_for.as_secs_f64()),
            Param::F64(budget.base.as_secs_f64()),
            Param::F64(budget.cap.as_secs_f64()),
            Param::Bool(alone),
            Param::Text(&token),
        ];
        let rows = self.inner.db.query("lease", &self.inner.sql.lease, &params).await?;
        let k = K::KEY.len();
        let mut leases = Leases {
            leased: Vec::with_capacity(rows.len()),
            buried: Vec::new(),
            requeued_due_in: None,
            alone_due: false,
        };
        if let Some(first) = rows.first() {
            let n = first.len();
            let providers: Option<Vec<String>> = first.get(n - 5);
            let keys: Option<Vec<String>> = first.get(n - 4);
            let filters: Option<Vec<Option<String>>> = first.get(n - 3);
            leases.buried = providers
                .unwrap_or_default()
                .into_iter()
                .zip(keys.unwrap_or_default())
                .zip(filters.unwrap_or_default())
                .map(|((provider, key), filter)| Buried { provider, key, filter })
                .collect();
            let next_due: Option<f64> = first.get(n - 2);
            leases.requeued_due_in = next_due.map(|s| Duration::try_from_secs_f64(s.max(0.0)).unwrap_or_default());
            leases.alone_due = first.get(n - 1);
        }
        leases.leased = rows
            .iter()
            .filter(|row| row.get::<Option<&str>>(0).is_some())
            .map(|row| Leased {
                inner: Arc::new(LeasedInner {
                    key: (0..k).map(|i| row.get(i)).collect(),
                    attempt: u32::try_from(row.get::<i32>(k)).unwrap_or(0),
                    token: row.get(k + 1),
                    payload: K::payload(row, k + 2),
                }),
            })
            .collect();
        Ok(leases)
    }

    /// Extends `leased`'s lease to `lease` from now. `Ok(false)`: the lease
    /// is no longer this worker's (it expired and another worker took the
    /// row, or the row ended).
    ///
    /// # Errors
    /// [`StoreError`] when the database is unavailable.
    pub(crate) async fn heartbeat(&self, leased: &Leased<K::Payload>, lease: Duration) -> Result<bool, StoreError> {
        let mut params = leased.fence();
        params.push(Param::F64(lease.as_secs_f64()));
        Ok(!self.inner.db.query("heartbeat", &self.inner.sql.heartbeat, &params).await?.is_empty())
    }

    /// Puts a failed row back to `pending`, due after `delay` but never past
    /// the end of its retry budget (`retry_for` after it arrived), or `dead`
    /// when it has run `max_attempts` times or the budget is spent; records
    /// `error` (never a payload) and the handler's `status`. Fenced by the
    /// lease.
    ///
    /// # Errors
    /// [`StoreError`] when the database is unavailable.
    pub(crate) async fn retry_later(
        &self,
        leased: &Leased<K::Payload>,
        budget: Budget,
        delay: Duration,
        error: &str,
        status: Option<u16>,
    ) -> Result<AfterFailure, StoreError> {
        let mut params = leased.fence();
        params.extend([
            Param::I32(i32::try_from(budget.max_attempts).unwrap_or(i32::MAX)),
            Param::F64(delay.as_secs_f64()),
            Param::Text(error),
            Param::OptI16(status.map(|s| i16::try_from(s).unwrap_or(i16::MAX))),
            Param::Text(K::retry_state(leased.payload())),
            Param::F64(budget.retry_for.as_secs_f64()),
        ]);
        let rows = self.inner.db.query("retry later", &self.inner.sql.retry_later, &params).await?;
        Ok(match rows.first().map(|r| (r.get::<&str>(0), r.get::<bool>(1))) {
            Some(("dead", true)) => AfterFailure::Dead,
            Some(("dead", false)) => AfterFailure::Expired,
            Some(_) => AfterFailure::Retry,
            None => AfterFailure::LeaseLost,
        })
    }

    /// Buries a leased row as `dead` now, whatever its attempts (a permanent
    /// failure), with `error` (never a payload) and `status`. `Ok(false)`
    /// when the lease was no longer this worker's.
    ///
    /// # Errors
    /// [`StoreError`] when the database is unavailable.
    pub(crate) async fn bury(
        &self,
        leased: &Leased<K::Payload>,
        error: &str,
        status: Option<u16>,
    ) -> Result<bool, StoreError> {
        let mut params = leased.fence();
        params.extend([Param::Text(error), Param::OptI16(status.map(|s| i16::try_from(s).unwrap_or(i16::MAX)))]);
        Ok(!self.inner.db.query("bury", &self.inner.sql.bury, &params).await?.is_empty())
    }

    /// The database the queue runs on, for a kind's own statements.
    pub(crate) fn db(&self) -> &Db {
        &self.inner.db
    }

    /// The schema the queue's table is in.
    pub(crate) fn schema(&self) -> &str {
        &self.inner.tables.schema
    }

    /// Hands a leased row back untouched: `pending`, due now, the attempt not
    /// counted (graceful shutdown). `Ok(false)` when the lease was no longer
    /// this worker's.
    ///
    /// # Errors
    /// [`StoreError`] when the database is unavailable.
    pub(crate) async fn release(&self, leased: &Leased<K::Payload>) -> Result<bool, StoreError> {
        let params = leased.fence();
        Ok(!self.inner.db.query("release", &self.inner.sql.release, &params).await?.is_empty())
    }

    /// Reads `leased`'s [`BODY_COLUMNS`](QueueKind::BODY_COLUMNS) (from
    /// column 0) in one autocommit statement fenced by its lease token,
    /// within the database timeout: for a kind whose work runs outside a
    /// transaction (the outbox). `Ok(None)`: the lease is no longer this
    /// worker's.
    ///
    /// # Errors
    /// [`StoreError`] when no connection can be had, the statement fails, or
    /// it outlasts the database timeout (a payload too large for the link:
    /// the item's run fails, the rows behind it are not held up).
    pub(crate) async fn read(&self, leased: &Leased<K::Payload>, step: &str) -> Result<Option<Row>, StoreError> {
        let params = leased.fence();
        Ok(self.inner.db.query(step, &self.inner.sql.read, &params).await?.pop())
    }

    /// Opens the transaction a leased row's work runs in (READ COMMITTED):
    /// `BEGIN` with the fence the completion checks (`driver::FENCE_ON`) and
    /// the kind's
    /// [`BODY_COLUMNS`](QueueKind::BODY_COLUMNS) in one flight, within the
    /// database timeout: no round trip more than a bare BEGIN.
    ///
    /// # Errors
    /// [`StoreError`] when no connection can be had, `BEGIN` fails, or the
    /// flight (the body read included) outlasts the database timeout.
    pub(crate) async fn begin(&self, leased: &Leased<K::Payload>) -> Result<WorkTx<K>, StoreError> {
        let step = if K::BODY_COLUMNS.is_empty() {
            "begin the work's transaction"
        } else {
            "begin the work's transaction and read the stored item"
        };
        let conn = self.inner.db.connect(step).await?;
        let begin = format!("BEGIN ISOLATION LEVEL READ COMMITTED; {FENCE_ON}");
        let params = if K::BODY_COLUMNS.is_empty() { Vec::new() } else { leased.fence() };
        let (tx, mut rows) =
            conn.begin(&begin, &self.inner.sql.begin_read, &params).await.map_err(|e| self.inner.db.error(&e, step))?;
        let read = if K::BODY_COLUMNS.is_empty() { None } else { rows.pop().filter(|r| r.get::<bool>(0)) };
        let event = ScopedEvent::new(leased.provider(), leased.scope(), leased.event_key());
        Ok(WorkTx { slot: TxSlot::new(tx), event, leased: leased.clone(), queue: self.clone(), read })
    }
}

/// A fresh lease token: 128 random bits as 32 hex digits (PostgreSQL reads
/// them as a `uuid`). Made by the worker, not the database, since Citus
/// refuses a VOLATILE `gen_random_uuid()` in an UPDATE; a token is a fence,
/// compared for equality, not a secret.
fn lease_token() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// The transaction a leased row's work runs in. [`complete`](Self::complete)
/// commits the work with the row marked `done`, only while the lease is
/// still this worker's; dropping it rolls the work back.
#[must_use = "dropping the transaction rolls the work back"]
pub(crate) struct WorkTx<K: QueueKind> {
    /// The transaction's connection, shared with the handler's `WebhookTx`.
    slot: TxSlot,
    /// The leased row's event.
    event: ScopedEvent,
    leased: Leased<K::Payload>,
    queue: TableQueue<K>,
    /// The kind's body columns, read in the BEGIN flight while the lease was
    /// still this worker's.
    read: Option<Row>,
}

/// Why [`WorkTx::complete`] did not commit.
#[derive(Debug)]
pub(crate) enum Incomplete {
    /// A clone of the handle still holds the connection (a task the work
    /// spawned): rolled back when that clone drops.
    StillInUse,
    /// The lease was taken over, or the work ended its transaction itself:
    /// rolled back, the row left to its lease.
    LeaseLost,
    /// A failed statement aborted the transaction (its SQLSTATE, and its
    /// error's chain): rolled back.
    Aborted(String, Option<Arc<Cause>>),
    /// COMMIT's answer never came, or it failed (its error's chain): the
    /// outcome is unknown.
    Unknown(Option<Arc<Cause>>),
}

impl fmt::Display for Incomplete {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::StillInUse => f.write_str("the transaction handle is still in use"),
            Self::LeaseLost => f.write_str(
                "the work's transaction was not this lease's at completion (taken over, or ended by the handler)",
            ),
            Self::Aborted(code, None) => {
                write!(f, "the transaction was aborted by a failed statement (SQLSTATE {code})")
            }
            Self::Aborted(_, cause) => {
                let own = "the transaction was aborted by a failed statement";
                f.write_str(own)?;
                Cause::write_chain(f, own, cause.as_deref())
            }
            Self::Unknown(cause) => {
                let own = "the commit failed or its outcome is unknown";
                f.write_str(own)?;
                Cause::write_chain(f, own, cause.as_deref())
            }
        }
    }
}

impl<K: QueueKind> WorkTx<K> {
    /// The row the BEGIN flight read, its [`BODY_COLUMNS`](QueueKind::BODY_COLUMNS)
    /// from column [`BODY_FIRST`]; `None` when the kind has none, or when the
    /// lease was no longer this worker's by then.
    pub(crate) fn read(&self) -> Option<&Row> {
        self.read.as_ref()
    }

    /// The transaction's connection, the leased row's event and the tables:
    /// what the work's `WebhookTx` is made of (`crate::tx`).
    pub(crate) fn parts(&self) -> (&TxSlot, &ScopedEvent, &Arc<TxTables>) {
        (&self.slot, &self.event, &self.queue.inner.tables)
    }

    /// The SQLSTATE of a retryable conflict a statement through the handle
    /// met (40P01, 40001, 55P03).
    pub(crate) fn retryable_conflict(&self) -> Option<&'static str> {
        self.slot.retryable()
    }

    /// Marks the row `done` with `status` inside the work's transaction,
    /// fenced by the lease token, and commits.
    ///
    /// # Errors
    /// [`Incomplete`]: what happened instead.
    pub(crate) async fn complete(self, status: Option<u16>) -> Result<(), Incomplete> {
        let tx = self.slot.take().ok_or(Incomplete::StillInUse)?;
        let mut params = self.leased.fence();
        params.push(Param::OptI16(status.map(|s| i16::try_from(s).unwrap_or(i16::MAX))));
        match tx.commit_fenced(Some((&self.queue.inner.sql.complete, &params))).await {
            Ok(()) => Ok(()),
            Err(Fenced::Lost) => Err(Incomplete::LeaseLost),
            Err(Fenced::Aborted(e)) => Err(Incomplete::Aborted(e.sqlstate().to_owned(), e.cause())),
            Err(Fenced::Unknown(e)) => {
                tracing::error!(
                    sqlstate = e.sqlstate(),
                    error = %e,
                    "{} commit failed or its result is unknown",
                    K::NAME
                );
                Err(Incomplete::Unknown(e.cause()))
            }
        }
    }

    /// Rolls the work back (the row stays leased; end it with
    /// [`TableQueue::retry_later`] or [`TableQueue::release`]).
    pub(crate) async fn rollback(self) {
        if let Some(tx) = self.slot.take() {
            let _ = tx.rollback().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::event::ScopedEvent;
    use crate::store::inbox::{Inbox, InboxRows, RequestHead};
    use crate::store::testing as db;
    use crate::store::StoreConfig;
    use crate::worker::RetryPolicy;

    /// `max_attempts` runs within a day.
    fn budget(max_attempts: u32) -> Budget {
        Budget {
            max_attempts,
            retry_for: Duration::from_secs(86_400),
            base: Duration::from_millis(10),
            cap: Duration::from_millis(10),
        }
    }

    /// The inbox queue on a fresh database with `keys` accepted as pending.
    async fn inbox_with(keys: &[String], pool_size: usize) -> (TableQueue<InboxRows>, StoreConfig) {
        let store = db::fresh(pool_size).await;
        let inbox = Inbox::new(store.clone()).unwrap();
        let head = RequestHead { method: "POST".into(), uri: "/webhooks/stripe".into(), headers: vec![] };
        for key in keys {
            let event = ScopedEvent::new("stripe", "acct_test", key.clone());
            assert!(inbox.accept(&event, b"{}", &head).await.unwrap(), "{key} accepted");
        }
        let (db, schema) = store.open().unwrap();
        (TableQueue::new(db, schema), store.clone())
    }

    #[tokio::test]
    async fn racing_leases_hand_each_row_to_one_worker() {
        let keys: Vec<String> = (0..40).map(|i| format!("evt_race{i}")).collect();
        let (queue, _pool) = inbox_with(&keys, 16).await;
        let barrier = Arc::new(tokio::sync::Barrier::new(8));
        let leasers: Vec<_> = (0..8)
            .map(|_| {
                let (queue, barrier) = (queue.clone(), Arc::clone(&barrier));
                tokio::spawn(async move {
                    barrier.wait().await;
                    let mut mine = Vec::new();
                    loop {
                        let rows = queue
                            .lease(3, Duration::from_secs(60), LeaseFilter::default(), budget(u32::MAX), false)
                            .await
                            .unwrap()
                            .leased;
                        if rows.is_empty() {
                            break mine;
                        }
                        mine.extend(rows.into_iter().map(|r| r.event_key().to_owned()));
                    }
                })
            })
            .collect();
        let mut all = Vec::new();
        for leaser in leasers {
            all.extend(leaser.await.unwrap());
        }
        all.sort();
        let before = all.len();
        all.dedup();
        assert_eq!((before, all.len()), (40, 40), "every row leased exactly once");
    }

    /// `(state, run_alone, attempts, last_error)` of `key`'s row.
    async fn row_of(store: &StoreConfig, key: &str) -> (String, bool, i32, Option<String>) {
        let sql = "SELECT state, run_alone, attempts, last_error FROM webhook_idempotency.webhook_events
                    WHERE event_key = $1";
        let rows = db::execute(store, sql, &[Param::Text(key)]).await;
        let row = &rows[0];
        (row.get(0), row.get(1), row.get(2), row.get(3))
    }

    /// Ends the leases of `keys` now (their process died), or makes them due
    /// now (their backoff passed), as the test needs: the clock the statements
    /// read is the database's.
    async fn set_now(store: &StoreConfig, column: &str, keys: &[&str]) {
        let sql = format!(
            "UPDATE webhook_idempotency.webhook_events SET {column} = now() - interval '1 second'
              WHERE event_key = ANY($1)"
        );
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        db::execute(store, &sql, &[Param::OptTexts(Some(&keys))]).await;
    }

    #[tokio::test]
    async fn a_row_whose_lease_expired_runs_alone_and_is_buried_only_when_it_expired_alone() {
        let (queue, pool) = inbox_with(&["evt_crashes".to_owned(), "evt_fine".to_owned()], 4).await;
        let lease = |alone| queue.lease(2, Duration::from_secs(60), LeaseFilter::default(), budget(1), alone);
        let first = lease(false).await.unwrap();
        assert_eq!((first.leased.len(), first.buried.len()), (2, 0));
        // The process running both died: both leases are past. Which row killed
        // it is unknown: neither is buried, though each had its one allowed run.
        set_now(&pool, "locked_until", &["evt_crashes", "evt_fine"]).await;
        let next = lease(false).await.unwrap();
        assert!(next.leased.is_empty() && next.buried.is_empty(), "nothing leased with them, nothing buried");
        let due_in = next.requeued_due_in.expect("back at a backoff");
        assert!(due_in <= Duration::from_millis(10), "within the backoff's ceiling: {due_in:?}");
        for key in ["evt_crashes", "evt_fine"] {
            let (state, alone, attempts, error) = row_of(&pool, key).await;
            assert_eq!((state.as_str(), alone, attempts), ("pending", true, 1), "{key}");
            assert_eq!(error.as_deref(), Some(sql::EXPIRED_IN_BATCH), "{key}");
        }
        set_now(&pool, "run_at", &["evt_crashes"]).await;
        let normal = lease(false).await.unwrap();
        assert!(normal.leased.is_empty() && normal.alone_due, "only a lease alone takes them");
        let alone = lease(true).await.unwrap();
        let keys: Vec<(&str, u32)> = alone.leased.iter().map(|r| (r.event_key(), r.attempt())).collect();
        assert_eq!(keys, [("evt_crashes", 2)], "one row, the earliest due");
        // It killed the process again, running alone: on its last allowed run, it is buried.
        set_now(&pool, "locked_until", &["evt_crashes"]).await;
        set_now(&pool, "run_at", &["evt_fine"]).await;
        let after = lease(false).await.unwrap();
        let buried: Vec<_> =
            after.buried.iter().map(|b| (b.provider.as_str(), b.key.as_str(), b.filter.clone())).collect();
        assert_eq!(buried, [("stripe", "evt_crashes", None)]);
        let (state, alone, attempts, error) = row_of(&pool, "evt_crashes").await;
        assert_eq!((state.as_str(), alone, attempts), ("dead", true, 2));
        assert_eq!(error.as_deref(), Some(sql::EXPIRED_ALONE_SPENT));
        // The other row runs alone, and its end clears the mark.
        assert!(after.leased.is_empty() && after.alone_due);
        let fine = lease(true).await.unwrap().leased.remove(0);
        assert_eq!((fine.event_key(), fine.attempt()), ("evt_fine", 2));
        assert_eq!(
            queue.retry_later(&fine, budget(5), Duration::ZERO, "boom", None).await.unwrap(),
            AfterFailure::Retry
        );
        assert!(!row_of(&pool, "evt_fine").await.1, "ended otherwise than by its lease expiring");
        let nothing = lease(false).await.unwrap();
        assert!(nothing.buried.is_empty() && !nothing.alone_due, "buried once");
    }

    #[tokio::test]
    async fn a_failed_run_is_due_again_within_the_backoff_ceiling() {
        let (queue, pool) = inbox_with(&["evt_backoff".to_owned()], 4).await;
        let leased = queue
            .lease(1, Duration::from_secs(60), LeaseFilter::default(), budget(u32::MAX), false)
            .await
            .unwrap()
            .leased
            .remove(0);
        let policy = RetryPolicy::attempts(Duration::from_secs(10), Duration::from_secs(60), 5);
        let delay = policy.delay(leased.attempt());
        assert!(delay <= policy.ceiling(1) && policy.ceiling(1) == Duration::from_secs(10));
        assert_eq!(queue.retry_later(&leased, budget(5), delay, "boom", Some(503)).await.unwrap(), AfterFailure::Retry);
        let wait = db::scalar_f64(
            &pool,
            "SELECT extract(epoch FROM run_at - last_failed_at)::float8 FROM webhook_idempotency.webhook_events
              WHERE event_key = 'evt_backoff'",
        )
        .await;
        assert!(
            (wait - delay.as_secs_f64()).abs() < 0.01,
            "run_at is the delay after the failure: {wait} vs {delay:?}"
        );
        // Not due yet (unless the jitter drew ~0): nothing to lease before run_at.
        if delay > Duration::from_millis(500) {
            assert!(queue
                .lease(1, Duration::from_secs(60), LeaseFilter::default(), budget(u32::MAX), false)
                .await
                .unwrap()
                .leased
                .is_empty());
        }
        // The ceilings double up to the cap.
        let ceilings: Vec<u64> = (1..=5).map(|n| policy.ceiling(n).as_secs()).collect();
        assert_eq!(ceilings, [10, 20, 40, 60, 60]);
    }
}
