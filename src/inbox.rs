//! Inbox mode: acknowledge after a durable insert, process with leased
//! workers.
//!
//! With [`Mode::Inbox`](crate::layer::Mode::Inbox) the layer verifies a
//! delivery, extracts its key, inserts it as a `pending` row (the raw body
//! and the request head, see [`RequestHead`](crate::store::inbox::RequestHead))
//! and answers 2xx only once that insert committed: in milliseconds,
//! whatever the handler costs (Slack retries after 3 s, Shopify after 5 s,
//! GitHub gives up after 10 s). A duplicate of an accepted event, in any
//! state, is answered 2xx with `Idempotent-Replayed: true` and writes nothing.
//!
//! An [`InboxWorker`] then runs the same handler the synchronous mode wraps:
//! it leases due rows, rebuilds each request (same method, URI, body and
//! kept headers) and calls the service with [`WebhookTx`](crate::WebhookTx)
//! and [`WebhookEvent`] in the extensions. The
//! handler's writes and the row's `done` commit in one transaction, fenced by
//! the lease token: a worker whose lease was taken over cannot complete the
//! row, and its writes roll back with it.
//!
//! ```no_run
//! use axum::{http::StatusCode, routing::post, Router};
//! use webhook_idempotency::inbox::InboxWorker;
//! use webhook_idempotency::layer::Mode;
//! use webhook_idempotency::{Provider, WebhookEvent, WebhookLayer, WebhookTx};
//!
//! async fn on_event(tx: WebhookTx, event: WebhookEvent) -> StatusCode {
//!     let Ok(db) = tx.client().await else { return StatusCode::INTERNAL_SERVER_ERROR };
//!     match db.execute("INSERT INTO slack_events (id) VALUES ($1)", &[&event.key()]).await {
//!         Ok(_) => StatusCode::OK,
//!         Err(_) => StatusCode::INTERNAL_SERVER_ERROR, // retried later with backoff
//!     }
//! }
//!
//! # async fn run(pool: deadpool_postgres::Pool, secret: String) -> Result<(), Box<dyn std::error::Error>> {
//! let handlers = Router::new().route("/webhooks/slack", post(on_event));
//! let layer = WebhookLayer::builder(pool.clone(), Provider::slack())
//!     .scope("T0001")
//!     .secret(secret)
//!     .mode(Mode::Inbox)
//!     .build()?;
//! // The layer goes on a clone for the HTTP app; the worker gets the handlers
//! // without it (the stored requests carry no signature to verify).
//! let app = handlers.clone().route_layer(layer);
//! let worker = InboxWorker::builder(pool, handlers).provider("slack").build()?;
//! let (stop, stopped) = tokio::sync::watch::channel(false);
//! let mut stopped_worker = stopped.clone();
//! let mut worker = tokio::spawn(worker.run(async move { let _ = stopped_worker.wait_for(|s| *s).await; }));
//! let mut stopped_server = stopped.clone();
//! let server = axum::serve(tokio::net::TcpListener::bind("0.0.0.0:3000").await?, app)
//!     .with_graceful_shutdown(async move { let _ = stopped_server.wait_for(|s| *s).await; });
//! tokio::select! {
//!     served = server => served?,
//!     // A worker that ended early (a panic) must not go unnoticed while the
//!     // endpoint keeps acknowledging: stop, and let the supervisor restart.
//!     ended = &mut worker => return Err(format!("inbox worker stopped: {ended:?}").into()),
//! }
//! let _ = stop.send(true);
//! worker.await?;
//! # Ok(()) }
//! ```
//!
//! Give each worker the provider (and scope) it serves (`.provider("slack")`):
//! a worker without a filter leases every provider's rows, and a router that
//! has no route for a row's URI answers 404 until the row is dead.
//!
//! **Leases.** A lease lasts [`lease`](InboxWorkerBuilder::lease) (30 s by
//! default) and is renewed every third of it while the handler runs
//! (heartbeat). A worker that crashes stops renewing: the next poll after
//! the lease expires hands the row to another worker. A worker whose
//! heartbeat finds the lease gone stops the handler and rolls its work back.
//!
//! **Failures.** A non-2xx answer, an error, a panic, a handler past
//! [`handler_timeout`](InboxWorkerBuilder::handler_timeout) or a retryable
//! conflict (40P01, 40001, 55P03) rolls the work back and puts the row back to
//! `pending`, due after a delay from [`RetryPolicy`] (exponential backoff with
//! full jitter), with `attempts`, `last_error` and the status recorded; past
//! the maximum attempts the row is `dead`, kept for an operator
//! ([`Inbox::list`](crate::store::inbox::Inbox::list),
//! [`requeue_dead`](crate::store::inbox::Inbox::requeue_dead)).
//!
//! **Wake-ups.** With [`listen`](InboxWorkerBuilder::listen) a dedicated
//! connection `LISTEN`s for the layer's `pg_notify` and wakes the worker at
//! once; it reconnects after a loss. Polling every
//! [`poll_interval`](InboxWorkerBuilder::poll_interval) (1 s) is the
//! fallback: a lost notification delays an event by at most one interval.
//!
//! **Shutdown.** When `run`'s shutdown future completes, the worker stops
//! leasing, lets work in hand finish for up to
//! [`shutdown_timeout`](InboxWorkerBuilder::shutdown_timeout), then rolls the
//! rest back and releases their rows (`pending`, the attempt not counted).

