//! The PostgreSQL store: every SQL statement of the crate, and the migration
//! helper.
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

use std::fmt;

use deadpool_postgres::Pool;

pub mod admin;
pub mod claim;
mod conn;
pub mod inbox;
pub mod retention;
mod statements;

pub use claim::{
    Claim, ClaimError, ClaimErrorKind, ClaimStore, ClaimStoreBuilder, ClaimedEvent, CommitError, CommitErrorKind,
    ScopedEvent, DEFAULT_DATABASE_TIMEOUT,
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

/// The shipped migrations, in order: `(version, SQL)`. The SQL names its
/// schema only as the quoted identifier `"webhook_idempotency"`, the
/// placeholder [`migrate_schema`] replaces.
pub const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../sql/001_webhook_events.sql")),
    (2, include_str!("../sql/002_inbox.sql")),
    (3, include_str!("../sql/003_operations.sql")),
    (4, include_str!("../sql/004_hot_updates.sql")),
    (5, include_str!("../sql/005_retention_index.sql")),
];

/// Key of the advisory lock serialising migrations across processes.
const MIGRATION_LOCK: i64 = 0x7765_6268_6f6f_6b31; // "webhook1"

/// The newest migration version this crate's statements need.
pub const SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// What went wrong in [`migrate`], [`migrate_schema`] or [`check_schema`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MigrateErrorKind {
    /// No connection to the server: refused, unreachable, name resolution,
    /// TLS, the connection closed, or the pool's wait timed out. The error's
    /// `Display` names the configured `host:port`.
    Connect,
    /// The server refused the login: SQLSTATE 28000 (role does not exist, no
    /// `pg_hba.conf` entry) or 28P01 (wrong password).
    Authentication,
    /// The database named in the configuration does not exist: SQLSTATE
    /// 3D000.
    DatabaseMissing,
    /// A statement failed; [`MigrateError::sqlstate`] says why (42501:
    /// the role may not create the schema, ...).
    Database,
    /// The schema name is not a plain identifier (see [`migrate_schema`]).
    InvalidSchemaName,
    /// [`check_schema`]: the schema or its tables do not exist; run
    /// [`migrate`] / [`migrate_schema`] or the SQL files under `sql/`.
    NotMigrated,
    /// [`check_schema`]: the recorded migrations are older than
    /// [`SCHEMA_VERSION`]; run [`migrate`] / [`migrate_schema`] again.
    Outdated,
}

/// A failed migration or schema check.
///
/// `Display` gives the SQLSTATE and the server's message (severity, message,
/// detail, hint) for errors the server reported, and the configured
/// `host:port` for connection errors; never the password (the server's
/// messages do not quote it, and only host and port are taken from the
/// pool's configuration).
#[derive(Debug)]
pub struct MigrateError {
    kind: MigrateErrorKind,
    /// SQLSTATE, when the server answered with an error.
    sqlstate: Option<String>,
    /// What was being done, e.g. "connect", "apply migration 1".
    step: String,
    /// The server's message, or the client-side cause.
    detail: String,
    /// `host:port` of the pool's configuration, for connection errors.
    endpoint: Option<String>,
}

impl MigrateError {
    /// What kind of failure this is.
    pub fn kind(&self) -> MigrateErrorKind {
        self.kind
    }

    /// The five-character SQLSTATE the server answered with (PostgreSQL docs,
    /// Appendix A "PostgreSQL Error Codes"), if any: `3D000` database missing,
    /// `28P01` wrong password, `42501` insufficient privilege, ...
    pub fn sqlstate(&self) -> Option<&str> {
        self.sqlstate.as_deref()
    }

    fn new(kind: MigrateErrorKind, step: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { kind, sqlstate: None, step: step.into(), detail: detail.into(), endpoint: None }
    }

