//! Operator actions on the events table, for the person on call (the
//! `webhook-admin` command uses them): statistics, listings, one event in
//! full, and the manual actions `requeue`, `replay` and `purge`.
//!
//! `requeue` and `replay` run in one transaction with their audit row
//! (`webhook_audit`: time, actor, action, filter, rows changed); a dry run
//! runs the very same statements and rolls back, so the count it reports is
//! exactly what the action would change. `purge` deletes in short batches,
//! each its own transaction (as [`Retention`](super::retention::Retention)
//! does), and records its audit row after the last batch; its dry run counts
//! the rows it would delete.

use std::fmt;
use std::time::{Duration, SystemTime};

use deadpool_postgres::Pool;
use tokio_postgres::types::ToSql;

use super::inbox::EventRow;
use crate::layer::ConfigErrorKind;
use crate::ConfigError;

/// An operator action that failed: no connection, or a statement failed.
/// Nothing of the action is kept (it is one transaction).
#[derive(Debug)]
pub struct OpsError {
    source: Option<tokio_postgres::Error>,
    detail: String,
}

impl OpsError {
    /// The SQLSTATE of the failed statement, when the server answered one.
    pub fn sqlstate(&self) -> Option<&str> {
        self.source.as_ref().and_then(|e| e.code()).map(tokio_postgres::error::SqlState::code)
    }

    pub(crate) fn unavailable(detail: impl fmt::Display) -> Self {
        Self { source: None, detail: format!("no database connection: {detail}") }
    }
}

impl fmt::Display for OpsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.source, self.sqlstate()) {
            (Some(e), Some(code)) => {
                let message = e.as_db_error().map_or("", |d| d.message());
                write!(f, "SQLSTATE {code}: {message}")
            }
            _ => f.write_str(&self.detail),
        }
    }
}

impl std::error::Error for OpsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

impl From<tokio_postgres::Error> for OpsError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self { detail: "database error".into(), source: Some(e) }
    }
}

/// Which rows an action or listing applies to: every part given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Filter {
    /// The provider.
    pub provider: Option<String>,
    /// The scope.
    pub scope: Option<String>,
    /// One event key.
    pub key: Option<String>,
    /// Received at most this long ago.
    #[serde(skip)]
    pub since: Option<Duration>,
}

/// One event in full: see [`Admin::show`].
#[derive(Debug, Clone)]
pub struct EventDetail {
    /// The row as listed.
    pub row: EventRow,
    /// When it was done.
    pub completed_at: Option<SystemTime>,
    /// Inbox mode: when it is due next.
    pub run_at: Option<SystemTime>,
    /// Inbox mode: the lease's end while it runs.
    pub locked_until: Option<SystemTime>,
    /// The stored body's size in bytes (inbox mode), if any.
    pub payload_bytes: Option<i32>,
    /// The stored body, only when asked for.
    pub payload: Option<Vec<u8>>,
}

/// Counts for an operator: see [`Admin::stats`].
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// `(provider, scope, state, rows)`.
    pub by_state: Vec<(String, String, String, i64)>,
    /// How long the oldest `pending` row has waited.
    pub oldest_pending: Option<Duration>,
    /// `(attempts, rows)` over rows that ran at least once.
    pub attempts: Vec<(i32, i64)>,
    /// Failures recorded in the last hour.
    pub failures_last_hour: i64,
}

/// Operator actions on one schema. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Admin {
    pool: Pool,
    t: String,
    audit: String,
}

const MATCH: &str = "($1::text IS NULL OR provider = $1) AND ($2::text IS NULL OR scope = $2)
                     AND ($3::text IS NULL OR event_key = $3)
                     AND ($4::float8 IS NULL OR received_at >= now() - make_interval(secs => $4))";

