//! A migrated database of its own for one unit test, on the throwaway
//! PostgreSQL server the unit tests share (`DATABASE_URL`'s server instead
//! when set), for the store's internals the integration tests cannot reach;
//! its pool is of the first compiled-in driver.

use super::driver::any::AnyPool;
use super::StoreConfig;

/// A fresh, migrated database and a store on it, with a pool of `max_size`.
pub(crate) async fn fresh(max_size: usize) -> StoreConfig {
    let store = StoreConfig::of_pool(AnyPool::fresh(max_size).await);
    super::migrate::migrate(&store).await.expect("migrate");
    store
}

/// One float from `sql` on `store`'s database.
pub(crate) async fn scalar_f64(store: &StoreConfig, sql: &str) -> f64 {
    let (db, _) = store.open().expect("a valid store");
    db.query("test", sql, &[]).await.expect("the test's statement")[0].get(0)
}

/// Runs `sql` (one statement, `params`) on `store`'s database, outside any
/// transaction.
pub(crate) async fn execute(
    store: &StoreConfig,
    sql: &str,
    params: &[super::driver::Param<'_>],
) -> Vec<super::driver::Row> {
    let (db, _) = store.open().expect("a valid store");
    db.query("test", sql, params).await.expect("the test's statement")
}
