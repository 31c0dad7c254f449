//! Operator actions on the events table, for the person on call (the
//! `webhook-admin` command uses them): statistics, listings, one event in
//! full, and the manual actions `requeue`, `replay` and `purge`.
//!
//! `requeue` and `replay` run in one transaction with their audit row
//! (`webhook_audit`: time, actor, the session's database role, action, filter,
//! rows changed); a dry run
//! runs the very same statements and rolls back, so the count it reports is
//! exactly what the action would change. `purge` deletes in short batches,
//! each its own transaction (as [`Retention`]
//! does), and records its audit row after the last batch; its dry run counts
//! the rows it would delete.
//!
//! The outbox has its own ([`Admin::outbox_stats`], [`Admin::list_effects`],
//! [`Admin::show_effect`], [`Admin::resolve_effect`],
//! [`Admin::requeue_effects`], [`Admin::purge_effects`]), audited alike.
//!
//! The gauge sampler ([`Admin::run_gauge_sampler`]) polls [`Admin::stats`]
//! and [`Admin::outbox_stats`] for the `webhook_events`,
//! `webhook_oldest_pending_age_seconds`, `webhook_outbox_effects` and
//! `webhook_outbox_oldest_due_age_seconds` gauges.

mod outbox;

use std::time::{Duration, SystemTime};

use super::driver::{Db, Param, Row};
use super::retention::Retention;
use super::StoreConfig;
use crate::error::{ConfigError, StoreError};

pub use outbox::{EffectFilter, EffectId, EffectRow, OutboxStats, Resolution};

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

/// A row as an operator sees it: see [`Admin::list`].
#[derive(Debug, Clone)]
pub struct EventRow {
    /// The provider.
    pub provider: String,
    /// The scope.
    pub scope: String,
    /// The idempotency key.
    pub key: String,
    /// The event type.
    pub event_type: Option<String>,
    /// `pending`, `running`, `done`, `failed` or `dead`.
    pub state: String,
    /// Runs of the handler so far.
    pub attempts: i32,
    /// The last failure's description (never a payload or secret).
    pub last_error: Option<String>,
    /// The last HTTP status the handler answered.
    pub response_status: Option<i16>,
    /// When the first delivery arrived.
    pub received_at: SystemTime,
    /// When the last failure was recorded.
    pub last_failed_at: Option<SystemTime>,
}

/// One audit row: an operator's action, see [`Admin::audit`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditRow {
    /// When the action committed (the database's clock).
    pub at: SystemTime,
    /// Who the operator said they are (`--actor`, default `$USER`): free text.
    pub actor: String,
    /// The database role the action's session logged in as (`session_user`,
    /// recorded by the column's default since migration 11); `None` for rows
    /// written before it.
    pub db_role: Option<String>,
    /// `requeue`, `replay`, `purge`, `outbox_resolve`, `outbox_requeue` or
    /// `outbox_purge`.
    pub action: String,
    /// The filter the action was given, as JSON text.
    pub filter: String,
    /// How many rows it changed.
    pub rows: i64,
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
    /// How long the oldest `pending` row has waited since it was received.
    pub oldest_pending: Option<Duration>,
    /// `(attempts, rows)` over rows that ran at least once.
    pub attempts: Vec<(i32, i64)>,
    /// Failures recorded in the last hour.
    pub failures_last_hour: i64,
    /// Inbox rows due now, by provider and scope (only groups with some).
    pub due: Vec<Backlog>,
}

/// The inbox rows of one provider and scope that are due now: see
/// [`Stats::due`].
#[derive(Debug, Clone, PartialEq)]
pub struct Backlog {
    /// The provider.
    pub provider: String,
    /// The scope.
    pub scope: String,
    /// `pending` rows whose `run_at` has passed.
    pub rows: i64,
    /// How long the oldest of them has been due.
    pub oldest_due: Duration,
    /// How long ago a row of this provider and scope last ran (the end of
    /// its last run, done or failed, or now while one runs); `None`: never.
    pub last_run: Option<Duration>,
    /// No worker serves these rows: the oldest has been due longer than
    /// [`Admin::unserved_after`] and no row of theirs ran in that time (no
    /// worker leases this provider or scope, a worker's provider filter is
    /// misspelt, or the workers are all busy with other providers' rows).
    pub unserved: bool,
}

