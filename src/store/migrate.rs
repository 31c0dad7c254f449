//! The shipped migrations and the schema check.

use super::citus;
use super::config::StoreConfig;
use super::driver::{code, Db, DbError, Param};
use super::{check_schema_name, DEFAULT_SCHEMA};
use crate::error::{StoreError, StoreErrorKind};

/// The shipped migrations, in order: `(version, SQL)`. The SQL names its
/// schema only as the quoted identifier `"webhook_idempotency"`, the
/// placeholder [`migrate`] replaces with the configured schema.
pub const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../../sql/001_webhook_events.sql")),
    (2, include_str!("../../sql/002_inbox.sql")),
    (3, include_str!("../../sql/003_operations.sql")),
    (4, include_str!("../../sql/004_hot_updates.sql")),
    (5, include_str!("../../sql/005_retention_index.sql")),
    (6, include_str!("../../sql/006_outbox.sql")),
    (7, include_str!("../../sql/007_budgets_and_tags.sql")),
    (8, include_str!("../../sql/008_body_digests.sql")),
    (9, include_str!("../../sql/009_idempotency_keys.sql")),
    (10, include_str!("../../sql/010_toast_target.sql")),
    (11, include_str!("../../sql/011_audit_role.sql")),
    (12, include_str!("../../sql/012_isolation_and_ordering.sql")),
    (13, include_str!("../../sql/013_distributed_time.sql")),
];

/// The newest migration version this crate's statements need.
pub const SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// Key of the advisory lock serialising migrations across processes.
const MIGRATION_LOCK: i64 = 0x7765_6268_6f6f_6b31; // "webhook1"

/// The placeholder the shipped SQL names its schema by: the quoted identifier
/// `"webhook_idempotency"`, and nothing else in the files is spelled so.
const SCHEMA_PLACEHOLDER: &str = "\"webhook_idempotency\"";

/// The database `store` names, for migrations and checks, and its checked
/// schema: no step deadline (a migration may take long).
///
/// # Errors
/// [`StoreErrorKind::InvalidSchemaName`] for a schema name that is not a
/// plain identifier.
fn open<'a>(store: &'a StoreConfig, step: &str) -> Result<(Db, &'a str), StoreError> {
    let invalid = |e: String| StoreError::new(StoreErrorKind::InvalidSchemaName, step, e);
    check_schema_name(store.schema_name()).map_err(invalid)?;
    let (db, schema) = store.open().map_err(|e| invalid(e.to_string()))?;
    Ok((db.without_deadline(), schema))
}

/// Creates or updates the tables under `store`'s schema
/// ([`DEFAULT_SCHEMA`] unless [`StoreConfig::schema`] says otherwise).
///
/// Safe to run twice and from several processes at once: each run takes a
/// transaction-scoped advisory lock (`pg_advisory_xact_lock`), applies the
/// [`MIGRATIONS`] not yet recorded in `webhook_schema_migrations`, and commits.
///
/// # Errors
/// [`StoreError`] for a schema name that is not a plain identifier
/// ([`InvalidSchemaName`](StoreErrorKind::InvalidSchemaName)), when no
/// connection can be had (kinds
/// [`Unavailable`](StoreErrorKind::Unavailable), naming the server,
/// [`Authentication`](StoreErrorKind::Authentication),
/// [`DatabaseMissing`](StoreErrorKind::DatabaseMissing),
/// [`PoolTimeout`](StoreErrorKind::PoolTimeout)) or when a statement fails
/// ([`Database`](StoreErrorKind::Database), with the server's message,
/// detail and hint); nothing is half-applied (each run is one transaction).
///
/// On a database with the `citus` extension installed (Citus, distributed
/// PostgreSQL), it also distributes the tenant tables by `scope`, colocated,
/// and makes the global ones reference tables, in the same transaction, each
/// only once: OPERATIONS.md, "Distributed PostgreSQL (Citus)".
pub async fn migrate(store: &StoreConfig) -> Result<(), StoreError> {
    let (db, schema) = open(store, "migrate")?;
    let conn = db.connect("connect").await?;
    let err = |step: &str| {
        let step = step.to_owned();
        let db = db.clone();
        move |e: DbError| db.error_verbose(&e, &step)
    };
    // `IF NOT EXISTS` on existing objects only raises NOTICEs: keep them quiet.
    let begin = "BEGIN; SET LOCAL client_min_messages = warning";
    let (tx, _) = conn
        .begin(begin, "SELECT pg_advisory_xact_lock($1)", &[Param::I64(MIGRATION_LOCK)])
        .await
        .map_err(err("migrate: advisory lock"))?;
    tx.batch(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.webhook_schema_migrations (
             version    integer     PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         );"
    ))
    .await
    .map_err(err(&format!("migrate: create schema {schema}")))?;
    let applied: Vec<i32> = tx
        .query(&format!("SELECT version FROM {schema}.webhook_schema_migrations"), &[])
        .await
        .map_err(err("migrate: read applied versions"))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let record = format!(
        "INSERT INTO {schema}.webhook_schema_migrations (version) VALUES ($1) ON CONFLICT (version) DO NOTHING"
    );
    let citus = citus::installed(&tx).await.map_err(err("migrate: look for the citus extension"))?;
    for (version, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        let step = format!("migrate: apply migration {version} to schema {schema}");
        let sql = with_schema(sql, schema);
        if citus {
            // One statement at a time: see `citus`.
            for statement in citus::statements(&sql) {
                tx.batch(statement).await.map_err(err(&step))?;
            }
        } else {
            tx.batch(&sql).await.map_err(err(&step))?;
        }
        // The shipped files record their own version; older ones did not.
        tx.query(&record, &[Param::I32(*version)]).await.map_err(err(&step))?;
    }
    if citus {
        citus::distribute(&tx, schema).await.map_err(err(&format!("migrate: distribute schema {schema} (Citus)")))?;
    }
    tx.commit().await.map_err(err("migrate: COMMIT"))
}

