//! Retention: delete `done` and `failed` rows older than a window that must
//! outlast the provider's retries and manual replays.
//!
//! An event whose key was purged and that arrives again is processed again
//! (RELIABILITY.md shows it), so the window must exceed the longest time a
//! provider can send the same event: its automatic retries and the manual
//! redelivery its dashboard or CLI allows. Each preset states that window as
//! its facts' or its module's window (`providers::stripe::FACTS.replay_window`, ...),
//! with the schedule and the provider page it comes from, and in its
//! [`PresetInfo::replay_window`](crate::providers::PresetInfo::replay_window);
//! [`replay_window`] looks it up by name. [`Retention::builder`] starts every
//! compiled-in preset at its window, [`RetentionBuilder::build`] refuses a
//! shorter one unless
//! [`allow_short_window`](RetentionBuilder::allow_short_window) says so, and
//! a provider without a preset (a generic one) states its own with
//! [`RetentionBuilder::window`] or gets [`DEFAULT_REPLAY_WINDOW`].
//!
//! [`Retention::purge`] deletes in short batches (`batch_size` rows per
//! statement, each its own transaction, a pause between them), provider by
//! provider, oldest first through the `(provider, received_at)` index
//! (migration 5), so each provider's scan stops at its own window; it skips
//! rows another purger holds
//! (`FOR UPDATE SKIP LOCKED`), so several processes may purge at once without
//! waiting on or double-counting each other. It never touches `pending`,
//! `running` or `dead` rows.
//!
//! The same purge deletes delivered outbox rows past
//! [`RetentionBuilder::outbox_window`] (never `pending`, `running`,
//! `uncertain` or `dead` ones), the body-digest guard's digests past
//! their provider's window, and the `Idempotency-Key` layer's keys and stored
//! responses (provider `idempotency-key`, 24 hours unless
//! [`window`](RetentionBuilder::window) says otherwise) past theirs. Business keys (`webhook_actions`) and object
//! versions (`webhook_versions`) are never purged: they guard transitions for
//! as long as the objects live; delete them with your objects.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::driver::{Conn, Db, DbError, Param};
use super::StoreConfig;
use crate::error::{ConfigError, ConfigErrorKind, StoreError};
use crate::providers::DEFAULT_REPLAY_WINDOW;

/// How long delivered outbox rows are kept by default: 30 days.
pub const DEFAULT_OUTBOX_WINDOW: Duration = Duration::from_secs(30 * 86_400);

/// The documented redelivery and manual-replay window of the preset named
/// `provider` (its module's `REPLAY_WINDOW`, from
/// [`PresetInfo::replay_window`](crate::providers::PresetInfo::replay_window)),
/// for every preset in [`crate::providers::REGISTRY`]; `None` for a name no
/// compiled-in preset has (a generic provider, or a preset whose feature is
/// off).
pub fn replay_window(provider: &str) -> Option<Duration> {
    crate::providers::find(provider).map(|p| p.replay_window)
}

/// Builds a [`Retention`].
#[derive(Debug)]
#[must_use]
pub struct RetentionBuilder {
    store: StoreConfig,
    windows: BTreeMap<String, Duration>,
    default_window: Duration,
    batch_size: u32,
    pause: Duration,
    allow_short: bool,
    outbox_window: Duration,
    scope: Option<String>,
}

impl RetentionBuilder {
    /// Keep `provider`'s rows for `window` after they were received. This is
    /// where a generic provider states its sender's window (its retries plus
    /// any manual redelivery); a preset's window may be raised here, and
    /// lowered only with [`allow_short_window`](Self::allow_short_window).
    pub fn window(mut self, provider: impl Into<String>, window: Duration) -> Self {
        self.windows.insert(provider.into(), window);
        self
    }

