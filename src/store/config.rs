//! [`StoreConfig`]: the one value that says where the tables are and how
//! every database step behaves, shared by the layer, the claim store, the
//! workers, the operator API and retention.

use std::fmt;
use std::time::Duration;

use super::driver::any::{AnyListener, AnyPool};
use super::driver::{Db, SynchronousReplication};
use crate::error::{ConfigError, ConfigErrorKind};

/// The default wait for a pooled connection: 5 seconds.
pub const DEFAULT_POOL_TIMEOUT: Duration = Duration::from_secs(5);

/// The default client-side deadline of each database step: 2 seconds.
pub const DEFAULT_DATABASE_TIMEOUT: Duration = Duration::from_secs(2);

/// The database the crate works in: a driver's pool, the schema holding
/// the tables, and the rules every step follows. Build it once from your
/// pool and give a clone to each part ([`WebhookLayer::builder`](crate::layer::WebhookLayer::builder),
/// [`InboxWorker::builder`](crate::inbox::InboxWorker::builder),
/// [`ClaimStore::builder`](super::claim::ClaimStore::builder),
/// [`Admin::new`](super::admin::Admin::new),
/// [`Retention::builder`](super::retention::Retention::builder)), and to
/// [`migrate`](crate::migrate) and [`check_schema`](super::check_schema);
/// the parts take a bare pool too (`impl Into<StoreConfig>`) for the
/// defaults.
///
/// Each driver builds it from its own pool, and adds the settings only it
/// has: with the `tokio-postgres` feature (default),
/// `StoreConfig::new(pool)` or `StoreConfig::from(pool)` takes that
/// driver's pool ([`postgres`](crate::postgres) shows it, with `cancel_tls`
/// and the workers' `listen_connection`).
#[derive(Clone)]
#[must_use]
pub struct StoreConfig {
    pool: AnyPool,
    schema: String,
    pool_timeout: Duration,
    database_timeout: Duration,
    transaction_pooler: bool,
    synchronous_replication: SynchronousReplication,
    /// The workers' `LISTEN` connection, when configured.
    listener: Option<AnyListener>,
}

impl fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreConfig")
            .field("schema", &self.schema)
            .field("pool_timeout", &self.pool_timeout)
            .field("database_timeout", &self.database_timeout)
            .field("transaction_pooler", &self.transaction_pooler)
            .field("synchronous_replication", &self.synchronous_replication)
            .field("listen_connection", &self.listener.is_some())
            .finish_non_exhaustive()
    }
}

impl StoreConfig {
    /// The tables under [`DEFAULT_SCHEMA`](super::DEFAULT_SCHEMA) in `pool`'s
    /// database, with the default timeouts: what each driver's constructor
    /// builds.
    pub(crate) fn of_pool(pool: AnyPool) -> Self {
        Self {
            pool,
            schema: super::DEFAULT_SCHEMA.to_owned(),
            pool_timeout: DEFAULT_POOL_TIMEOUT,
            database_timeout: DEFAULT_DATABASE_TIMEOUT,
            transaction_pooler: false,
            synchronous_replication: SynchronousReplication::Detect,
            listener: None,
        }
    }

