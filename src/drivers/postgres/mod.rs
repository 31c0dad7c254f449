//! The tokio-postgres driver (feature `tokio-postgres`, on by default): a
//! [`deadpool_postgres`] pool for the store, [`tokio_postgres`]'s client for
//! the handler.
//!
//! What is this driver's own, and nowhere else in the crate's API:
//! - the versions of [`tokio_postgres`] and [`deadpool_postgres`] the crate
//!   is built against (build the pool with them, so the types match);
//! - [`StoreConfig::new`] and `StoreConfig::from(pool)`: the store
//!   configuration every part and [`migrate`](crate::migrate) take, from a
//!   deadpool pool;
//! - [`StoreConfig::cancel_tls`]: the TLS connector of cancel requests;
//! - [`StoreConfig::listen_connection`]: the connection the workers
//!   `LISTEN` on;
//! - [`WebhookTx::client`] and [`TxClient`]: the handler's borrowed client
//!   inside the claim's transaction.
//!
//! Everything else (the layers, the workers, the operator API, retention,
//! the migrations) takes the [`StoreConfig`] and names no driver type.
//!
//! ```rust,no_run
//! use std::time::Duration;
//!
//! use webhook_idempotency::postgres::deadpool_postgres::{Manager, Pool};
//! use webhook_idempotency::postgres::tokio_postgres::NoTls;
//! use webhook_idempotency::StoreConfig;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let url = "postgresql://app@localhost/app";
//! let pool = Pool::builder(Manager::new(url.parse()?, NoTls)).max_size(16).build()?;
//! let store = StoreConfig::new(pool)
//!     .schema("webhooks") // created by migrate(&store)
//!     .database_timeout(Duration::from_secs(1))
//!     .transaction_pooler(true) // behind PgBouncer in transaction mode
//!     // The workers LISTEN on PostgreSQL itself, not on the pooler.
//!     .listen_connection("postgresql://app@db-primary/app".parse()?, NoTls);
//! webhook_idempotency::migrate(&store).await?;
//! # Ok(())
//! # }
//! ```

mod client;

pub use client::TxClient;
/// The deadpool-postgres this crate is built against: build the pool you
/// give [`StoreConfig::new`] with it, so the versions match.
pub use deadpool_postgres;
/// The tokio-postgres this crate is built against: its `Config` and TLS
/// connectors for the pool and [`StoreConfig::listen_connection`], and the
/// client [`TxClient`] wraps.
pub use tokio_postgres;

use crate::store::driver::any::{AnyListener, AnyPool};
use crate::store::driver::postgres::{cancel_with, PgListener, PgPool};
use crate::store::StoreConfig;
use crate::tx::{TxError, TxErrorKind, WebhookTx};

impl From<deadpool_postgres::Pool> for StoreConfig {
    fn from(pool: deadpool_postgres::Pool) -> Self {
        Self::new(pool)
    }
}

impl StoreConfig {
    /// The tables under [`DEFAULT_SCHEMA`](crate::store::DEFAULT_SCHEMA) in
    /// `pool`'s database, with the default timeouts (a deadpool-postgres
    /// pool: see [`postgres`](crate::postgres)).
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio-postgres")))]
    pub fn new(pool: deadpool_postgres::Pool) -> Self {
        Self::of_pool(AnyPool::Postgres(PgPool::new(pool)))
    }

    /// The TLS connector for cancel requests: give it the one the pool's
    /// manager connects with when the server requires TLS
    /// (`sslmode=require`). A connection the crate discards (a step past its
    /// deadline, a dropped request) first asks the server to cancel its
    /// running statement, which otherwise runs on, holding its locks (the
    /// event's advisory lock among them: its redeliveries are answered 409
    /// meanwhile). The cancel request goes over a new connection ("Canceling
    /// Requests in Progress", PostgreSQL docs, protocol flow) with the
    /// session's `sslmode`: tokio-postgres cannot send it without TLS when
    /// that is `require`. Default: plain TCP, enough without TLS or with
    /// `sslmode=prefer`; a cancel that fails is logged at WARN. A store
    /// built from another driver's pool ignores it.
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio-postgres")))]
    pub fn cancel_tls<T>(mut self, tls: T) -> Self
    where
        T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket> + Clone + Send + Sync + 'static,
        T::Stream: Send,
        T::TlsConnect: Send,
        <T::TlsConnect as tokio_postgres::tls::TlsConnect<tokio_postgres::Socket>>::Future: Send,
    {
        if let Some(pool) = self.pool_mut().postgres_mut() {
            pool.set_cancel(cancel_with(tls));
        }
        self
    }

    /// Wakes the workers built on this store ([`InboxWorker`](crate::inbox::InboxWorker),
    /// [`OutboxWorker`](crate::outbox::OutboxWorker)) by `LISTEN` on a
    /// dedicated connection built from `config` and `tls` (re-established
    /// after a loss, 1 s between tries), instead of waiting for the next
    /// poll: the same `pg_notify` the layer and the handlers' outbox effects
    /// send when they add rows. Without it the workers poll.
    ///
    /// `config` must reach PostgreSQL itself, not a transaction-mode pooler
    /// (PgBouncer, Supavisor, RDS Proxy), which takes `LISTEN` and drops the
    /// notifications. At start and after each reconnect the listener sends
    /// one to itself from a second session of `config`; when it has not
    /// arrived within 5 s, a WARN names the fix and
    /// `webhook_worker_listen_checks_total{outcome="missed"}` counts it (the
    /// worker goes on polling; that connection is not checked again). Once a
    /// check passed, the connection is checked again every
    /// [`listen_check_interval`](crate::worker::WorkerBuilder::listen_check_interval):
    /// one that went silent without closing (a NAT gateway or load balancer
    /// that dropped the idle flow) misses it, is counted `missed` and logged
    /// at WARN too, and is replaced.
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio-postgres")))]
    pub fn listen_connection<T>(mut self, config: tokio_postgres::Config, tls: T) -> Self
    where
        T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket> + Clone + Send + Sync + 'static,
        T::Stream: Send,
        T::TlsConnect: Send,
        <T::TlsConnect as tokio_postgres::tls::TlsConnect<tokio_postgres::Socket>>::Future: Send,
    {
        self.set_listener(AnyListener::Postgres(PgListener::new(config, tls)));
        self
    }
}

impl WebhookTx {
    /// Borrows the connection inside the transaction, as tokio-postgres's
    /// client ([`TxClient`]). Waits while another clone holds it; statements
    /// on one connection run one at a time.
    ///
    /// # Errors
    /// [`TxError`] of kind [`TxErrorKind::Finished`] once the layer has
    /// committed or rolled back; [`TxErrorKind::OtherDriver`] when the
    /// transaction runs on another driver's connection (a store built from
    /// another driver's pool: borrow that driver's client).
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio-postgres")))]
    pub async fn client(&self) -> Result<TxClient, TxError> {
        let lent = self.slot().lend().await.ok_or(TxError::of(TxErrorKind::Finished))?;
        if lent.tx().connection().postgres().is_none() {
            return Err(TxError::of(TxErrorKind::OtherDriver));
        }
        Ok(TxClient::new(lent))
    }
}
