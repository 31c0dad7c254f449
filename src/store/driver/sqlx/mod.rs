//! The sqlx driver (feature `sqlx`): the seam's traits ([`seam`](super::seam))
//! over an `sqlx::PgPool`. Its public face (building a `StoreConfig` from
//! the pool, the `LISTEN` connection, the handler's `SqlxTx`) is
//! `crate::sqlx` (`src/drivers/sqlx/`).
//!
//! What this driver does for each part of the seam, and where sqlx differs
//! from tokio-postgres:
//! - **A flight is sent one step after the other**: sqlx never sends a
//!   request before the previous one is answered (sqlx#408), so a flight of
//!   n steps costs n round trips, except that consecutive simple-query
//!   steps (`COMMIT` and the `NOTIFY` after it) go as one message
//!   (`raw_sql`), whose statements PostgreSQL runs in order, stopping at the
//!   first error. The fence holds as with pipelining: a failed check (25P02
//!   in an aborted transaction, 22012 when the fence is gone) is answered
//!   before the `COMMIT` is sent, and that `COMMIT` is then answered as
//!   `ROLLBACK`; the typestate above never counts it as a commit.
//! - **The crate owns `BEGIN` and `COMMIT`**: they are plain statements on a
//!   `PoolConnection`, never sqlx's `Transaction` (whose depth counter would
//!   still say "open" after a `COMMIT` it did not send, and roll back on
//!   drop).
//! - **A named statement** is sqlx's statement cache (`persistent(true)`,
//!   per connection, keyed by the text); an unnamed one is
//!   `persistent(false)` (Parse, Bind and Execute of an unnamed statement,
//!   behind a transaction-mode pooler; sqlx 0.9.1 no longer leaks them,
//!   sqlx#4337).
//! - **Discarding detaches the connection from the pool and closes its
//!   socket.** sqlx keeps the backend's cancel key private, so no cancel
//!   request is sent: a statement still running on the server runs until it
//!   ends, its lock wait times out (the crate's `lock_timeout`), or the
//!   server notices the closed socket (`client_connection_check_interval`,
//!   PostgreSQL 14+: README, "Using sqlx"). sqlx's own pool only pings a
//!   returned connection and never reads the server's transaction status;
//!   the typestate above never returns one with a transaction open.
//! - A `timestamptz` is read from its binary value and sent as one, as the
//!   tokio-postgres driver does (no `chrono` or `time` feature of sqlx).

mod listen;
mod types;

use std::sync::Arc;
use std::time::Instant;

use futures_util::TryStreamExt;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgRow, Postgres};
use sqlx::{AssertSqlSafe, Row as _};

pub(crate) use listen::SqlxListener;

use super::column::{ColumnError, Timestamp};
use super::error::{DbError, ServerError};
use super::seam::{self, AcquireError, PoolIdentity, Step};
use crate::error::Cause;

/// An sqlx pool, and the identity the crate keeps per pool.
#[derive(Clone)]
pub(crate) struct SqlxPool {
    pool: sqlx::PgPool,
    /// Shared by the clones of this value: sqlx's pool exposes no identity
    /// of its own, so one `StoreConfig` (and its clones) is one pool to the
    /// crate.
    identity: Arc<()>,
}

impl SqlxPool {
    pub(crate) fn new(pool: sqlx::PgPool) -> Self {
        Self { pool, identity: Arc::new(()) }
    }
}

/// A connection checked out of an [`SqlxPool`]. sqlx runs statements on
/// `&mut PgConnection`; the seam's statements take `&self`: the connection
/// sits behind a lock that only one of them holds at a time (the typestate
/// above already runs one flight at a time, so it is never contended).
pub(crate) struct SqlxConn {
    conn: Arc<tokio::sync::Mutex<Option<PoolConnection<Postgres>>>>,
    checked_out: Instant,
}

impl SqlxConn {
    /// The connection, for the handler's `SqlxTx`: locked until the guard
    /// drops; `None` inside once it was released or discarded.
    pub(crate) fn lock_owned(
        &self,
    ) -> impl std::future::Future<Output = tokio::sync::OwnedMutexGuard<Option<PoolConnection<Postgres>>>> + Send + 'static
    {
        Arc::clone(&self.conn).lock_owned()
    }

    /// Takes the connection out (for release or discard), when no flight
    /// holds it; a flight's dropped future has let it go.
    fn take(&self) -> Option<PoolConnection<Postgres>> {
        self.conn.try_lock().ok().and_then(|mut c| c.take())
    }
}

