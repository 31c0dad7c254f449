//! The sqlx driver (feature `sqlx`): an [`sqlx::PgPool`] for the store,
//! sqlx's executor for the handler.
//!
//! What is this driver's own, and nowhere else in the crate's API:
//! - the version of [`sqlx`] the crate is built against (0.9.1: build the
//!   pool with it, so the types match);
//! - `StoreConfig::from(pool)` and [`StoreConfig::from_sqlx`]: the store
//!   configuration every part and [`migrate`](crate::migrate) take, from an
//!   sqlx pool;
//! - [`StoreConfig::sqlx_listen_connection`]: the connection the workers
//!   `LISTEN` on;
//! - [`WebhookTx::sqlx`] and [`SqlxTx`]: the handler's borrowed connection
//!   inside the claim's transaction, an [`sqlx::Executor`] (`&mut tx`)
//!   for `sqlx::query!`, `query_as!`, `query_scalar` and the rest.
//!
//! Everything else (the layers, the workers, the operator API, retention,
//! the migrations) takes the [`StoreConfig`] and names no driver type. With
//! the `tokio-postgres` feature on as well, both drivers work in one binary:
//! each store uses the driver of the pool it was built from.
//!
//! How it differs from the tokio-postgres driver (README, "Using sqlx"):
//! sqlx sends one statement per round trip (no pipelining, sqlx#408), so an
//! event costs more round trips; it has no multi-host URLs (sqlx#2290): put
//! a virtual IP, PgBouncer or Patroni's HAProxy in front of a failover
//! pair; and it sends no cancel request for a connection the crate
//! discards (set `client_connection_check_interval` on the server).
//!
//! ```rust,no_run
//! use webhook_idempotency::sqlx::sqlx::postgres::PgPoolOptions;
//! use webhook_idempotency::StoreConfig;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = PgPoolOptions::new().max_connections(16).connect("postgresql://app@localhost/app").await?;
//! let store = StoreConfig::from_sqlx(pool);
//! webhook_idempotency::migrate(&store).await?;
//! # Ok(())
//! # }
//! ```

mod tx;

/// The sqlx this crate is built against (0.9.1): build the pool you give
/// [`StoreConfig::from_sqlx`] with it, so the versions match.
pub use sqlx;
pub use tx::SqlxTx;

use crate::store::driver::any::{AnyListener, AnyPool};
use crate::store::driver::sqlx::{SqlxListener, SqlxPool};
use crate::store::StoreConfig;
use crate::tx::{TxError, TxErrorKind, WebhookTx};

impl From<sqlx::PgPool> for StoreConfig {
    fn from(pool: sqlx::PgPool) -> Self {
        Self::from_sqlx(pool)
    }
}

impl StoreConfig {
    /// The tables under [`DEFAULT_SCHEMA`](crate::store::DEFAULT_SCHEMA) in
    /// `pool`'s database, with the default timeouts (an sqlx pool: see
    /// [`sqlx`](crate::sqlx)). The crate's pool timeout bounds each
    /// checkout; sqlx's own `acquire_timeout` (30 s by default) bounds it
    /// too, whichever comes first.
    #[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
    pub fn from_sqlx(pool: sqlx::PgPool) -> Self {
        Self::of_pool(AnyPool::Sqlx(SqlxPool::new(pool)))
    }

    /// Wakes the workers built on this store ([`InboxWorker`](crate::inbox::InboxWorker),
    /// [`OutboxWorker`](crate::outbox::OutboxWorker)) by `LISTEN` on a
    /// dedicated connection made with `options` (re-established after a
    /// loss, 1 s between tries), instead of waiting for the next poll. The
    /// same rules and checks as the tokio-postgres driver's
    /// `StoreConfig::listen_connection`: `options` must reach PostgreSQL
    /// itself, not a transaction-mode pooler, which takes `LISTEN` and
    /// drops the notifications; a listener that misses its own check
    /// notification within 5 s is logged at WARN and counted.
    #[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
    pub fn sqlx_listen_connection(mut self, options: sqlx::postgres::PgConnectOptions) -> Self {
        self.set_listener(AnyListener::Sqlx(SqlxListener::new(options)));
        self
    }
}

impl WebhookTx {
    /// Borrows the connection inside the transaction as sqlx's
    /// ([`SqlxTx`]): `&mut db` is an [`sqlx::Executor`]. Waits while
    /// another clone holds it; statements on one connection run one at a
    /// time.
    ///
    /// ```rust,no_run
    /// # async fn handler(tx: webhook_idempotency::WebhookTx) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut db = tx.sqlx().await?;
    /// webhook_idempotency::sqlx::sqlx::query("INSERT INTO payments (id) VALUES ($1)")
    ///     .bind("pi_1")
    ///     .execute(&mut db)
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`TxError`] of kind [`TxErrorKind::Finished`] once the layer has
    /// committed or rolled back; [`TxErrorKind::OtherDriver`] when the
    /// transaction runs on another driver's connection (a store built from a
    /// deadpool pool: borrow that driver's client).
    #[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
    pub async fn sqlx(&self) -> Result<SqlxTx, TxError> {
        let lent = self.slot().lend().await.ok_or(TxError::of(TxErrorKind::Finished))?;
        SqlxTx::new(lent).await.ok_or(TxError::of(TxErrorKind::OtherDriver))
    }
}
