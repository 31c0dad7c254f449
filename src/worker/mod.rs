//! The worker runtime: one runtime, several kinds of work.
//!
//! The shape is River's: a **producer** leases at most as many due items as
//! it has free slots (one `UPDATE ... WHERE ... IN (SELECT ... FOR UPDATE
//! SKIP LOCKED LIMIT n) RETURNING`, a lease deadline and a fresh token per
//! row; a kind's large columns are read per item, not by the lease; with a
//! [fetch cooldown](WorkerBuilder::fetch_cooldown), slots that free within it
//! share one lease statement); an **executor** runs each item under a heartbeat that renews its
//! lease every third of it, with the user's code in a task of its own (a
//! panic is a failed run) bounded by the handler timeout; a **completer**
//! ends every item fenced by its token (done inside the work's own
//! transaction, retried at a backoff with full jitter, dead once the retry
//! budget of [`RetryPolicy`] is spent, or left to whoever took the lease over); a row whose lease
//! expired (its process died, say in a handler that aborts it) goes back at a backoff and next
//! **runs alone** in its process, so a crash costs a retry only to the row that causes it (see
//! below); a **notifier** wakes
//! the producer by `LISTEN` (with reconnect), polling being the fallback so
//! a lost notification costs at most one poll interval; and **graceful
//! shutdown** stops leasing, lets work in hand finish for a bound, then
//! rolls the rest back and releases their rows (the attempt not counted).
//!
//! A kind of work supplies its table and statements (a queue kind in the
//! store) and the function that runs one item (`Work`); it never copies the
//! loop. The inbox worker ([`InboxWorker`](crate::inbox::InboxWorker)) is
//! the first kind; every kind shares [`WorkerBuilder`]'s settings and
//! [`RetryPolicy`].
//!
//! **Crashes.** A handler that kills its process (`std::process::abort`, a
//! panic in a `panic = "abort"` build, a segfault in a C library, the OOM
//! killer) takes every row that process was running down with it: their
//! leases expire together and nothing tells which one did it. So the lease
//! statement that finds an expired lease puts the row back due at the
//! policy's backoff (full jitter), marked to run alone (`run_alone`, with
//! `last_error` saying so); that run counts as a run, but a lease expiry
//! buries only a row that ran alone. A worker leases a marked row only once its process has nothing
//! else in hand on that database (every worker of the process on it, inbox
//! and outbox alike, stops leasing until then), and nothing else starts
//! while it runs: if the process dies again, that row killed it; its lease
//! expiring while it ran alone counts, and on its last allowed run it is
//! `dead` with that reason ("the lease expired while it ran alone ...").
//! Any other end clears the mark. The cost: nothing while no lease expires
//! (one probe of an empty partial index in the lease statement); after a
//! crash, each row of the dead process's batch runs alone once, one at a
//! time, while the process's other workers on that database wait (the runs
//! in hand finish first; a run whose lease could not be renewed for a whole
//! lease no longer holds them). A process serving two databases isolates
//! each on its own: run their workers in separate processes if a crash in
//! one must not cost the other's rows a run.
//!
//! Every run is counted (`webhook_worker_runs_total` by `kind`, `provider`
//! and `outcome`: `done`, `retried`, `dead`, `lease_lost`, `released`) and
//! timed (`webhook_worker_run_duration_seconds`); see [`crate::metrics`].
//! The run's log lines, the handler's included, carry a span with the
//! item's `kind`, `provider`, `scope`, `key` and `attempt` (and the
//! outbox's `effect`).

mod completer;
mod executor;
mod isolation;
mod producer;
mod retry;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use executor::{Guard, Stopped};
pub use retry::RetryPolicy;

use crate::error::{ConfigError, ConfigErrorKind};
use crate::store::driver::any::AnyListener;
use crate::store::driver::Db;
use crate::store::queue::{Leased, QueueKind, TableQueue};
use crate::store::StoreConfig;