    /// Classifies a tokio-postgres error; `endpoint` is the pool's
    /// `host:port`, kept for errors raised before a session existed.
    fn postgres(e: &tokio_postgres::Error, step: &str, endpoint: Option<String>) -> Self {
        use tokio_postgres::error::SqlState;
        if let Some(db) = e.as_db_error() {
            let code = db.code();
            let kind = if *code == SqlState::INVALID_CATALOG_NAME {
                MigrateErrorKind::DatabaseMissing
            } else if *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION || *code == SqlState::INVALID_PASSWORD {
                MigrateErrorKind::Authentication
            } else {
                MigrateErrorKind::Database
            };
            let mut detail = format!("{}: {}", db.severity(), db.message());
            if let Some(d) = db.detail() {
                detail.push_str(&format!(" (detail: {d})"));
            }
            if let Some(h) = db.hint() {
                detail.push_str(&format!(" (hint: {h})"));
            }
            let endpoint = (kind != MigrateErrorKind::Database).then_some(endpoint).flatten();
            return Self { kind, sqlstate: Some(code.code().to_owned()), step: step.to_owned(), detail, endpoint };
        }
        // Not a server error: I/O, TLS, a closed connection. The chain of
        // sources holds the reason ("Connection refused (os error 111)").
        let mut detail = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            detail.push_str(&format!(": {s}"));
            source = s.source();
        }
        Self { kind: MigrateErrorKind::Connect, sqlstate: None, step: step.to_owned(), detail, endpoint }
    }

    fn pool(e: deadpool_postgres::PoolError, pool: &Pool) -> Self {
        let endpoint = pool_endpoint(pool);
        match e {
            deadpool_postgres::PoolError::Backend(e) => Self::postgres(&e, "connect", endpoint),
            other => {
                let mut err = Self::new(MigrateErrorKind::Connect, "connect", other.to_string());
                err.endpoint = endpoint;
                err
            }
        }
    }
}

impl fmt::Display for MigrateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "webhook-idempotency store: {} failed", self.step)?;
        if let Some(endpoint) = &self.endpoint {
            write!(f, " (server {endpoint})")?;
        }
        if let Some(code) = &self.sqlstate {
            write!(f, ": SQLSTATE {code}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

impl std::error::Error for MigrateError {}

/// `host:port` of the pool's connection configuration, comma-separated when
/// it names several hosts; `None` when it cannot be read.
///
/// deadpool-postgres keeps the `tokio_postgres::Config` private; its `Debug`
/// output (which redacts the password as `Some(_)`) is the only public view.
/// Only the `host` and `port` fields are taken from it.
fn pool_endpoint(pool: &Pool) -> Option<String> {
    endpoint_from_debug(&format!("{:?}", pool.manager()))
}

fn endpoint_from_debug(debug: &str) -> Option<String> {
    fn list<'a>(debug: &'a str, field: &str) -> Option<Vec<&'a str>> {
        let start = debug.find(&format!(" {field}: ["))? + field.len() + 4;
        let rest = &debug[start..];
        let inner = &rest[..rest.find(']')?];
        Some(inner.split(", ").map(str::trim).filter(|s| !s.is_empty()).collect())
    }
    let hosts: Vec<String> = list(debug, "host")?
        .into_iter()
        .map(|h| {
            let h = h.strip_prefix("Tcp(").or_else(|| h.strip_prefix("Unix(")).unwrap_or(h);
            h.trim_end_matches(')').trim_matches('"').to_owned()
        })
        .collect();
    let ports = list(debug, "port").unwrap_or_default();
    let port_at = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or("5432");
    let hosts = if hosts.is_empty() { vec!["localhost".to_owned()] } else { hosts };
    Some(hosts.iter().enumerate().map(|(i, h)| format!("{h}:{}", port_at(i))).collect::<Vec<_>>().join(","))
}

/// Creates or updates the tables under [`DEFAULT_SCHEMA`].
///
/// Safe to run twice and from several processes at once: each run takes a
/// transaction-scoped advisory lock (`pg_advisory_xact_lock`), applies the
/// [`MIGRATIONS`] not yet recorded in `webhook_schema_migrations`, and commits.
///
/// # Errors
/// [`MigrateError`] when no connection can be had (kinds
/// [`Connect`](MigrateErrorKind::Connect),
/// [`Authentication`](MigrateErrorKind::Authentication),
/// [`DatabaseMissing`](MigrateErrorKind::DatabaseMissing)) or a statement
/// fails ([`Database`](MigrateErrorKind::Database)); nothing is
/// half-applied (each run is one transaction).
pub async fn migrate(pool: &Pool) -> Result<(), MigrateError> {
    migrate_schema(pool, DEFAULT_SCHEMA).await
}

