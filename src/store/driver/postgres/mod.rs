//! The tokio-postgres + deadpool-postgres driver (feature `tokio-postgres`,
//! on by default): the seam's traits ([`seam`](super::seam)) over a
//! deadpool pool. Its public face (building a `StoreConfig` from a pool,
//! TLS for cancel requests, the `LISTEN` connection, the handler's
//! `TxClient`) is `crate::postgres` (`src/drivers/postgres/`).
//!
//! What this driver does for each part of the seam:
//! - a flight is pipelined: every request is queued on the client before
//!   the first answer is awaited (tokio-postgres sends a request when its
//!   future is first polled, in order), so `BEGIN`, a statement and
//!   `COMMIT` cost one round trip;
//! - a named statement is deadpool's `prepare_cached` (cached per pooled
//!   connection); an unnamed one is `query_typed` (Parse, Bind and Execute
//!   in one request, with each parameter's type);
//! - discarding detaches the connection from the pool (`Object::take`:
//!   deadpool recycles at checkout, and none of its recycling methods
//!   notices an open transaction), sends a cancel request for its running
//!   statement (with the TLS connector of `StoreConfig::cancel_tls`) and
//!   closes it;
//! - a `timestamptz` is read from its binary value, never through
//!   tokio-postgres's `SystemTime`.

mod endpoint;
mod error;
mod listen;
mod types;

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use deadpool_postgres::{Object, PoolError};
use tokio_postgres::types::{ToSql, Type};

pub(crate) use error::db_error;
pub(crate) use listen::PgListener;
/// A result row of this driver.
pub(crate) use tokio_postgres::Row;
/// A statement prepared on a connection of this driver.
pub(crate) use tokio_postgres::Statement;

use super::error::DbError;
use super::seam::{self, AcquireError, PoolIdentity, Step};
use crate::error::Cause;

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

/// A deadpool pool, and the TLS its cancel requests go through.
#[derive(Clone)]
pub(crate) struct PgPool {
    pool: deadpool_postgres::Pool,
    /// Plain TCP when `None`.
    cancel: Option<CancelFn>,
}

impl PgPool {
    pub(crate) fn new(pool: deadpool_postgres::Pool) -> Self {
        Self { pool, cancel: None }
    }

    /// Cancel requests through `cancel` from now on.
    pub(crate) fn set_cancel(&mut self, cancel: CancelFn) {
        self.cancel = Some(cancel);
    }
}

/// A connection checked out of a [`PgPool`].
pub(crate) struct PgConn {
    obj: Object,
    cancel: Option<CancelFn>,
}

impl PgConn {
    /// The client, for the handler's `TxClient`.
    pub(crate) fn client(&self) -> &Object {
        &self.obj
    }
}

impl seam::Pool for PgPool {
    type Conn = PgConn;

    async fn acquire(&self) -> Result<PgConn, AcquireError> {
        match self.pool.get().await {
            Ok(obj) => Ok(PgConn { obj, cancel: self.cancel.clone() }),
            Err(PoolError::Backend(e)) => Err(AcquireError::Connect(db_error(e))),
            Err(e) => Err(AcquireError::Pool(Cause::of(&e, error::describe))),
        }
    }

    fn endpoint(&self) -> Option<String> {
        endpoint::of_pool(&self.pool)
    }

    fn database(&self) -> Option<String> {
        endpoint::database_of(&self.pool)
    }

    /// deadpool's [`Pool::retain`](https://docs.rs/deadpool/0.13.1/deadpool/managed/struct.Pool.html#method.retain)
    /// detaches them under the pool's lock (no I/O there);
    /// [`Metrics::recycled`](https://docs.rs/deadpool/0.13.1/deadpool/managed/struct.Metrics.html)
    /// is the instant a connection was last checked out (deadpool sets it
    /// when it recycles an object at checkout), `created` for one never
    /// reused. Closing them is dropping them (their connection tasks end).
    fn close_idle_since(&self, since: Instant) -> usize {
        self.pool.retain(|_, m| m.recycled.unwrap_or(m.created) >= since).removed.len()
    }

    /// The address of the pool's manager, which lives in the pool's shared
    /// allocation (deadpool's `Pool` is an `Arc`): unique while the pool
    /// lives; alive while its `WeakPool` upgrades.
    fn identity(&self) -> PoolIdentity {
        let weak = self.pool.weak();
        PoolIdentity {
            id: std::ptr::from_ref(self.pool.manager()).addr(),
            alive: Box::new(move || weak.upgrade().is_some()),
        }
    }
}

impl seam::Connection for PgConn {
    type Statement = Statement;
    type Row = Row;

    /// deadpool's [`Metrics::recycled`](https://docs.rs/deadpool/0.13.1/deadpool/managed/struct.Metrics.html),
    /// set when it recycles an object at checkout, or `created` for a
    /// connection opened by this checkout.
    fn checked_out(&self) -> Instant {
        let m = Object::metrics(&self.obj);
        m.recycled.unwrap_or(m.created)
    }

    async fn prepare(&self, sql: &str) -> Result<Statement, DbError> {
        self.obj.prepare_cached(sql).await.map_err(db_error)
    }

    fn flight<'a>(
        &'a self,
        steps: &'a [Step<'a, Statement>],
    ) -> impl Future<Output = Vec<Result<Vec<Row>, DbError>>> + Send + 'a {
        // `join_all` polls each step's future once, in order, before
        // awaiting any answer: each request is queued in order.
        futures_util::future::join_all(steps.iter().map(|step| run(&self.obj, step)))
    }

    fn release(self) {
        drop(self.obj);
    }

    fn discard(self) {
        let client = Object::take(self.obj);
        let cancel = client.cancel_token();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let with = self.cancel;
                rt.spawn(async move {
                    let cancelled = match with {
                        Some(with) => with(cancel).await,
                        None => cancel.cancel_query(tokio_postgres::NoTls).await,
                    };
                    if let Err(e) = cancelled {
                        tracing::warn!(
                            error = %db_error(e),
                            "the discarded connection's statement could not be cancelled and runs until it ends \
                             (with TLS to PostgreSQL, give StoreConfig::cancel_tls the pool's connector)"
                        );
                    }
                    drop(client);
                });
            }
            Err(_) => drop(client),
        }
    }

    fn close_uncancelled(self) {
        drop(Object::take(self.obj));
    }
}

/// One step of a flight on `client`.
async fn run(client: &Object, step: &Step<'_, Statement>) -> Result<Vec<Row>, DbError> {
    let rows = match step {
        Step::Batch(sql) => client.batch_execute(sql).await.map(|()| Vec::new()),
        Step::Query { params, prepared: Some(statement), .. } => {
            let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
            client.query(*statement, &values).await
        }
        Step::Query { sql, params, prepared: None } => {
            let typed: Vec<(&(dyn ToSql + Sync), Type)> =
                params.iter().map(|p| (p as &(dyn ToSql + Sync), types::of(p))).collect();
            client.query_typed(sql, &typed).await
        }
    };
    rows.map_err(db_error)
}