/// A statement "prepared" on an sqlx connection: sqlx prepares and caches a
/// persistent statement on its first run on the connection, so preparing
/// ahead is a marker that the step runs as a named, cached statement.
pub(crate) struct Statement;

/// A result row of this driver.
pub(crate) struct Row(PgRow);

/// `e` as the seam's error.
pub(crate) fn db_error(e: sqlx::Error) -> DbError {
    match e.as_database_error().and_then(|d| d.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()) {
        Some(db) => DbError::server(ServerError {
            severity: format!("{:?}", db.severity()).to_uppercase(),
            message: db.message().to_owned(),
            code: db.code().to_owned(),
            detail: db.detail().map(str::to_owned),
            hint: db.hint().map(str::to_owned),
        }),
        // Not a server error: I/O, TLS, a closed connection, a protocol error.
        None => DbError::connection(Some(Cause::new(describe(&e)))),
    }
}

/// A non-server error of sqlx as text, without values it may quote.
fn describe(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Io(io) => format!("I/O: {io}"),
        sqlx::Error::Tls(tls) => format!("TLS: {tls}"),
        sqlx::Error::PoolTimedOut => "sqlx's pool timed out (its acquire_timeout)".to_owned(),
        sqlx::Error::PoolClosed => "the sqlx pool is closed".to_owned(),
        other => other.to_string(),
    }
}

impl seam::Pool for SqlxPool {
    type Conn = SqlxConn;

    async fn acquire(&self) -> Result<SqlxConn, AcquireError> {
        match self.pool.acquire().await {
            Ok(conn) => {
                Ok(SqlxConn { conn: Arc::new(tokio::sync::Mutex::new(Some(conn))), checked_out: Instant::now() })
            }
            Err(e @ (sqlx::Error::PoolClosed | sqlx::Error::PoolTimedOut)) => {
                Err(AcquireError::Pool(Some(Cause::new(describe(&e)))))
            }
            Err(e) => Err(AcquireError::Connect(db_error(e))),
        }
    }

    fn endpoint(&self) -> Option<String> {
        let options = self.pool.connect_options();
        Some(match options.get_socket() {
            Some(socket) => socket.display().to_string(),
            None => format!("{}:{}", options.get_host(), options.get_port()),
        })
    }

    fn database(&self) -> Option<String> {
        let options = self.pool.connect_options();
        let name = options.get_database().map_or_else(|| options.get_username().to_owned(), str::to_owned);
        Some(format!("{}/{name}", self.endpoint()?))
    }

    /// sqlx's pool does not say when an idle connection was last used, nor
    /// close chosen ones: none is closed (its own `idle_timeout` and
    /// `max_lifetime` retire them).
    fn close_idle_since(&self, _since: Instant) -> usize {
        0
    }

    fn identity(&self) -> PoolIdentity {
        let weak = Arc::downgrade(&self.identity);
        PoolIdentity { id: Arc::as_ptr(&self.identity).addr(), alive: Box::new(move || weak.upgrade().is_some()) }
    }
}

impl seam::Connection for SqlxConn {
    type Statement = Statement;
    type Row = Row;

    /// When this checkout began: sqlx does not tell when a pooled
    /// connection was last released.
    fn checked_out(&self) -> Instant {
        self.checked_out
    }

    /// Whether sqlx's statement cache holds statements: a query asking for
    /// an unnamed statement (`persistent(false)`) still runs the cached named
    /// one of the same text (sqlx-postgres 0.9.1, `get_or_prepare`).
    fn holds_named_statements(&self) -> bool {
        use sqlx::Connection as _;
        self.conn.try_lock().is_ok_and(|c| c.as_ref().is_some_and(|c| c.cached_statements_size() > 0))
    }

    async fn prepare(&self, _sql: &str) -> Result<Statement, DbError> {
        Ok(Statement)
    }