/// Operator actions on one schema. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Admin {
    db: Db,
    retention: Retention,
    t: String,
    audit: String,
    outbox: String,
    unserved_after: Duration,
    /// The one scope purges delete from ([`Admin::purge_scope`]).
    scope: Option<String>,
}

/// The default of [`Admin::unserved_after`]: 5 minutes (ten of the workers'
/// default 30 s leases).
pub const DEFAULT_UNSERVED_AFTER: Duration = Duration::from_secs(300);

const MATCH: &str = "($1::text IS NULL OR provider = $1) AND ($2::text IS NULL OR scope = $2)
                     AND ($3::text IS NULL OR event_key = $3)
                     AND ($4::float8 IS NULL OR received_at >= now() - make_interval(secs => $4))";

const EVENT_COLUMNS: &str = "provider, scope, event_key, event_type, state, attempts, last_error, response_status,
                             received_at, last_failed_at";

impl Filter {
    /// `$1..$4` of [`MATCH`].
    fn params(&self) -> [Param<'_>; 4] {
        [
            Param::OptText(self.provider.as_deref()),
            Param::OptText(self.scope.as_deref()),
            Param::OptText(self.key.as_deref()),
            Param::OptF64(self.since.map(|d| d.as_secs_f64())),
        ]
    }
}

/// A listing's parameters: the filter's `$1..$4`, then `$5` the state and
/// `$6` the most rows.
fn listing<'a>(filter: [Param<'a>; 4], state: &'a str, limit: usize) -> Vec<Param<'a>> {
    filter.into_iter().chain([Param::Text(state), limit_param(limit)]).collect()
}

/// A row limit as a `bigint` parameter.
fn limit_param(limit: usize) -> Param<'static> {
    Param::I64(i64::try_from(limit).unwrap_or(i64::MAX))
}

impl Admin {
    /// Operator actions on `store`'s database (a [`StoreConfig`], or a bare
    /// pool for the defaults). Their statements have no client-side
    /// deadline (an action over many rows may take a while); the pool
    /// timeout applies.
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid schema name.
    pub fn new(store: impl Into<StoreConfig>) -> Result<Self, ConfigError> {
        let config = store.into();
        let (db, schema) = config.open()?;
        let (t, audit) = (format!("{schema}.webhook_events"), format!("{schema}.webhook_audit"));
        let outbox = format!("{schema}.webhook_outbox");
        // The admin command's `--older-than` purge: its own age, checked by the caller.
        let retention = Retention::builder(config.clone()).allow_short_window(true).build()?;
        Ok(Self {
            db: db.without_deadline(),
            retention,
            t,
            audit,
            outbox,
            unserved_after: DEFAULT_UNSERVED_AFTER,
            scope: None,
        })
    }

    /// Restricts [`purge`](Self::purge) and [`purge_effects`](Self::purge_effects)
    /// (their dry runs too) to `scope`'s rows (`None`: every scope, the
    /// default). On Citus a purge per scope runs on one shard's worker; one
    /// over every scope reads the scopes present first (OPERATIONS.md,
    /// "Distributed PostgreSQL (Citus)").
    #[must_use]
    pub fn purge_scope(mut self, scope: Option<String>) -> Self {
        self.retention = self.retention.with_scope(scope.clone());
        self.scope = scope;
        self
    }

    setters! {
        /// How long inbox rows may be due with none of their provider and scope
        /// running before [`Stats::due`] calls them unserved (and the
        /// `webhook_inbox_unserved_events` gauge counts them): default
        /// [`DEFAULT_UNSERVED_AFTER`], 5 minutes. Keep it well above the workers'
        /// poll interval and lease.
        #[must_use]
        pub fn unserved_after(after: Duration) => unserved_after = after;
    }