    setters! {
        /// The window of providers not named with [`window`](Self::window)
        /// (default [`DEFAULT_REPLAY_WINDOW`], 30 days).
        pub fn default_window(window: Duration) => default_window = window;

        /// Rows deleted per statement (default 1,000): each batch is a short
        /// transaction of its own.
        pub fn batch_size(rows: u32) => batch_size = rows;

        /// The pause between batches (default 50 ms), leaving the database to
        /// the deliveries.
        pub fn pause(pause: Duration) => pause = pause;

        /// Accepts windows shorter than the provider's documented replay window.
        /// A replay after the purge is then processed again.
        pub fn allow_short_window(allow: bool) => allow_short = allow;

        /// Keep delivered (`done`) outbox rows for `window` after their delivery
        /// (default [`DEFAULT_OUTBOX_WINDOW`], 30 days): the record of what was
        /// sent, with its remote reference, for operators. `pending`, `running`,
        /// `uncertain` and `dead` rows are never purged. A purged row's event is
        /// still deduplicated by its own row in the events table, so an effect
        /// cannot be enqueued again while that row is kept.
        pub fn outbox_window(window: Duration) => outbox_window = window;

        /// Purge only `scope`'s rows (default: every scope). On Citus each
        /// scope's rows sit on one shard: a retention per scope keeps every
        /// statement on one worker, while one serving every scope first reads
        /// the `(scope, provider)` pairs present (one statement over every
        /// shard, a scan of each table) and purges pair by pair
        /// (OPERATIONS.md, "Distributed PostgreSQL (Citus)").
        pub fn scope(scope: impl Into<String>) => scope = Some(scope.into());
    }

    /// Checks the windows and builds.
    ///
    /// # Errors
    /// [`ConfigError`] of kind `InvalidLimit` for a window shorter than the
    /// provider's [`replay_window`] (unless allowed) or a batch size of 0,
    /// `InvalidSchema` for an invalid schema name.
    pub fn build(self) -> Result<Retention, ConfigError> {
        let (db, schema) = self.store.open()?;
        if self.batch_size == 0 {
            return Err(ConfigError::of(ConfigErrorKind::InvalidLimit, "the retention batch size must be at least 1"));
        }
        if !self.allow_short {
            for (provider, window) in &self.windows {
                if let Some(documented) = replay_window(provider).filter(|d| window < d) {
                    return Err(ConfigError::of(
                        ConfigErrorKind::InvalidLimit,
                        format!(
                            "retention window for {provider} is {} s, shorter than its documented replay window of \
                             {} s: a replay after the purge would be processed again (allow_short_window to accept)",
                            window.as_secs(),
                            documented.as_secs()
                        ),
                    ));
                }
            }
        }
        let t = format!("{schema}.webhook_events");
        let purge = batched_delete(
            &t,
            "scope, provider, event_key",
            "provider = $2 AND ($4::text IS NULL OR scope = $4)
             AND received_at < now() - make_interval(secs => $1) AND state IN ('done', 'failed')
             ORDER BY received_at LIMIT $3",
        );
        // The distinct providers, one probe each on the leading column of
        // (provider, received_at) (a "loose index scan").
        let distinct_providers = |t: &str| {
            format!(
                "WITH RECURSIVE p AS (
                     (SELECT provider FROM {t} ORDER BY provider LIMIT 1)
                     UNION ALL
                     SELECT (SELECT provider FROM {t} WHERE provider > p.provider ORDER BY provider LIMIT 1)
                       FROM p WHERE p.provider IS NOT NULL)
                 SELECT provider FROM p WHERE provider IS NOT NULL"
            )
        };
        let providers = Pairs::new(&t, distinct_providers(&t));
        // The body-digest guard's digests (migration 8) and the
        // Idempotency-Key layer's keys (migration 9) go with their
        // provider's events, by the same window.
        let side_tables = [
            ("webhook_body_digests", "scope, provider, body_sha256"),
            ("webhook_request_keys", "scope, provider, idempotency_key"),
        ];
        let side = side_tables
            .iter()
            .map(|(table, key)| {
                let table = format!("{schema}.{table}");
                let purge = batched_delete(
                    &table,
                    key,
                    "provider = $2 AND ($4::text IS NULL OR scope = $4) AND created_at < now() - make_interval(secs => $1)
                     ORDER BY created_at LIMIT $3",
                );
                (Pairs::new(&table, distinct_providers(&table)), purge)
            })
            .collect();
        let outbox_purge = batched_delete(
            &format!("{schema}.webhook_outbox"),
            "scope, provider, event_key, effect, ordinal",
            "($3::text IS NULL OR scope = $3) AND state = 'done' AND delivered_at < now() - make_interval(secs => $1)
             LIMIT $2",
        );
        Ok(Retention {
            db: db.without_deadline(),
            purge,
            outbox_purge,
            outbox_window: self.outbox_window,
            providers,
            side,
            windows: self.windows,
            default_window: self.default_window,
            batch_size: self.batch_size,
            pause: self.pause,
            scope: self.scope,
            outbox_scopes: format!("SELECT DISTINCT scope FROM {schema}.webhook_outbox WHERE state = 'done'"),
            citus: Arc::default(),
        })
    }
}

