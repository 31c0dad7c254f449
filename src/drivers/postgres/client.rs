//! [`TxClient`]: the handler's borrowed connection inside its transaction,
//! with tokio-postgres's API.

use std::fmt;

use deadpool_postgres::Object;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, ToStatement};

use crate::store::driver::Lent;

/// The connection inside a [`WebhookTx`](crate::WebhookTx), borrowed
/// ([`WebhookTx::client`](crate::WebhookTx::client)); drop it to let others
/// use the transaction. Its methods wrap [`tokio_postgres::Client`]'s and
/// notice retryable conflicts (see [`TxClient::execute`]);
/// [`TxClient::raw`] gives the client itself, without that detection.
pub struct TxClient {
    lent: Lent,
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

impl TxClient {
    /// The client of the transaction's connection `lent` (a connection of
    /// this driver).
    pub(super) fn new(lent: Lent) -> Self {
        Self { lent }
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
        if self.lent.tx().caches_statements() {
            self.conn().prepare_cached(query).await
        } else {
            // Behind a transaction-mode pooler a cached statement may not exist
            // on the next transaction's server session: prepare afresh.
            self.conn().prepare(query).await
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

    /// Notes a failed statement on the transaction: its SQLSTATE (a
    /// retryable conflict, a session unfit for the pool) and, for the
    /// commit's log line, its message (never its parameters).
    fn note<R>(&self, result: Result<R, tokio_postgres::Error>) -> Result<R, tokio_postgres::Error> {
        if let Err(e) = &result {
            let what = match e.as_db_error() {
                Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
                None => e.to_string(),
            };
            self.lent.tx().note_failure(e.code().map(tokio_postgres::error::SqlState::code), what);
        }
        result
    }

    fn conn(&self) -> &Object {
        self.lent.tx().connection().postgres().expect("a TxClient is lent only on a connection of this driver").client()
    }
}

impl fmt::Debug for TxClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TxClient").finish_non_exhaustive()
    }
}
