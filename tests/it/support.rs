//! Shared test harness: a real PostgreSQL per test binary (or `DATABASE_URL`),
//! a fresh database per test, signed deliveries, an HTTP server on loopback.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use bytes::Bytes;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use http::Request;
use tokio_postgres::NoTls;
use webhook_idempotency::providers::{github, stripe};
pub use webhook_idempotency::StoreConfig;
use webhook_idempotency::{Provider, SigningSecret, WebhookEvent, WebhookLayer, WebhookLayerBuilder, WebhookTx};

pub use webhook_test_support::{Citus, TempPostgres};

pub const STRIPE_SECRET: &str = "whsec_test_secret_for_the_suite";
pub const GITHUB_SECRET: &str = "It's a Secret to Everybody";

static SERVER: OnceLock<TempPostgres> = OnceLock::new();
static CITUS: OnceLock<Citus> = OnceLock::new();
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Whether this run puts every test database on a throwaway Citus cluster
/// (a coordinator and two workers; `WEBHOOK_TEST_CITUS=1`, as the `citus`
/// step of `.ci/run` sets it) instead of a single PostgreSQL.
pub fn on_citus() -> bool {
    std::env::var_os("WEBHOOK_TEST_CITUS").is_some_and(|v| v != "0" && !v.is_empty())
}

/// The cluster of a Citus run, started on first use.
pub fn citus() -> &'static Citus {
    CITUS.get_or_init(|| Citus::start(2).expect("start a throwaway Citus cluster (../shared/citus/install.sh)"))
}

/// The server every test of this binary shares: `DATABASE_URL`'s, the
/// coordinator of a Citus run, or a throwaway one started on first use.
pub fn admin_config() -> tokio_postgres::Config {
    let url = match std::env::var("DATABASE_URL") {
        Ok(url) => url,
        Err(_) if on_citus() => citus().url("postgres"),
        Err(_) => SERVER.get_or_init(|| TempPostgres::start().expect("start a throwaway PostgreSQL")).url("postgres"),
    };
    url.parse().expect("DATABASE_URL is a valid PostgreSQL URL")
}

/// The business table the tests' handlers write their effects to.
pub const EFFECTS_TABLE: &str = "CREATE TABLE effects (id bigserial PRIMARY KEY, provider text, scope text NOT NULL,
                                   event_key text NOT NULL, event_type text, body bytea,
                                   created_at timestamptz NOT NULL DEFAULT now())";

/// Whether this run's stores use the sqlx driver (`WEBHOOK_TEST_DRIVER=sqlx`,
/// with the `sqlx` feature, as `.ci/run`'s sqlx step sets it) instead of
/// tokio-postgres: every `StoreConfig` built from a [`TestPool`] is then on
/// an `sqlx::PgPool` of the same database and size, and the handlers'
/// statements ([`TxDb`]) go through `WebhookTx::sqlx`.
pub fn on_sqlx() -> bool {
    cfg!(feature = "sqlx") && std::env::var("WEBHOOK_TEST_DRIVER").is_ok_and(|d| d == "sqlx")
}

/// In an sqlx run, says why the calling test does not apply there (on
/// stderr) and returns true: for tests of what only the tokio-postgres
/// driver has (its `TxClient`, its cancel requests, deadpool's pool).
pub fn tokio_postgres_only(why: &str) -> bool {
    if on_sqlx() {
        eprintln!("not run on sqlx: {why}");
    }
    on_sqlx()
}

/// A pool of the suite on one database: deadpool, for the test's own
/// statements (`.get()`, through `Deref`), and, turned into a store
/// (`StoreConfig::from`, or any `impl Into<StoreConfig>`), a pool of this
/// run's driver ([`on_sqlx`]) on the same database with the same size.
///
/// Clones share one pool of each driver, as deadpool's clones do: in an sqlx
/// run every store built from a `TestPool` (or its clones) is on one
/// `PgPool`, which [`hold`](Self::hold) takes connections from.
#[derive(Clone)]
pub struct TestPool {
    deadpool: Pool,
    config: tokio_postgres::Config,
    max_size: usize,
    #[cfg(feature = "sqlx")]
    sqlx: std::sync::Arc<std::sync::OnceLock<webhook_idempotency::sqlx::sqlx::PgPool>>,
}

impl TestPool {
    /// The deadpool pool itself (a store built from it is tokio-postgres's
    /// whatever the run).
    pub fn deadpool(&self) -> Pool {
        self.deadpool.clone()
    }

    /// The sqlx pool a store built from this pool uses in an sqlx run
    /// (made at the first call, inside a Tokio runtime).
    #[cfg(feature = "sqlx")]
    pub fn sqlx(&self) -> webhook_idempotency::sqlx::sqlx::PgPool {
        self.sqlx.get_or_init(|| sqlx_pool(&self.config, self.max_size)).clone()
    }

