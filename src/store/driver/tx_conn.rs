//! [`TxConn`], a pooled connection with a transaction open on it: its
//! statements, the fenced commit (the check and `COMMIT` in one flight, with
//! 25P02 and 22012 mapped once) and its rollback. See [`super::conn`] for the
//! typestate it belongs to.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use super::any::{AnyConn, AnyStatement};
use super::code;
use super::db::{bounded, Db};
use super::error::{unusable_code, DbError};
use super::param::Param;
use super::row::{rows, Row};
use super::seam::{Connection, Step};

/// SQLSTATEs after which a retry of the whole transaction will succeed
/// (PostgreSQL docs, "Serialization Failure Handling"): deadlock,
/// serialization failure, lock timeout.
const RETRYABLE: [&str; 3] = [code::DEADLOCK_DETECTED, code::SERIALIZATION_FAILURE, code::LOCK_NOT_AVAILABLE];

/// `sql` prepared on `conn` when statements are `named` (cached there: a
/// round trip the first time), else `None`: sent unnamed, behind a
/// transaction-mode pooler, where each transaction may run on another
/// server session. Prepare before a flight, so its requests leave in order.
pub(super) async fn prepare_on(conn: &AnyConn, sql: &str, named: bool) -> Result<Option<AnyStatement>, DbError> {
    if named {
        conn.prepare(sql).await.map(Some)
    } else {
        Ok(None)
    }
}

/// Discards `conn` (detached, cancelled, closed), saying `why` at WARN.
pub(super) fn discard(conn: AnyConn, why: &'static str) {
    tracing::warn!("{why}");
    conn.discard();
}

/// Closes `conn` without a cancel request: its `COMMIT` went unanswered.
pub(super) fn close_uncancelled(conn: AnyConn) {
    tracing::warn!(
        "closing a connection whose COMMIT went unanswered, without cancelling it: the COMMIT ends on its own (a \
         cancelled COMMIT waiting for a synchronous standby would stay committed on the primary alone)"
    );
    conn.close_uncancelled();
}

/// Marks a transaction whose end is fenced ([`TxConn::commit_fenced`]):
/// sent in its `BEGIN` batch, it sets a setting that lasts until the
/// transaction ends (`SET LOCAL`: PostgreSQL docs, "SET"). The fence check
/// finds it only inside that very transaction: once the work ended the
/// transaction itself (a `COMMIT` or `ROLLBACK` of its own), the setting is
/// gone. A value of the session the statements are sent on, so it holds
/// whatever node runs the rest: on Citus, the statement on a distributed
/// table runs on the worker holding its shard while this check, naming no
/// table, runs on the coordinator the session is connected to.
pub(crate) const FENCE_ON: &str = "SET LOCAL webhook_idempotency.fence TO on";

/// The fence as a condition, for a statement that ends a fenced transaction
/// itself (it belongs in that statement's `WHERE`, so that the statement
/// changes nothing once the work ended the transaction: sent then, it would
/// run on its own and commit at once). True only inside a transaction that
/// began with [`FENCE_ON`]. On Citus a router UPDATE's STABLE function
/// without column references is evaluated on the coordinator, the session's
/// node, before the statement goes to the worker (tested on the cluster by
/// `review::inbox_handler_that_rolls_back_itself_is_never_done_without_its_writes`).
pub(crate) const FENCE_HOLDS: &str = "current_setting('webhook_idempotency.fence', true) = 'on'";

/// The fence check sent with `COMMIT` when the caller has no statement of
/// its own: fails (division by zero, 22012) unless [`FENCE_ON`] was set in
/// this transaction; in an aborted transaction it fails too (25P02).
const FENCE_CHECK: &str = "SELECT 1 / coalesce(current_setting('webhook_idempotency.fence', true) = 'on', false)::int";

/// A pooled connection with a transaction open on it.
pub(crate) struct TxConn {
    conn: Option<AnyConn>,
    db: Db,
    /// The first retryable error a handler statement met (deadlock,
    /// serialization failure, lock timeout): the layer answers 503 +
    /// `Retry-After` instead of the handler's failure.
    retryable: OnceLock<&'static str>,
    /// The first handler statement that failed: its SQLSTATE and the
    /// server's message (never its parameters), for the log line of a commit
    /// the failure aborted.
    first_error: OnceLock<String>,
    /// A handler statement failed in a way that leaves the session unfit for
    /// the pool (25006: the server turned read-only after a failover; a
    /// shutdown in progress): discarded after its end instead of pooled.
    poisoned: AtomicBool,
    /// `COMMIT` was sent: a drop before its answer closes the connection
    /// without a cancel request (see [`discard`]).
    committing: bool,
    /// The channel to `NOTIFY` once the fenced commit is confirmed
    /// ([`notify_after_commit`](Self::notify_after_commit)).
    notify: Option<String>,
}