use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use deadpool_postgres::Pool;
use http::{Request, Response};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tower_service::Service;

use crate::event::WebhookEvent;
use crate::store::inbox::{AfterFailure, Inbox, LeasedEvent};
use crate::store::CommitErrorKind;
use crate::ConfigError;

/// When a failed event runs again: exponential backoff with full jitter
/// (AWS Architecture Blog, "Exponential Backoff And Jitter"): before attempt
/// `n + 1`, a delay drawn uniformly from `[0, min(cap, base × 2^(n-1))]`.
/// After `max_attempts` runs the row is `dead`.
///
/// Defaults: base 1 s, cap 1 h, 10 attempts (about 8.5 minutes of backoff at
/// most before the tenth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The first ceiling of the delay.
    pub base: Duration,
    /// The largest ceiling.
    pub cap: Duration,
    /// Runs of the handler before the row is `dead` (at least 1).
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { base: Duration::from_secs(1), cap: Duration::from_secs(3600), max_attempts: 10 }
    }
}

impl RetryPolicy {
    /// The ceiling of the delay after run `attempt` (1-based) failed:
    /// `min(cap, base × 2^(attempt-1))`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(31));
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A delay after run `attempt` failed: uniform in `[0, ceiling(attempt)]`.
    pub fn delay(&self, attempt: u32) -> Duration {
        self.ceiling(attempt).mul_f64(fastrand::f64())
    }
}

type ListenFn = Arc<dyn Fn(Arc<Notify>, String) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Builds an [`InboxWorker`].
#[must_use]
pub struct InboxWorkerBuilder<S> {
    pool: Pool,
    service: S,
    schema: String,
    provider: Option<String>,
    scope: Option<String>,
    concurrency: usize,
    batch_size: Option<usize>,
    lease: Duration,
    poll_interval: Duration,
    handler_timeout: Duration,
    shutdown_timeout: Duration,
    retry: RetryPolicy,
    listen: Option<ListenFn>,
    database_timeout: Duration,
    transaction_pooler: bool,
}

impl<S> std::fmt::Debug for InboxWorkerBuilder<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxWorkerBuilder").field("concurrency", &self.concurrency).finish_non_exhaustive()
    }
}

/// Processes inbox rows with the handler service. Build with
/// [`InboxWorker::builder`], start with [`InboxWorker::run`] (a future to
/// spawn). See the [module docs](self).
pub struct InboxWorker<S> {
    service: S,
    shared: Arc<Shared>,
}