/// One batch of a purge: lock up to the batch's rows of `table` that
/// `filter` selects (a `WHERE` condition, then its `ORDER BY` and `LIMIT`),
/// skipping rows another purger holds (`FOR UPDATE SKIP LOCKED`), delete
/// them by their primary key `key` (a column list) and return how many went.
fn batched_delete(table: &str, key: &str, filter: &str) -> String {
    let matched = key.split(", ").map(|c| format!("t.{c}")).collect::<Vec<_>>().join(", ");
    let doomed = key.split(", ").map(|c| format!("doomed.{c}")).collect::<Vec<_>>().join(", ");
    format!(
        "WITH doomed AS (SELECT {key} FROM {table} WHERE {filter} FOR UPDATE SKIP LOCKED)
         , gone AS (DELETE FROM {table} t USING doomed WHERE ({matched}) = ({doomed}) RETURNING 1)
         SELECT count(*) FROM gone"
    )
}

/// Deletes rows past their retention window. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Retention {
    db: Db,
    purge: String,
    outbox_purge: String,
    outbox_window: Duration,
    providers: Pairs,
    /// Per side table: its distinct providers, and its batch purge.
    side: Vec<(Pairs, String)>,
    windows: BTreeMap<String, Duration>,
    default_window: Duration,
    batch_size: u32,
    pause: Duration,
    /// The one scope purged, if set.
    scope: Option<String>,
    /// The scopes with delivered outbox rows (Citus, no scope set).
    outbox_scopes: String,
    /// Whether the database has the `citus` extension (looked up once).
    citus: Arc<tokio::sync::OnceCell<bool>>,
}

/// How a purge finds the `(scope, provider)` pairs of one table it runs
/// over: every provider with no scope filter (one probe per provider); a
/// given scope's providers; or, on Citus with no scope given, every pair
/// present (one statement over every shard: Citus refuses the purge's
/// `FOR UPDATE` over several shards, so each batch names its scope).
#[derive(Debug, Clone)]
struct Pairs {
    providers: String,
    of_scope: String,
    all: String,
}

impl Pairs {
    fn new(table: &str, providers: String) -> Self {
        Self {
            providers,
            of_scope: format!("SELECT DISTINCT provider FROM {table} WHERE scope = $1"),
            all: format!("SELECT DISTINCT scope, provider FROM {table}"),
        }
    }
}

/// What a [`Retention::purge`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PurgeReport {
    /// Rows deleted.
    pub deleted: u64,
    /// Batches run (statements).
    pub batches: u64,
    /// Time taken.
    pub took: Duration,
}

impl Retention {
    /// A retention on `store`'s database (a [`StoreConfig`], or a bare pool
    /// for the defaults; no connection is made until [`purge`](Self::purge)).
    /// Its statements have no client-side deadline; the pool timeout applies.
    /// Every compiled-in preset starts with its
    /// [`replay_window`], unless set otherwise with
    /// [`window`](RetentionBuilder::window); other providers get
    /// [`DEFAULT_REPLAY_WINDOW`].
    pub fn builder(store: impl Into<StoreConfig>) -> RetentionBuilder {
        RetentionBuilder {
            store: store.into(),
            windows: crate::providers::all()
                .iter()
                .map(|p| (p.name.to_owned(), p.replay_window))
                .chain([(super::idempotency_key::PROVIDER.to_owned(), super::idempotency_key::RETENTION)])
                .collect(),
            default_window: DEFAULT_REPLAY_WINDOW,
            batch_size: 1_000,
            pause: Duration::from_millis(50),
            allow_short: false,
            outbox_window: DEFAULT_OUTBOX_WINDOW,
            scope: None,
        }
    }

