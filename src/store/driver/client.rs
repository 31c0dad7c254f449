//! [`TxSlot`], the connection of an open transaction shared by every handle
//! on it, and [`TxClient`]: the handler's borrowed connection inside that
//! transaction, with tokio-postgres's API.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Object;
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, ToStatement};

use super::TxConn;

/// The connection inside a [`WebhookTx`](crate::WebhookTx), borrowed; drop it to let others use
/// the transaction. Its methods wrap [`tokio_postgres::Client`]'s and notice
/// retryable conflicts (see [`TxClient::execute`]); [`TxClient::raw`] gives
/// the client itself, without that detection.
pub struct TxClient {
    guard: OwnedMutexGuard<Option<TxConn>>,
}

/// The wrappers that take a statement and its parameters, one per
/// `name -> output`: each calls the client's method of that name and notes a
/// retryable failure.
macro_rules! noted_queries {
    ($($(#[$doc:meta])* $name:ident -> $output:ty;)*) => {$(
        $(#[$doc])*
        pub async fn $name<T>(
            &self,
            statement: &T,
            params: &[&(dyn ToSql + Sync)],
        ) -> Result<$output, tokio_postgres::Error>
        where
            T: ?Sized + ToStatement,
        {
            self.note(self.conn().$name(statement, params).await)
        }
    )*};
}

/// The connection of an open transaction, shared by every handle on it (the
/// handler's `WebhookTx` clones, the claim or lease that ends it): borrowed
/// one at a time ([`TxClient`]), taken out once by the end. Cheap to clone;
/// every clone is the same slot.
#[derive(Clone)]
pub(crate) struct TxSlot {
    slot: Arc<Mutex<Option<TxConn>>>,
    /// The connection's step deadline.
    deadline: Option<Duration>,
}

/// Why [`TxSlot::client_within`] lent no client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unlent {
    /// Another borrower held the connection for the whole wait.
    Busy,
    /// The transaction ended: its connection was taken.
    Ended,
}

impl TxSlot {
    /// The slot holding `conn`.
    pub(crate) fn new(conn: TxConn) -> Self {
        let deadline = conn.step_deadline();
        Self { slot: Arc::new(Mutex::new(Some(conn))), deadline }
    }

    /// The client-side deadline of each step on the connection.
    pub(crate) fn step_deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// Borrows the connection, waiting while another borrower holds it;
    /// `None` once the transaction ended.
    pub(crate) async fn client(&self) -> Option<TxClient> {
        let guard = Arc::clone(&self.slot).lock_owned().await;
        guard.is_some().then_some(TxClient { guard })
    }

    /// [`client`](Self::client), waiting at most `wait`.
    ///
    /// # Errors
    /// [`Unlent`]: busy for the whole wait, or ended.
    pub(crate) async fn client_within(&self, wait: Duration) -> Result<TxClient, Unlent> {
        let Ok(guard) = tokio::time::timeout(wait, Arc::clone(&self.slot).lock_owned()).await else {
            return Err(Unlent::Busy);
        };
        if guard.is_some() {
            Ok(TxClient { guard })
        } else {
            Err(Unlent::Ended)
        }
    }

    /// Takes the connection out to end the transaction: `None` when a
    /// borrower still holds it (a task the handler spawned, after the
    /// handler answered), or it was taken before.
    pub(crate) fn take(&self) -> Option<TxConn> {
        self.slot.try_lock().ok().and_then(|mut g| g.take())
    }

    /// The retryable conflict (40P01, 40001, 55P03) a statement on the
    /// connection met, when the connection is here and not borrowed.
    pub(crate) fn retryable(&self) -> Option<&'static str> {
        self.slot.try_lock().ok().and_then(|g| g.as_ref().and_then(TxConn::retryable))
    }
}

impl TxClient {
    /// The transaction's connection (the crate's own statements run on it).
    pub(crate) fn tx_conn(&mut self) -> &mut TxConn {
        self.guard.as_mut().expect("TxClient exists only while the slot is full")
    }
}