/// How one run of an item ended, for the completer.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The work committed with the row marked `done`.
    Done,
    /// The lease was no longer this worker's: the work rolled back and the
    /// row is left to the lease's new holder.
    LeaseLost,
    /// The run failed (rolled back): retry later or bury. `error` is a
    /// description without payload or secrets; `status` the handler's;
    /// `after` the delay the work asked for instead of the backoff (the
    /// outbox's `RetryAfter`, already bounded).
    Failed { error: String, status: Option<u16>, after: Option<std::time::Duration> },
    /// The run failed permanently: bury the row now, whatever its attempts.
    Dead { error: String, status: Option<u16> },
    /// The work ended the row itself in a state of its kind (the outbox's
    /// `uncertain`, `resent`): counted under that name.
    Settled(&'static str),
    /// The work knew how the run ended but could not record it (the
    /// database failed through every try): nothing more is written; the
    /// lease expires and the row runs again (the documented at-least-once
    /// window). Never turned into a retry or a burial that would misstate
    /// what happened.
    Unrecorded { error: String },
}

impl Outcome {
    pub(crate) fn failed(error: impl Into<String>, status: Option<u16>) -> Self {
        Self::Failed { error: error.into(), status, after: None }
    }
}

/// A kind of work: runs one leased item in a transaction it opens from the
/// queue, with the user's code inside [`Guard::call`], and ends it fenced.
pub(crate) trait Work: Clone + Send + 'static {
    /// The queue kind this work leases from.
    type Kind: QueueKind;

    /// Runs `item` once (the producer clones the work for each item).
    fn run(
        self,
        queue: &TableQueue<Self::Kind>,
        item: &Leased<<Self::Kind as QueueKind>::Payload>,
        guard: &Guard,
    ) -> impl Future<Output = Outcome> + Send;
}

/// What a worker's [`provider`](WorkerBuilder::provider) filter is given: a
/// [`Provider`](crate::Provider) (its name, as the layer stores it), or a
/// name, which [`WorkerBuilder::build`] checks against the compiled presets
/// ([`providers::REGISTRY`](crate::providers::REGISTRY)). A provider of your
/// own by name: [`WorkerBuilder::custom_provider`].
#[derive(Debug, Clone)]
pub struct ProviderName {
    name: String,
    checked: bool,
}

impl From<&crate::Provider> for ProviderName {
    fn from(provider: &crate::Provider) -> Self {
        Self { name: provider.name().to_owned(), checked: false }
    }
}

impl From<crate::Provider> for ProviderName {
    fn from(provider: crate::Provider) -> Self {
        Self::from(&provider)
    }
}

impl From<&str> for ProviderName {
    fn from(name: &str) -> Self {
        Self { name: name.to_owned(), checked: true }
    }
}

impl From<String> for ProviderName {
    fn from(name: String) -> Self {
        Self { name, checked: true }
    }
}

/// Refuses a provider name given as text that no compiled preset has (a
/// worker filtering on it would lease nothing, silently, for ever).
fn check_provider(name: &str) -> Result<(), ConfigError> {
    let presets = crate::providers::REGISTRY;
    if presets.iter().any(|p| p.name == name) {
        return Ok(());
    }
    let hint = presets
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name))
        .map(|p| format!(" (did you mean \"{}\"?)", p.name))
        .unwrap_or_default();
    Err(ConfigError::of(
        ConfigErrorKind::InvalidName,
        format!(
            "the worker's provider \"{name}\" is no compiled preset{hint}: rows are stored under the layer's \
             provider name, so this worker would lease nothing. Give it the layer's `Provider` \
             (`.provider(Provider::github())`), enable the preset's feature, or use `.custom_provider(name)` \
             for a provider of your own"
        ),
    ))
}

/// The default of [`WorkerBuilder::fetch_cooldown`]: 5 ms.
pub const DEFAULT_FETCH_COOLDOWN: Duration = Duration::from_millis(5);

/// The default of [`WorkerBuilder::listen_check_interval`]: 60 s.
pub const DEFAULT_LISTEN_CHECK_INTERVAL: Duration = Duration::from_secs(60);

/// The runtime's settings, common to every kind of work.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) provider: Option<String>,
    /// Whether `provider` was given as a preset's name (checked at build).
    pub(crate) provider_checked: bool,
    pub(crate) scope: Option<String>,
    pub(crate) concurrency: usize,
    pub(crate) batch_size: Option<usize>,
    pub(crate) fetch_cooldown: Duration,
    pub(crate) lease: Duration,
    pub(crate) poll_interval: Duration,
    pub(crate) handler_timeout: Duration,
    pub(crate) shutdown_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    /// The store's `LISTEN` connection, when it has one.
    pub(crate) listen: Option<AnyListener>,
    pub(crate) listen_check_interval: Duration,
    /// Only rows whose kind's filter column is one of these (the outbox:
    /// the effects this worker has functions for).
    pub(crate) only: Option<Vec<String>>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            provider: None,
            provider_checked: false,
            scope: None,
            concurrency: 4,
            batch_size: None,
            fetch_cooldown: DEFAULT_FETCH_COOLDOWN,
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            handler_timeout: Duration::from_secs(300),
            shutdown_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            listen: None,
            listen_check_interval: DEFAULT_LISTEN_CHECK_INTERVAL,
            only: None,
        }
    }
}