/// Colocates the user's business `table` with the crate's tables on Citus
/// (distributed PostgreSQL), so a handler's writes to it commit on the
/// claim's shard, in one local transaction with the claim.
///
/// `table` is a table name as SQL reads it (`"payments"`, `"billing.payments"`);
/// `column` is its column holding the claim's scope (the value of
/// [`WebhookLayerBuilder::scope`](crate::WebhookLayerBuilder::scope) or the
/// tenant's), whose type is `text` and which every primary key and unique
/// constraint of `table` includes (Citus docs, "Choosing Distribution
/// Column"). Call it after [`migrate`] and after creating the table, at
/// start-up: it runs `create_distributed_table(table, column, colocate_with
/// => '<schema>.webhook_events')` once and does nothing the next times.
///
/// Returns `Ok(true)` when `table` is (now) hash-distributed by `column`
/// and colocated with the claims, `Ok(false)` on a database without the
/// `citus` extension, where it does nothing: the same start-up code runs on
/// one PostgreSQL and on Citus. A table not colocated still works on Citus,
/// at the cost of a two-phase commit per event: OPERATIONS.md,
/// "Distributed PostgreSQL (Citus)".
///
/// # Errors
/// [`StoreErrorKind::NotColocated`] when `table` is already a Citus table of
/// another kind (a reference table, distributed by another column, or in
/// another colocation group: nothing is changed, the message says which);
/// [`StoreErrorKind::Database`] when Citus refuses to distribute it (SQLSTATE
/// and message from the server: a unique constraint without `column`, a
/// missing table or column, a column type other than `text`), and the
/// connection kinds of [`migrate`]; [`StoreErrorKind::InvalidSchemaName`] as
/// for [`migrate`].
pub async fn colocate(store: &StoreConfig, table: &str, column: &str) -> Result<bool, StoreError> {
    let (db, schema) = open(store, "colocate")?;
    let conn = db.connect("connect").await?;
    let step = format!("colocate {table} by {column} with {schema}.webhook_events");
    let err = |e: DbError| db.error_verbose(&e, &step);
    // The migrations' lock: one process distributes the table, the others
    // then find it distributed.
    let (tx, _) =
        conn.begin("BEGIN", "SELECT pg_advisory_xact_lock($1)", &[Param::I64(MIGRATION_LOCK)]).await.map_err(err)?;
    if !citus::installed(&tx).await.map_err(err)? {
        tx.commit().await.map_err(err)?;
        return Ok(false);
    }
    let outcome = citus::colocate(&tx, schema, table, column).await.map_err(err)?;
    tx.commit().await.map_err(err)?;
    match outcome {
        citus::Colocation::Distributed | citus::Colocation::Already => Ok(true),
        citus::Colocation::Elsewhere(how) => Err(StoreError::new(StoreErrorKind::NotColocated, step, how)),
    }
}