    /// The connections open in the pool the run's stores use (idle or in
    /// use): deadpool's `status().size`, or sqlx's `size()`.
    pub fn size(&self) -> usize {
        #[cfg(feature = "sqlx")]
        if on_sqlx() {
            return self.sqlx().size() as usize;
        }
        self.deadpool.status().size
    }

    /// Waits until every connection of the run's pool is back in it: sqlx
    /// returns a connection from a task of its own, after a ping (sqlx 0.9.1,
    /// `PoolConnection::return_to_pool`), so a request's last round trip can
    /// come after its answer; deadpool's return is immediate. At most 5 s.
    pub async fn settled(&self) {
        #[cfg(feature = "sqlx")]
        if on_sqlx() {
            let pool = self.sqlx();
            let idle = || pool.num_idle() == pool.size() as usize;
            assert!(eventually(Duration::from_secs(5), || async { idle() }).await, "the sqlx pool settles");
        }
    }

    /// A connection checked out of the pool the run's stores use
    /// ([`on_sqlx`]: sqlx's, else deadpool's), held until dropped: what a
    /// test holds to exhaust or starve a store's pool.
    pub async fn hold(&self) -> Held {
        #[cfg(feature = "sqlx")]
        if on_sqlx() {
            return Held::Sqlx(self.sqlx().acquire().await.expect("an sqlx connection"));
        }
        Held::Postgres(self.deadpool.get().await.expect("a deadpool connection"))
    }
}

/// A connection of the run's driver checked out of a [`TestPool`].
pub enum Held {
    Postgres(deadpool_postgres::Object),
    #[cfg(feature = "sqlx")]
    Sqlx(webhook_idempotency::sqlx::sqlx::pool::PoolConnection<webhook_idempotency::sqlx::sqlx::Postgres>),
}

impl Held {
    /// The server process of this connection (`pg_backend_pid()`).
    pub async fn backend_pid(&mut self) -> i32 {
        match self {
            Self::Postgres(c) => c.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0),
            #[cfg(feature = "sqlx")]
            Self::Sqlx(c) => webhook_idempotency::sqlx::sqlx::query_scalar("SELECT pg_backend_pid()")
                .fetch_one(&mut **c)
                .await
                .unwrap(),
        }
    }

    /// Runs `sql` (statements without parameters) on this connection.
    pub async fn batch(&mut self, sql: &str) {
        match self {
            Self::Postgres(c) => c.batch_execute(sql).await.unwrap(),
            #[cfg(feature = "sqlx")]
            Self::Sqlx(c) => {
                use webhook_idempotency::sqlx::sqlx;
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(&mut **c).await.map(drop).unwrap();
            }
        }
    }

    /// The one `text` value `sql` returns on this connection.
    pub async fn text(&mut self, sql: &str) -> String {
        match self {
            Self::Postgres(c) => c.query_one(sql, &[]).await.unwrap().get(0),
            #[cfg(feature = "sqlx")]
            Self::Sqlx(c) => {
                use webhook_idempotency::sqlx::sqlx;
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned())).fetch_one(&mut **c).await.unwrap()
            }
        }
    }
}

impl std::ops::Deref for TestPool {
    type Target = Pool;

    fn deref(&self) -> &Pool {
        &self.deadpool
    }
}

impl From<TestPool> for StoreConfig {
    fn from(pool: TestPool) -> Self {
        // sqlx's pool needs a Tokio runtime even to be built lazily: a store
        // built outside one (a plain #[test] of the builder) stays deadpool's.
        #[cfg(feature = "sqlx")]
        if on_sqlx() && tokio::runtime::Handle::try_current().is_ok() {
            return StoreConfig::from_sqlx(pool.sqlx());
        }
        StoreConfig::from(pool.deadpool)
    }
}