/// [`migrate`] into the schema `schema` (a plain identifier: lower-case ASCII letters,
/// digits and `_`, not starting with a digit, at most 63 bytes).
///
/// # Errors
/// [`MigrateErrorKind::InvalidSchemaName`] for an invalid schema name, as
/// well as [`migrate`]'s.
pub async fn migrate_schema(pool: &Pool, schema: &str) -> Result<(), MigrateError> {
    check_schema_name(schema).map_err(|e| MigrateError::new(MigrateErrorKind::InvalidSchemaName, "migrate", e))?;
    let mut client = pool.get().await.map_err(|e| MigrateError::pool(e, pool))?;
    let err = |step: &str| {
        let step = step.to_owned();
        move |e: tokio_postgres::Error| MigrateError::postgres(&e, &step, pool_endpoint(pool))
    };
    let tx = client.transaction().await.map_err(err("migrate: BEGIN"))?;
    // `IF NOT EXISTS` on existing objects only raises NOTICEs: keep them quiet.
    tx.batch_execute("SET LOCAL client_min_messages = warning").await.map_err(err("migrate: SET"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(err("migrate: advisory lock"))?;
    tx.batch_execute(&format!(
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
    for (version, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        let step = format!("migrate: apply migration {version} to schema {schema}");
        tx.batch_execute(&with_schema(sql, schema)).await.map_err(err(&step))?;
        // The shipped files record their own version; older ones did not.
        tx.execute(
            &format!(
                "INSERT INTO {schema}.webhook_schema_migrations (version) VALUES ($1) ON CONFLICT (version) DO NOTHING"
            ),
            &[version],
        )
        .await
        .map_err(err(&step))?;
    }
    tx.commit().await.map_err(err("migrate: COMMIT"))
}

/// Checks that `schema` holds the tables at [`SCHEMA_VERSION`] or newer, as
/// recorded in `<schema>.webhook_schema_migrations` by [`migrate_schema`] or
/// the SQL files. Call it at startup to fail fast instead of answering every
/// delivery 503; the layer itself logs the same advice once (at ERROR) when
/// a claim finds the schema or table missing.
///
/// # Errors
/// [`MigrateErrorKind::NotMigrated`] when the schema or its version table
/// does not exist or records nothing, [`MigrateErrorKind::Outdated`] when the newest recorded
/// version is older than [`SCHEMA_VERSION`], and the connection kinds of
/// [`migrate`].
pub async fn check_schema(pool: &Pool, schema: &str) -> Result<(), MigrateError> {
    check_schema_name(schema).map_err(|e| MigrateError::new(MigrateErrorKind::InvalidSchemaName, "schema check", e))?;
    let client = pool.get().await.map_err(|e| MigrateError::pool(e, pool))?;
    check_schema_on(&client, schema).await.map_err(|mut e| {
        if e.kind == MigrateErrorKind::Connect {
            e.endpoint = pool_endpoint(pool);
        }
        e
    })
}

/// [`check_schema`] on a connection. `schema` must have passed
/// [`check_schema_name`].
pub(crate) async fn check_schema_on(client: &tokio_postgres::Client, schema: &str) -> Result<(), MigrateError> {
    let step = "schema check";
    let err = |e: tokio_postgres::Error| MigrateError::postgres(&e, step, None);
    let row = client
        .query_one(
            "SELECT to_regnamespace($1) IS NOT NULL, to_regclass($2) IS NOT NULL",
            &[&schema, &format!("{schema}.webhook_schema_migrations")],
        )
        .await
        .map_err(err)?;
    let (has_schema, has_versions): (bool, bool) = (row.get(0), row.get(1));
    let advice = migrate_advice(schema);
    if !has_schema {
        return Err(MigrateError::new(
            MigrateErrorKind::NotMigrated,
            step,
            format!("schema {schema} does not exist: {advice}"),
        ));
    }
    if !has_versions {
        return Err(MigrateError::new(
            MigrateErrorKind::NotMigrated,
            step,
            format!("{schema}.webhook_schema_migrations does not exist: {advice}"),
        ));
    }
    let newest: Option<i32> = client
        .query_one(&format!("SELECT max(version) FROM {schema}.webhook_schema_migrations"), &[])
        .await
        .map_err(err)?
        .get(0);
    match newest {
        None => {
            return Err(MigrateError::new(
                MigrateErrorKind::NotMigrated,
                step,
                format!("{schema}.webhook_schema_migrations records no migration: {advice}"),
            ))
        }
        Some(v) if v < SCHEMA_VERSION => {
            return Err(MigrateError::new(
                MigrateErrorKind::Outdated,
                step,
                format!("schema {schema} is at version {v}, this crate needs {SCHEMA_VERSION}: {advice}"),
            ))
        }
        Some(_) => {}
    }
    Ok(())
}

/// What to run to create or update `schema`.
fn migrate_advice(schema: &str) -> String {
    if schema == DEFAULT_SCHEMA {
        "run webhook_idempotency::migrate(&pool) or apply the files under sql/ in the crate".to_owned()
    } else {
        format!(
            "run webhook_idempotency::migrate_schema(&pool, \"{schema}\") or apply the files under sql/ in the \
             crate with {DEFAULT_SCHEMA} replaced by {schema}"
        )
    }
}

/// Called by the layer when its claim failed with `e`: a missing schema
/// (3F000), table (42P01) or column (42703, a schema older than the crate)
/// is logged at ERROR with what to run, once per process and schema. The
/// delivery is answered 503 all the same.
pub(crate) fn report_unmigrated(sql: &Statements, e: &tokio_postgres::Error) {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    use tokio_postgres::error::SqlState;
    static REPORTED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let Some(code) = e.code() else { return };
    if ![SqlState::INVALID_SCHEMA_NAME, SqlState::UNDEFINED_TABLE, SqlState::UNDEFINED_COLUMN].contains(code) {
        return;
    }
    let first = REPORTED.lock().unwrap_or_else(|p| p.into_inner()).insert(sql.schema.clone());
    if first {
        tracing::error!(
            reason = "schema_not_migrated",
            schema = sql.schema.as_str(),
            sqlstate = code.code(),
            "schema {} missing or not migrated (every delivery is answered 503 until it is): {}",
            sql.schema,
            migrate_advice(&sql.schema),
        );
    }
}

/// The placeholder the shipped SQL names its schema by: the quoted identifier
/// `"webhook_idempotency"`, and nothing else in the files is spelled so.
const SCHEMA_PLACEHOLDER: &str = "\"webhook_idempotency\"";

/// A shipped migration with its schema placeholder replaced by `schema` (a
/// checked plain identifier, quoted the same way).
fn with_schema(sql: &str, schema: &str) -> String {
    sql.replace(SCHEMA_PLACEHOLDER, &format!("\"{schema}\""))
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

    #[test]
    fn endpoint_from_the_pools_config() {
        let cases: &[(&str, &str, &str)] = &[
            ("one TCP host", "postgresql://app:hunter2@db.internal:6543/app", "db.internal:6543"),
            ("default port", "postgresql://app:hunter2@127.0.0.1/app", "127.0.0.1:5432"),
            ("two hosts, one port", "host=a,b port=5433 user=app password=hunter2", "a:5433,b:5433"),
            ("two hosts, two ports", "host=a,b port=1,2 user=app", "a:1,b:2"),
            ("unix socket", "host=/run/postgresql port=5432 user=app", "/run/postgresql:5432"),
        ];
        for (name, url, want) in cases {
            let config: tokio_postgres::Config = url.parse().unwrap();
            let manager = deadpool_postgres::Manager::new(config, tokio_postgres::NoTls);
            let debug = format!("{manager:?}");
            assert_eq!(endpoint_from_debug(&debug).as_deref(), Some(*want), "{name}: {debug}");
            assert!(!debug.contains("hunter2"), "{name}: the pool's Debug shows the password");
        }
    }

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
                "migration {version}: a bare schema name would escape migrate_schema"
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
