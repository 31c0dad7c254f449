//! The connection typestate: a pooled connection is either outside any
//! transaction ([`Conn`]) or inside one ([`TxConn`]), and only a confirmed
//! end gives it back to the pool.
//!
//! There is no flag to keep in step with the server: [`Conn::begin`] turns a
//! `Conn` into a `TxConn` before `BEGIN` is sent, and only a confirmed
//! `COMMIT` or `ROLLBACK` gives the connection back. Every other way out
//! drops the value, which detaches the connection from the pool, cancels its
//! running statement and closes it, so PostgreSQL rolls the transaction back.
//! deadpool recycles at checkout, and none of its recycling methods notices
//! an open transaction. A `Conn` is discarded the same way when dropped
//! without [`Conn::release`], or after a step failed in a way that leaves
//! the session unusable (a timeout, a broken connection, a read-only server).

use std::sync::atomic::{AtomicBool, Ordering};

use deadpool_postgres::Object;

use super::tx_conn::Finish;
use super::wire::{close_uncancelled, discard, prepare_on, query_on};
use super::{bounded, checked_out, Db, DbError, Param, Row, TxConn};

/// A pooled connection outside any transaction.
pub(crate) struct Conn {
    obj: Option<Object>,
    db: Db,
    /// A step failed so that the session may not be reused: released means
    /// discarded.
    poisoned: AtomicBool,
    /// An autocommit statement that writes is in flight, or went unanswered
    /// ([`query_commit`](Self::query_commit)): discarded without a cancel
    /// request.
    committing: AtomicBool,
}

impl Conn {
    pub(super) fn new(obj: Object, db: Db) -> Self {
        Self { obj: Some(obj), db, poisoned: AtomicBool::new(false), committing: AtomicBool::new(false) }
    }

    fn client(&self) -> &Object {
        self.obj.as_ref().expect("a Conn holds its connection until released or dropped")
    }