impl Admin {
    /// Operator actions on `pool`'s database, tables under `schema`.
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid schema name.
    pub fn new(pool: Pool, schema: &str) -> Result<Self, ConfigError> {
        super::check_schema_name(schema).map_err(|m| ConfigError::of(ConfigErrorKind::InvalidSchema, m))?;
        Ok(Self { pool, t: format!("{schema}.webhook_events"), audit: format!("{schema}.webhook_audit") })
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, OpsError> {
        self.pool.get().await.map_err(OpsError::unavailable)
    }

    /// Rows by provider, scope and state; the oldest pending age; the
    /// attempts distribution; failures in the last hour.
    ///
    /// # Errors
    /// [`OpsError`].
    pub async fn stats(&self) -> Result<Stats, OpsError> {
        let c = self.client().await?;
        let t = &self.t;
        let by_state = c
            .query(&format!("SELECT provider, scope, state, count(*) FROM {t} GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"), &[])
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        let oldest: Option<f64> = c
            .query_one(
                &format!(
                    "SELECT extract(epoch FROM now() - min(received_at))::float8 FROM {t} WHERE state = 'pending'"
                ),
                &[],
            )
            .await?
            .get(0);
        let attempts = c
            .query(&format!("SELECT attempts, count(*) FROM {t} WHERE attempts > 0 GROUP BY 1 ORDER BY 1"), &[])
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let failures_last_hour = c
            .query_one(&format!("SELECT count(*) FROM {t} WHERE last_failed_at >= now() - interval '1 hour'"), &[])
            .await?
            .get(0);
        Ok(Stats {
            by_state,
            oldest_pending: oldest.map(|s| Duration::from_secs_f64(s.max(0.0))),
            attempts,
            failures_last_hour,
        })
    }

    /// Up to `limit` rows in `state` matching `filter`, oldest first.
    ///
    /// # Errors
    /// [`OpsError`].
    pub async fn list(&self, state: &str, filter: &Filter, limit: usize) -> Result<Vec<EventRow>, OpsError> {
        let c = self.client().await?;
        let sql = format!(
            "SELECT provider, scope, event_key, event_type, state, attempts, last_error, response_status,
                    received_at, last_failed_at
             FROM {} WHERE state = $5 AND {MATCH} ORDER BY received_at LIMIT $6",
            self.t
        );
        let since = filter.since.map(|d| d.as_secs_f64());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = c.query(&sql, &[&filter.provider, &filter.scope, &filter.key, &since, &state, &limit]).await?;
        Ok(rows.iter().map(row).collect())
    }

    /// One event in full; the stored payload only with `with_payload`.
    ///
    /// # Errors
    /// [`OpsError`].
    pub async fn show(
        &self,
        provider: &str,
        scope: &str,
        key: &str,
        with_payload: bool,
    ) -> Result<Option<EventDetail>, OpsError> {
        let c = self.client().await?;
        let sql = format!(
            "SELECT provider, scope, event_key, event_type, state, attempts, last_error, response_status,
                    received_at, last_failed_at, completed_at, run_at, locked_until, octet_length(payload),
                    CASE WHEN $4 THEN payload END
             FROM {} WHERE provider = $1 AND scope = $2 AND event_key = $3",
            self.t
        );
        let found = c.query_opt(&sql, &[&provider, &scope, &key, &with_payload]).await?;
        Ok(found.map(|r| EventDetail {
            row: row(&r),
            completed_at: r.get(10),
            run_at: r.get(11),
            locked_until: r.get(12),
            payload_bytes: r.get(13),
            payload: r.get(14),
        }))
    }

    /// Puts matching `dead` or `failed` rows that have a stored payload back
    /// to `pending`, due now, with a fresh attempt budget (inbox mode runs
    /// them again). Rows without a payload (synchronous mode) are left: their
    /// sender's retry claims them again. Returns the rows changed (or that
    /// would change, for a dry run).
    ///
    /// # Errors
    /// [`OpsError`]; nothing changed.
    pub async fn requeue(&self, filter: &Filter, dry_run: bool, actor: &str) -> Result<u64, OpsError> {
        self.act("requeue", "state IN ('dead', 'failed')", filter, dry_run, actor).await
    }

    /// Runs matching `done` events again from their stored payload: they go
    /// back to `pending` (inbox mode), so their effects repeat. Rows without
    /// a payload are left. Returns the rows changed (or that would change).
    ///
    /// # Errors
    /// [`OpsError`]; nothing changed.
    pub async fn replay(&self, filter: &Filter, dry_run: bool, actor: &str) -> Result<u64, OpsError> {
        self.act("replay", "state = 'done'", filter, dry_run, actor).await
    }

    async fn act(
        &self,
        action: &str,
        states: &str,
        filter: &Filter,
        dry_run: bool,
        actor: &str,
    ) -> Result<u64, OpsError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        let sql = format!(
            "UPDATE {} SET state = 'pending', attempts = 0, run_at = now(), locked_until = NULL, lease_token = NULL
             WHERE {states} AND payload IS NOT NULL AND {MATCH}",
            self.t
        );
        let since = filter.since.map(|d| d.as_secs_f64());
        let params: [&(dyn ToSql + Sync); 4] = [&filter.provider, &filter.scope, &filter.key, &since];
        let changed = tx.execute(&sql, &params).await?;
        self.record(&tx, actor, action, filter, changed).await?;
        if dry_run {
            tx.rollback().await?;
        } else {
            tx.commit().await?;
        }
        Ok(changed)
    }