    async fn query(&self, step: &str, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, StoreError> {
        self.db.query(step, sql, params).await
    }

    /// Rows by provider, scope and state; the oldest pending age; the
    /// attempts distribution; failures in the last hour.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn stats(&self) -> Result<Stats, StoreError> {
        let t = &self.t;
        let by_state = self
            .query(
                "stats",
                &format!("SELECT provider, scope, state, count(*) FROM {t} GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"),
                &[],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        let oldest: Option<f64> = self
            .query(
                "stats",
                &format!(
                    "SELECT extract(epoch FROM now() - min(received_at))::float8 FROM {t} WHERE state = 'pending'"
                ),
                &[],
            )
            .await?[0]
            .get(0);
        let attempts = self
            .query(
                "stats",
                &format!("SELECT attempts, count(*) FROM {t} WHERE attempts > 0 GROUP BY 1 ORDER BY 1"),
                &[],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let failures = format!("SELECT count(*) FROM {t} WHERE last_failed_at >= now() - interval '1 hour'");
        let failures_last_hour = self.query("stats", &failures, &[]).await?[0].get(0);
        // Per provider and scope with rows due now: how many, the oldest's
        // wait, and when a row of theirs last ran (a running row counts as
        // now). One scan, as the counts by state.
        let due_sql = format!(
            "SELECT provider, scope, due, extract(epoch FROM now() - oldest)::float8,
                    extract(epoch FROM now() - last_run)::float8
               FROM (SELECT provider, scope,
                            count(*) FILTER (WHERE state = 'pending' AND run_at <= now()) AS due,
                            min(run_at) FILTER (WHERE state = 'pending' AND run_at <= now()) AS oldest,
                            greatest(max(completed_at), max(last_failed_at),
                                     max(now()) FILTER (WHERE state = 'running')) AS last_run
                       FROM {t} GROUP BY 1, 2) g
              WHERE due > 0 ORDER BY 1, 2"
        );
        let secs = |s: f64| Duration::from_secs_f64(s.max(0.0));
        let due = self
            .query("stats", &due_sql, &[])
            .await?
            .iter()
            .map(|r| {
                let oldest_due = secs(r.get(3));
                let last_run = r.get::<Option<f64>>(4).map(secs);
                let idle = last_run.is_none_or(|d| d > self.unserved_after);
                Backlog {
                    provider: r.get(0),
                    scope: r.get(1),
                    rows: r.get(2),
                    oldest_due,
                    last_run,
                    unserved: oldest_due > self.unserved_after && idle,
                }
            })
            .collect();
        Ok(Stats {
            by_state,
            oldest_pending: oldest.map(|s| Duration::from_secs_f64(s.max(0.0))),
            attempts,
            failures_last_hour,
            due,
        })
    }

    /// Up to `limit` rows in `state` matching `filter`, oldest first.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn list(&self, state: &str, filter: &Filter, limit: usize) -> Result<Vec<EventRow>, StoreError> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM {} WHERE state = $5 AND {MATCH} ORDER BY received_at LIMIT $6",
            self.t
        );
        let params = listing(filter.params(), state, limit);
        Ok(self.query("list", &sql, &params).await?.iter().map(event_row).collect())
    }