/// The worker's settings, shared by its jobs.
struct Shared {
    inbox: Inbox,
    provider: Option<String>,
    scope: Option<String>,
    concurrency: usize,
    batch_size: usize,
    lease: Duration,
    poll_interval: Duration,
    handler_timeout: Duration,
    shutdown_timeout: Duration,
    retry: RetryPolicy,
    listen: Option<ListenFn>,
}

impl<S> std::fmt::Debug for InboxWorker<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxWorker")
            .field("inbox", &self.shared.inbox)
            .field("concurrency", &self.shared.concurrency)
            .finish()
    }
}

impl<S> InboxWorker<S> {
    /// A worker on `pool`'s inbox calling `service` (the handler: an axum
    /// `Router` of the webhook routes without the layer, or any
    /// `tower::Service<http::Request<InboxBody>>`).
    pub fn builder(pool: Pool, service: S) -> InboxWorkerBuilder<S> {
        InboxWorkerBuilder {
            pool,
            service,
            schema: crate::store::DEFAULT_SCHEMA.to_owned(),
            provider: None,
            scope: None,
            concurrency: 4,
            batch_size: None,
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            handler_timeout: Duration::from_secs(300),
            shutdown_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            listen: None,
            database_timeout: crate::store::DEFAULT_DATABASE_TIMEOUT,
            transaction_pooler: false,
        }
    }
}

impl<S> InboxWorkerBuilder<S> {
    /// The schema holding the tables (default `webhook_idempotency`).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Only rows of this provider (default: all).
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// Only rows of this scope (default: all).
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// Events processed at once (default 4). Each holds a pooled connection
    /// for its handler's duration; size the pool above it.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Rows leased per statement (default: the free slots, up to the
    /// concurrency). Each row is still processed in its own transaction.
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = Some(n);
        self
    }

    /// How long a lease lasts without renewal (default 30 s; at least 1 s).
    /// Renewed every third of it while the handler runs.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How often to look for due rows without a notification (default 1 s).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// The longest a handler may run (default 300 s); past it the run fails.
    pub fn handler_timeout(mut self, timeout: Duration) -> Self {
        self.handler_timeout = timeout;
        self
    }

    /// How long work in hand may finish after shutdown is asked (default 10 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// The retry policy for failed runs.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The client-side deadline of each database statement (default 2 s).
    pub fn database_timeout(mut self, timeout: Duration) -> Self {
        self.database_timeout = timeout;
        self
    }

    /// For a pool behind a transaction-mode pooler (see
    /// [`WebhookLayerBuilder::transaction_pooler`](crate::WebhookLayerBuilder::transaction_pooler)).
    pub fn transaction_pooler(mut self, behind_pooler: bool) -> Self {
        self.transaction_pooler = behind_pooler;
        self
    }

    /// Wakes the worker by `LISTEN` on a dedicated connection built from
    /// `config` and `tls` (re-established after a loss, 1 s between tries),
    /// instead of waiting for the next poll. The same `pg_notify` the layer
    /// sends when it accepts a delivery.
    pub fn listen<T>(mut self, config: tokio_postgres::Config, tls: T) -> Self
    where
        T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket> + Clone + Send + Sync + 'static,
        T::Stream: Send,
        T::TlsConnect: Send,
        <T::TlsConnect as tokio_postgres::tls::TlsConnect<tokio_postgres::Socket>>::Future: Send,
    {
        self.listen =
            Some(Arc::new(move |notify, channel| Box::pin(listen_loop(config.clone(), tls.clone(), notify, channel))));
        self
    }

    /// Checks the settings and builds the worker.
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid schema name, a concurrency or batch of
    /// 0, a lease under 1 s, or a retry policy of 0 attempts.
    pub fn build(self) -> Result<InboxWorker<S>, ConfigError> {
        use crate::layer::ConfigErrorKind::{InvalidLimit, InvalidSchema};
        crate::store::check_schema_name(&self.schema).map_err(|m| ConfigError::of(InvalidSchema, m))?;
        if self.concurrency == 0 || self.batch_size == Some(0) {
            return Err(ConfigError::of(InvalidLimit, "concurrency and batch size must be at least 1"));
        }
        if self.lease < Duration::from_secs(1) {
            return Err(ConfigError::of(InvalidLimit, "the lease must be at least 1 s"));
        }
        if self.retry.max_attempts == 0 {
            return Err(ConfigError::of(InvalidLimit, "the retry policy needs at least 1 attempt"));
        }
        Ok(InboxWorker {
            service: self.service,
            shared: Arc::new(Shared {
                inbox: Inbox::new(
                    self.pool,
                    &self.schema,
                    Duration::from_secs(5),
                    self.database_timeout,
                    self.transaction_pooler,
                ),
                provider: self.provider,
                scope: self.scope,
                concurrency: self.concurrency,
                batch_size: self.batch_size.unwrap_or(self.concurrency),
                lease: self.lease,
                poll_interval: self.poll_interval,
                handler_timeout: self.handler_timeout,
                shutdown_timeout: self.shutdown_timeout,
                retry: self.retry,
                listen: self.listen,
            }),
        })
    }
}

