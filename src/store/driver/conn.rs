//! The connection typestate: a pooled connection is either outside any
//! transaction ([`Conn`]) or inside one ([`TxConn`]), and only a confirmed
//! end gives it back to the pool.
//!
//! There is no flag to keep in step with the server: [`Conn::begin`] turns a
//! `Conn` into a `TxConn` before `BEGIN` is sent, and only a confirmed
//! `COMMIT` or `ROLLBACK` gives the connection back. Every other way out
//! drops the value, which discards the connection (the seam's
//! [`Connection::discard`]: detached from the pool, its running statement
//! cancelled, closed), so PostgreSQL rolls the transaction back. A pool
//! that recycles at checkout (deadpool does) does not notice an open
//! transaction. A `Conn` is discarded the same way when dropped without
//! [`Conn::release`], or after a step failed in a way that leaves the
//! session unusable (a timeout, a broken connection, a read-only server).
//!
//! Also here, the steps that take a connection from the pool and give it
//! back: [`Db::connect`], [`Db::query`], [`Db::query_commit`],
//! [`Db::transact`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::any::AnyConn;
use super::db::{bounded, Db};
use super::error::DbError;
use super::param::Param;
use super::row::{rows, Row};
use super::seam::{AcquireError, Connection, Pool, Step};
use super::tx_conn::{close_uncancelled, discard, prepare_on, Finish, TxConn};
use crate::error::{StoreError, StoreErrorKind};

/// A pooled connection outside any transaction.
pub(crate) struct Conn {
    conn: Option<AnyConn>,
    db: Db,
    /// A step failed so that the session may not be reused: released means
    /// discarded.
    poisoned: AtomicBool,
    /// An autocommit statement that writes is in flight, or went unanswered
    /// ([`query_commit`](Self::query_commit)): discarded without a cancel
    /// request.
    committing: AtomicBool,
}

impl Db {
    /// A pooled connection, within the pool timeout.
    ///
    /// # Errors
    /// [`StoreErrorKind::PoolTimeout`] past the pool timeout,
    /// [`StoreErrorKind::Unavailable`] (or `Authentication`,
    /// `DatabaseMissing`) when no connection could be made.
    pub(crate) async fn connect(&self, step: &str) -> Result<Conn, StoreError> {
        let started = Instant::now();
        let got = tokio::time::timeout(self.pool_timeout(), self.acquire_for_mode()).await;
        crate::metrics::pool_wait(started.elapsed());
        match got {
            Ok(Ok(conn)) => Ok(Conn::new(conn, self.clone())),
            Ok(Err(AcquireError::Connect(e))) => Err(self.error(&e, step)),
            Ok(Err(AcquireError::Pool(cause))) => {
                let e = StoreError::new(StoreErrorKind::Unavailable, step, "no database connection")
                    .with_cause(cause)
                    .with_endpoint(self.endpoint());
                tracing::error!(error = %e, "no database connection");
                Err(e)
            }
            Err(_) => Err(StoreError::new(
                StoreErrorKind::PoolTimeout,
                step,
                format!("timed out: no database connection within the pool timeout ({:?})", self.pool_timeout()),
            )
            .with_endpoint(self.endpoint())),
        }
    }