impl TxClient {
    /// Like [`tokio_postgres::Client::prepare`], cached per pooled
    /// connection (deadpool's statement cache); prepared afresh, not cached,
    /// when the layer is set for a transaction-mode pooler or its pool
    /// switched itself to unnamed statements (see
    /// [`StoreConfig::transaction_pooler`](crate::StoreConfig::transaction_pooler)).
    ///
    /// # Errors
    /// The statement does not parse, or the connection failed.
    pub async fn prepare_cached(&self, query: &str) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
        let conn = self.guard.as_ref().expect("TxClient exists only while the slot is full");
        if conn.caches_statements() {
            conn.client().prepare_cached(query).await
        } else {
            // Behind a transaction-mode pooler a cached statement may not exist
            // on the next transaction's server session: prepare afresh.
            conn.client().prepare(query).await
        }
    }

    noted_queries! {
        /// [`tokio_postgres::Client::execute`], noting a retryable failure.
        ///
        /// These wrappers (`execute`, `query`, `query_one`, `query_opt`,
        /// `batch_execute`) shadow the client's methods of the same names. When
        /// one fails with a deadlock (40P01), a serialization failure (40001) or
        /// a lock timeout (55P03), the layer answers 503 + `Retry-After` after
        /// rolling back, whatever status the handler returned: the sender's
        /// retry will succeed (PostgreSQL docs, "Serialization Failure Handling").
        /// So it does for a named statement that went missing or collided behind
        /// a transaction-mode pooler (26000, 42P05) unless
        /// [`StoreConfig::transaction_pooler`](crate::StoreConfig::transaction_pooler)
        /// was set: the pool switches to unnamed statements, and the retry uses
        /// them.
        ///
        /// # Errors
        /// As [`tokio_postgres::Client::execute`].
        execute -> u64;

        /// [`tokio_postgres::Client::query`], noting a retryable failure.
        ///
        /// # Errors
        /// As [`tokio_postgres::Client::query`].
        query -> Vec<Row>;

        /// [`tokio_postgres::Client::query_one`], noting a retryable failure.
        ///
        /// # Errors
        /// As [`tokio_postgres::Client::query_one`].
        query_one -> Row;

        /// [`tokio_postgres::Client::query_opt`], noting a retryable failure.
        ///
        /// # Errors
        /// As [`tokio_postgres::Client::query_opt`].
        query_opt -> Option<Row>;
    }

    /// [`tokio_postgres::Client::batch_execute`], noting a retryable failure.
    ///
    /// # Errors
    /// As [`tokio_postgres::Client::batch_execute`].
    pub async fn batch_execute(&self, query: &str) -> Result<(), tokio_postgres::Error> {
        self.note(self.conn().batch_execute(query).await)
    }

    /// [`tokio_postgres::Client::simple_query`], noting a retryable failure.
    ///
    /// # Errors
    /// As [`tokio_postgres::Client::simple_query`].
    pub async fn simple_query(
        &self,
        query: &str,
    ) -> Result<Vec<tokio_postgres::SimpleQueryMessage>, tokio_postgres::Error> {
        self.note(self.conn().simple_query(query).await)
    }

    /// [`tokio_postgres::Client::prepare`] (preparing cannot meet a conflict).
    ///
    /// # Errors
    /// As [`tokio_postgres::Client::prepare`].
    pub async fn prepare(&self, query: &str) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
        self.conn().prepare(query).await
    }

    /// The underlying [`tokio_postgres::Client`], for what the wrappers do
    /// not cover (`query_raw`, `copy_in`, helpers taking `&Client`).
    ///
    /// Statements sent through it bypass the retryable-conflict detection:
    /// a deadlock (40P01), serialization failure (40001) or lock timeout
    /// (55P03) met there is not noticed by the layer, which then passes the
    /// handler's own answer on. Return a non-2xx for such errors yourself, or
    /// use the wrappers. Do not send `COMMIT`, `ROLLBACK` or `BEGIN`.
    pub fn raw(&self) -> &tokio_postgres::Client {
        self.conn()
    }

    fn note<R>(&self, result: Result<R, tokio_postgres::Error>) -> Result<R, tokio_postgres::Error> {
        if let Some(conn) = self.guard.as_ref() {
            conn.note(&result);
        }
        result
    }

    fn conn(&self) -> &Object {
        self.guard.as_ref().expect("TxClient exists only while the slot is full").client()
    }
}

impl fmt::Debug for TxClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TxClient").finish_non_exhaustive()
    }
}
