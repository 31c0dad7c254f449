//! The wire steps both connection states share: a statement prepared (or
//! not, behind a transaction pooler) and run on a pooled connection, and a
//! connection discarded after a step that did not finish.

use deadpool_postgres::Object;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Statement;

use super::{Db, DbError, Param, Row};
use crate::error::Chain;

/// Detaches `obj` from the pool, cancels its running statement and closes
/// it. A dropped query future does not stop the statement on the server;
/// the cancel request does. Then the close rolls back any transaction.
///
/// Never for a `COMMIT` in flight, nor for an autocommit statement that
/// writes (their drops close those with [`close_uncancelled`]): PostgreSQL
/// answers a cancel of a `COMMIT` that waits for synchronous standbys with a
/// warning, "The transaction has already committed locally, but might not
/// have been replicated to the standby", and makes it visible on the
/// primary, where an event no standby holds would be lost at a failover
/// (redeliveries wait for the standby's confirmation before they are
/// answered as duplicates: [`Db::confirm_replicated`]). Closed without a
/// cancel, the backend keeps waiting for the standby's confirmation
/// (PostgreSQL does not notice the closed client there) and holds the
/// claim's lock: redeliveries meanwhile get 409.
pub(super) fn discard(obj: Object, db: &Db, why: &'static str) {
    let client = Object::take(obj);
    tracing::warn!("{why}");
    let cancel = client.cancel_token();
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            let db = db.clone();
            rt.spawn(async move {
                if let Err(e) = db.cancel(cancel).await {
                    tracing::warn!(
                        error = %Chain(&e),
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

/// Detaches `obj` from the pool and closes it without a cancel request: a
/// `COMMIT` (or an autocommit statement that writes) went unanswered, and
/// must end on its own (see [`discard`]).
pub(super) fn close_uncancelled(obj: Object) {
    let client = Object::take(obj);
    tracing::warn!(
        "closing a connection whose COMMIT went unanswered, without cancelling it: the COMMIT ends on its own (a \
         cancelled COMMIT waiting for a synchronous standby would stay committed on the primary alone)"
    );
    drop(client);
}

/// The cached prepared statement for `sql` (a round trip the first time on
/// this connection), or `None` behind a transaction-mode pooler, where each
/// transaction may run on another server session. Prepare before a flight,
/// so the flight's requests leave in order.
pub(super) async fn prepare_on(client: &Object, sql: &str, cache: bool) -> Result<Option<Statement>, DbError> {
    if cache {
        client.prepare_cached(sql).await.map(Some).map_err(DbError::pg)
    } else {
        Ok(None)
    }
}

/// Runs `sql`: the prepared statement, or unnamed with its parameter types
/// (one round trip: Parse, Bind, Execute together).
pub(super) async fn query_on(
    client: &Object,
    prepared: Option<&Statement>,
    sql: &str,
    params: &[Param<'_>],
) -> Result<Vec<Row>, DbError> {
    let rows = match prepared {
        Some(stmt) => {
            let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
            client.query(stmt, &values).await
        }
        None => {
            let typed: Vec<(&(dyn ToSql + Sync), Type)> =
                params.iter().map(|p| (p as &(dyn ToSql + Sync), p.ty())).collect();
            client.query_typed(sql, &typed).await
        }
    };
    rows.map(|rows| rows.into_iter().map(Row).collect()).map_err(DbError::pg)
}