/// How [`TxConn::end`] failed.
pub(crate) enum Finish {
    /// `begin` or the statement failed, or the server refused the end with
    /// an error of its own (a deferred constraint at `COMMIT`): the
    /// transaction ended without committing (PostgreSQL answers a `COMMIT`
    /// of an aborted transaction with `ROLLBACK`); the connection is back in
    /// the pool.
    Statement(DbError),
    /// The end itself failed or its answer never came: the outcome is
    /// unknown; the connection is closed.
    End(DbError),
}

impl Finish {
    pub(super) fn into_error(self) -> DbError {
        match self {
            Self::Statement(e) | Self::End(e) => e,
        }
    }
}

/// Why [`TxConn::commit_fenced`] did not commit.
#[derive(Debug)]
pub(crate) enum Fenced {
    /// The fence did not hold (the check divided by zero, 22012): the
    /// transaction is not the one the fence names (the work ended it
    /// itself, or a lease was taken over). Rolled back.
    Lost,
    /// The transaction was aborted by a failed statement (25P02 and the
    /// like), or could not even prepare the check. Rolled back.
    Aborted(DbError),
    /// `COMMIT` failed or its answer never came (the deadline): PostgreSQL
    /// may or may not have committed. The connection is closed.
    Unknown(DbError),
}

impl TxConn {
    pub(super) fn opening(conn: AnyConn, db: Db) -> Self {
        Self {
            conn: Some(conn),
            db,
            retryable: OnceLock::new(),
            first_error: OnceLock::new(),
            poisoned: AtomicBool::new(false),
            committing: false,
            notify: None,
        }
    }

    /// Whether the database has the `citus` extension, when a connection of
    /// the pool looked it up already (`Conn::on_citus`; a claim does, before
    /// its transaction).
    pub(crate) fn citus(&self) -> Option<bool> {
        self.db.citus()
    }

    /// Sends `NOTIFY channel` with the fenced commit, in its flight, once
    /// the transaction commits (nothing when it does not): PostgreSQL's
    /// own `NOTIFY` inside a transaction is delivered at its commit too,
    /// but takes the notification lock through the commit. `channel` is a
    /// checked identifier.
    pub(crate) fn notify_after_commit(&mut self, channel: &str) {
        self.notify = Some(channel.to_owned());
    }

    /// The client-side deadline of each step on this connection.
    pub(crate) fn step_deadline(&self) -> Option<std::time::Duration> {
        self.db.deadline()
    }

    /// The driver's connection (for the handler's borrowed client of that
    /// driver).
    pub(crate) fn connection(&self) -> &AnyConn {
        self.conn.as_ref().expect("TxConn holds its connection until released or dropped")
    }

    /// The connection, out of this value (which then ends nothing when
    /// dropped): for a step after a confirmed end.
    pub(super) fn take_connection(&mut self) -> AnyConn {
        self.conn.take().expect("TxConn holds its connection until released or dropped")
    }

    /// The rules its steps follow.
    pub(super) fn db(&self) -> &Db {
        &self.db
    }

    /// Whether statements are prepared once and cached on the connection
    /// (named), or sent unnamed (behind a transaction-mode pooler).
    pub(crate) fn caches_statements(&self) -> bool {
        !self.db.transaction_pooler()
    }

    /// One statement inside the transaction, within the deadline.
    pub(crate) async fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, DbError> {
        let named = self.caches_statements();
        let conn = self.connection();
        bounded(&self.db, conn.checked_out(), async {
            let prepared = prepare_on(conn, sql, named).await?;
            rows(conn.flight(&[Step::Query { sql, params, prepared: prepared.as_ref() }]).await.pop())
        })
        .await
    }

    /// A simple-query batch inside the transaction, within the deadline.
    pub(crate) async fn batch(&self, sql: &str) -> Result<(), DbError> {
        let conn = self.connection();
        bounded(&self.db, conn.checked_out(), async { rows(conn.flight(&[Step::Batch(sql)]).await.pop()).map(drop) })
            .await
    }

