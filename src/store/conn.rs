//! The driver-specific part of the claim protocol (tokio-postgres with
//! deadpool): a pooled connection is either outside any transaction (a plain
//! deadpool [`Object`], which goes back to the pool when dropped) or inside
//! the claim's transaction (a [`TxConn`], which never does).
//!
//! There is no flag to keep in step: [`TxConn::begin`] turns an `Object`
//! into a `TxConn` before `BEGIN` is sent, and only a confirmed `COMMIT` or
//! `ROLLBACK` ([`TxConn::finish_with`], [`TxConn::rollback`]) gives the `Object`
//! back. Every other way out drops the `TxConn`, which detaches the
//! connection from the pool, cancels its running statement and closes it, so
//! PostgreSQL rolls the transaction back. deadpool recycles at checkout, and
//! none of its recycling methods notices an open transaction.
//!
//! An sqlx driver would provide the same three things over a
//! `PoolConnection<Postgres>`: begin (the `BEGIN` batch and the claim
//! statements of [`Statements`](super::Statements)), commit/rollback that
//! release the connection only when confirmed, and a drop that closes
//! (`PoolConnection::detach` + `close`) instead of releasing.

use std::sync::OnceLock;

use deadpool_postgres::Object;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Row, Statement};

/// A pooled connection with a transaction open on it.
pub(crate) struct TxConn {
    obj: Option<Object>,
    /// Named prepared statements, cached per pooled connection (deadpool's
    /// cache); off behind a transaction-mode pooler, where each transaction
    /// may run on another server session.
    cache: bool,
    /// The first retryable error a handler statement met (deadlock,
    /// serialization failure, lock timeout): the layer answers 503 +
    /// `Retry-After` instead of the handler's failure.
    retryable: OnceLock<&'static str>,
}

/// SQLSTATEs after which the sender's retry will succeed (PostgreSQL docs,
/// "Serialization Failure Handling"), with their codes.
const RETRYABLE: [(SqlState, &str); 3] = [
    (SqlState::T_R_DEADLOCK_DETECTED, "40P01"),
    (SqlState::T_R_SERIALIZATION_FAILURE, "40001"),
    (SqlState::LOCK_NOT_AVAILABLE, "55P03"),
];

impl TxConn {
    /// Gives the connection back to the pool when the caller knows no
    /// transaction is open on it (only autocommit statements were sent, and
    /// they were answered).
    pub(crate) fn release_idle(mut self) {
        drop(self.obj.take());
    }

    /// `obj` about to have a transaction opened on it by statements the
    /// caller sends (pipelined with others): from now on it is never pooled
    /// unless [`finish_with`](Self::finish_with) or [`rollback`](Self::rollback)
    /// confirms the end.
    pub(crate) fn opening(obj: Object, cache: bool) -> Self {
        Self { obj: Some(obj), cache, retryable: OnceLock::new() }
    }

    pub(crate) fn client(&self) -> &Object {
        self.obj.as_ref().expect("TxConn holds its connection until released or dropped")
    }

    /// Whether statements may be prepared once and cached on the connection.
    pub(crate) fn caches_statements(&self) -> bool {
        self.cache
    }

    /// The cached prepared statement for `sql` (a round trip the first time
    /// on this connection), or `None` behind a transaction-mode pooler.
    /// Prepare before a flight, so the flight's requests leave in order.
    pub(crate) async fn prepare(&self, sql: &str) -> Result<Option<Statement>, tokio_postgres::Error> {
        prepare_on(self.client(), sql, self.cache).await
    }

    /// Sends `sql` (prepared) and `end` (`COMMIT` or `ROLLBACK`) in one
    /// flight, after `begin` when given (a simple-query batch opening the
    /// transaction). `Ok`: all succeeded, the transaction ended as `end`
    /// says, the connection back in the pool. `Err(Statement(e))`: `begin`
    /// or `sql` failed, so a `COMMIT` ended an aborted transaction
    /// (PostgreSQL answers it `ROLLBACK`): nothing committed, the connection
    /// back in the pool. `Err(Commit(e))`: `end` itself failed or its answer
    /// was lost: the outcome is unknown, the connection closed.
    pub(crate) async fn finish_with(
        mut self,
        begin: Option<&str>,
        prepared: Option<&Statement>,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        types: &[Type],
        end: &str,
    ) -> Result<Vec<Row>, Finish> {
        let client = self.client();
        let opened = async {
            match begin {
                Some(begin) => client.batch_execute(begin).await,
                None => Ok(()),
            }
        };
        let (opened, done, ended) =
            tokio::join!(opened, query_on(client, prepared, sql, params, types), client.batch_execute(end));
        if let Err(e) = ended {
            return Err(Finish::Commit(e)); // dropped: closed
        }
        drop(self.obj.take()); // the transaction ended either way: pooled
        opened.and(done).map_err(Finish::Statement)
    }

    /// The retryable SQLSTATE a handler statement failed with, if any.    /// The retryable SQLSTATE a handler statement failed with, if any.
    pub(crate) fn retryable(&self) -> Option<&'static str> {
        self.retryable.get().copied()
    }

    /// Notes `result`'s SQLSTATE when it is a retryable conflict.
    pub(crate) fn note<R>(&self, result: &Result<R, tokio_postgres::Error>) {
        if let Err(e) = result {
            if let Some((_, code)) = RETRYABLE.iter().find(|(state, _)| e.code() == Some(state)) {
                let _ = self.retryable.set(code);
            }
        }
    }

    /// `ROLLBACK`. `Ok`: the connection is back in the pool; `Err`: closed
    /// (PostgreSQL rolls back when the session ends).
    pub(crate) async fn rollback(self) -> Result<(), tokio_postgres::Error> {
        self.end("ROLLBACK").await
    }

    async fn end(mut self, sql: &str) -> Result<(), tokio_postgres::Error> {
        self.client().batch_execute(sql).await?;
        // Confirmed: outside any transaction, the connection may be pooled.
        drop(self.obj.take());
        Ok(())
    }
}

/// How [`TxConn::finish_with`] failed.
pub(crate) enum Finish {
    /// The statement failed: rolled back.
    Statement(tokio_postgres::Error),
    /// `COMMIT` failed or went unanswered: unknown outcome.
    Commit(tokio_postgres::Error),
}

/// See [`TxConn::prepare`].
pub(crate) async fn prepare_on(
    client: &Object,
    sql: &str,
    cache: bool,
) -> Result<Option<Statement>, tokio_postgres::Error> {
    if cache {
        client.prepare_cached(sql).await.map(Some)
    } else {
        Ok(None)
    }
}

/// See [`TxConn::query_prepared`].
pub(crate) async fn query_on(
    client: &Object,
    prepared: Option<&Statement>,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    types: &[Type],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    match prepared {
        Some(stmt) => client.query(stmt, params).await,
        None => {
            let typed: Vec<(&(dyn ToSql + Sync), Type)> =
                params.iter().zip(types).map(|(p, t)| (*p, t.clone())).collect();
            client.query_typed(sql, &typed).await
        }
    }
}

impl Drop for TxConn {
    fn drop(&mut self) {
        let Some(obj) = self.obj.take() else { return }; // released after COMMIT/ROLLBACK
        let client = Object::take(obj);
        tracing::warn!("closing a connection abandoned inside a webhook transaction");
        let cancel = client.cancel_token();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    // A dropped query future does not stop the statement on the
                    // server; the cancel request does. Then the close rolls back.
                    let _ = cancel.cancel_query(tokio_postgres::NoTls).await;
                    drop(client);
                });
            }
            Err(_) => drop(client),
        }
    }
}
