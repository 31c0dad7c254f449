//! Retention: delete `done` and `failed` rows older than a window that must
//! outlast the provider's retries and manual replays.
//!
//! An event whose key was purged and that arrives again is processed again
//! (RELIABILITY.md shows it), so the window must exceed the longest time a
//! provider can send the same event: its automatic retries and the manual
//! redelivery its dashboard or CLI allows. [`replay_window`] gives the
//! documented windows; [`RetentionBuilder::build`] refuses a shorter one
//! unless [`allow_short_window`](RetentionBuilder::allow_short_window) says so.
//!
//! [`Retention::purge`] deletes in short batches (`batch_size` rows per
//! statement, each its own transaction, a pause between them), oldest first
//! through the `received_at` index, skipping rows another purger holds
//! (`FOR UPDATE SKIP LOCKED`), so several processes may purge at once without
//! waiting on or double-counting each other. It never touches `pending`,
//! `running` or `dead` rows.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;

use crate::layer::ConfigErrorKind;
use crate::ConfigError;

const DAY: u64 = 86_400;

/// Stripe: automatic retries for up to 3 days; the Dashboard resends events
/// of the last 15 days and the Stripe CLI (`stripe events resend`) of the
/// last 30 (<https://docs.stripe.com/webhooks#retries>).
pub const STRIPE_REPLAY_WINDOW: Duration = Duration::from_secs(30 * DAY);
/// GitHub: no automatic retries; a delivery can be redelivered by hand or
/// through the API for 3 days
/// (<https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks>).
pub const GITHUB_REPLAY_WINDOW: Duration = Duration::from_secs(3 * DAY);
/// Shopify: failed deliveries are retried over 48 hours
/// (<https://shopify.dev/docs/apps/build/webhooks/troubleshooting-webhooks>).
pub const SHOPIFY_REPLAY_WINDOW: Duration = Duration::from_secs(2 * DAY);
/// Slack Events API: three retries, the last about 5 minutes after the first
/// attempt (<https://api.slack.com/apis/events-api#retries>); a day covers it
/// with a margin.
pub const SLACK_REPLAY_WINDOW: Duration = Duration::from_secs(DAY);
/// Any provider without a documented window here: 30 days, as long as the
/// longest above. State your provider's own with
/// [`RetentionBuilder::window`].
pub const DEFAULT_REPLAY_WINDOW: Duration = Duration::from_secs(30 * DAY);

/// The documented redelivery and manual-replay window of a preset, by
/// provider name; `None` for providers without one here.
pub fn replay_window(provider: &str) -> Option<Duration> {
    match provider {
        "stripe" => Some(STRIPE_REPLAY_WINDOW),
        "github" => Some(GITHUB_REPLAY_WINDOW),
        "shopify" => Some(SHOPIFY_REPLAY_WINDOW),
        "slack" => Some(SLACK_REPLAY_WINDOW),
        _ => None,
    }
}

/// Builds a [`Retention`].
#[derive(Debug)]
#[must_use]
pub struct RetentionBuilder {
    pool: Pool,
    schema: String,
    windows: BTreeMap<String, Duration>,
    default_window: Duration,
    batch_size: u32,
    pause: Duration,
    allow_short: bool,
}

impl RetentionBuilder {
    /// The schema holding the tables (default `webhook_idempotency`).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Keep `provider`'s rows for `window` after they were received.
    pub fn window(mut self, provider: impl Into<String>, window: Duration) -> Self {
        self.windows.insert(provider.into(), window);
        self
    }

    /// The window of providers not named with [`window`](Self::window)
    /// (default [`DEFAULT_REPLAY_WINDOW`], 30 days).
    pub fn default_window(mut self, window: Duration) -> Self {
        self.default_window = window;
        self
    }

    /// Rows deleted per statement (default 1,000): each batch is a short
    /// transaction of its own.
    pub fn batch_size(mut self, rows: u32) -> Self {
        self.batch_size = rows;
        self
    }

    /// The pause between batches (default 50 ms), leaving the database to
    /// the deliveries.
    pub fn pause(mut self, pause: Duration) -> Self {
        self.pause = pause;
        self
    }

    /// Accepts windows shorter than the provider's documented replay window.
    /// A replay after the purge is then processed again.
    pub fn allow_short_window(mut self, allow: bool) -> Self {
        self.allow_short = allow;
        self
    }

