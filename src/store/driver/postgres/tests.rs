//! The seam over this driver on a real PostgreSQL: which ends pool a
//! session and which close it, the closing of idle connections after a
//! timeout, and the statement mode's switch on the failures a
//! transaction-mode pooler causes (made here by hand on a direct server).

use std::time::Duration;

use deadpool_postgres::Pool;

use super::testing::fresh_pool;
use super::PgPool;
use crate::store::driver::any::AnyPool;
use crate::store::driver::{code, Db, Fenced, Param};

async fn pid(pool: &Pool) -> i32 {
    pool.get().await.unwrap().query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0)
}

/// The seam over `pool`, with a step deadline of `deadline`.
fn db_with(pool: &Pool, deadline: Duration) -> Db {
    Db::new(AnyPool::Postgres(PgPool::new(pool.clone())), Duration::from_secs(5), deadline, false)
}

fn db(pool: &Pool) -> Db {
    db_with(pool, Duration::from_secs(5))
}

/// The tokio-postgres client of a connection of this driver.
fn client(tx: &crate::store::driver::TxConn) -> &deadpool_postgres::Object {
    tx.connection().postgres().expect("a connection of this driver").client()
}

/// A session that refused a handler's write with 25006 (read-only after
/// a failover) is closed after its rollback, not pooled for the next run.
#[tokio::test]
async fn a_session_that_refused_a_write_is_not_pooled_again() {
    let pool = fresh_pool(1).await;
    let before = pid(&pool).await;
    // This session now starts read-only transactions, as a demoted primary's do.
    pool.get().await.unwrap().batch_execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY").await.unwrap();
    let (tx, _) = db(&pool).connect("test").await.unwrap().begin("BEGIN", "SELECT 1", &[]).await.unwrap();
    let refused = client(&tx).execute("CREATE TABLE t (x int)", &[]).await;
    let sqlstate = refused.as_ref().err().and_then(|e| e.code()).map(|c| c.code());
    assert_eq!(sqlstate, Some(code::READ_ONLY_SQL_TRANSACTION));
    tx.note_failure(sqlstate, "refused".to_owned());
    tx.rollback().await.unwrap();
    assert_ne!(pid(&pool).await, before, "a new session");
}

/// A COMMIT the server refuses with an ordinary error (a deferred unique
/// constraint, 23505) has a known outcome, rolled back, and the session
/// goes back to the pool.
#[tokio::test]
async fn a_commit_refused_by_a_deferred_constraint_is_rolled_back_and_the_session_pooled() {
    let pool = fresh_pool(1).await;
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
        .begin(&format!("BEGIN; {}", crate::store::driver::FENCE_ON), "INSERT INTO d VALUES ('x'), ('x')", &[])
        .await
        .unwrap();
    match tx.commit_fenced(None).await {
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
    let pool = fresh_pool(4).await;
    let warm: Vec<_> = futures_util::future::join_all((0..4).map(|_| pool.get())).await;
    drop(warm.into_iter().map(Result::unwrap).collect::<Vec<_>>());
    assert_eq!(pool.status().size, 4);
    let quick = db_with(&pool, Duration::from_millis(200));
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
    let pool = fresh_pool(1).await;
    let autocommit = db(&pool);
    assert_eq!(autocommit.query("test", SQL, &text).await.unwrap().len(), 1, "prepared and cached");
    pool.get().await.unwrap().batch_execute("DEALLOCATE ALL").await.unwrap();
    let rows = autocommit.query("test", SQL, &text).await.expect("run again, unnamed");
    assert_eq!(rows[0].get::<String>(0), "x");
    assert!(autocommit.transaction_pooler(), "switched");
    assert!(db(&pool).transaction_pooler(), "for every Db over the pool");
    assert!(!db(&fresh_pool(1).await).transaction_pooler(), "not for another pool");

    // The claim's shape: BEGIN and a cached statement in one flight.
    let pool = fresh_pool(1).await;
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
    let pool = fresh_pool(1).await;
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
    let pool = fresh_pool(1).await;
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
    let pool = fresh_pool(2).await;
    let before = pid(&pool).await;
    let conn = db(&pool).connect("test").await.unwrap();
    let failed = conn.query("SET lock_timeout = 1; SELECT 1", &[]).await;
    assert!(failed.is_err(), "two statements in one prepared query");
    conn.release();
    assert_eq!(pid(&pool).await, before, "pooled after an ordinary error");
    let quick = db_with(&pool, Duration::from_millis(100));
    let conn = quick.connect("test").await.unwrap();
    assert!(conn.query("SELECT pg_sleep(5)", &[]).await.err().is_some_and(|e| e.timed_out()));
    conn.release();
    assert_ne!(pid(&pool).await, before, "closed after a timeout");
}
