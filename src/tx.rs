//! [`WebhookTx`]: the claim's transaction, handed to the handler.

use std::fmt;
use std::sync::Arc;

use deadpool_postgres::Object;
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, ToStatement};

use crate::store::TxConn;

/// A clone of [`WebhookTx`] still borrows the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InUse;

/// The transaction holding this delivery's claim. The handler's business
/// writes go through it, so they commit (or roll back) together with the
/// claim.
///
/// Cloneable; every clone is the same transaction. The layer takes it back
/// when the inner service returns its response: using it after that (from a
/// spawned task, say) is [`TxError::Finished`], not a hang. Do not send
/// `COMMIT` or `ROLLBACK` yourself: the layer ends the transaction.
///
/// With the `axum` feature it is an extractor; without axum, read it from the
/// request extensions: `req.extensions().get::<WebhookTx>()`.
///
/// ```no_run
/// # async fn handler(tx: webhook_idempotency::WebhookTx) -> Result<(), Box<dyn std::error::Error>> {
/// let client = tx.client().await?;
/// client.execute("INSERT INTO orders_paid (order_id) VALUES ($1)", &[&"ord_1"]).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct WebhookTx {
    slot: Arc<Mutex<Option<TxConn>>>,
}

impl fmt::Debug for WebhookTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookTx").finish_non_exhaustive()
    }
}

impl WebhookTx {
    pub(crate) fn new(conn: TxConn) -> Self {
        Self { slot: Arc::new(Mutex::new(Some(conn))) }
    }

    /// Borrows the connection inside the transaction. Waits while another
    /// clone holds it; statements on one connection run one at a time.
    ///
    /// # Errors
    /// [`TxError::Finished`] once the layer has committed or rolled back.
    pub async fn client(&self) -> Result<TxClient, TxError> {
        let guard = Arc::clone(&self.slot).lock_owned().await;
        if guard.is_some() {
            Ok(TxClient { guard })
        } else {
            Err(TxError::Finished)
        }
    }

    /// Takes the connection back for the store. [`InUse`] when a clone still
    /// holds a [`TxClient`] after the work answered.
    pub(crate) fn take(&self) -> Result<Option<TxConn>, InUse> {
        self.slot.try_lock().map(|mut g| g.take()).map_err(|_| InUse)
    }

    /// Runs `f` on the connection when it is here and not borrowed.
    pub(crate) fn peek<R>(&self, f: impl FnOnce(&TxConn) -> R) -> Option<R> {
        self.slot.try_lock().ok().and_then(|g| g.as_ref().map(f))
    }
}

/// The connection inside a [`WebhookTx`], borrowed; drop it to let others use
/// the transaction. Its methods wrap [`tokio_postgres::Client`]'s and notice
/// retryable conflicts (see [`TxClient::execute`]); [`TxClient::raw`] gives
/// the client itself, without that detection.
pub struct TxClient {
    guard: OwnedMutexGuard<Option<TxConn>>,
}

impl TxClient {
    /// Like [`tokio_postgres::Client::prepare`], cached per pooled
    /// connection (deadpool's statement cache); prepared afresh, not cached,
    /// when the layer is set for a transaction-mode pooler.
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

    /// [`tokio_postgres::Client::execute`], noting a retryable failure.
    ///
    /// These wrappers (`execute`, `query`, `query_one`, `query_opt`,
    /// `batch_execute`) shadow the client's methods of the same names. When
    /// one fails with a deadlock (40P01), a serialization failure (40001) or
    /// a lock timeout (55P03), the layer answers 503 + `Retry-After` after
    /// rolling back, whatever status the handler returned: the sender's
    /// retry will succeed (PostgreSQL docs, "Serialization Failure Handling").
    ///
    /// # Errors
    /// As [`tokio_postgres::Client::execute`].
    pub async fn execute<T>(&self, statement: &T, params: &[&(dyn ToSql + Sync)]) -> Result<u64, tokio_postgres::Error>
    where
        T: ?Sized + ToStatement,
    {
        self.note(self.conn().execute(statement, params).await)
    }

    /// [`tokio_postgres::Client::query`], noting a retryable failure.
    ///
    /// # Errors
    /// As [`tokio_postgres::Client::query`].
    pub async fn query<T>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error>
    where
        T: ?Sized + ToStatement,
    {
        self.note(self.conn().query(statement, params).await)
    }

    /// [`tokio_postgres::Client::query_one`], noting a retryable failure.
    ///
    /// # Errors
    /// As [`tokio_postgres::Client::query_one`].
    pub async fn query_one<T>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, tokio_postgres::Error>
    where
        T: ?Sized + ToStatement,
    {
        self.note(self.conn().query_one(statement, params).await)
    }

    /// [`tokio_postgres::Client::query_opt`], noting a retryable failure.
    ///
    /// # Errors
    /// As [`tokio_postgres::Client::query_opt`].
    pub async fn query_opt<T>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, tokio_postgres::Error>
    where
        T: ?Sized + ToStatement,
    {
        self.note(self.conn().query_opt(statement, params).await)
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

/// Using a [`WebhookTx`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TxError {
    /// The layer already committed or rolled back this transaction: the
    /// handler had returned its response.
    Finished,
}

impl fmt::Display for TxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Finished => f.write_str(
                "the webhook transaction is finished: WebhookTx is usable only until the handler returns its response",
            ),
        }
    }
}

impl std::error::Error for TxError {}