    /// The window `provider`'s rows are kept for: its preset's
    /// [`replay_window`] (or the one set with
    /// [`window`](RetentionBuilder::window)), else the default window
    /// ([`DEFAULT_REPLAY_WINDOW`] unless set with
    /// [`default_window`](RetentionBuilder::default_window)). One rule for
    /// [`purge`](Self::purge) and for the admin's short-window check.
    pub fn window(&self, provider: &str) -> Duration {
        self.windows.get(provider).copied().unwrap_or(self.default_window)
    }

    /// Deletes every `done` or `failed` event row older than its provider's
    /// window, then every delivered outbox row older than the outbox window,
    /// in batches, until none is left.
    ///
    /// # Errors
    /// [`StoreError`]: no connection, or a batch failed (the batches before
    /// it stay deleted).
    pub async fn purge(&self) -> Result<PurgeReport, StoreError> {
        let events = self.purge_older_than(None).await?;
        let effects = self.purge_effects_older_than(None).await?;
        Ok(PurgeReport {
            deleted: events.deleted + effects.deleted,
            batches: events.batches + effects.batches,
            took: events.took + effects.took,
        })
    }

    /// Deletes delivered (`done`) outbox rows delivered more than
    /// `older_than` ago (the outbox window when `None`), in batches.
    ///
    /// # Errors
    /// As [`purge`](Self::purge).
    pub async fn purge_effects_older_than(&self, older_than: Option<Duration>) -> Result<PurgeReport, StoreError> {
        let step = "retention purge (outbox)";
        let started = Instant::now();
        let mut report = PurgeReport::default();
        let window = older_than.unwrap_or(self.outbox_window);
        let conn = self.db.connect(step).await?;
        let purged = async {
            let scopes = match &self.scope {
                Some(scope) => vec![Some(scope.clone())],
                None if self.on_citus(&conn).await? => {
                    conn.query(&self.outbox_scopes, &[]).await?.iter().map(|row| Some(row.get(0))).collect()
                }
                None => vec![None],
            };
            for scope in scopes {
                let params = [
                    Param::F64(window.as_secs_f64()),
                    Param::I64(i64::from(self.batch_size)),
                    Param::OptText(scope.as_deref()),
                ];
                self.batches(&conn, &self.outbox_purge, &params, &mut report).await?;
            }
            Ok(())
        };
        let purged = purged.await;
        conn.release();
        purged.map_err(|e| self.db.error(&e, step))?;
        report.took = started.elapsed();
        Ok(report)
    }

    /// [`purge`](Self::purge) with one window for every provider (the admin
    /// command's `--older-than`). The windows checked at build do not apply.
    ///
    /// # Errors
    /// As [`purge`](Self::purge).
    pub async fn purge_older_than(&self, older_than: Option<Duration>) -> Result<PurgeReport, StoreError> {
        let step = "retention purge";
        let started = Instant::now();
        let mut report = PurgeReport::default();
        let conn = self.db.connect(step).await?;
        let limit = Param::I64(i64::from(self.batch_size));
        let purged = async {
            let tables = std::iter::once((&self.providers, &self.purge)).chain(self.side.iter().map(|(p, s)| (p, s)));
            for (pairs, purge) in tables {
                for (scope, provider) in self.pairs(&conn, pairs).await? {
                    let window = older_than.unwrap_or_else(|| self.window(&provider));
                    let params = [
                        Param::F64(window.as_secs_f64()),
                        Param::Text(&provider),
                        limit,
                        Param::OptText(scope.as_deref()),
                    ];
                    self.batches(&conn, purge, &params, &mut report).await?;
                }
            }
            Ok(())
        };
        let purged = purged.await;
        conn.release();
        purged.map_err(|e| self.db.error(&e, step))?;
        report.took = started.elapsed();
        Ok(report)
    }

    /// The same retention purging only `scope`'s rows (all scopes with
    /// `None`), as [`RetentionBuilder::scope`].
    pub(crate) fn with_scope(mut self, scope: Option<String>) -> Self {
        self.scope = scope;
        self
    }

    /// The `(scope, provider)` pairs a purge runs over (see [`Pairs`]).
    async fn pairs(&self, conn: &Conn, pairs: &Pairs) -> Result<Vec<(Option<String>, String)>, DbError> {
        Ok(match &self.scope {
            Some(scope) => conn
                .query(&pairs.of_scope, &[Param::Text(scope)])
                .await?
                .iter()
                .map(|row| (Some(scope.clone()), row.get(0)))
                .collect(),
            None if self.on_citus(conn).await? => {
                conn.query(&pairs.all, &[]).await?.iter().map(|row| (Some(row.get(0)), row.get(1))).collect()
            }
            None => conn.query(&pairs.providers, &[]).await?.iter().map(|row| (None, row.get(0))).collect(),
        })
    }