    async fn flight<'a>(&'a self, steps: &'a [Step<'a, Statement>]) -> Vec<Result<Vec<Row>, DbError>> {
        let mut answers = Vec::with_capacity(steps.len());
        let mut guard = self.conn.lock().await;
        let Some(conn) = guard.as_mut() else {
            answers.resize_with(steps.len(), || Err(DbError::connection(None)));
            return answers;
        };
        let mut i = 0;
        while i < steps.len() {
            // Consecutive simple-query steps: one message.
            let batch: Vec<&str> = steps[i..]
                .iter()
                .map_while(|s| match s {
                    Step::Batch(sql) => Some(*sql),
                    Step::Query { .. } => None,
                })
                .collect();
            if !batch.is_empty() {
                answers.extend(run_batch(conn, &batch).await);
                i += batch.len();
                continue;
            }
            let Step::Query { sql, params, prepared } = &steps[i] else { unreachable!("a batch is handled above") };
            answers.push(run_query(conn, sql, params, prepared.is_some()).await);
            i += 1;
        }
        answers
    }

    fn release(self) {
        drop(self.take());
    }

    fn discard(self) {
        if let Some(conn) = self.take() {
            close(conn);
        }
    }

    fn close_uncancelled(self) {
        if let Some(conn) = self.take() {
            close(conn);
        }
    }
}

/// Detaches `conn` from its pool (it is never returned) and closes its
/// socket without the protocol's goodbye: the server ends the session and
/// rolls back an open transaction.
fn close(conn: PoolConnection<Postgres>) {
    let raw = conn.detach();
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn(async move {
                let _ = sqlx::Connection::close_hard(raw).await;
            });
        }
        Err(_) => drop(raw),
    }
}

/// `statements` as one simple-query message: one answer per statement, in
/// order. PostgreSQL stops at the first error and runs none after it in the
/// message: those are answered with the same error.
async fn run_batch(conn: &mut PoolConnection<Postgres>, statements: &[&str]) -> Vec<Result<Vec<Row>, DbError>> {
    let text = statements.join(";\n");
    let mut done = 0;
    let mut results = sqlx::raw_sql(AssertSqlSafe(text)).execute_many(&mut **conn);
    let failed = loop {
        match results.try_next().await {
            Ok(Some(_)) => done += 1,
            Ok(None) => break None,
            Err(e) => break Some(db_error(e)),
        }
    };
    drop(results);
    // A statement that returns no command completion (an empty one) is not
    // counted by sqlx: every statement before the failure succeeded.
    let succeeded = if failed.is_some() { done.min(statements.len()) } else { statements.len() };
    (0..statements.len())
        .map(|i| match &failed {
            Some(e) if i >= succeeded => Err(e.clone()),
            _ => Ok(Vec::new()),
        })
        .collect()
}

/// One statement with its parameters, as a named (cached) statement when
/// `named`, else an unnamed one.
async fn run_query(
    conn: &mut PoolConnection<Postgres>,
    sql: &str,
    params: &[super::param::Param<'_>],
    named: bool,
) -> Result<Vec<Row>, DbError> {
    let arguments = types::arguments(params).map_err(|e| DbError::connection(Some(Cause::new(e))))?;
    let query = sqlx::query_with(AssertSqlSafe(sql.to_owned()), arguments).persistent(named);
    let rows = query.fetch_all(&mut **conn).await.map_err(db_error)?;
    Ok(rows.into_iter().map(Row).collect())
}

/// The column `idx` of `row`, decoded as `T` (`None` for SQL NULL).
fn column<'r, T>(row: &'r PgRow, idx: usize) -> Result<Option<T>, ColumnError>
where
    T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    row.try_get::<Option<T>, _>(idx).map_err(|e| ColumnError::new(e.to_string()))
}

impl seam::Columns for Row {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn text(&self, idx: usize) -> Result<Option<&str>, ColumnError> {
        column(&self.0, idx)
    }

    fn bytes(&self, idx: usize) -> Result<Option<&[u8]>, ColumnError> {
        column(&self.0, idx)
    }

    fn boolean(&self, idx: usize) -> Result<Option<bool>, ColumnError> {
        column(&self.0, idx)
    }

    fn int2(&self, idx: usize) -> Result<Option<i16>, ColumnError> {
        column(&self.0, idx)
    }

    fn int4(&self, idx: usize) -> Result<Option<i32>, ColumnError> {
        column(&self.0, idx)
    }

    fn int8(&self, idx: usize) -> Result<Option<i64>, ColumnError> {
        column(&self.0, idx)
    }

    fn float8(&self, idx: usize) -> Result<Option<f64>, ColumnError> {
        column(&self.0, idx)
    }

    fn timestamp(&self, idx: usize) -> Result<Option<Timestamp>, ColumnError> {
        column::<types::PgTimestamp>(&self.0, idx).map(|t| t.map(|t| t.0))
    }

    fn texts(&self, idx: usize) -> Result<Option<Vec<Option<String>>>, ColumnError> {
        column(&self.0, idx)
    }
}
