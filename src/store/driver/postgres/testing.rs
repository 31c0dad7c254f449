//! A database of its own for one unit test, with a pool of this driver on
//! it, on the throwaway PostgreSQL server the unit tests share
//! (`DATABASE_URL`'s server instead when set).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use webhook_test_support::TempPostgres;

static SERVER: OnceLock<TempPostgres> = OnceLock::new();
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A fresh database (not migrated) and a pool of `max_size` on it.
pub(crate) async fn fresh_pool(max_size: usize) -> Pool {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| {
        SERVER.get_or_init(|| TempPostgres::start().expect("start a throwaway PostgreSQL")).url("postgres")
    });
    let admin: tokio_postgres::Config = url.parse().expect("a PostgreSQL URL");
    let name = format!("u_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
    let (client, conn) = admin.connect(tokio_postgres::NoTls).await.expect("connect to the admin database");
    tokio::spawn(conn);
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create the test database");
    let mut config = admin;
    config.dbname(&name);
    let manager =
        Manager::from_config(config, tokio_postgres::NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    Pool::builder(manager).max_size(max_size).build().expect("pool config")
}

/// A pool that never connects (port 1): building a part makes no
/// connection.
pub(crate) fn unreachable_pool() -> Pool {
    let config: tokio_postgres::Config = "host=127.0.0.1 port=1 user=nobody".parse().expect("a valid config");
    Pool::builder(Manager::new(config, tokio_postgres::NoTls)).build().expect("pool config")
}