impl Settings {
    /// Rows leased per statement: the batch size, up to the free slots.
    pub(crate) fn batch(&self) -> usize {
        self.batch_size.unwrap_or(self.concurrency)
    }
}

/// Builds a worker of one kind (an [`InboxWorker`](crate::inbox::InboxWorker),
/// ...): the settings every kind shares are here, the kind's own next to
/// its constructor. Every setter takes `self` by value.
#[must_use]
pub struct WorkerBuilder<W> {
    store: StoreConfig,
    work: W,
    settings: Settings,
}

impl<W> fmt::Debug for WorkerBuilder<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("store", &self.store)
            .field("concurrency", &self.settings.concurrency)
            .finish_non_exhaustive()
    }
}

impl<W> WorkerBuilder<W> {
    pub(crate) fn new(store: StoreConfig, work: W) -> Self {
        Self { store, work, settings: Settings::default() }
    }

    /// The kind's own work, for its builder's settings.
    pub(crate) fn work_mut(&mut self) -> &mut W {
        &mut self.work
    }

    setters! {
        /// Leases only rows whose kind's filter column is one of `names`.
        pub(crate) fn only(names: Vec<String>) => settings.only = Some(names);
    }

    /// Only rows of this provider (default: all): the layer's [`Provider`](crate::Provider)
    /// (`.provider(Provider::github())`, or `&provider`), or a compiled
    /// preset's name (`"github"`; [`build`](Self::build) refuses a name no
    /// preset has, `"GitHub"` say, which would lease nothing for ever).
    pub fn provider(mut self, provider: impl Into<ProviderName>) -> Self {
        let ProviderName { name, checked } = provider.into();
        self.settings.provider = Some(name);
        self.settings.provider_checked = checked;
        self
    }

    /// Only rows of the provider named `name`, a provider of your own (built
    /// with [`Provider::new`](crate::Provider::new)): not checked against the
    /// presets. Prefer [`provider`](Self::provider) with the layer's
    /// `Provider`, which cannot be misspelt.
    pub fn custom_provider(mut self, name: impl Into<String>) -> Self {
        self.settings.provider = Some(name.into());
        self.settings.provider_checked = false;
        self
    }

    setters! {
        /// Only rows of this scope (default: all).
        pub fn scope(scope: impl Into<String>) => settings.scope = Some(scope.into());

        /// Items processed at once (default 4). Each holds a pooled connection
        /// for its run's duration; size the pool above it.
        pub fn concurrency(n: usize) => settings.concurrency = n;

        /// Rows leased per statement (default: the free slots, up to the
        /// concurrency). Each row is still processed in its own transaction.
        pub fn batch_size(n: usize) => settings.batch_size = Some(n);

        /// The least time between two lease statements while some slots are busy
        /// (default [`DEFAULT_FETCH_COOLDOWN`], 5 ms; `Duration::ZERO` leases as
        /// soon as a slot frees). Slots that free meanwhile are filled by one
        /// statement, so one durable lease commit serves several rows; every
        /// leased row still starts at once (nothing waits leased, so nothing
        /// can go stale, be lost with the process or run on a lease another
        /// worker took). River's producer has the same setting (`FetchCooldown`,
        /// 100 ms by default there). A notification or a retry coming due waits
        /// for it; all slots free does not. It is never longer than the poll
        /// interval (a longer one counts as the poll interval). Measured in
        /// BENCHMARKS.md ("fetch cooldown"): at concurrency 16, 16 rows per lease
        /// instead of 6.
        pub fn fetch_cooldown(cooldown: Duration) => settings.fetch_cooldown = cooldown;

        /// How long a lease lasts without renewal (default 30 s; at least 1 s).
        /// Renewed every third of it while the item runs.
        pub fn lease(lease: Duration) => settings.lease = lease;

        /// How often to look for due rows without a notification (default 1 s).
        pub fn poll_interval(interval: Duration) => settings.poll_interval = interval;

        /// The longest one run of the user's code may take (default 300 s); past
        /// it the run fails and is retried.
        pub fn handler_timeout(timeout: Duration) => settings.handler_timeout = timeout;

        /// How long work in hand may finish after shutdown is asked (default 10 s).
        pub fn shutdown_timeout(timeout: Duration) => settings.shutdown_timeout = timeout;

        /// The retry policy for failed runs (default: retry for up to 3 days,
        /// backoff capped at 1 h; see [`RetryPolicy`]).
        pub fn retry(policy: RetryPolicy) => settings.retry = policy;
    }