    /// The providers that have `done` or `failed` rows received more than
    /// `older_than` ago while `older_than` is shorter than their documented
    /// replay window ([`replay_window`](super::retention::replay_window)),
    /// with that window: purging those rows would let a replay of the event
    /// run again. Empty when the age is safe for every provider present.
    ///
    /// # Errors
    /// [`OpsError`].
    pub async fn inside_replay_windows(&self, older_than: Duration) -> Result<Vec<(String, Duration)>, OpsError> {
        let c = self.client().await?;
        let sql = format!(
            "SELECT DISTINCT provider FROM {} WHERE state IN ('done', 'failed')
                AND received_at < now() - make_interval(secs => $1) ORDER BY 1",
            self.t
        );
        let rows = c.query(&sql, &[&older_than.as_secs_f64()]).await?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                let provider: String = r.get(0);
                let window = super::retention::replay_window(&provider)?;
                (older_than < window).then_some((provider, window))
            })
            .collect())
    }

    /// Deletes `done` and `failed` rows received more than `older_than` ago
    /// (never `pending`, `running` or `dead`), with the same batched
    /// statement as [`Retention`](super::retention::Retention), and records
    /// it. A dry run counts what would go.
    ///
    /// # Errors
    /// [`OpsError`].
    pub async fn purge(&self, older_than: Duration, dry_run: bool, actor: &str) -> Result<u64, OpsError> {
        let filter = Filter::default();
        if dry_run {
            let c = self.client().await?;
            let sql = format!(
                "SELECT count(*) FROM {} WHERE state IN ('done', 'failed') AND received_at < now() - make_interval(secs => $1)",
                self.t
            );
            let n: i64 = c.query_one(&sql, &[&older_than.as_secs_f64()]).await?.get(0);
            return Ok(u64::try_from(n).unwrap_or(0));
        }
        let schema = self.t.trim_end_matches(".webhook_events");
        let retention = super::retention::Retention::builder(self.pool.clone())
            .schema(schema)
            .allow_short_window(true)
            .build()
            .map_err(|e| OpsError { source: None, detail: e.to_string() })?;
        let report = retention.purge_older_than(Some(older_than)).await?;
        let c = self.client().await?;
        let filter_json = serde_json::json!({ "older_than_secs": older_than.as_secs() });
        c.execute(
            &format!(
                "INSERT INTO {} (actor, action, filter, rows) VALUES ($1, 'purge', $2::text::jsonb, $3)",
                self.audit
            ),
            &[&actor, &filter_json.to_string(), &i64::try_from(report.deleted).unwrap_or(i64::MAX)],
        )
        .await?;
        let _ = filter;
        Ok(report.deleted)
    }

    async fn record(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        actor: &str,
        action: &str,
        filter: &Filter,
        rows: u64,
    ) -> Result<(), OpsError> {
        let mut json = serde_json::to_value(filter).unwrap_or_default();
        if let (Some(since), Some(map)) = (filter.since, json.as_object_mut()) {
            map.insert("since_secs".into(), since.as_secs().into());
        }
        tx.execute(
            &format!("INSERT INTO {} (actor, action, filter, rows) VALUES ($1, $2, $3::text::jsonb, $4)", self.audit),
            &[&actor, &action, &json.to_string(), &i64::try_from(rows).unwrap_or(i64::MAX)],
        )
        .await?;
        Ok(())
    }

    /// The audit rows, newest first: `(time, actor, action, filter JSON, rows)`.
    ///
    /// # Errors
    /// [`OpsError`].
    pub async fn audit(&self, limit: usize) -> Result<Vec<(SystemTime, String, String, String, i64)>, OpsError> {
        let c = self.client().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = c
            .query(
                &format!("SELECT at, actor, action, filter::text, rows FROM {} ORDER BY at DESC LIMIT $1", self.audit),
                &[&limit],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))).collect())
    }
}

fn row(r: &tokio_postgres::Row) -> EventRow {
    EventRow {
        provider: r.get(0),
        scope: r.get(1),
        key: r.get(2),
        event_type: r.get(3),
        state: r.get(4),
        attempts: r.get(5),
        last_error: r.get(6),
        response_status: r.get(7),
        received_at: r.get(8),
        last_failed_at: r.get(9),
    }
}