    /// One event in full; the stored payload only with `with_payload`.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn show(
        &self,
        provider: &str,
        scope: &str,
        key: &str,
        with_payload: bool,
    ) -> Result<Option<EventDetail>, StoreError> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS}, completed_at, run_at, locked_until, octet_length(payload),
                    CASE WHEN $4 THEN payload END
             FROM {} WHERE provider = $1 AND scope = $2 AND event_key = $3",
            self.t
        );
        let params = [Param::Text(provider), Param::Text(scope), Param::Text(key), Param::Bool(with_payload)];
        let found = self.query("show", &sql, &params).await?;
        Ok(found.first().map(|r| EventDetail {
            row: event_row(r),
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
    /// [`StoreError`]; nothing changed.
    pub async fn requeue(&self, filter: &Filter, dry_run: bool, actor: &str) -> Result<u64, StoreError> {
        self.act("requeue", "state IN ('dead', 'failed')", filter, dry_run, actor).await
    }

    /// Runs matching `done` events again from their stored payload: they go
    /// back to `pending` (inbox mode), so their effects repeat. Rows without
    /// a payload are left. Returns the rows changed (or that would change).
    ///
    /// # Errors
    /// [`StoreError`]; nothing changed.
    pub async fn replay(&self, filter: &Filter, dry_run: bool, actor: &str) -> Result<u64, StoreError> {
        self.act("replay", "state = 'done'", filter, dry_run, actor).await
    }

    /// The action's update and its audit row ([`Admin::audited`]).
    async fn act(
        &self,
        action: &str,
        states: &str,
        filter: &Filter,
        dry_run: bool,
        actor: &str,
    ) -> Result<u64, StoreError> {
        let sql = format!(
            "WITH changed AS (
                 UPDATE {} SET state = 'pending', attempts = 0, run_at = now(), retry_from = now(), locked_until = NULL, lease_token = NULL
                 WHERE {states} AND payload IS NOT NULL AND {MATCH}
                 RETURNING 1)
             SELECT count(*) FROM changed",
            self.t
        );
        let json = filter_json(filter).to_string();
        self.audited(action, &sql, &filter.params(), &json, dry_run, actor).await
    }

    /// The providers that have `done` or `failed` rows received more than
    /// `older_than` ago while `older_than` is shorter than their documented
    /// window ([`Retention::window`]: the preset's documented replay window,
    /// or the default window, 30 days, for a provider without a preset, as
    /// [`Retention`] keeps them), with that window: purging those rows would
    /// let a replay of the event run again. Empty when the age is safe for
    /// every provider present.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn inside_replay_windows(&self, older_than: Duration) -> Result<Vec<(String, Duration)>, StoreError> {
        let sql = format!(
            "SELECT DISTINCT provider FROM {} WHERE state IN ('done', 'failed')
                AND received_at < now() - make_interval(secs => $1) ORDER BY 1",
            self.t
        );
        let rows = self.query("purge check", &sql, &[Param::F64(older_than.as_secs_f64())]).await?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                let provider: String = r.get(0);
                let window = self.retention.window(&provider);
                (older_than < window).then_some((provider, window))
            })
            .collect())
    }

    /// The database's `now() - older_than`: the time before which
    /// [`purge`](Self::purge) and [`purge_effects`](Self::purge_effects) take
    /// rows, on the clock they compare with (PostgreSQL's, not this
    /// process's, which may be skewed from it: OPERATIONS.md, "Clocks"). Each
    /// purge batch takes its own `now()`, as late as the batch runs, so every
    /// row older than the time returned here is taken.
    ///
    /// # Errors
    /// [`StoreError`], also for an `older_than` that reaches before
    /// PostgreSQL's earliest timestamp (4713 BC).
    pub async fn cutoff(&self, older_than: Duration) -> Result<SystemTime, StoreError> {
        let sql = "SELECT now() - make_interval(secs => $1)";
        Ok(self.query("purge cutoff", sql, &[Param::F64(older_than.as_secs_f64())]).await?[0].get(0))
    }

    /// Deletes `done` and `failed` rows received more than `older_than` ago
    /// (never `pending`, `running` or `dead`), with the same batched
    /// statement as [`Retention`], and records
    /// it. A dry run counts what would go.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn purge(&self, older_than: Duration, dry_run: bool, actor: &str) -> Result<u64, StoreError> {
        let secs = Param::F64(older_than.as_secs_f64());
        if dry_run {
            let sql = format!(
                "SELECT count(*) FROM {} WHERE ($2::text IS NULL OR scope = $2)
                    AND state IN ('done', 'failed') AND received_at < now() - make_interval(secs => $1)",
                self.t
            );
            let n: i64 = self.query("purge", &sql, &[secs, Param::OptText(self.scope.as_deref())]).await?[0].get(0);
            return Ok(u64::try_from(n).unwrap_or(0));
        }
        let report = self.retention.purge_older_than(Some(older_than)).await?;
        let filter = serde_json::json!({ "older_than_secs": older_than.as_secs(), "scope": self.scope }).to_string();
        let params = audit_params(actor, "purge", &filter, report.deleted);
        self.query("purge: audit", &self.audit_insert(), &params).await?;
        Ok(report.deleted)
    }

    /// The `INSERT` of an audit row: `$1 actor, $2 action, $3 filter JSON,
    /// $4 rows`; the time and the session's role (`db_role`) are the
    /// columns' defaults, `now()` and `session_user`.
    fn audit_insert(&self) -> String {
        format!("INSERT INTO {} (actor, action, filter, rows) VALUES ($1, $2, $3::text::jsonb, $4)", self.audit)
    }

    /// The audit rows, newest first.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn audit(&self, limit: usize) -> Result<Vec<AuditRow>, StoreError> {
        let sql = format!(
            "SELECT at, actor, db_role, action, filter::text, rows FROM {} ORDER BY at DESC LIMIT $1",
            self.audit
        );
        let rows = self.query("audit", &sql, &[limit_param(limit)]).await?;
        Ok(rows
            .iter()
            .map(|r| AuditRow {
                at: r.get(0),
                actor: r.get(1),
                db_role: r.get(2),
                action: r.get(3),
                filter: r.get(4),
                rows: r.get(5),
            })
            .collect())
    }

    /// Sets the state gauges once (see [`crate::metrics`]): rows by provider
    /// and state, and the oldest pending row's age in seconds (0 when none is
    /// pending); outbox rows by effect and state, and how long the oldest due
    /// effect has been due.
    ///
    /// # Errors
    /// The [`StoreError`] of the query.
    pub async fn sample_gauges(&self) -> Result<(), StoreError> {
        let stats = self.stats().await?;
        // Every provider with rows gets its gauge, 0 when nothing is unserved.
        let mut unserved: std::collections::BTreeMap<String, i64> =
            stats.by_state.iter().map(|(provider, _, _, _)| (provider.clone(), 0)).collect();
        for backlog in stats.due.iter().filter(|b| b.unserved) {
            *unserved.entry(backlog.provider.clone()).or_default() += backlog.rows;
        }
        for (provider, rows) in unserved {
            crate::metrics::inbox_unserved(provider, rows);
        }
        let events = stats.by_state.into_iter().map(|(provider, _scope, state, rows)| (provider, state, rows));
        for ((provider, state), rows) in every_state(events, &["pending", "running", "done", "failed", "dead"]) {
            crate::metrics::events(provider, state, rows);
        }
        crate::metrics::oldest_pending(stats.oldest_pending.unwrap_or_default());
        let outbox = self.outbox_stats().await?;
        for ((effect, state), rows) in
            every_state(outbox.by_state, &["pending", "running", "done", "uncertain", "dead"])
        {
            crate::metrics::outbox_rows(effect, state, rows);
        }
        crate::metrics::outbox_oldest_due(outbox.oldest_due.unwrap_or_default());
        Ok(())
    }

    /// The gauge sampler: [`sample_gauges`](Self::sample_gauges) every
    /// `period` until `shutdown` completes, a task that runs beside the
    /// server (spawn it, or use [`spawn_gauge_sampler`](Self::spawn_gauge_sampler)).
    /// A failed query is logged at WARN and retried the next period.
    pub async fn run_gauge_sampler(self, period: Duration, shutdown: impl std::future::Future<Output = ()>) {
        super::every(period, shutdown, || async {
            if let Err(e) = self.sample_gauges().await {
                tracing::warn!(error = %e, "metrics gauge sampler: query failed; retried next period");
            }
        })
        .await;
    }

    /// Spawns [`run_gauge_sampler`](Self::run_gauge_sampler) on the current
    /// Tokio runtime; await the handle to know it stopped.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn spawn_gauge_sampler(
        self,
        period: Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.run_gauge_sampler(period, shutdown))
    }
}