/// An sqlx pool of `max_size` with the settings of `config` (host, port,
/// user, password, database, application name and `-c name=value`
/// options), connecting lazily.
#[cfg(feature = "sqlx")]
pub fn sqlx_pool(config: &tokio_postgres::Config, max_size: usize) -> webhook_idempotency::sqlx::sqlx::PgPool {
    use webhook_idempotency::sqlx::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
    let mut options = PgConnectOptions::new_without_pgpass();
    if let Some(tokio_postgres::config::Host::Tcp(host)) = config.get_hosts().first() {
        options = options.host(host);
    }
    if let Some(port) = config.get_ports().first() {
        options = options.port(*port);
    }
    if let Some(user) = config.get_user() {
        options = options.username(user);
    }
    if let Some(password) = config.get_password() {
        options = options.password(std::str::from_utf8(password).expect("a UTF-8 password"));
    }
    if let Some(db) = config.get_dbname() {
        options = options.database(db);
    }
    if let Some(name) = config.get_application_name() {
        options = options.application_name(name);
    }
    if let Some(settings) = config.get_options() {
        let pairs: Vec<(String, String)> = settings
            .split_whitespace()
            .filter(|w| *w != "-c")
            .filter_map(|w| w.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
            .collect();
        options = options.options(pairs);
    }
    // As README's "Using sqlx" recommends: no ping before each checkout (the
    // crate discards a connection whose step failed or timed out, and claims
    // again on a fresh one), so a silently dead connection costs one step
    // deadline, not the pool timeout.
    let mut pool =
        PgPoolOptions::new().max_connections(u32::try_from(max_size).expect("a pool size")).test_before_acquire(false);
    if let Some(timeout) = config.get_connect_timeout() {
        pool = pool.acquire_timeout(*timeout);
    }
    pool.connect_lazy_with(options)
}

pub fn pool(config: tokio_postgres::Config, max_size: usize) -> TestPool {
    let manager =
        Manager::from_config(config.clone(), NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    let deadpool = Pool::builder(manager).max_size(max_size).build().expect("pool config");
    TestPool {
        deadpool,
        config,
        max_size,
        #[cfg(feature = "sqlx")]
        sqlx: std::sync::Arc::default(),
    }
}

/// A database of its own for one test, migrated, with an `effects` table
/// (deliberately without a unique key: a duplicate effect shows as a row;
/// `provider` and `event_type` are optional, written by the store API test).
pub struct TestDb {
    pub name: String,
    pub config: tokio_postgres::Config,
    pub pool: TestPool,
}

impl TestDb {
    pub async fn new() -> Self {
        Self::on(admin_config()).await
    }

    /// A fresh database on the server `admin` points at.
    pub async fn on(admin: tokio_postgres::Config) -> Self {
        let name = format!("t_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        let on_the_cluster = on_citus()
            && std::env::var_os("DATABASE_URL").is_none()
            && admin.get_ports().first() == Some(&citus().coordinator.port());
        if on_the_cluster {
            // The database on every node, with the extension and the nodes
            // registered; 4 shards (2 per worker) keep each test's schema quick.
            let create = name.clone();
            tokio::task::spawn_blocking(move || citus().create_database(&create, Some(4)))
                .await
                .unwrap()
                .expect("create the test database on the Citus cluster");
        } else {
            let (client, conn) = admin.connect(NoTls).await.expect("connect to the admin database");
            tokio::spawn(conn);
            client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create test database");
        }
        let mut config = admin.clone();
        config.dbname(&name);
        let pool = pool(config.clone(), 64);
        webhook_idempotency::migrate(&StoreConfig::from(pool.clone())).await.expect("migrate");
        pool.get().await.unwrap().batch_execute(EFFECTS_TABLE).await.unwrap();
        if on_the_cluster {
            // Colocated with the crate's tables (OPERATIONS.md, "Distributed
            // PostgreSQL"): `scope` in its key, distributed by it.
            pool.get()
                .await
                .unwrap()
                .batch_execute("ALTER TABLE effects DROP CONSTRAINT effects_pkey, ADD PRIMARY KEY (scope, id)")
                .await
                .unwrap();
            let store = StoreConfig::from(pool.clone());
            let colocated = webhook_idempotency::store::colocate(&store, "effects", "scope").await;
            assert!(colocated.expect("colocate the effects table"));
        }
        Self { name, config, pool }
    }

    /// A new pool of `max_size` on this database.
    pub fn pool(&self, max_size: usize) -> TestPool {
        pool(self.config.clone(), max_size)
    }

    /// Runs `sql` (one or more statements) on this database.
    pub async fn execute(&self, sql: &str) {
        self.pool.get().await.unwrap().batch_execute(sql).await.unwrap();
    }

    /// Creates a trigger on one of the crate's tables (`function`, then
    /// `trigger`, one statement each), on one PostgreSQL as on Citus. On
    /// Citus, a trigger on a distributed table runs on the shard, on the
    /// worker holding it: both run with `citus.enable_unsafe_triggers` (Citus
    /// then creates the function and the trigger on every shard), and
    /// `node_local` first on every worker (an object Citus does not
    /// propagate, such as a sequence the function reads, created where the
    /// function runs; `None`: nothing).
    pub async fn create_trigger(&self, node_local: Option<&str>, function: &str, trigger: &str) {
        let c = self.pool.get().await.unwrap();
        if on_citus() {
            if let Some(sql) = node_local {
                let answers = c.query("SELECT success, result FROM run_command_on_workers($1)", &[&sql]).await;
                for row in answers.unwrap() {
                    assert!(row.get::<_, bool>(0), "on a worker: {sql}: {}", row.get::<_, String>(1));
                }
            }
            c.batch_execute("SET citus.enable_unsafe_triggers TO on").await.unwrap();
        } else if let Some(sql) = node_local {
            c.batch_execute(sql).await.unwrap();
        }
        // One statement per message: Citus forwards DDL text to the workers,
        // which refuse several commands in one.
        c.batch_execute(function).await.unwrap();
        c.batch_execute(trigger).await.unwrap();
        if on_citus() {
            c.batch_execute("RESET citus.enable_unsafe_triggers").await.unwrap();
        }
    }

    /// A session of its own on the node that runs `scope`'s statements: this
    /// database on one PostgreSQL; on Citus, the worker holding `scope`'s
    /// shard (where a claim's advisory lock and row locks are taken).
    pub async fn session_for_scope(&self, scope: &str) -> tokio_postgres::Client {
        let mut config = self.config.clone();
        if on_citus() {
            let c = self.pool.get().await.unwrap();
            let port: i32 = c
                .query_one(
                    "SELECT nodeport FROM citus_shards WHERE shardid = get_shard_id_for_distribution_column(
                         'webhook_idempotency.webhook_events', $1::text)",
                    &[&scope],
                )
                .await
                .unwrap()
                .get(0);
            config = format!("postgresql://postgres@127.0.0.1:{port}/{}", self.name).parse().unwrap();
        }
        let (client, conn) = config.connect(NoTls).await.unwrap();
        tokio::spawn(conn);
        client
    }

    /// The table holding `scope`'s rows of the crate's `table`, as
    /// [`session_for_scope`](Self::session_for_scope)'s node names it:
    /// `webhook_idempotency.<table>`, or on Citus its shard for `scope`.
    pub async fn table_for_scope(&self, table: &str, scope: &str) -> String {
        let table = format!("webhook_idempotency.{table}");
        if !on_citus() {
            return table;
        }
        let c = self.pool.get().await.unwrap();
        c.query_one(
            "SELECT shard_name($1::text::regclass, get_shard_id_for_distribution_column($1::text::regclass, $2::text))",
            &[&table, &scope],
        )
        .await
        .unwrap()
        .get(0)
    }

    /// This database's URL (for a child process).
    pub fn url(&self) -> String {
        let host = match self.config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            _ => "127.0.0.1".into(),
        };
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        format!("postgresql://{}@{host}:{port}/{}", self.config.get_user().unwrap_or("postgres"), self.name)
    }

    /// A pool of one whose session the [`Killer`] never kills: the test's
    /// own view of the database.
    pub fn observer(&self) -> TestPool {
        let mut config = self.config.clone();
        config.application_name("observer");
        pool(config, 1)
    }

    pub async fn effects(&self) -> i64 {
        self.scalar("SELECT count(*) FROM effects").await
    }

    pub async fn effects_for(&self, key: &str) -> i64 {
        let c = self.pool.get().await.unwrap();
        c.query_one("SELECT count(*) FROM effects WHERE event_key = $1", &[&key]).await.unwrap().get(0)
    }

    pub async fn events(&self) -> i64 {
        self.scalar("SELECT count(*) FROM webhook_idempotency.webhook_events").await
    }

    /// `(state, attempts, response_status)` of an event's row.
    pub async fn event_row(&self, key: &str) -> Option<(String, i32, Option<i16>)> {
        let c = self.pool.get().await.unwrap();
        c.query_opt(
            "SELECT state, attempts, response_status FROM webhook_idempotency.webhook_events WHERE event_key = $1",
            &[&key],
        )
        .await
        .unwrap()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
    }

    pub async fn scalar(&self, sql: &str) -> i64 {
        let c = self.pool.get().await.unwrap();
        c.query_one(sql, &[]).await.unwrap().get(0)
    }

    pub async fn scalar_text(&self, sql: &str) -> String {
        let c = self.pool.get().await.unwrap();
        c.query_one(sql, &[]).await.unwrap().get(0)
    }

    pub async fn scalar_f64(&self, sql: &str) -> f64 {
        let c = self.pool.get().await.unwrap();
        c.query_one(sql, &[]).await.unwrap().get(0)
    }

    /// Backends of this database in state `idle in transaction`.
    pub async fn idle_in_transaction(&self) -> i64 {
        let (client, conn) = admin_config().connect(NoTls).await.unwrap();
        tokio::spawn(conn);
        client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND state LIKE 'idle in transaction%'",
                &[&self.name],
            )
            .await
            .unwrap()
            .get(0)
    }
}

