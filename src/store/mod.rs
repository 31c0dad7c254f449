//! The PostgreSQL store: every SQL statement of the crate, the driver seam
//! they run through, the one store configuration, and the migrations.
//!
//! The schema ships as SQL files under `sql/` in the crate (readable, and
//! runnable with your own migration tool); [`MIGRATIONS`] holds the same
//! text. Tables live under a configurable schema, `webhook_idempotency` by
//! default.
//!
//! PostgreSQL behaviour the statements rely on (PostgreSQL docs, "INSERT",
//! section "ON CONFLICT Clause", and "Explicit Locking", sections "Row-Level
//! Locks" and "Advisory Locks"):
//! - `INSERT ... ON CONFLICT` on a key whose first insert is not yet
//!   committed waits for that transaction; in READ COMMITTED it then
//!   inserts (the other rolled back) or finds the row (it committed). The
//!   claim therefore runs in READ COMMITTED by default, whatever the server
//!   default; [`IsolationLevel`] sets a stricter level, where that case is a
//!   serialization failure the claim retries.
//! - The claim never waits like that for another claim: it inserts only when
//!   `pg_try_advisory_xact_lock` takes the event's lock at once, and that
//!   lock is held until the claiming transaction ends. A claim that cannot
//!   take it returns no row; the layer checks again later without holding a
//!   connection.
//! - A lookup that finds a committed `done` row answers the duplicate outside
//!   any transaction: no transaction id, no WAL.
//!
//! The parts: [`StoreConfig`] (pool, schema, timeouts, pooler mode, shared by
//! every part); [`claim`] (the synchronous claim protocol, [`ClaimStore`](claim::ClaimStore));
//! [`inbox`] (accepting deliveries as `pending` rows) and `queue` (leasing
//! and ending rows for the workers, fenced by lease tokens); [`admin`]
//! (operator actions and the gauge sampler); [`retention`]; the migrations
//! ([`migrate`](crate::migrate), [`check_schema`]). Only `driver` talks to a database
//! driver (its module docs say how: one interface, one module per driver);
//! the rest is protocol and SQL text.
//! The handler's transaction ([`WebhookTx`](crate::WebhookTx) and what a
//! handler calls on it) is above the store, in one module of its own: it
//! runs the statements `outbox` (the enqueue), [`actions`] and the body-digest guard
//! build here.

pub mod actions;
pub mod admin;
pub(crate) mod citus;
pub mod claim;
pub(crate) mod config;
pub(crate) mod digest;
pub(crate) mod driver;
pub(crate) mod idempotency_key;
pub mod inbox;
pub(crate) mod migrate;
pub(crate) mod outbox;
pub(crate) mod queue;
pub mod retention;
mod statements;
#[cfg(test)]
pub(crate) mod testing;

// `StoreConfig` and `migrate` are public at the crate root only.
pub(crate) use config::StoreConfig;
pub use config::{DEFAULT_DATABASE_TIMEOUT, DEFAULT_POOL_TIMEOUT};
pub use driver::SynchronousReplication;
pub(crate) use migrate::report_unmigrated;
pub use migrate::{check_schema, colocate, MIGRATIONS, SCHEMA_VERSION};
pub(crate) use statements::Statements;

/// The isolation level of the claim's transaction (PostgreSQL docs,
/// "Transaction Isolation").
///
/// READ COMMITTED, the default, is what the claim is designed for: a
/// delivery that finds another delivery's claim waits, then sees it
/// committed (a duplicate) or rolled back (it claims). At REPEATABLE READ
/// and SERIALIZABLE, PostgreSQL answers that case with a serialization
/// failure (40001) instead; the claim then checks again in a new
/// transaction, which sees the committed claim (a duplicate). Choose a stricter level only when the handler's
/// own writes need it; its serialization failures are answered 503 +
/// `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum IsolationLevel {
    /// `READ COMMITTED` (the default).
    #[default]
    ReadCommitted,
    /// `REPEATABLE READ`.
    RepeatableRead,
    /// `SERIALIZABLE`.
    Serializable,
}

impl IsolationLevel {
    pub(crate) fn sql(self) -> &'static str {
        match self {
            Self::ReadCommitted => "READ COMMITTED",
            Self::RepeatableRead => "REPEATABLE READ",
            Self::Serializable => "SERIALIZABLE",
        }
    }
}

/// The default schema holding the tables.
pub const DEFAULT_SCHEMA: &str = "webhook_idempotency";

/// Runs `step` now and every `period` after until `shutdown` completes (a
/// step under way finishes first): the loop of the store's periodic tasks
/// (retention, the gauge sampler).
pub(crate) async fn every<F, Fut>(
    period: std::time::Duration,
    shutdown: impl std::future::Future<Output = ()>,
    mut step: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut shutdown = std::pin::pin!(shutdown);
    let mut ticks = tokio::time::interval(period);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = ticks.tick() => {}
        }
        step().await;
    }
}

/// Checks `schema` is a plain identifier, safe to splice into SQL.
pub(crate) fn check_schema_name(schema: &str) -> Result<(), String> {
    let ok = !schema.is_empty()
        && schema.len() <= 63
        && schema.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !schema.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err(format!("invalid schema name {schema:?}: use lower-case ASCII letters, digits and _"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names() {
        for ok in ["webhook_idempotency", "w", "_x1"] {
            assert!(check_schema_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "1abc", "a-b", "a;drop", "a b", "\"q\"", "Tenant", &"a".repeat(64)] {
            assert!(check_schema_name(bad).is_err(), "{bad}");
        }
    }
}