    /// Checks the windows and builds.
    ///
    /// # Errors
    /// [`ConfigError`] of kind `InvalidLimit` for a window shorter than the
    /// provider's [`replay_window`] (unless allowed) or a batch size of 0,
    /// `InvalidSchema` for an invalid schema name.
    pub fn build(self) -> Result<Retention, ConfigError> {
        super::check_schema_name(&self.schema).map_err(|m| ConfigError::of(ConfigErrorKind::InvalidSchema, m))?;
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
        let t = format!("{}.webhook_events", self.schema);
        let purge = format!(
            "WITH doomed AS (
                 SELECT scope, provider, event_key FROM {t}
                 WHERE received_at < now() - make_interval(secs => $1)
                   AND state IN ('done', 'failed')
                   AND ($2::text IS NULL OR provider = $2)
                   AND NOT (provider = ANY($3::text[]))
                 ORDER BY received_at
                 LIMIT $4
                 FOR UPDATE SKIP LOCKED)
             DELETE FROM {t} e USING doomed
             WHERE (e.scope, e.provider, e.event_key) = (doomed.scope, doomed.provider, doomed.event_key)"
        );
        Ok(Retention {
            pool: self.pool,
            purge,
            windows: self.windows,
            default_window: self.default_window,
            batch_size: self.batch_size,
            pause: self.pause,
        })
    }
}

/// Deletes rows past their retention window. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Retention {
    pool: Pool,
    purge: String,
    windows: BTreeMap<String, Duration>,
    default_window: Duration,
    batch_size: u32,
    pause: Duration,
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
    /// A retention on `pool`'s database; windows from [`replay_window`] are
    /// applied to the presets that document one, unless set otherwise.
    pub fn builder(pool: Pool) -> RetentionBuilder {
        RetentionBuilder {
            pool,
            schema: super::DEFAULT_SCHEMA.to_owned(),
            windows: ["stripe", "github", "shopify", "slack"]
                .into_iter()
                .filter_map(|p| Some((p.to_owned(), replay_window(p)?)))
                .collect(),
            default_window: DEFAULT_REPLAY_WINDOW,
            batch_size: 1_000,
            pause: Duration::from_millis(50),
            allow_short: false,
        }
    }

    /// Deletes every `done` or `failed` row older than its provider's window,
    /// in batches, until none is left.
    ///
    /// # Errors
    /// [`PurgeError`]: no connection, or a batch failed (the batches before
    /// it stay deleted).
    pub async fn purge(&self) -> Result<PurgeReport, PurgeError> {
        self.purge_older_than(None).await
    }

    /// [`purge`](Self::purge) with one window for every provider (the admin
    /// command's `--older-than`). The windows checked at build do not apply.
    ///
    /// # Errors
    /// As [`purge`](Self::purge).
    pub async fn purge_older_than(&self, older_than: Option<Duration>) -> Result<PurgeReport, PurgeError> {
        let started = Instant::now();
        let mut report = PurgeReport::default();
        let client = self.pool.get().await.map_err(PurgeError::unavailable)?;
        let stmt = client.prepare_cached(&self.purge).await?;
        let named: Vec<String> = self.windows.keys().cloned().collect();
        let limit = i64::from(self.batch_size);
        let mut runs: Vec<(Option<String>, Duration, Vec<String>)> = match older_than {
            Some(age) => vec![(None, age, Vec::new())],
            None => self.windows.iter().map(|(p, w)| (Some(p.clone()), *w, Vec::new())).collect(),
        };
        if older_than.is_none() {
            runs.push((None, self.default_window, named));
        }
        for (provider, window, excluded) in runs {
            let secs = window.as_secs_f64();
            loop {
                let deleted = client.execute(&stmt, &[&secs, &provider, &excluded, &limit]).await?;
                report.batches += 1;
                report.deleted += deleted;
                if deleted < u64::from(self.batch_size) {
                    break;
                }
                tokio::time::sleep(self.pause).await;
            }
        }
        report.took = started.elapsed();
        Ok(report)
    }

    /// Purges every `period` until `shutdown` completes: a task to spawn. Safe
    /// with several processes running it at once. Failures are logged and
    /// retried at the next period.
    pub async fn run(self, period: Duration, shutdown: impl std::future::Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut every = tokio::time::interval(period);
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                _ = every.tick() => {}
            }
            match self.purge().await {
                Ok(report) => {
                    tracing::info!(deleted = report.deleted, batches = report.batches, took = ?report.took, "retention purge")
                }
                Err(e) => tracing::warn!(error = %e, "retention purge failed; retried next period"),
            }
        }
    }
}

/// A purge that stopped: no connection, or a batch failed (the batches
/// before it stay deleted).
pub type PurgeError = super::admin::OpsError;