    /// Whether the database has the `citus` extension (looked up once).
    async fn on_citus(&self, conn: &Conn) -> Result<bool, DbError> {
        let sql = "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')";
        let found = self.citus.get_or_try_init(|| async { Ok::<bool, DbError>(conn.query(sql, &[]).await?[0].get(0)) });
        found.await.copied()
    }

    /// Runs the batch `sql` (which returns how many rows it deleted) until a
    /// batch deletes fewer than the batch size, pausing between batches.
    async fn batches(
        &self,
        conn: &Conn,
        sql: &str,
        params: &[Param<'_>],
        report: &mut PurgeReport,
    ) -> Result<(), DbError> {
        loop {
            let deleted: i64 = conn.query(sql, params).await?[0].get(0);
            let deleted = u64::try_from(deleted).unwrap_or(0);
            report.batches += 1;
            report.deleted += deleted;
            if deleted < u64::from(self.batch_size) {
                return Ok(());
            }
            tokio::time::sleep(self.pause).await;
        }
    }

    /// Purges every `period` until `shutdown` completes: a task to spawn. Safe
    /// with several processes running it at once. Failures are logged and
    /// retried at the next period.
    pub async fn run(self, period: Duration, shutdown: impl std::future::Future<Output = ()>) {
        super::every(period, shutdown, || async {
            match self.purge().await {
                Ok(report) => {
                    tracing::info!(deleted = report.deleted, batches = report.batches, took = ?report.took, "retention purge")
                }
                Err(e) => tracing::warn!(error = %e, "retention purge failed; retried next period"),
            }
        })
        .await;
    }
}

impl Retention {
    /// Spawns [`run`](Self::run) on the current Tokio runtime: a purge now
    /// and every `period` after, until `shutdown` completes (a purge under
    /// way finishes first). Await the handle to know it stopped.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn spawn(
        self,
        period: Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.run(period, shutdown))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers;
    use crate::store::driver::any::AnyPool;
    use crate::store::StoreConfig;

    const DAY: u64 = 86_400;

    /// A store whose pool never connects: building a retention makes no connection.
    fn idle_pool() -> StoreConfig {
        StoreConfig::of_pool(AnyPool::unreachable())
    }

    #[test]
    fn every_preset_has_a_window_between_a_day_and_ninety_days_and_replay_window_returns_it() {
        assert!(!providers::all().is_empty());
        for preset in providers::all() {
            let w = preset.replay_window;
            assert!(w >= Duration::from_secs(DAY), "{}: {w:?} is under a day", preset.name);
            assert!(w <= Duration::from_secs(90 * DAY), "{}: {w:?} is over 90 days", preset.name);
            assert_eq!(replay_window(preset.name), Some(w), "{}", preset.name);
        }
        for generic in ["acme", "", "Stripe", "stripe "] {
            assert_eq!(replay_window(generic), None, "{generic:?} is no preset");
        }
    }