/// Checks that `store`'s schema holds the tables at [`SCHEMA_VERSION`] or
/// newer, as recorded in `<schema>.webhook_schema_migrations` by
/// [`migrate`] or the SQL files. Call it at startup to fail fast instead of answering every
/// delivery 503; the layer itself logs the same advice once (at ERROR) when
/// a claim finds the schema or table missing.
///
/// # Errors
/// [`StoreErrorKind::NotMigrated`] when the schema or its version table
/// does not exist or records nothing, [`StoreErrorKind::Outdated`] when the
/// newest recorded version is older than [`SCHEMA_VERSION`],
/// [`StoreErrorKind::InvalidSchemaName`], and the connection kinds of
/// [`migrate`].
pub async fn check_schema(store: &StoreConfig) -> Result<(), StoreError> {
    let step = "schema check";
    let (db, schema) = open(store, step)?;
    let conn = db.connect(step).await?;
    let versions = format!("{schema}.webhook_schema_migrations");
    let read = async {
        let found = conn
            .query(
                "SELECT to_regnamespace($1) IS NOT NULL, to_regclass($2) IS NOT NULL",
                &[Param::Text(schema), Param::Text(&versions)],
            )
            .await?;
        let (has_schema, has_versions): (bool, bool) = (found[0].get(0), found[0].get(1));
        if !(has_schema && has_versions) {
            return Ok((has_schema, has_versions, None));
        }
        let newest: Option<i32> = conn.query(&format!("SELECT max(version) FROM {versions}"), &[]).await?[0].get(0);
        Ok((true, true, newest))
    };
    let read: Result<_, DbError> = read.await;
    conn.release();
    let (has_schema, has_versions, newest) = read.map_err(|e| db.error_verbose(&e, step))?;
    let advice = migrate_advice(schema);
    let not_migrated =
        |what: String| Err(StoreError::new(StoreErrorKind::NotMigrated, step, format!("{what}: {advice}")));
    if !has_schema {
        return not_migrated(format!("schema {schema} does not exist"));
    }
    if !has_versions {
        return not_migrated(format!("{versions} does not exist"));
    }
    match newest {
        None => not_migrated(format!("{versions} records no migration")),
        Some(v) if v < SCHEMA_VERSION => Err(StoreError::new(
            StoreErrorKind::Outdated,
            step,
            format!("schema {schema} is at version {v}, this crate needs {SCHEMA_VERSION}: {advice}"),
        )),
        Some(_) => Ok(()),
    }
}

/// What to run to create or update `schema`.
fn migrate_advice(schema: &str) -> String {
    if schema == DEFAULT_SCHEMA {
        "run webhook_idempotency::migrate(&store) or apply the files under sql/ in the crate".to_owned()
    } else {
        format!(
            "run webhook_idempotency::migrate(&store) with StoreConfig::schema(\"{schema}\") or apply the files \
             under sql/ in the crate with {DEFAULT_SCHEMA} replaced by {schema}"
        )
    }
}

/// Called when a step on `schema`'s tables failed with `e`: a missing schema
/// (3F000), table (42P01) or column (42703, a schema older than the crate)
/// is logged at ERROR with what to run, once per process and schema. The
/// step fails all the same (the layer answers 503).
pub(crate) fn report_unmigrated(schema: &str, e: &DbError) {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    static REPORTED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let Some(sqlstate) = e.code() else { return };
    if ![code::INVALID_SCHEMA_NAME, code::UNDEFINED_TABLE, code::UNDEFINED_COLUMN].contains(&sqlstate) {
        return;
    }
    let first = REPORTED.lock().unwrap_or_else(|p| p.into_inner()).insert(schema.to_owned());
    if first {
        tracing::error!(
            reason = "schema_not_migrated",
            schema,
            sqlstate,
            "schema {schema} missing or not migrated (every delivery is answered 503 until it is): {}",
            migrate_advice(schema),
        );
    }
}

/// A shipped migration with its schema placeholder replaced by `schema` (a
/// checked plain identifier, quoted the same way).
fn with_schema(sql: &str, schema: &str) -> String {
    sql.replace(SCHEMA_PLACEHOLDER, &format!("\"{schema}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_sql_records_its_version() {
        for (version, sql) in MIGRATIONS {
            let record = format!("webhook_schema_migrations (version) VALUES ({version})");
            assert!(sql.contains(&record), "migration {version} does not record itself");
        }
    }

    #[test]
    fn shipped_sql_names_its_schema_only_by_the_placeholder() {
        for (version, sql) in MIGRATIONS {
            assert!(sql.contains("\"webhook_idempotency\"."), "{version}");
            assert!(!sql.to_lowercase().contains("public."), "{version}");
            // Outside comments, the schema's name appears only as the placeholder.
            let code: String = sql.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n");
            assert_eq!(
                code.matches("webhook_idempotency").count(),
                code.matches(SCHEMA_PLACEHOLDER).count(),
                "migration {version}: a bare schema name would escape the configured schema"
            );
            let moved = with_schema(sql, "tenant_a");
            assert!(!moved
                .lines()
                .filter(|l| !l.trim_start().starts_with("--"))
                .any(|l| l.contains("webhook_idempotency")));
            // Comments (which name the crate's Rust paths) are left alone.
            let comments = |text: &str| {
                text.lines().filter(|l| l.trim_start().starts_with("--")).map(str::to_owned).collect::<Vec<_>>()
            };
            assert_eq!(comments(&moved), comments(sql), "migration {version}");
        }
    }
}