    /// When the connection was checked out of the pool.
    fn checked_out(&self) -> std::time::Instant {
        checked_out(self.client())
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

    /// [`query`](Self::query) for an autocommit statement that writes: its
    /// implicit `COMMIT` may be waiting for a synchronous standby when the
    /// deadline passes, and PostgreSQL turns a cancelled wait into a commit
    /// on the primary alone (see [`discard`]). So a statement that did not
    /// answer in time (or whose future was dropped) has its connection
    /// closed without a cancel request, as an unanswered `COMMIT`'s is: it
    /// ends on its own, committed or not.
    pub(crate) async fn query_commit(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, DbError> {
        self.committing.store(true, Ordering::Relaxed);
        let result = self.query(sql, params).await;
        if !result.as_ref().is_err_and(DbError::timed_out) {
            self.committing.store(false, Ordering::Relaxed); // answered: ended either way
        }
        result
    }

    async fn query_once(&self, sql: &str, params: &[Param<'_>], cache: bool) -> Result<Vec<Row>, DbError> {
        let result = bounded(&self.db, self.checked_out(), async {
            let prepared = prepare_on(self.client(), sql, cache).await?;
            query_on(self.client(), prepared.as_ref(), sql, params).await
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
        self.begin_then(begin, sql, params, None).await.map(|(tx, rows, _)| (tx, rows))
    }

    /// [`begin`](Self::begin), and `then` (a read and its parameters) in the
    /// same flight after the statement: its rows come third (none without
    /// it). At READ COMMITTED `then` sees what committed before it started,
    /// after `sql` ran (the claim's read of what its lock guarded).
    ///
    /// # Errors
    /// As [`begin`](Self::begin); a failing `then` fails the whole.
    pub(crate) async fn begin_then(
        self,
        begin: &str,
        sql: &str,
        params: &[Param<'_>],
        then: Option<(&str, &[Param<'_>])>,
    ) -> Result<(TxConn, Vec<Row>, Vec<Row>), DbError> {
        let db = self.db.clone();
        let named = !db.transaction_pooler();
        let (e, tx) = match self.begin_once(begin, sql, params, then, named).await {
            Ok(opened) => return Ok(opened),
            Err((e, None)) => return Err(e), // closed
            Err((e, Some(tx))) => (e, tx),
        };
        if !db.named_statement_failed(&e, named) {
            let _ = tx.rollback().await;
            return Err(e);
        }
        match tx.rollback_to_conn().await?.begin_once(begin, sql, params, then, false).await {
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
    async fn begin_once(
        mut self,
        begin: &str,
        sql: &str,
        params: &[Param<'_>],
        then: Option<(&str, &[Param<'_>])>,
        cache: bool,
    ) -> Result<(TxConn, Vec<Row>, Vec<Row>), (DbError, Option<TxConn>)> {
        let obj = self.obj.take().expect("a Conn holds its connection until released or dropped");
        // From here on the connection is never pooled unless an end is confirmed.
        let tx = TxConn::opening(obj, self.db.clone());
        let opened = bounded(&self.db, tx.checked_out(), async {
            let client = tx.client();
            let prepared = prepare_on(client, sql, cache).await?;
            let then_prepared = match then {
                Some((then_sql, _)) => prepare_on(client, then_sql, cache).await?,
                None => None,
            };
            let (begun, rows, then_rows) = tokio::join!(
                async { client.batch_execute(begin).await.map_err(DbError::pg) },
                query_on(client, prepared.as_ref(), sql, params),
                async {
                    match then {
                        Some((then_sql, then_params)) => {
                            query_on(client, then_prepared.as_ref(), then_sql, then_params).await
                        }
                        None => Ok(Vec::new()),
                    }
                },
            );
            let rows = begun.and(rows)?;
            Ok((rows, then_rows?))
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
        let obj = self.obj.take().expect("a Conn holds its connection until released or dropped");
        let tx = TxConn::opening(obj, self.db.clone());
        let cache = !self.db.transaction_pooler();
        bounded(&self.db, tx.checked_out(), async {
            let prepared = prepare_on(tx.client(), sql, cache).await?;
            tx.finish(Some(begin), prepared.as_ref(), sql, params, "COMMIT", None).await.map_err(Finish::into_error)
        })
        .await
    }

    /// Gives the connection back to the pool, or discards it after a step
    /// that left the session unusable.
    pub(crate) fn release(mut self) {
        if !self.poisoned.load(Ordering::Relaxed) {
            drop(self.obj.take());
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(obj) = self.obj.take() {
            if self.committing.load(Ordering::Relaxed) {
                close_uncancelled(obj);
            } else {
                discard(obj, &self.db, "closing a connection whose step did not finish");
            }
        }
    }
}

impl TxConn {
    /// `ROLLBACK`, within the deadline, keeping the connection (outside any
    /// transaction once confirmed) for another step. `Err`: closed.
    async fn rollback_to_conn(mut self) -> Result<Conn, DbError> {
        let db = self.db.clone();
        bounded(&db, self.checked_out(), async { self.client().batch_execute("ROLLBACK").await.map_err(DbError::pg) })
            .await?;
        let obj = self.obj.take().expect("TxConn holds its connection until released or dropped");
        Ok(Conn::new(obj, db))
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::pg(e)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{code, Fenced};
    use super::*;
    use crate::store::testing;

    async fn pid(pool: &deadpool_postgres::Pool) -> i32 {
        pool.get().await.unwrap().query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0)
    }

    fn db(pool: &deadpool_postgres::Pool) -> Db {
        Db::new(pool.clone(), Duration::from_secs(5), Duration::from_secs(5), false, None)
    }

    /// A session that refused a handler's write with 25006 (read-only after
    /// a failover) is closed after its rollback, not pooled for the next run.
    #[tokio::test]
    async fn a_session_that_refused_a_write_is_not_pooled_again() {
        let pool = testing::fresh(1).await;
        let before = pid(&pool).await;
        // This session now starts read-only transactions, as a demoted primary's do.
        pool.get().await.unwrap().batch_execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY").await.unwrap();
        let (tx, _) = db(&pool).connect("test").await.unwrap().begin("BEGIN", "SELECT 1", &[]).await.unwrap();
        let refused = tx.client().execute("CREATE TABLE t (x int)", &[]).await;
        assert_eq!(
            refused.as_ref().err().and_then(|e| e.code()).map(|c| c.code()),
            Some(code::READ_ONLY_SQL_TRANSACTION)
        );
        tx.note(&refused);
        tx.rollback().await.unwrap();
        assert_ne!(pid(&pool).await, before, "a new session");
    }

    /// A COMMIT the server refuses with an ordinary error (a deferred unique
    /// constraint, 23505) has a known outcome, rolled back, and the session
    /// goes back to the pool.
    #[tokio::test]
    async fn a_commit_refused_by_a_deferred_constraint_is_rolled_back_and_the_session_pooled() {
        let pool = testing::fresh(1).await;
        pool.get()
            .await
            .unwrap()
            .batch_execute("CREATE TABLE d (k text, CONSTRAINT du UNIQUE (k) DEFERRABLE INITIALLY DEFERRED)")
            .await
            .unwrap();
        let before = pid(&pool).await;
        let (tx, _) = db(&pool)
            .connect("test")
            .await
            .unwrap()
            .begin("BEGIN", "INSERT INTO d VALUES ('x'), ('x')", &[])
            .await
            .unwrap();
        match tx.commit_fenced("SELECT 1", &[]).await {
            Err(Fenced::Aborted(e)) => assert_eq!(e.code(), Some("23505")),
            Err(Fenced::Unknown(e)) => panic!("reported unknown: {e:?}"),
            other => panic!("{:?}", other.is_ok()),
        }
        assert_eq!(pid(&pool).await, before, "the same session, pooled");
        let rows: i64 = pool.get().await.unwrap().query_one("SELECT count(*) FROM d", &[]).await.unwrap().get(0);
        assert_eq!(rows, 0, "nothing committed");
    }

    /// A step that times out closes, besides its own connection, the idle
    /// ones nobody checked out since it was (each would cost a delivery a
    /// whole timeout after a silent network death); one checked out and
    /// returned after it stays.
    #[tokio::test]
    async fn a_timed_out_step_closes_the_idle_connections_not_checked_out_since() {
        let pool = testing::fresh(4).await;
        let warm: Vec<_> = futures_util::future::join_all((0..4).map(|_| pool.get())).await;
        drop(warm.into_iter().map(Result::unwrap).collect::<Vec<_>>());
        assert_eq!(pool.status().size, 4);
        let quick = Db::new(pool.clone(), Duration::from_secs(5), Duration::from_millis(200), false, None);
        let stuck = quick.connect("test").await.unwrap();
        let since = pool.get().await.unwrap(); // checked out after `stuck`: in use since
        let kept: i32 = since.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
        drop(since);
        assert!(stuck.query("SELECT pg_sleep(5)", &[]).await.err().is_some_and(|e| e.timed_out()));
        stuck.release();
        assert_eq!(pool.status().size, 1, "the two idle since before the step closed, the stuck one discarded");
        assert_eq!(pid(&pool).await, kept, "the connection used since is kept");
    }

    /// The state behind a transaction-mode pooler, on a direct server:
    /// `DEALLOCATE ALL` drops the session's statements behind the statement
    /// cache's back (26000 next), a `PREPARE` of the next names takes them
    /// (42P05 next). Each switches the pool to unnamed statements and the
    /// step runs again: an autocommit step, a transaction's first statement
    /// (after a rollback, from `BEGIN`), a one-flight transaction; a 26000
    /// inside an open transaction is noted as retryable instead.
    #[tokio::test]
    async fn a_named_statement_failing_as_behind_a_pooler_switches_the_pool_and_the_step_runs_again() {
        const SQL: &str = "SELECT $1::text";
        let text = [Param::Text("x")];
        let pool = testing::fresh(1).await;
        let autocommit = db(&pool);
        assert_eq!(autocommit.query("test", SQL, &text).await.unwrap().len(), 1, "prepared and cached");
        pool.get().await.unwrap().batch_execute("DEALLOCATE ALL").await.unwrap();
        let rows = autocommit.query("test", SQL, &text).await.expect("run again, unnamed");
        assert_eq!(rows[0].get::<String>(0), "x");
        assert!(autocommit.transaction_pooler(), "switched");
        assert!(db(&pool).transaction_pooler(), "for every Db over the pool");
        assert!(!db(&testing::fresh(1).await).transaction_pooler(), "not for another pool");

        // The claim's shape: BEGIN and a cached statement in one flight.
        let pool = testing::fresh(1).await;
        let (tx, _) = db(&pool).connect("test").await.unwrap().begin("BEGIN", SQL, &text).await.unwrap();
        tx.commit().await.unwrap();
        pool.get().await.unwrap().batch_execute("DEALLOCATE ALL").await.unwrap();
        let (tx, rows) =
            db(&pool).connect("test").await.unwrap().begin("BEGIN", SQL, &text).await.expect("from BEGIN again");
        assert_eq!(rows[0].get::<String>(0), "x");
        assert_eq!(tx.query("SELECT 1", &[]).await.unwrap().len(), 1, "the new transaction is not aborted");
        tx.commit().await.unwrap();
        assert!(db(&pool).transaction_pooler());

        // 42P05: the names the next statements get are taken on the session.
        let pool = testing::fresh(1).await;
        {
            let client = pool.get().await.unwrap();
            // The newest name tokio-postgres (a process-wide counter) gave out.
            let _newest = client.prepare("SELECT 1").await.unwrap();
            let newest = "SELECT max(substr(name, 2)::bigint) FROM pg_prepared_statements WHERE name ~ '^s[0-9]+$'";
            let next: i64 = client.query_one(newest, &[]).await.unwrap().get(0);
            let taken: String = (next + 1..next + 5001).map(|n| format!("PREPARE s{n} AS SELECT 1;")).collect();
            client.batch_execute(&taken).await.unwrap();
        }
        let rows = db(&pool).transact("test", "BEGIN", SQL, &text).await.expect("run again, unnamed");
        assert_eq!(rows[0].get::<String>(0), "x");
        assert!(db(&pool).transaction_pooler());

        // Inside an open transaction: not re-run, noted retryable.
        let pool = testing::fresh(1).await;
        let (tx, _) = db(&pool).connect("test").await.unwrap().begin("BEGIN", SQL, &text).await.unwrap();
        tx.batch("DEALLOCATE ALL").await.unwrap();
        let e = tx.query(SQL, &text).await.err().expect("the cached statement is gone");
        assert_eq!(e.code(), Some(code::INVALID_SQL_STATEMENT_NAME));
        tx.note_error(&e);
        assert_eq!(tx.retryable(), Some(code::INVALID_SQL_STATEMENT_NAME), "answered 503");
        assert!(db(&pool).transaction_pooler());
        tx.rollback().await.unwrap();
    }

    /// An ordinary error on an autocommit step (55P03 behind a migration's
    /// lock) leaves the session pooled; a timed-out step's is closed.
    #[tokio::test]
    async fn an_ordinary_step_error_pools_the_session_and_a_timeout_closes_it() {
        let pool = testing::fresh(2).await;
        let before = pid(&pool).await;
        let conn = db(&pool).connect("test").await.unwrap();
        let failed = conn.query("SET lock_timeout = 1; SELECT 1", &[]).await;
        assert!(failed.is_err(), "two statements in one prepared query");
        conn.release();
        assert_eq!(pid(&pool).await, before, "pooled after an ordinary error");
        let quick = Db::new(pool.clone(), Duration::from_secs(5), Duration::from_millis(100), false, None);
        let conn = quick.connect("test").await.unwrap();
        assert!(conn.query("SELECT pg_sleep(5)", &[]).await.err().is_some_and(|e| e.timed_out()));
        conn.release();
        assert_ne!(pid(&pool).await, before, "closed after a timeout");
    }
}