/// Rows summed by `(label, state)`, with every state in `states` present
/// (zero) for each label seen, so a gauge whose rows moved on reads 0.
fn every_state(
    counts: impl IntoIterator<Item = (String, String, i64)>,
    states: &[&str],
) -> std::collections::BTreeMap<(String, String), i64> {
    let mut by_state: std::collections::BTreeMap<(String, String), i64> = Default::default();
    for (label, state, rows) in counts {
        *by_state.entry((label, state)).or_default() += rows;
    }
    let labels: std::collections::BTreeSet<String> = by_state.keys().map(|(l, _)| l.clone()).collect();
    for label in labels {
        for state in states {
            by_state.entry((label.clone(), (*state).to_owned())).or_default();
        }
    }
    by_state
}

/// `$1..$4` of [`Admin::audit_insert`].
fn audit_params<'a>(actor: &'a str, action: &'a str, filter: &'a str, rows: u64) -> [Param<'a>; 4] {
    [Param::Text(actor), Param::Text(action), Param::Text(filter), Param::I64(i64::try_from(rows).unwrap_or(i64::MAX))]
}

/// The filter as the audit row records it.
fn filter_json(filter: &Filter) -> serde_json::Value {
    let mut json = serde_json::to_value(filter).unwrap_or_default();
    if let (Some(since), Some(map)) = (filter.since, json.as_object_mut()) {
        map.insert("since_secs".into(), since.as_secs().into());
    }
    json
}

fn event_row(r: &Row) -> EventRow {
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