/// A statement parameter of [`TxDb`], whatever the driver.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    Text(&'a str),
    OptText(Option<&'a str>),
    Bytes(&'a [u8]),
    I32(i32),
    I64(i64),
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Self::Text(v)
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(v: &'a String) -> Self {
        Self::Text(v)
    }
}

impl<'a> From<Option<&'a str>> for Value<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Self::OptText(v)
    }
}

impl<'a> From<&'a [u8]> for Value<'a> {
    fn from(v: &'a [u8]) -> Self {
        Self::Bytes(v)
    }
}

impl From<i32> for Value<'_> {
    fn from(v: i32) -> Self {
        Self::I32(v)
    }
}

impl From<i64> for Value<'_> {
    fn from(v: i64) -> Self {
        Self::I64(v)
    }
}

/// A handler statement's failure, whatever the driver.
#[derive(Debug)]
pub struct SqlError {
    /// The server's SQLSTATE, when the server answered.
    pub code: Option<String>,
    pub message: String,
}

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({:?})", self.message, self.code)
    }
}

impl From<tokio_postgres::Error> for SqlError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self { code: e.code().map(|c| c.code().to_owned()), message: e.to_string() }
    }
}

#[cfg(feature = "sqlx")]
impl From<webhook_idempotency::sqlx::sqlx::Error> for SqlError {
    fn from(e: webhook_idempotency::sqlx::sqlx::Error) -> Self {
        let code = e.as_database_error().and_then(|d| d.code()).map(|c| c.into_owned());
        Self { code, message: e.to_string() }
    }
}

