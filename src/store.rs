//! The PostgreSQL store: every SQL statement of the crate, and the migration
//! helper.
//!
//! The schema ships as SQL files under `sql/` in the crate (readable, and
//! runnable with your own migration tool); [`MIGRATIONS`] holds the same
//! text. Tables live under a configurable schema, `webhook_idempotency` by
//! default.
//!
//! PostgreSQL behaviour the statements rely on (PostgreSQL docs, "INSERT",
//! section "ON CONFLICT Clause", and "Explicit Locking"):
//! - `INSERT ... ON CONFLICT DO NOTHING` on a key whose first insert is not
//!   yet committed waits for that transaction; in READ COMMITTED it then
//!   inserts (the other rolled back) or returns no row (it committed). The
//!   claim therefore runs in READ COMMITTED, whatever the server default.
//! - `lock_timeout` bounds that wait with SQLSTATE 55P03; the layer sets it
//!   to 1 ms and waits between attempts without holding a connection.
//! - A claim that finds a committed row writes nothing and takes no
//!   transaction id: duplicates cost no WAL.

use std::fmt;

use deadpool_postgres::Pool;

mod claim;
mod conn;
mod statements;

pub use claim::{
    Claim, ClaimError, ClaimErrorKind, ClaimStore, ClaimStoreBuilder, ClaimedEvent, CommitError, CommitErrorKind,
    ScopedEvent,
};
pub(crate) use conn::TxConn;
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

/// The shipped migrations, in order: `(version, SQL)`. The SQL names the
/// default schema; [`migrate_schema`] substitutes another.
pub const MIGRATIONS: &[(i32, &str)] = &[(1, include_str!("../sql/001_webhook_events.sql"))];

/// Key of the advisory lock serialising migrations across processes.
const MIGRATION_LOCK: i64 = 0x7765_6268_6f6f_6b31; // "webhook1"

/// A failed migration. The detail comes from PostgreSQL.
#[derive(Debug)]
pub struct MigrateError {
    detail: String,
}

impl fmt::Display for MigrateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "webhook-idempotency migration failed: {}", self.detail)
    }
}

impl std::error::Error for MigrateError {}

impl MigrateError {
    fn new(detail: impl fmt::Display) -> Self {
        Self { detail: detail.to_string() }
    }
}

/// Creates or updates the tables under [`DEFAULT_SCHEMA`].
///
/// Safe to run twice and from several processes at once: each run takes a
/// transaction-scoped advisory lock (`pg_advisory_xact_lock`), applies the
/// [`MIGRATIONS`] not yet recorded in `webhook_schema_migrations`, and commits.
///
/// # Errors
/// [`MigrateError`] when no connection can be had or a statement fails;
/// nothing is half-applied (each run is one transaction).
pub async fn migrate(pool: &Pool) -> Result<(), MigrateError> {
    migrate_schema(pool, DEFAULT_SCHEMA).await
}

/// [`migrate`] into the schema `schema` (a plain identifier: ASCII letters,
/// digits and `_`, not starting with a digit, at most 63 bytes).
///
/// # Errors
/// [`MigrateError`] for an invalid schema name, as well as [`migrate`]'s.
pub async fn migrate_schema(pool: &Pool, schema: &str) -> Result<(), MigrateError> {
    check_schema_name(schema).map_err(MigrateError::new)?;
    let mut client = pool.get().await.map_err(MigrateError::new)?;
    let tx = client.transaction().await.map_err(MigrateError::new)?;
    // `IF NOT EXISTS` on existing objects only raises NOTICEs: keep them quiet.
    tx.batch_execute("SET LOCAL client_min_messages = warning").await.map_err(MigrateError::new)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(MigrateError::new)?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.webhook_schema_migrations (
             version    integer     PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         );"
    ))
    .await
    .map_err(MigrateError::new)?;
    let applied: Vec<i32> = tx
        .query(&format!("SELECT version FROM {schema}.webhook_schema_migrations"), &[])
        .await
        .map_err(MigrateError::new)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for (version, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        tx.batch_execute(&sql.replace(DEFAULT_SCHEMA, schema)).await.map_err(MigrateError::new)?;
        tx.execute(&format!("INSERT INTO {schema}.webhook_schema_migrations (version) VALUES ($1)"), &[version])
            .await
            .map_err(MigrateError::new)?;
    }
    tx.commit().await.map_err(MigrateError::new)
}

/// Checks `schema` is a plain identifier, safe to splice into SQL.
pub(crate) fn check_schema_name(schema: &str) -> Result<(), String> {
    let ok = !schema.is_empty()
        && schema.len() <= 63
        && schema.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !schema.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err(format!("invalid schema name {schema:?}: use ASCII letters, digits and _"))
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
        for bad in ["", "1abc", "a-b", "a;drop", "a b", "\"q\"", &"a".repeat(64)] {
            assert!(check_schema_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shipped_sql_names_only_the_default_schema() {
        for (_, sql) in MIGRATIONS {
            assert!(sql.contains("webhook_idempotency.webhook_events"));
            assert!(!sql.to_lowercase().contains("public."));
        }
    }
}
