//! [`SqlxTx`]: the handler's borrowed connection inside its transaction, as
//! an sqlx executor.

use std::fmt;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::{FutureExt, StreamExt, TryFutureExt, TryStreamExt};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, PgQueryResult, PgRow, PgStatement, PgTypeInfo, Postgres};
use sqlx::{Either, Execute, Executor, SqlStr};
use tokio::sync::OwnedMutexGuard;

use crate::store::driver::Lent;

/// The connection inside a [`WebhookTx`](crate::WebhookTx), borrowed
/// ([`WebhookTx::sqlx`](crate::WebhookTx::sqlx)); drop it to let others use
/// the transaction.
///
/// `&mut tx` is an [`sqlx::Executor`]: pass it to
/// `sqlx::query!(..).execute(..)`, `query_as!`, `query_scalar` and the rest.
/// Statements run through it are watched as tokio-postgres's `TxClient`
/// watches its own: a deadlock (40P01), serialization failure (40001) or
/// lock timeout (55P03) makes the layer answer 503 + `Retry-After` after
/// rolling back, whatever status the handler returned (PostgreSQL docs,
/// "Serialization Failure Handling"); and behind a transaction-mode pooler
/// ([`StoreConfig::transaction_pooler`](crate::StoreConfig::transaction_pooler),
/// or once the pool switched itself) they run as unnamed statements, never
/// from sqlx's statement cache, whatever `persistent` says.
///
/// [`SqlxTx::raw`] gives sqlx's [`PgConnection`] itself, for what takes one
/// (`copy_in_raw`, helpers taking `&mut PgConnection`): statements sent
/// through it bypass both. Do not send `BEGIN`, `COMMIT` or `ROLLBACK`, and
/// do not call `PgConnection::begin`: the layer owns the transaction.
pub struct SqlxTx {
    conn: OwnedMutexGuard<Option<PoolConnection<Postgres>>>,
    /// Last: dropped after the connection's guard.
    lent: Lent,
    /// Statements may come from sqlx's per-connection cache.
    cached: bool,
}

impl SqlxTx {
    /// The connection of the transaction `lent`, locked for this borrower;
    /// `None` when it is another driver's.
    pub(super) async fn new(lent: Lent) -> Option<Self> {
        let tx = lent.tx();
        let cached = tx.caches_statements();
        let conn = tx.connection().sqlx()?.lock_owned().await;
        Some(Self { conn, lent, cached })
    }

    /// sqlx's connection itself, for what the executor does not cover.
    /// Statements sent through it bypass the retryable-conflict detection
    /// and the pooler rule (see [`SqlxTx`]): return a non-2xx for a
    /// deadlock, serialization failure or lock timeout yourself.
    pub fn raw(&mut self) -> &mut PgConnection {
        self.parts().1
    }

    fn parts(&mut self) -> (&Lent, &mut PgConnection, bool) {
        let conn = self.conn.as_mut().expect("the connection stays while the transaction is lent");
        (&self.lent, &mut **conn, self.cached)
    }
}

/// Notes a failed statement on the transaction: its SQLSTATE (a retryable
/// conflict, a session unfit for the pool) and, for the commit's log line,
/// its message (never its parameters).
fn note(lent: &Lent, e: &sqlx::Error) {
    let (code, what) = match e.as_database_error() {
        Some(db) => {
            let code = db.code().map(|c| c.into_owned());
            let what = format!("{} (SQLSTATE {})", db.message(), code.as_deref().unwrap_or("?"));
            (code, what)
        }
        None => (None, e.to_string()),
    };
    lent.tx().note_failure(code.as_deref(), what);
}

/// A query run as an unnamed statement when the transaction may not use
/// sqlx's statement cache (behind a transaction-mode pooler a named
/// statement may not exist on the next transaction's server session).
struct Persistence<E> {
    inner: E,
    allowed: bool,
}

impl<'q, E: Execute<'q, Postgres>> Execute<'q, Postgres> for Persistence<E> {
    fn sql(self) -> SqlStr {
        self.inner.sql()
    }

    fn statement(&self) -> Option<&PgStatement> {
        self.inner.statement()
    }

    fn take_arguments(&mut self) -> Result<Option<sqlx::postgres::PgArguments>, sqlx::error::BoxDynError> {
        self.inner.take_arguments()
    }

    fn persistent(&self) -> bool {
        self.allowed && self.inner.persistent()
    }
}

impl<'c> Executor<'c> for &'c mut SqlxTx {
    type Database = Postgres;

    fn fetch_many<'e, 'q, E>(self, query: E) -> BoxStream<'e, Result<Either<PgQueryResult, PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
        'q: 'e,
    {
        let (lent, conn, allowed) = self.parts();
        conn.fetch_many(Persistence { inner: query, allowed }).inspect_err(move |e| note(lent, e)).boxed()
    }

    fn fetch_optional<'e, 'q, E>(self, query: E) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
        'q: 'e,
    {
        let (lent, conn, allowed) = self.parts();
        conn.fetch_optional(Persistence { inner: query, allowed }).inspect_err(move |e| note(lent, e)).boxed()
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement, sqlx::Error>>
    where
        'c: 'e,
    {
        let (_, conn, _) = self.parts();
        conn.prepare_with(sql, parameters)
    }

    fn describe<'e>(self, sql: SqlStr) -> BoxFuture<'e, Result<sqlx::Describe<Postgres>, sqlx::Error>>
    where
        'c: 'e,
    {
        let (_, conn, _) = self.parts();
        conn.describe(sql)
    }
}

impl fmt::Debug for SqlxTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlxTx").finish_non_exhaustive()
    }
}