/// The handler's borrowed connection through this run's driver
/// ([`on_sqlx`]): tokio-postgres's `TxClient`, or sqlx's `SqlxTx`. The
/// suite's handlers write through it, so every test of a handler runs on
/// both drivers.
pub enum TxDb {
    Postgres(webhook_idempotency::postgres::TxClient),
    #[cfg(feature = "sqlx")]
    Sqlx(webhook_idempotency::sqlx::SqlxTx),
}

impl TxDb {
    /// Borrows `tx`'s connection.
    ///
    /// # Errors
    /// The transaction ended.
    /// The transaction's own driver decides (a test may build a store from
    /// a deadpool pool of its own in an sqlx run).
    pub async fn of(tx: &WebhookTx) -> Result<Self, webhook_idempotency::TxError> {
        use webhook_idempotency::TxErrorKind::OtherDriver;
        #[cfg(feature = "sqlx")]
        match tx.sqlx().await {
            Ok(sqlx) => return Ok(Self::Sqlx(sqlx)),
            Err(e) if e.kind() != OtherDriver => return Err(e),
            Err(_) => {}
        }
        tx.client().await.map(Self::Postgres)
    }

    /// Runs `sql` with `params`; the rows it changed.
    pub async fn execute(&mut self, sql: &str, params: &[Value<'_>]) -> Result<u64, SqlError> {
        match self {
            Self::Postgres(c) => {
                let params = postgres_params(params);
                let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                    params.iter().map(|p| &**p as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
                Ok(c.execute(sql, &refs).await?)
            }
            #[cfg(feature = "sqlx")]
            Self::Sqlx(tx) => Ok(sqlx_query(sql, params).execute(&mut *tx).await?.rows_affected()),
        }
    }

    /// Runs `sql` with `params`: the first column of its one row, as an
    /// `i32`, `i64`, `bool` or `String` (`T`).
    pub async fn scalar<T: Scalar>(&mut self, sql: &str, params: &[Value<'_>]) -> Result<T, SqlError> {
        match self {
            Self::Postgres(c) => {
                let params = postgres_params(params);
                let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                    params.iter().map(|p| &**p as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
                Ok(T::from_postgres(&c.query_one(sql, &refs).await?))
            }
            #[cfg(feature = "sqlx")]
            Self::Sqlx(tx) => Ok(T::from_sqlx(&sqlx_query(sql, params).fetch_one(&mut *tx).await?)),
        }
    }

    /// Runs `sql` as a simple query through the driver's raw connection,
    /// around the crate's watch of the handler's statements
    /// (`TxClient::raw`, `SqlxTx::raw`).
    pub async fn raw_batch(&mut self, sql: &str) -> Result<(), SqlError> {
        match self {
            Self::Postgres(c) => Ok(c.raw().batch_execute(sql).await?),
            #[cfg(feature = "sqlx")]
            Self::Sqlx(tx) => {
                use webhook_idempotency::sqlx::sqlx;
                Ok(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(tx.raw()).await.map(drop)?)
            }
        }
    }

    /// Runs `sql` (statements without parameters) as a simple query.
    pub async fn batch(&mut self, sql: &str) -> Result<(), SqlError> {
        match self {
            Self::Postgres(c) => Ok(c.batch_execute(sql).await?),
            #[cfg(feature = "sqlx")]
            Self::Sqlx(tx) => {
                use webhook_idempotency::sqlx::sqlx;
                Ok(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(&mut *tx).await.map(drop)?)
            }
        }
    }
}

/// A column type [`TxDb::scalar`] reads.
pub trait Scalar: Sized {
    fn from_postgres(row: &tokio_postgres::Row) -> Self;
    #[cfg(feature = "sqlx")]
    fn from_sqlx(row: &webhook_idempotency::sqlx::sqlx::postgres::PgRow) -> Self;
}

macro_rules! scalar {
    ($($ty:ty),*) => {$(
        impl Scalar for $ty {
            fn from_postgres(row: &tokio_postgres::Row) -> Self {
                row.get(0)
            }
            #[cfg(feature = "sqlx")]
            fn from_sqlx(row: &webhook_idempotency::sqlx::sqlx::postgres::PgRow) -> Self {
                webhook_idempotency::sqlx::sqlx::Row::get(row, 0)
            }
        }
    )*};
}
scalar!(i32, i64, bool, String);

fn postgres_params<'a>(params: &[Value<'a>]) -> Vec<Box<dyn tokio_postgres::types::ToSql + Sync + Send + 'a>> {
    params
        .iter()
        .map(|p| -> Box<dyn tokio_postgres::types::ToSql + Sync + Send + 'a> {
            match *p {
                Value::Text(v) => Box::new(v),
                Value::OptText(v) => Box::new(v),
                Value::Bytes(v) => Box::new(v),
                Value::I32(v) => Box::new(v),
                Value::I64(v) => Box::new(v),
            }
        })
        .collect()
}