    /// A pooled connection fit for the pool's statement mode: once the pool
    /// sends unnamed statements (behind a transaction-mode pooler), a
    /// connection still holding named ones from before is closed, not used,
    /// since its driver would run them by name on whichever server session
    /// the pooler gives it (26000, or another client's statement).
    async fn acquire_for_mode(&self) -> Result<AnyConn, AcquireError> {
        loop {
            let conn = self.pool().acquire().await?;
            if !(self.transaction_pooler() && conn.holds_named_statements()) {
                return Ok(conn);
            }
            conn.discard();
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
}

impl Conn {
    pub(super) fn new(conn: AnyConn, db: Db) -> Self {
        Self { conn: Some(conn), db, poisoned: AtomicBool::new(false), committing: AtomicBool::new(false) }
    }

    fn conn(&self) -> &AnyConn {
        self.conn.as_ref().expect("a Conn holds its connection until released or dropped")
    }

    /// Notes a failed step: a timeout or a session that cannot serve means
    /// the connection is discarded instead of released.
    fn settle<T>(&self, result: Result<T, DbError>) -> Result<T, DbError> {
        if let Err(e) = &result {
            if e.unusable() {
                self.poisoned.store(true, Ordering::Relaxed);
            }
        }
        result
    }

    /// One autocommit statement, within the deadline.
    ///
    /// A named statement that failed as it does behind a transaction-mode
    /// pooler (26000, 42P05: see [`Db::named_statement_failed`]) switches the
    /// pool to unnamed statements and the statement runs once more, unnamed:
    /// safe, because the failure came at Parse or Bind, before anything ran,
    /// and outside any transaction.
    pub(crate) async fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, DbError> {
        let named = !self.db.transaction_pooler();
        match self.query_once(sql, params, named).await {
            Err(e) if self.db.named_statement_failed(&e, named) => self.query_once(sql, params, false).await,
            result => result,
        }
    }

    /// Whether the database has the `citus` extension: from the pool's
    /// memory once any of its connections looked, else looked up here (one
    /// round trip, once per pool) and remembered.
    ///
    /// # Errors
    /// As [`query`](Self::query).
    pub(crate) async fn on_citus(&self) -> Result<bool, DbError> {
        if let Some(citus) = self.db.citus() {
            return Ok(citus);
        }
        let rows = self.query("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')", &[]).await?;
        let citus = rows.first().and_then(|r| r.try_get::<bool>(0)).unwrap_or(false);
        self.db.set_citus(citus);
        Ok(citus)
    }

    /// [`query`](Self::query) for an autocommit statement that writes: its
    /// implicit `COMMIT` may be waiting for a synchronous standby when the
    /// deadline passes, and PostgreSQL turns a cancelled wait into a commit
    /// on the primary alone. So a statement that did not answer in time (or
    /// whose future was dropped) has its connection closed without a cancel
    /// request ([`Connection::close_uncancelled`]), as an unanswered
    /// `COMMIT`'s is: it ends on its own, committed or not.
    pub(crate) async fn query_commit(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, DbError> {
        self.committing.store(true, Ordering::Relaxed);
        let result = self.query(sql, params).await;
        if !result.as_ref().is_err_and(DbError::timed_out) {
            self.committing.store(false, Ordering::Relaxed); // answered: ended either way
        }
        result
    }

    async fn query_once(&self, sql: &str, params: &[Param<'_>], named: bool) -> Result<Vec<Row>, DbError> {
        let conn = self.conn();
        let result = bounded(&self.db, conn.checked_out(), async {
            let prepared = prepare_on(conn, sql, named).await?;
            let step = [Step::Query { sql, params, prepared: prepared.as_ref() }];
            rows(conn.flight(&step).await.pop())
        })
        .await;
        self.settle(result)
    }

    /// Opens a transaction with the simple-query batch `begin` and runs one
    /// statement in it, both in one flight (the statement is prepared first,
    /// so both leave in order), within the deadline.
    ///
    /// When the statement fails as a named statement does behind a
    /// transaction-mode pooler (26000, 42P05: see
    /// [`Db::named_statement_failed`]), the pool switches to unnamed
    /// statements, the transaction is rolled back and the whole of it
    /// (`begin` and the statement) runs once more from the start, unnamed,
    /// on the same connection. That is safe because the failed statement is
    /// the transaction's first: a 26000 aborts the transaction it occurs in
    /// (PostgreSQL then refuses every statement until `ROLLBACK`), so
    /// re-sending just the statement would fail with 25P02, but nothing ran
    /// before it and the confirmed `ROLLBACK` undoes `begin`'s settings and
    /// locks. A 26000 later in a transaction (after the handler's work)
    /// cannot be re-run this way: see [`TxConn::note_error`].
    ///
    /// # Errors
    /// When `begin` or the statement failed: the transaction is rolled back
    /// (the connection pooled again) unless the session is unusable or the
    /// step timed out (closed).
    pub(crate) async fn begin(
        self,
        begin: &str,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<(TxConn, Vec<Row>), DbError> {
        self.begin_then(begin, None, sql, params, None).await.map(|(tx, rows, _)| (tx, rows))
    }

    /// [`begin`](Self::begin), with `before` (a statement and its
    /// parameters whose rows are not kept) between `begin` and the
    /// statement, and `then` (a read and its parameters) after it, all in
    /// the same flight: `then`'s rows come third (none without it). At READ
    /// COMMITTED `then` sees what committed before it started, after `sql`
    /// ran (the claim's read of what its lock guarded). A failing `before`
    /// (the claim's advisory lock taken elsewhere, on Citus) aborts the
    /// transaction, so `sql` does not run (25P02).
    ///
    /// # Errors
    /// As [`begin`](Self::begin); a failing `before` or `then` fails the
    /// whole, with `before`'s error when it failed.
    pub(crate) async fn begin_then(
        self,
        begin: &str,
        before: Option<(&str, &[Param<'_>])>,
        sql: &str,
        params: &[Param<'_>],
        then: Option<(&str, &[Param<'_>])>,
    ) -> Result<(TxConn, Vec<Row>, Vec<Row>), DbError> {
        let db = self.db.clone();
        let named = !db.transaction_pooler();
        let (e, tx) = match self.begin_once(begin, [before, Some((sql, params)), then], named).await {
            Ok(opened) => return Ok(opened),
            Err((e, None)) => return Err(e), // closed
            Err((e, Some(tx))) => (e, tx),
        };
        if !db.named_statement_failed(&e, named) {
            let _ = tx.rollback().await;
            return Err(e);
        }
        match tx.rollback_to_conn().await?.begin_once(begin, [before, Some((sql, params)), then], false).await {
            Ok(opened) => Ok(opened),
            Err((e, Some(tx))) => {
                let _ = tx.rollback().await;
                Err(e)
            }
            Err((e, None)) => Err(e),
        }
    }

    /// One try of [`begin_then`](Self::begin_then). On failure, the
    /// transaction still to roll back when the session is usable (`None`:
    /// closed).
    /// `statements` are `before`, the statement and `then` of
    /// [`begin_then`](Self::begin_then) (the statement always `Some`).
    async fn begin_once(
        mut self,
        begin: &str,
        statements: [Option<(&str, &[Param<'_>])>; 3],
        named: bool,
    ) -> Result<(TxConn, Vec<Row>, Vec<Row>), (DbError, Option<TxConn>)> {
        let conn = self.conn.take().expect("a Conn holds its connection until released or dropped");
        // From here on the connection is never pooled unless an end is confirmed.
        let tx = TxConn::opening(conn, self.db.clone());
        let opened = bounded(&self.db, tx.connection().checked_out(), async {
            let conn = tx.connection();
            let mut prepared = Vec::with_capacity(statements.len());
            for (sql, _) in statements.iter().flatten() {
                prepared.push(prepare_on(conn, sql, named).await?);
            }
            let mut steps = vec![Step::Batch(begin)];
            for ((sql, params), prepared) in statements.iter().flatten().zip(&prepared) {
                steps.push(Step::Query { sql, params, prepared: prepared.as_ref() });
            }
            let mut answers = conn.flight(&steps).await.into_iter();
            rows(answers.next())?; // BEGIN
            let [before, _, then] = &statements;
            if before.is_some() {
                rows(answers.next())?;
            }
            let claimed = rows(answers.next())?;
            let then_rows = if then.is_some() { rows(answers.next())? } else { Vec::new() };
            Ok((claimed, then_rows))
        })
        .await;
        match opened {
            Ok((rows, then_rows)) => Ok((tx, rows, then_rows)),
            Err(e) if e.unusable() => Err((e, None)), // `tx` dropped: closed
            Err(e) => Err((e, Some(tx))),
        }
    }

    /// `begin`, one statement and `COMMIT` in one flight, within the deadline.
    ///
    /// # Errors
    /// The statement's failure (nothing committed) or the commit's (the
    /// outcome is unknown; the connection is closed).
    pub(crate) async fn transact(mut self, begin: &str, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, DbError> {
        let conn = self.conn.take().expect("a Conn holds its connection until released or dropped");
        let mut tx = TxConn::opening(conn, self.db.clone());
        let named = !self.db.transaction_pooler();
        bounded(&self.db, tx.connection().checked_out(), async {
            let prepared = prepare_on(tx.connection(), sql, named).await?;
            let statement = [Step::Query { sql, params, prepared: prepared.as_ref() }];
            tx.finish(Some(begin), &statement, "COMMIT", None).await.map_err(Finish::into_error)
        })
        .await
    }

    /// Gives the connection back to the pool, or discards it after a step
    /// that left the session unusable.
    pub(crate) fn release(mut self) {
        if !self.poisoned.load(Ordering::Relaxed) {
            if let Some(conn) = self.conn.take() {
                conn.release();
            }
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if self.committing.load(Ordering::Relaxed) {
                close_uncancelled(conn);
            } else {
                discard(conn, "closing a connection whose step did not finish");
            }
        }
    }
}

impl TxConn {
    /// `ROLLBACK`, within the deadline, keeping the connection (outside any
    /// transaction once confirmed) for another step. `Err`: closed.
    async fn rollback_to_conn(mut self) -> Result<Conn, DbError> {
        let db = self.db().clone();
        let conn = self.connection();
        bounded(&db, conn.checked_out(), async { rows(conn.flight(&[Step::Batch("ROLLBACK")]).await.pop()) }).await?;
        Ok(Conn::new(self.take_connection(), db))
    }
}