    /// Sends `sql` and `end` (`COMMIT` or `ROLLBACK`) in one flight, within
    /// the deadline. `Ok`: both succeeded, the transaction ended as `end`
    /// says, the connection is back in the pool.
    pub(crate) async fn end(mut self, sql: &str, params: &[Param<'_>], end: &str) -> Result<Vec<Row>, Finish> {
        let named = self.caches_statements();
        let db = self.db.clone();
        bounded(&db, self.connection().checked_out(), async {
            let prepared = prepare_on(self.connection(), sql, named).await?;
            let statement = [Step::Query { sql, params, prepared: prepared.as_ref() }];
            self.finish(None, &statement, end, None).await.map_err(Finish::into_error)
        })
        .await
        .map_err(|e| if e.timed_out() { Finish::End(e) } else { Finish::Statement(e) })
    }

    /// The fenced commit: `own` (a statement of the caller's that fails,
    /// dividing by zero (22012), unless its fences hold: [`FENCE_HOLDS`] in
    /// its `WHERE`, and a lease token or the claim row's time compared as
    /// values), or without one the fence check (fails unless this
    /// transaction began with [`FENCE_ON`]), and `COMMIT`, in one flight,
    /// within the deadline. In an aborted transaction either fails too
    /// (25P02), so nothing commits that a bare `COMMIT` would have silently
    /// rolled back (rust-postgres#1334).
    ///
    /// With a channel to notify ([`notify_after_commit`](Self::notify_after_commit)),
    /// a `NOTIFY` on it follows in the same flight, in a transaction of its
    /// own (notifying inside the transaction would take PostgreSQL's
    /// notification lock through its commit).
    ///
    /// # Errors
    /// [`Fenced`]: what happened instead of a commit.
    pub(crate) async fn commit_fenced(mut self, own: Option<(&str, &[Param<'_>])>) -> Result<(), Fenced> {
        let notify = self.notify.take();
        let notify = notify.as_deref();
        let named = self.caches_statements();
        let db = self.db.clone();
        let checked_out = self.connection().checked_out();
        let (sql, params) = own.unwrap_or((FENCE_CHECK, &[]));
        let prepared = match bounded(&db, checked_out, prepare_on(self.connection(), sql, named)).await {
            Ok(prepared) => prepared,
            Err(e) => {
                // Preparing fails in an aborted transaction (25P02), or on a
                // statement name another client prepared (42P05).
                self.note_error(&e);
                if !e.unusable() {
                    let _ = self.rollback().await;
                }
                return Err(Fenced::Aborted(e));
            }
        };
        let statements = [Step::Query { sql, params, prepared: prepared.as_ref() }];
        let finished =
            bounded(&db, checked_out, async { Ok(self.finish(None, &statements, "COMMIT", notify).await) }).await;
        match finished {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(Finish::Statement(e))) if e.is(code::DIVISION_BY_ZERO) => Err(Fenced::Lost),
            Ok(Err(Finish::Statement(e))) => Err(Fenced::Aborted(e)),
            Ok(Err(Finish::End(e))) | Err(e) => Err(Fenced::Unknown(e)),
        }
    }

    /// `COMMIT`, within the deadline.
    pub(crate) async fn commit(self) -> Result<(), DbError> {
        self.end_with("COMMIT").await
    }

    /// `ROLLBACK`, within the deadline. `Ok`: the connection is back in the
    /// pool; `Err`: closed (PostgreSQL rolls back when the session ends).
    pub(crate) async fn rollback(self) -> Result<(), DbError> {
        self.end_with("ROLLBACK").await
    }

    async fn end_with(mut self, sql: &str) -> Result<(), DbError> {
        self.committing = sql == "COMMIT";
        let db = self.db.clone();
        let conn = self.connection();
        bounded(&db, conn.checked_out(), async { rows(conn.flight(&[Step::Batch(sql)]).await.pop()) }).await?;
        // Confirmed: outside any transaction, the connection may be pooled.
        self.pool_or_discard();
        Ok(())
    }

    /// After a confirmed end: back to the pool, unless a statement showed
    /// the session unfit for it.
    fn pool_or_discard(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        if self.poisoned.load(Ordering::Relaxed) {
            discard(conn, "closing a connection whose session refused writes or is shutting down");
        } else {
            conn.release();
        }
    }

    /// `begin` (when given), `statements`, `end` and a `NOTIFY` on `notify`
    /// (when given) in one flight. Pools the connection once `end` is
    /// confirmed, whatever the statements did. `Ok`: the last statement's
    /// rows.
    pub(super) async fn finish(
        &mut self,
        begin: Option<&str>,
        statements: &[Step<'_, AnyStatement>],
        end: &str,
        notify: Option<&str>,
    ) -> Result<Vec<Row>, Finish> {
        self.committing = end == "COMMIT";
        // The channel is a checked identifier (`queue::channel`).
        let notify = notify.map(|channel| format!("NOTIFY \"{channel}\""));
        let mut steps = Vec::with_capacity(statements.len() + 3);
        steps.extend(begin.map(Step::Batch));
        steps.extend(statements.iter().copied());
        steps.push(Step::Batch(end));
        steps.extend(notify.as_deref().map(Step::Batch));
        let mut answers = self.connection().flight(&steps).await.into_iter();
        let opened = match begin {
            Some(_) => rows(answers.next()).map(drop),
            None => Ok(()),
        };
        // The first statement that failed, else the last one's rows.
        let mut done = Ok(Vec::new());
        for _ in statements {
            let answer = rows(answers.next());
            if done.is_ok() {
                done = answer;
            }
        }
        let ended = rows(answers.next());
        if let Some(Err(e)) = answers.next() {
            tracing::warn!(error = %e, "notification not sent; workers find the rows by polling");
        }
        if let Err(e) = ended {
            if e.code().is_some_and(|c| !unusable_code(c)) {
                // The server refused the end (a deferred constraint, a
                // serialization failure at COMMIT): the transaction rolled
                // back and the session is idle, a known outcome.
                self.note_error(&e);
                self.pool_or_discard();
                return Err(Finish::Statement(e));
            }
            return Err(Finish::End(e)); // unanswered or unusable: closed
        }
        // The transaction ended either way: the connection may be pooled.
        if let Err(e) = opened.as_ref().and(done.as_ref()) {
            self.note_error(e);
        }
        self.pool_or_discard();
        opened.and(done).map_err(Finish::Statement)
    }

    /// The retryable SQLSTATE a handler statement failed with, if any.
    pub(crate) fn retryable(&self) -> Option<&'static str> {
        self.retryable.get().copied()
    }

    /// Notes `e`'s SQLSTATE: a retryable conflict, or a session unfit for
    /// the pool.
    ///
    /// A named statement that failed as it does behind a transaction-mode
    /// pooler (26000, 42P05) inside this open transaction switches the pool
    /// to unnamed statements (`Db::switch_on`) and counts as a retryable
    /// conflict: the layer rolls back, records the attempt and answers 503 +
    /// `Retry-After`, and the sender's retry runs on unnamed statements.
    /// The step is not re-run here: the error aborted the transaction, so
    /// only the whole transaction could be, and its work (the handler) has
    /// already run and answered. Unless `transaction_pooler(true)` was
    /// configured: then the crate sends no named statement, and one of the
    /// handler's own is the handler's to answer for.
    pub(crate) fn note_error(&self, e: &DbError) {
        self.note_code(e.code());
    }

    /// [`note_error`](Self::note_error) for a handler statement that failed
    /// (through the driver's own client), with its SQLSTATE (`None`: no
    /// answer from the server) and `what` (its message and SQLSTATE, never
    /// its parameters), kept for the commit's log line
    /// ([`first_error`](Self::first_error)) when it is the first.
    pub(crate) fn note_failure(&self, code: Option<&str>, what: String) {
        let _ = self.first_error.set(what);
        self.note_code(code);
    }

    /// The first failed handler statement's SQLSTATE and message, if any.
    pub(crate) fn first_error(&self) -> Option<&str> {
        self.first_error.get().map(String::as_str)
    }

    fn note_code(&self, code: Option<&str>) {
        let Some(code) = code else { return };
        if let Some(retryable) = RETRYABLE.iter().copied().find(|c| *c == code) {
            let _ = self.retryable.set(retryable);
        }
        if !self.db.configured_for_pooler() {
            if let Some(named) = self.db.switch_on(code) {
                let _ = self.retryable.set(named);
            }
        }
        if unusable_code(code) {
            self.poisoned.store(true, Ordering::Relaxed);
        }
    }
}

impl Drop for TxConn {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return }; // released after COMMIT/ROLLBACK
        if self.committing {
            close_uncancelled(conn);
            return;
        }
        discard(conn, "closing a connection abandoned inside a webhook transaction");
    }
}