#[cfg(feature = "sqlx")]
fn sqlx_query<'q>(
    sql: &str,
    params: &[Value<'q>],
) -> webhook_idempotency::sqlx::sqlx::query::Query<
    'q,
    webhook_idempotency::sqlx::sqlx::Postgres,
    webhook_idempotency::sqlx::sqlx::postgres::PgArguments,
> {
    use webhook_idempotency::sqlx::sqlx;
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()));
    for p in params {
        query = match *p {
            Value::Text(v) => query.bind(v),
            Value::OptText(v) => query.bind(v),
            Value::Bytes(v) => query.bind(v),
            Value::I32(v) => query.bind(v),
            Value::I64(v) => query.bind(v),
        };
    }
    query
}

/// The business effect the tests count: one `effects` row (scope, event key,
/// raw body) written through the claim's transaction, by this run's driver.
pub async fn insert_effect(tx: &WebhookTx, event: &WebhookEvent) -> Result<(), SqlError> {
    let mut db = TxDb::of(tx).await.expect("transaction open during the handler");
    db.execute(
        "INSERT INTO effects (scope, event_key, body) VALUES ($1, $2, $3)",
        &[event.scope().into(), event.key().into(), event.body().as_ref().into()],
    )
    .await
    .map(drop)
}

/// A handler applying [`insert_effect`]: 200, or 500 when the write fails.
pub async fn apply_effect(tx: WebhookTx, event: WebhookEvent) -> http::StatusCode {
    match insert_effect(&tx, &event).await {
        Ok(()) => http::StatusCode::OK,
        Err(_) => http::StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Polls `probe` until it returns true or `limit` passes. For state only
/// the server can report (a backend going away), where no barrier exists.
pub async fn eventually<F, Fut>(limit: Duration, mut probe: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if probe().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

pub fn stripe_body(event_id: &str) -> Vec<u8> {
    format!(
        "{{\n  \"id\": \"{event_id}\",\n  \"object\": \"event\",\n  \"type\": \"payment_intent.succeeded\",\n  \"data\": {{\"object\": {{\"id\": \"pi_1\", \"amount\": 2000}}}}\n}}\n"
    )
    .into_bytes()
}

/// A Stripe delivery signed now with [`STRIPE_SECRET`].
pub fn stripe_request(body: impl Into<Bytes>) -> Request<Body> {
    stripe_request_at(body, unix_now(), STRIPE_SECRET)
}

pub fn stripe_request_at(body: impl Into<Bytes>, ts: u64, secret: &str) -> Request<Body> {
    let body = body.into();
    Request::post("/webhooks/stripe")
        .header("content-type", "application/json; charset=utf-8")
        .header("stripe-signature", stripe::FACTS.sign(&SigningSecret::from(secret), ts, &body))
        .body(Body::from(body))
        .unwrap()
}

pub fn github_request(delivery: &str, body: impl Into<Bytes>) -> Request<Body> {
    let body = body.into();
    Request::post("/webhooks/github")
        .header("content-type", "application/json")
        .header("x-github-event", "push")
        .header("x-github-delivery", delivery)
        .header("x-hub-signature-256", github::FACTS.sign(&SigningSecret::from(GITHUB_SECRET), 0, &body))
        .body(Body::from(body))
        .unwrap()
}

/// The Stripe layer of the suite on `store` (a pool, or a `StoreConfig`).
pub fn stripe_layer(store: impl Into<StoreConfig>) -> WebhookLayerBuilder {
    WebhookLayer::builder(store, Provider::stripe()).scope("acct_test").secret(STRIPE_SECRET)
}

pub fn github_layer(store: impl Into<StoreConfig>) -> WebhookLayerBuilder {
    WebhookLayer::builder(store, Provider::github()).scope("org_test").secret(GITHUB_SECRET)
}

/// Serves `router` on a free loopback port.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// Sets `subscriber` as the current thread's default until the guard drops,
/// as `tracing::subscriber::set_default`, such that it sees every event of
/// its thread, whatever other test threads of this process did first.
///
/// Each callsite caches whether a subscriber wants it. While a single
/// subscriber exists, tracing decides that with the subscriber of the thread
/// that hits the callsite first: a test thread without one (the soak's
/// workers, in this one test process) would cache "never", and a capture on
/// another thread would miss those lines. A second subscriber, alive for the
/// whole process and wanting nothing, makes tracing ask every live subscriber
/// instead.
pub fn set_default_subscriber(
    subscriber: impl tracing::Subscriber + Send + Sync + 'static,
) -> tracing::subscriber::DefaultGuard {
    static ASK_EVERY_SUBSCRIBER: OnceLock<tracing::Dispatch> = OnceLock::new();
    ASK_EVERY_SUBSCRIBER.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
    tracing::subscriber::set_default(subscriber)
}

/// Log lines captured from `tracing` for the current thread (a
/// `#[tokio::test]` runtime runs the layer on the test's thread), in the
/// plain `fmt` format without colours.
#[derive(Clone, Default)]
pub struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Logs {
    /// Captures DEBUG and above until the returned guard drops.
    pub fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(logs.clone())
            .finish();
        let guard = set_default_subscriber(subscriber);
        (logs.clone(), guard)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The captured lines that contain every one of `needles`.
    pub fn lines_with(&self, needles: &[&str]) -> Vec<String> {
        self.text().lines().filter(|l| needles.iter().all(|n| l.contains(n))).map(str::to_owned).collect()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// A TCP proxy on loopback in front of PostgreSQL (or anything on
/// `127.0.0.1:target`), for network faults on the flows it carries:
/// [`sever`](Self::sever) closes every open flow that still forwards (the app
/// sees its connections closed), [`blackhole`](Self::blackhole) makes every
/// open flow stop forwarding bytes in both directions without closing (no
/// FIN, no RST), as a NAT or firewall that dropped its mapping does: a
/// silenced flow stays silent, a later `sever` does not close it. Flows
/// opened afterwards work, unless [`stall_new`](Self::stall_new) holds them:
/// a flow opened while it is on is accepted and never answered (a session
/// whose connect never completes). Dropping the proxy closes every flow.
/// [`start_throttled`](Self::start_throttled) also limits the bytes per
/// second the server's replies get, across all flows (one slow link).
pub struct Proxy {
    pub port: u16,
    generation: tokio::sync::watch::Sender<u64>,
    /// Whether a flow opened now is held silent from its first byte.
    stalled: tokio::sync::watch::Sender<bool>,
    /// Each flow's task and the generation it was opened in.
    flows: std::sync::Arc<std::sync::Mutex<Vec<(tokio::task::JoinHandle<()>, u64)>>>,
    acceptor: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: u16) -> Self {
        Self::start_with(target, None).await
    }

    /// A proxy whose flows share one link carrying `bytes_per_second` from
    /// the server to the clients (the other way is not limited).
    pub async fn start_throttled(target: u16, bytes_per_second: u64) -> Self {
        Self::start_with(target, Some(std::sync::Arc::new(Throttle::new(bytes_per_second)))).await
    }

    async fn start_with(target: u16, throttle: Option<std::sync::Arc<Throttle>>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (generation, _) = tokio::sync::watch::channel(0u64);
        let flows: std::sync::Arc<std::sync::Mutex<Vec<(tokio::task::JoinHandle<()>, u64)>>> = Default::default();
        let (stalled, _) = tokio::sync::watch::channel(false);
        let (gen, registry, stall) = (generation.clone(), flows.clone(), stalled.clone());
        let acceptor = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if *stall.borrow() {
                    let held = tokio::spawn(async move {
                        let _open = inbound;
                        std::future::pending::<()>().await
                    });
                    registry.lock().unwrap().push((held, u64::MAX));
                    continue;
                }
                let mut frozen = gen.subscribe();
                let born = *frozen.borrow();
                let throttle = throttle.clone();
                let flow = tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else { return };
                    let freeze = async move {
                        let _ = frozen.wait_for(|g| *g > born).await;
                    };
                    let forward = async {
                        match &throttle {
                            None => drop(tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await),
                            Some(throttle) => {
                                let (mut from_client, mut to_client) = inbound.split();
                                let (mut from_server, mut to_server) = outbound.split();
                                tokio::select! {
                                    _ = tokio::io::copy(&mut from_client, &mut to_server) => {}
                                    _ = throttle.copy(&mut from_server, &mut to_client) => {}
                                }
                            }
                        }
                    };
                    tokio::select! {
                        () = forward => {}
                        // Both sockets stay open and silent until the proxy drops.
                        () = freeze => std::future::pending::<()>().await,
                    }
                });
                let mut list = registry.lock().unwrap();
                list.retain(|(t, _)| !t.is_finished());
                list.push((flow, born));
            }
        });
        Self { port, generation, stalled, flows, acceptor }
    }

    /// While `on`, every flow opened is accepted and never answered (nor
    /// closed until the proxy drops); flows open already are not touched.
    pub fn stall_new(&self, on: bool) {
        self.stalled.send_replace(on);
    }

    /// Closes every open flow that still forwards; returns how many.
    pub fn sever(&self) -> usize {
        let now = *self.generation.borrow();
        let mut list = self.flows.lock().unwrap();
        let mut severed = 0;
        list.retain(|(t, born)| {
            if *born == now && !t.is_finished() {
                t.abort();
                severed += 1;
                false
            } else {
                !t.is_finished()
            }
        });
        severed
    }

    /// Silences every flow open now; returns how many were forwarding.
    pub fn blackhole(&self) -> usize {
        let now = *self.generation.borrow();
        let silenced = self.flows.lock().unwrap().iter().filter(|(t, born)| *born == now && !t.is_finished()).count();
        self.generation.send_modify(|g| *g += 1);
        silenced
    }
}

