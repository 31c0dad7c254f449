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

/// How long one claim attempt waits for the row lock of an in-flight
/// delivery of the same event, in milliseconds (PostgreSQL's `lock_timeout`,
/// whose smallest effective value is 1 ms; 0 would mean no limit). The layer
/// waits for an in-flight delivery between attempts, without a connection.
const CLAIM_LOCK_WAIT_MS: u32 = 1;

/// The statements the layer runs, with the schema spliced in once at build
/// time. Parameters are always `$1 scope, $2 provider, $3 event_key`.
#[derive(Debug)]
pub(crate) struct Statements {
    /// Simple-query batch: opens the claim transaction, reads the session's
    /// `lock_timeout` (one row), and bounds the wait for an in-flight claim.
    pub(crate) begin: String,
    /// `$1` the session's `lock_timeout`: restores it for the handler's own
    /// statements (`SET LOCAL ... TO DEFAULT` would reset it to the server's).
    pub(crate) restore_lock_timeout: &'static str,
    /// `$4 event_type` → `attempts, now()` when this delivery claimed the
    /// event; `now()` is the transaction's start time.
    pub(crate) claim: String,
    /// → `state, response_status` of a committed row.
    pub(crate) lookup: String,
    /// Re-claims an event whose last delivery failed. `$4 event_type` →
    /// `attempts, now()`.
    pub(crate) reclaim: String,
    /// `$4 response_status, $5 the claim's now()`: marks the claimed row
    /// done, only inside the claim's transaction (a handler that sent COMMIT
    /// or ROLLBACK itself is running in another one: 0 rows).
    pub(crate) done: String,
    /// Records a failed attempt after the rollback. `$4 event_type,
    /// $5 last_error, $6 response_status`.
    pub(crate) record_failure: String,
    /// Simple-query batch: transaction for [`Statements::record_failure`].
    pub(crate) begin_failure: &'static str,
    pub(crate) commit: &'static str,
    pub(crate) rollback: &'static str,
}

impl Statements {
    pub(crate) fn new(schema: &str, isolation: crate::layer::IsolationLevel) -> Self {
        let t = format!("{schema}.webhook_events");
        let pk = "scope = $1 AND provider = $2 AND event_key = $3";
        Self {
            begin: format!(
                "BEGIN ISOLATION LEVEL {}; SELECT current_setting('lock_timeout'); \
                 SET LOCAL lock_timeout = {CLAIM_LOCK_WAIT_MS}",
                isolation.sql(),
            ),
            restore_lock_timeout: "SELECT set_config('lock_timeout', $1, true)",
            claim: format!(
                "INSERT INTO {t} (scope, provider, event_key, event_type, state)
                 VALUES ($1, $2, $3, $4, 'running')
                 ON CONFLICT (scope, provider, event_key) DO NOTHING
                 RETURNING attempts, now()"
            ),
            lookup: format!("SELECT state, response_status FROM {t} WHERE {pk}"),
            reclaim: format!(
                "UPDATE {t} SET state = 'running', attempts = attempts + 1,
                        event_type = coalesce($4, event_type)
                 WHERE {pk} AND state = 'failed'
                 RETURNING attempts, now()"
            ),
            done: format!(
                "UPDATE {t} SET state = 'done', response_status = $4, completed_at = now()
                 WHERE {pk} AND state = 'running' AND now() = $5"
            ),
            record_failure: format!(
                "INSERT INTO {t} AS e (scope, provider, event_key, event_type, state, attempts,
                                      last_error, response_status, last_failed_at)
                 VALUES ($1, $2, $3, $4, 'failed', 1, $5, $6, now())
                 ON CONFLICT (scope, provider, event_key) DO UPDATE
                    -- A committed `running` row: a handler that ended the claim's
                    -- transaction itself; that run was counted at its claim.
                    SET state = 'failed',
                        attempts = e.attempts + CASE WHEN e.state = 'running' THEN 0 ELSE 1 END,
                        last_error = excluded.last_error,
                        response_status = excluded.response_status,
                        last_failed_at = excluded.last_failed_at
                  WHERE e.state IN ('failed', 'running')"
            ),
            begin_failure: "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = 1000",
            commit: "COMMIT",
            rollback: "ROLLBACK",
        }
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