    /// The documented windows, in days, of the presets written as code, one
    /// row each: their module's `REPLAY_WINDOW` a second time, on purpose (a
    /// changed window must change both). An HMAC preset states its window
    /// beside its source in its facts (`replay_window`, `replay_evidence`,
    /// which cites the provider's page): a preset added to the registry
    /// without either fails.
    #[cfg(feature = "full")]
    #[test]
    fn each_preset_s_documented_window() {
        use providers::*;
        let cases: &[(&str, u64, &str)] = &[
            (standard_webhooks::NAME, 30, "Svix: ~27.6 h of retries; recover/resend bounded by retention"),
            (standard_webhooks::SVIX_NAME, 30, "as Standard Webhooks"),
            (square::NAME, 4, "retries for up to 72 hours"),
            (twilio::NAME, 1, "connection retries within seconds"),
            (linear::NAME, 2, "retries after 1 min, 1 h, 6 h"),
            (hubspot::NAME, 3, "10 retries, about 24-34 hours"),
            (mailgun::NAME, 1, "retries during 8 hours"),
            (discord::NAME, 1, "interactions are not redelivered"),
            (sendgrid::NAME, 2, "retries for up to 24 hours"),
            (gitlab::NAME, 30, "no automatic retry; manual resend, log retention not stated"),
            (telegram::NAME, 2, "repeats; updates kept at most 24 hours"),
            (recurly::NAME, 4, "10 retries over about 3 days"),
            (gitea::NAME, 1, "no retries; a redelivery has a new id"),
            (forgejo::NAME, 1, "as Gitea"),
            (box_com::NAME, 30, "no published span"),
            (buildkite::NAME, 30, "no published span"),
            (adyen::NAME, 31, "retry queue for up to 30 days"),
            (mandrill::NAME, 30, "retries until given up; span not published"),
            (postmark::NAME, 30, "10 retries over 10.5 hours; manual inbound retry unbounded"),
            (vonage::NAME, 30, "retries; no published span"),
            (dropbox::NAME, 1, "retries over about ten minutes"),
            (asana::NAME, 2, "resends for up to 24 hours"),
            (notion::NAME, 30, "retries; span not confirmed"),
            (aws_sns::NAME, 2, "delivery policy retries within 3,600 s"),
            (airtable::NAME, 30, "retries, no published span"),
            (docusign::NAME, 30, "ten retries at least 24 h apart, no upper bound; manual republish"),
            (trello::NAME, 30, "no span the research could confirm"),
            (apple_app_store::NAME, 8, "5 retries over 157 hours"),
        ];
        for preset in providers::all() {
            match preset.facts() {
                Some(facts) => {
                    let cited = facts.replay_evidence.contains("https://");
                    assert!(cited, "{}: its replay_evidence cites the provider's page", preset.name);
                }
                None => assert!(cases.iter().any(|(name, ..)| *name == preset.name), "{}: no row here", preset.name),
            }
        }
        for (name, days, covers) in cases {
            assert_eq!(replay_window(name), Some(Duration::from_secs(days * DAY)), "{name}: {covers}");
        }
    }

    #[test]
    fn the_builder_starts_every_preset_at_its_window() {
        let builder = Retention::builder(idle_pool());
        for preset in providers::all() {
            assert_eq!(builder.windows.get(preset.name), Some(&preset.replay_window), "{}", preset.name);
        }
        // And the Idempotency-Key layer's keys, at their 24 hours.
        let keys = crate::store::idempotency_key::PROVIDER;
        assert_eq!(builder.windows.get(keys), Some(&crate::store::idempotency_key::RETENTION));
        assert_eq!(builder.windows.len(), providers::all().len() + 1);
        assert_eq!(builder.default_window, DEFAULT_REPLAY_WINDOW);
    }

    #[test]
    fn build_refuses_a_window_shorter_than_each_preset_s_documented_one() {
        let second = Duration::from_secs(1);
        for preset in providers::all() {
            let documented = preset.replay_window;
            let cases: &[(&str, Duration, bool, Option<ConfigErrorKind>)] = &[
                ("one second short", documented - second, false, Some(ConfigErrorKind::InvalidLimit)),
                ("one hour", Duration::from_secs(3600), false, Some(ConfigErrorKind::InvalidLimit)),
                ("one second short, allowed", documented - second, true, None),
                ("exactly the documented window", documented, false, None),
                ("longer", documented + Duration::from_secs(DAY), false, None),
            ];
            for (case, window, allow, want) in cases {
                let built =
                    Retention::builder(idle_pool()).window(preset.name, *window).allow_short_window(*allow).build();
                assert_eq!(built.err().map(|e| e.kind()), *want, "{}: {case}", preset.name);
            }
        }
    }

    #[test]
    fn a_generic_provider_states_its_own_window() {
        let cases: &[(&str, Duration)] = &[
            ("an hour", Duration::from_secs(3600)),
            ("a second", Duration::from_secs(1)),
            ("a year", Duration::from_secs(365 * DAY)),
        ];
        for (case, window) in cases {
            let built = Retention::builder(idle_pool()).window("acme", *window).build();
            assert!(built.is_ok(), "{case}: no documented window for a generic provider to undercut");
            assert_eq!(built.unwrap().windows.get("acme"), Some(window), "{case}");
        }
    }
}