/// One link's bandwidth, shared by the flows that use it: each chunk takes
/// its turn on the link (a schedule of send times, one chunk per flow ahead
/// at most, so flows share it about evenly).
pub struct Throttle {
    bytes_per_second: f64,
    next: tokio::sync::Mutex<tokio::time::Instant>,
}

impl Throttle {
    pub fn new(bytes_per_second: u64) -> Self {
        Self { bytes_per_second: bytes_per_second as f64, next: tokio::sync::Mutex::new(tokio::time::Instant::now()) }
    }

    /// Waits for `n` bytes' turn on the link.
    async fn pass(&self, n: usize) {
        let sent = {
            let mut next = self.next.lock().await;
            let start = (*next).max(tokio::time::Instant::now());
            *next = start + Duration::from_secs_f64(n as f64 / self.bytes_per_second);
            *next
        };
        // The link's pace, not a synchronisation: the bytes leave when their turn ends.
        tokio::time::sleep_until(sent).await;
    }

    /// Copies `from` to `to` at the link's pace, 16 KiB at a time.
    async fn copy<R, W>(&self, from: &mut R, to: &mut W)
    where
        R: tokio::io::AsyncRead + Unpin,
        W: tokio::io::AsyncWrite + Unpin,
    {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            self.pass(n).await;
            if to.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        for (t, _) in self.flows.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

/// Kills one random client backend of a database (never the observer's) at
/// random intervals of `between` until dropped; counts the kills.
pub struct Killer {
    task: tokio::task::JoinHandle<()>,
    killed: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

impl Killer {
    pub fn start(db: &TestDb, between: std::ops::Range<u64>) -> Self {
        let killed = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
        let (pool, count) = (db.pool(1), std::sync::Arc::clone(&killed));
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(fastrand::u64(between.clone()))).await;
                let Ok(c) = pool.get().await else { continue };
                let sql = "SELECT count(pg_terminate_backend(pid)) FROM (
                               SELECT pid FROM pg_stat_activity
                                WHERE datname = current_database() AND pid <> pg_backend_pid()
                                  AND backend_type = 'client backend' AND application_name <> 'observer'
                                ORDER BY random() LIMIT 1) victim";
                let n = c.query_one(sql, &[]).await.map(|r| r.get::<_, i64>(0)).unwrap_or(0);
                count.fetch_add(n, Ordering::SeqCst);
            }
        });
        Self { task, killed }
    }

    /// Stops killing; the backends killed.
    pub fn stop(self) -> i64 {
        self.task.abort();
        self.killed.load(Ordering::SeqCst)
    }
}

/// This test binary again as a child process, running only the ignored
/// test `test` with `env` set to `value`, until its standard input closes
/// (drop the child).
pub fn child_test_process(test: &str, env: &str, value: &str) -> std::process::Child {
    child_test_process_with(test, &[(env, value)])
}

/// [`child_test_process`] with several variables of its environment set.
pub fn child_test_process_with(test: &str, env: &[(&str, &str)]) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--ignored", "--nocapture"])
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// The body of a child test process: waits until the parent closes its
/// standard input.
pub async fn until_stdin_closes() {
    let _ = tokio::task::spawn_blocking(|| std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new())).await;
}

/// A future that completes when its [`Tasks`] stop.
pub type Shutdown = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// `n` tasks (workers) each given a shutdown future; [`stop`](Self::stop)
/// completes them all and waits for their ends.
pub struct Tasks {
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Tasks {
    pub fn spawn<F, Fut>(n: usize, start: F) -> Self
    where
        F: Fn(Shutdown) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let tasks = (0..n)
            .map(|_| {
                let mut stopped = stopped.clone();
                tokio::spawn(start(Box::pin(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })))
            })
            .collect();
        Self { stop, tasks }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}