    setters! {
        /// The PostgreSQL schema holding the tables (default
        /// `webhook_idempotency`): a plain identifier (lower-case ASCII letters,
        /// digits and `_`, not starting with a digit, at most 63 bytes), checked
        /// when a part is built; migrate it with
        /// [`migrate`](crate::migrate).
        pub fn schema(schema: impl Into<String>) => schema = schema.into();

        /// How long to wait for a pooled connection (default 5 s); past it the
        /// step fails with [`StoreErrorKind::PoolTimeout`](crate::error::StoreErrorKind::PoolTimeout)
        /// (the layer answers 503 + `Retry-After`).
        pub fn pool_timeout(timeout: Duration) => pool_timeout = timeout;

        /// The client-side deadline of each database step on the request path
        /// and in the workers (default 2 s): one claim attempt, the commit check
        /// with its COMMIT, the failure record, an inbox accept, a lease. Well
        /// under the senders' own timeouts (Slack 3 s, Shopify 5 s, GitHub 10 s).
        /// A step past it has its connection discarded (detached from the pool,
        /// its statement cancelled, closed), never pooled; the layer answers
        /// 503 and `Retry-After`, and a COMMIT whose answer never came is an unknown
        /// outcome (the retry finds the event done, or claims it again). It
        /// covers what PostgreSQL's own timeouts cannot: a network that stops
        /// answering without closing (a NAT or firewall dropping the
        /// connection's mapping), where the server never sees the statement.
        /// Operator actions, retention and migrations have no client-side
        /// deadline.
        pub fn database_timeout(timeout: Duration) => database_timeout = timeout;

        /// Set when the pool's connections go through a transaction-mode pooler
        /// (PgBouncer `pool_mode = transaction`, Supavisor, RDS Proxy), which may
        /// run each transaction on another server session, where a cached
        /// prepared statement does not exist (SQLSTATE 26000). Every part then
        /// sends its statements unnamed, with their parameter types, in one
        /// round trip each, and caches no prepared statement on the connection;
        /// [`TxClient::prepare_cached`](crate::postgres::TxClient::prepare_cached) prepares
        /// afresh too. The handler's own statements must do the same:
        /// `TxClient::execute(sql_text, ..)` and `query(..)` with text are fine
        /// (prepared and closed inside the transaction). Default off: statements
        /// are prepared once per pooled connection.
        ///
        /// # Switched on by itself
        /// Left off behind such a pooler, the pool switches itself at the first
        /// named statement that fails there: SQLSTATE 26000 (`prepared statement
        /// "s3" does not exist`: prepared on one server session, run on another)
        /// or 42P05 (`prepared statement "s3" already exists`: another client's
        /// statement of that name on this server session). From the next step
        /// on, every part on the same pool (the layer, the workers, the operator
        /// API, whichever `StoreConfig` built them) sends unnamed statements, as
        /// if this were set, for the life of the pool; one WARN per pool names
        /// this setting. No delivery is lost or doubled on the way:
        /// - a failed autocommit step (the duplicate lookup, an inbox accept) or
        ///   the claim transaction's first statement ran nothing (the failure is
        ///   at Parse or Bind): it is re-run once, unnamed; for the claim, after
        ///   a confirmed `ROLLBACK`, the whole transaction from `BEGIN`, since a
        ///   26000 aborts the transaction it occurs in;
        /// - a failure later in the claim's transaction (the fenced commit's
        ///   check, an enqueue, a handler statement through
        ///   [`TxClient`](crate::postgres::TxClient)'s wrappers) aborted the handler's
        ///   work, which cannot be re-run here: it is rolled back, the attempt
        ///   recorded, and the sender answered 503 + `Retry-After`; its retry
        ///   runs unnamed.
        ///
        /// Set it anyway: the switch costs the first deliveries a retry and a
        /// few of them a 503, and a named statement may meet another process's
        /// statement of the same name with compatible parameters before any
        /// error shows. PgBouncer docs, "Features" (prepared statements in
        /// transaction pooling, <https://www.pgbouncer.org/features.html>);
        /// PostgreSQL docs, "PostgreSQL Error Codes" (26000, 42P05).
        pub fn transaction_pooler(behind_pooler: bool) => transaction_pooler = behind_pooler;

        /// Whether a duplicate waits for the synchronous standby before it is
        /// answered 2xx from a stored outcome (default
        /// [`SynchronousReplication::Detect`]: when the server has synchronous
        /// standbys, read with the stored row at no extra statement).
        ///
        /// A `COMMIT` that waits for a synchronous standby and is cancelled,
        /// terminated or interrupted by a fast restart of the primary stays
        /// committed there alone and visible (PostgreSQL docs, "Synchronous
        /// Replication"); a redelivery answered 2xx from that row would be an
        /// acknowledgement a failover loses. So a duplicate of the webhook
        /// layer, a replay of the body-digest guard and a stored response of
        /// the `Idempotency-Key` layer are answered only after a commit of
        /// their own, sent after the row was read, was confirmed by the
        /// standby (WAL is sequential: the row's commit is then confirmed
        /// too); concurrent duplicates share one such commit. Without the
        /// confirmation within [`database_timeout`](Self::database_timeout)
        /// the answer is 503 + `Retry-After`
        /// ([`StoreErrorKind::Unconfirmed`](crate::error::StoreErrorKind::Unconfirmed)
        /// from [`ClaimStore::claim`](super::claim::ClaimStore::claim)).
        /// BENCHMARKS.md ("Synchronous replication") measures what it costs a
        /// duplicate; without synchronous standbys it costs nothing.
        pub fn synchronous_replication(mode: SynchronousReplication) => synchronous_replication = mode;
    }

    /// The schema's name as configured.
    pub fn schema_name(&self) -> &str {
        &self.schema
    }

    /// The pool, for a driver's own settings.
    pub(crate) fn pool_mut(&mut self) -> &mut AnyPool {
        &mut self.pool
    }

    /// The workers' `LISTEN` connection from now on (a driver's setter
    /// builds it).
    pub(crate) fn set_listener(&mut self, listener: AnyListener) {
        self.listener = Some(listener);
    }

    /// The workers' `LISTEN` connection, when configured.
    pub(crate) fn listener(&self) -> Option<&AnyListener> {
        self.listener.as_ref()
    }

    /// The checked schema name and the database handle every part runs its
    /// steps through.
    ///
    /// # Errors
    /// [`ConfigErrorKind::InvalidSchema`] for a schema name that is not a
    /// plain identifier.
    pub(crate) fn open(&self) -> Result<(Db, &str), ConfigError> {
        super::check_schema_name(&self.schema).map_err(|m| ConfigError::of(ConfigErrorKind::InvalidSchema, m))?;
        let db = Db::new(self.pool.clone(), self.pool_timeout, self.database_timeout, self.transaction_pooler)
            .with_replication(self.synchronous_replication);
        Ok((db, &self.schema))
    }
}