/// `LISTEN`s on `channel` and wakes `notify` on every notification;
/// reconnects after a loss. Runs until dropped.
async fn listen_loop<T>(config: tokio_postgres::Config, tls: T, notify: Arc<Notify>, channel: String)
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket> + Clone + Send + Sync + 'static,
    T::Stream: Send,
{
    loop {
        match config.connect(tls.clone()).await {
            Ok((client, mut connection)) => {
                let statement = format!("LISTEN \"{channel}\"");
                let listen = client.batch_execute(&statement);
                let mut listen = pin!(listen);
                let mut listening = false;
                loop {
                    let message = poll_fn(|cx| {
                        if !listening {
                            if let std::task::Poll::Ready(result) = listen.as_mut().poll(cx) {
                                listening = result.is_ok();
                                if result.is_ok() {
                                    // Rows accepted before LISTEN took effect.
                                    notify.notify_one();
                                }
                            }
                        }
                        connection.poll_message(cx)
                    })
                    .await;
                    match message {
                        Some(Ok(tokio_postgres::AsyncMessage::Notification(_))) => notify.notify_one(),
                        Some(Ok(_)) => {}
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "inbox listener connection lost; reconnecting");
                            break;
                        }
                        None => break,
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "inbox listener could not connect; polling meanwhile"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The request body type the worker hands the service: the stored bytes.
/// An axum `Router` accepts it like any other body.
pub type InboxBody = http_body_util::Full<Bytes>;

impl<S, ResBody> InboxWorker<S>
where
    S: Service<Request<InboxBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: std::fmt::Display + Send + 'static,
    ResBody: Send + 'static,
{
    /// Runs until `shutdown` completes, then shuts down gracefully (see the
    /// [module docs](self)). Spawn it: `tokio::spawn(worker.run(signal))`.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let Self { service, shared: this } = self;
        let notify = Arc::new(Notify::new());
        let listener =
            this.listen.as_ref().map(|listen| tokio::spawn(listen(Arc::clone(&notify), this.inbox.channel())));
        let slots = Arc::new(Semaphore::new(this.concurrency));
        let in_hand: Arc<Mutex<HashMap<u64, LeasedEvent>>> = Arc::default();
        let ids = AtomicU64::new(0);
        let mut jobs = JoinSet::new();
        let mut shutdown = pin!(shutdown);
        loop {
            while jobs.try_join_next().is_some() {}
            let free = slots.available_permits().min(this.batch_size);
            let mut leased_all = false;
            if free > 0 {
                let leased = this.inbox.lease_bounded(
                    free,
                    this.lease,
                    this.provider.as_deref(),
                    this.scope.as_deref(),
                    this.retry.max_attempts,
                );
                match leased.await {
                    Ok(rows) => {
                        leased_all = rows.len() == free;
                        for row in rows {
                            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else { break };
                            let id = ids.fetch_add(1, Ordering::Relaxed);
                            in_hand.lock().unwrap_or_else(|p| p.into_inner()).insert(id, row.clone());
                            let (this, in_hand) = (Arc::clone(&this), Arc::clone(&in_hand));
                            let service = service.clone();
                            jobs.spawn(async move {
                                this.process(service, row).await;
                                in_hand.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                                drop(permit);
                            });
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "inbox: leasing due rows failed; retrying after the poll interval")
                    }
                }
            }
            if leased_all && slots.available_permits() > 0 {
                continue; // more may be due
            }
            tokio::select! {
                () = &mut shutdown => break,
                () = notify.notified() => {}
                () = tokio::time::sleep(this.poll_interval) => {}
                Some(_) = jobs.join_next(), if !jobs.is_empty() => {}
            }
        }
        // Graceful shutdown: no more leases; work in hand may finish.
        if let Some(listener) = listener {
            listener.abort();
        }
        let finished =
            tokio::time::timeout(this.shutdown_timeout, async { while jobs.join_next().await.is_some() {} }).await;
        if finished.is_err() {
            jobs.abort_all();
            while jobs.join_next().await.is_some() {}
        }
        let unfinished: Vec<LeasedEvent> =
            in_hand.lock().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, r)| r).collect();
        for row in unfinished {
            match this.inbox.release(&row).await {
                Ok(_) => tracing::info!(key = row.event().key(), "inbox: released unfinished work at shutdown"),
                Err(e) => {
                    tracing::warn!(key = row.event().key(), error = %e, "inbox: could not release at shutdown; the lease will expire")
                }
            }
        }
    }
}

impl Shared {
    /// Runs one leased row to its end: done, retried later, dead, or left to
    /// whoever took the lease over.
    async fn process<S, ResBody>(&self, service: S, row: LeasedEvent)
    where
        S: Service<Request<InboxBody>, Response = Response<ResBody>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: std::fmt::Display + Send + 'static,
        ResBody: Send + 'static,
    {
        let span = tracing::error_span!(
            "inbox",
            provider = row.event().provider(),
            scope = row.event().scope(),
            key = row.event().key(),
            attempt = row.attempt()
        );
        let _enter = span.clone();
        let heartbeat = async {
            let mut every = tokio::time::interval(self.lease / 3);
            every.tick().await;
            loop {
                every.tick().await;
                match self.inbox.heartbeat(&row, self.lease).await {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(e) => tracing::warn!(error = %e, "inbox: heartbeat failed; retrying"),
                }
            }
        };
        let outcome = tokio::select! {
            outcome = self.run_once(service, &row) => outcome,
            () = heartbeat => Outcome::LeaseLost,
        };
        let (error, status) = match outcome {
            Outcome::Done => {
                tracing::info!(parent: &span, outcome = "committed", "inbox event processed");
                return;
            }
            Outcome::LeaseLost => {
                tracing::warn!(parent: &span, outcome = "lease_lost", "inbox lease taken over; work rolled back");
                return;
            }
            Outcome::Failed(error, status) => (error, status),
        };
        let delay = self.retry.delay(row.attempt());
        match self.inbox.retry_later(&row, self.retry.max_attempts, delay, &error, status).await {
            Ok(AfterFailure::Dead) => {
                tracing::error!(parent: &span, outcome = "dead", error, "inbox event dead after its last attempt")
            }
            Ok(AfterFailure::Retry) => {
                tracing::warn!(parent: &span, outcome = "failed", error, retry_in = ?delay, "inbox event failed; retried later")
            }
            Ok(_) => {
                tracing::warn!(parent: &span, outcome = "lease_lost", "inbox lease taken over before the failure was recorded")
            }
            Err(e) => tracing::warn!(parent: &span, error = %e, "inbox failure not recorded; the lease will expire"),
        }
    }

    async fn run_once<S, ResBody>(&self, mut service: S, row: &LeasedEvent) -> Outcome
    where
        S: Service<Request<InboxBody>, Response = Response<ResBody>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: std::fmt::Display + Send + 'static,
        ResBody: Send + 'static,
    {
        let tx = match row.begin(&self.inbox).await {
            Ok(tx) => tx,
            Err(e) => return Outcome::Failed(format!("could not begin the transaction: {e}"), None),
        };
        let body = row.payload().clone();
        let request = match row.head() {
            Some(head) => head.to_request(InboxBody::new(body.clone())),
            None => Request::builder().method(http::Method::POST).uri("/").body(InboxBody::new(body.clone())),
        };
        let Ok(mut request) = request else {
            return Outcome::Failed("the stored request head does not parse".into(), None);
        };
        // axum's body extractors read the stored body whatever its size (it
        // was accepted under the layer's limit), as they do in the layer.
        #[cfg(feature = "axum")]
        axum_core::extract::DefaultBodyLimit::max(row.payload().len().max(1)).apply(&mut request);
        let event = row.event();
        request.extensions_mut().insert(FromInbox);
        request.extensions_mut().insert(tx.tx());
        request.extensions_mut().insert(WebhookEvent {
            provider: event.provider().to_owned(),
            scope: event.scope().to_owned(),
            key: event.key().to_owned(),
            event_type: event.get_event_type().map(str::to_owned),
            attempt: row.attempt(),
            body,
        });
        // The handler runs in a task of its own (a panic is a failed run), and
        // is aborted with this run: a lost lease or a shutdown stops it.
        let handler = AbortOnDrop(tokio::spawn(tokio::time::timeout(self.handler_timeout, async move {
            poll_fn(|cx| service.poll_ready(cx)).await?;
            service.call(request).await
        })));
        let status = match handler.join().await {
            Ok(Ok(Ok(response))) => response.status(),
            Ok(Ok(Err(e))) => {
                tx.rollback().await;
                return Outcome::Failed(format!("the service failed: {e}"), None);
            }
            Ok(Err(_)) => {
                tx.rollback().await;
                return Outcome::Failed("the handler timed out".into(), None);
            }
            Err(_) => {
                tx.rollback().await;
                return Outcome::Failed("the handler panicked".into(), None);
            }
        };
        if let Some(code) = tx.retryable_conflict() {
            tx.rollback().await;
            return Outcome::Failed(
                format!("retryable conflict in the handler's transaction ({code})"),
                Some(status.as_u16()),
            );
        }
        if !status.is_success() {
            tx.rollback().await;
            return Outcome::Failed(format!("the handler answered {}", status.as_u16()), Some(status.as_u16()));
        }
        match tx.complete(status.as_u16()).await {
            Ok(()) => Outcome::Done,
            // The lease was taken over, or the handler ended the transaction
            // itself: recording the failure is fenced by the lease, so it lands
            // only in the second case.
            Err(e) if e.kind() == CommitErrorKind::LeaseLost => Outcome::Failed(
                "the work's transaction was not this lease's at completion (taken over, or ended by the handler)"
                    .into(),
                Some(status.as_u16()),
            ),
            Err(e) => Outcome::Failed(format!("not committed: {e}"), Some(status.as_u16())),
        }
    }
}

/// Marks a request an [`InboxWorker`] rebuilt: a `WebhookLayer` that sees it
/// was wrongly put in front of the worker's handlers and says so.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FromInbox;

/// A spawned task aborted when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    async fn join(mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

enum Outcome {
    Done,
    LeaseLost,
    Failed(String, Option<u16>),
}