    setters! {
        /// How long after a passed check the store's `LISTEN` connection
        /// (`StoreConfig::listen_connection`, with the `tokio-postgres`
        /// feature) is checked again (default
        /// [`DEFAULT_LISTEN_CHECK_INTERVAL`], 60 s; at least 1 s): a
        /// notification sent from a second session must arrive within 5 s,
        /// else the connection went silent (a NAT gateway drops a flow idle
        /// for 350 s on AWS, an Azure load balancer after 4 minutes, and
        /// neither end is told) and the listener connects again. So a silent
        /// listener leaves rows to polling for at most this plus 5 s, instead
        /// of until TCP keepalive notices (2 hours by default). Each check's
        /// notification is also traffic on the listening flow, so an interval
        /// under the path's idle timeout keeps such a flow from being dropped.
        /// Each check opens one short connection to that server.
        pub fn listen_check_interval(interval: Duration) => settings.listen_check_interval = interval;
    }

    /// Checks the settings and builds the worker.
    ///
    /// # Errors
    /// [`ConfigError`] for a provider name given as text that no compiled
    /// preset has ([`InvalidName`](ConfigErrorKind::InvalidName); the
    /// message says what to use instead), an invalid schema name, a concurrency or batch of
    /// 0, a lease or a listen check interval under 1 s, or a retry policy of 0 attempts or a zero
    /// `retry_for`.
    pub fn build(self) -> Result<Worker<W>, ConfigError> {
        let s = &self.settings;
        if let (Some(name), true) = (&s.provider, s.provider_checked) {
            check_provider(name)?;
        }
        if s.concurrency == 0 || s.batch_size == Some(0) {
            return Err(ConfigError::of(
                ConfigErrorKind::InvalidLimit,
                "concurrency and batch size must be at least 1",
            ));
        }
        if s.lease < Duration::from_secs(1) {
            return Err(ConfigError::of(ConfigErrorKind::InvalidLimit, "the lease must be at least 1 s"));
        }
        if s.listen_check_interval < Duration::from_secs(1) {
            return Err(ConfigError::of(
                ConfigErrorKind::InvalidLimit,
                "the listen check interval must be at least 1 s",
            ));
        }
        if s.retry.max_attempts == 0 {
            return Err(ConfigError::of(ConfigErrorKind::InvalidLimit, "the retry policy needs at least 1 attempt"));
        }
        if s.retry.retry_for.is_zero() {
            return Err(ConfigError::of(ConfigErrorKind::InvalidLimit, "the retry policy's retry_for must be above 0"));
        }
        let (db, schema) = self.store.open()?;
        let schema = schema.to_owned();
        let mut settings = self.settings;
        settings.listen = self.store.listener().cloned();
        Ok(Worker { db, schema, work: self.work, settings: Arc::new(settings) })
    }
}

/// A worker of one kind, built by [`WorkerBuilder::build`]. Start it with
/// its kind's `run` (a future to spawn), for example
/// [`InboxWorker::run`](crate::inbox::InboxWorker::run).
pub struct Worker<W> {
    db: Db,
    schema: String,
    work: W,
    settings: Arc<Settings>,
}

impl<W> fmt::Debug for Worker<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("schema", &self.schema)
            .field("concurrency", &self.settings.concurrency)
            .finish_non_exhaustive()
    }
}

/// Runs `worker`'s producer until `shutdown` completes, then shuts down
/// gracefully. Each kind's public `run` calls this.
pub(crate) async fn run<W: Work>(worker: Worker<W>, shutdown: impl Future<Output = ()> + Send) {
    let queue = TableQueue::<W::Kind>::new(worker.db, &worker.schema);
    producer::run(queue, worker.work, worker.settings, shutdown).await;
}
