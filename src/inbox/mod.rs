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
//! and [`WebhookEvent`](crate::event::WebhookEvent) in the extensions. The
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
//! # async fn run(store: webhook_idempotency::StoreConfig, secret: String) -> Result<(), Box<dyn std::error::Error>> {
//! let handlers = Router::new().route("/webhooks/slack", post(on_event));
//! let layer = WebhookLayer::builder(store.clone(), Provider::slack())
//!     .scope("T0001")
//!     .secret(secret)
//!     .mode(Mode::Inbox)
//!     .build()?;
//! // The layer goes on a clone for the HTTP app; the worker gets the handlers
//! // without it (the stored requests carry no signature to verify).
//! let app = handlers.clone().route_layer(layer);
//! let worker = InboxWorker::builder(store, handlers).provider("slack").build()?;
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
//! Give each worker the provider (and scope) it serves: the layer's
//! [`Provider`](crate::Provider) (`.provider(Provider::slack())`) or a
//! preset's name (`.provider("slack")`; a name no compiled preset has is
//! refused at build: `"Slack"` would lease nothing for ever;
//! [`custom_provider`](crate::worker::WorkerBuilder::custom_provider) for a
//! provider of your own). A worker without a filter leases every provider's
//! rows, and a router that has no route for a row's URI answers 404 until the
//! row is dead. Each worker logs what it serves at INFO when it starts and
//! stops; rows no running worker serves show in
//! [`Admin::stats`](crate::store::admin::Admin::stats) (`due`, `unserved`) and
//! the `webhook_inbox_unserved_events` gauge.
//!
//! **What a row carries, and what is trusted.** The stored head keeps a
//! keep-list of headers (see [`RequestHead::of`](crate::store::inbox::RequestHead::of)),
//! never credentials. The worker runs a row as if it had been signed: with an
//! [`IntegrityKey`] on the layer and on the worker
//! ([`InboxWorkerBuilder::integrity_key`]) a row written without the key is
//! refused (`dead`, ERROR, counted). A stored head that does not parse (JSON
//! of another shape, a method, URI or header no request can have: a row
//! written or altered in the database) is not run either: `dead` at once,
//! with the reason in `last_error` and an ERROR line (without the head's
//! content); a row without a head runs as `POST /`.
//!
//! **Large payloads.** The lease returns identities only; each row's payload
//! and head are read in its own transaction's BEGIN flight (no extra round
//! trip), within the database timeout: a payload too slow to read fails its
//! own run (an attempt, `dead` after the last) and never stalls the rows
//! behind it.
//!
//! **Processing order.** Events are processed in any order, even those of
//! one object that arrived in order: rows due together are leased together
//! and run concurrently (up to the worker's concurrency, across workers and
//! processes), a failed row is retried after a backoff while later ones run,
//! and a crash sends rows back at a backoff of their own. A handler
//! that must not let an older event overwrite a newer one guards the write
//! with [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)
//! (last writer wins by the event's version: each preset's module docs say
//! which field that is), and a transition that must happen once whatever
//! event carries it with [`WebhookTx::claim_action`](crate::WebhookTx::claim_action).
//! In synchronous mode events run as they arrive, in the order the sender's
//! concurrent deliveries and retries give them; most providers promise no
//! order either.
//!
//! **Leases.** A lease lasts [`lease`](crate::worker::WorkerBuilder::lease) (30 s by
//! default) and is renewed every third of it while the handler runs
//! (heartbeat). A worker that crashes stops renewing: the next poll after
//! the lease expires puts the row back, due after a backoff, to run alone (a
//! handler that kills its process takes no other row down more than once;
//! see [`crate::worker`], "Crashes"). A worker whose heartbeat finds the
//! lease gone stops the handler and rolls its work back.
//!
//! **Failures.** An answer the success rule refuses (anything but 2xx by
//! default; [`InboxWorkerBuilder::success`], the same predicate as the
//! layer's), an error, a panic, a handler past
//! [`handler_timeout`](crate::worker::WorkerBuilder::handler_timeout) or a retryable
//! conflict (40P01, 40001, 55P03) rolls the work back and puts the row back to
//! `pending`, due after a delay from [`RetryPolicy`](crate::worker::RetryPolicy) (exponential backoff with
//! full jitter), with `attempts`, `last_error` and the status recorded; once
//! its retry budget is spent (by default 3 days after it was received, or
//! 200 runs) the row is `dead`, kept for an operator
//! ([`Admin::list`](crate::store::admin::Admin::list),
//! [`Admin::requeue`](crate::store::admin::Admin::requeue), `webhook-admin`).
//!
//! **Wake-ups.** With a `LISTEN` connection on the store
//! ([`StoreConfig::listen_connection`](crate::StoreConfig::listen_connection))
//! a dedicated connection `LISTEN`s for the layer's `pg_notify` and wakes
//! the worker at once; it reconnects after a loss. Polling every
//! [`poll_interval`](crate::worker::WorkerBuilder::poll_interval) (1 s) is the
//! fallback: a lost notification delays an event by at most one interval.
//! The listener checks that notifications reach it (a WARN when that
//! connection goes through a transaction-mode pooler, which drops them).
//!
//! **Metrics and logs.** Every run is counted by outcome
//! (`webhook_worker_runs_total{kind="inbox"}`: `done`, `retried`, `dead`,
//! `lease_lost`, `released`) and timed; each run's log lines, the handler's
//! own included, carry the event's `provider`, `scope`, `key` and `attempt`.
//!
//! **Shutdown.** When `run`'s shutdown future completes, the worker stops
//! leasing, lets work in hand finish for up to
//! [`shutdown_timeout`](crate::worker::WorkerBuilder::shutdown_timeout), then rolls the
//! rest back and releases their rows (`pending`, the attempt not counted).

//!
//! The worker is the inbox's kind of work on the shared runtime of
//! [`crate::worker`]: the producer, executor, completer and notifier are
//! there, the rebuilding of the request here.

mod request;
mod work;

use bytes::Bytes;
use http::{Request, Response};
use tower_service::Service;

pub use request::DEFAULT_KEPT_HEADERS;
pub use work::InboxWork;

use crate::store::inbox::IntegrityKey;
use crate::store::StoreConfig;
use crate::worker::{Worker, WorkerBuilder};

/// The request body type the worker hands the service: the stored bytes.
/// An axum `Router` accepts it like any other body.
pub type InboxBody = http_body_util::Full<Bytes>;

/// Processes inbox rows with the handler service. Build with
/// [`InboxWorker::builder`], start with [`InboxWorker::run`] (a future to
/// spawn). See the [module docs](self).
pub type InboxWorker<S> = Worker<InboxWork<S>>;

/// Builds an [`InboxWorker`]: the settings every worker shares
/// ([`WorkerBuilder`]).
pub type InboxWorkerBuilder<S> = WorkerBuilder<InboxWork<S>>;

impl<S> WorkerBuilder<InboxWork<S>> {
    /// Runs only rows whose integrity tag verifies with `key` (the layer's
    /// [`inbox_integrity_key`](crate::layer::WebhookLayerBuilder::inbox_integrity_key)):
    /// a row whose tag is missing or wrong is not run; it is `dead` with the
    /// reason in `last_error`, logged at ERROR (without payload) and counted
    /// (`webhook_inbox_integrity_failures_total`). Call again with the old key
    /// during a rotation (a tag verifying with any key passes). Default: no
    /// check; every row runs as if signed.
    pub fn integrity_key(mut self, key: IntegrityKey) -> Self {
        self.work_mut().integrity_key(key);
        self
    }

    /// Which handler statuses commit (default: 2xx only, as the layer's):
    /// give it the predicate the layer was given
    /// ([`WebhookLayerBuilder::success`](crate::layer::WebhookLayerBuilder::success)),
    /// so the same handler commits under the same rule in synchronous and
    /// inbox mode. A status it refuses rolls the run back and the row is
    /// retried (`last_error`: `the handler answered 500`; for a refused 2xx,
    /// `the handler answered 200, a 2xx the success rule refuses`), `dead`
    /// once its retry budget is spent.
    pub fn success(mut self, predicate: impl Fn(http::StatusCode) -> bool + Send + Sync + 'static) -> Self {
        self.work_mut().success(crate::handler::Success::new(predicate));
        self
    }
}

impl<S> Worker<InboxWork<S>> {
    /// A worker on `store`'s inbox (a [`StoreConfig`], or a bare pool for
    /// the defaults) calling `service` (the handler: an axum `Router` of the
    /// webhook routes without the layer, or any
    /// `tower::Service<http::Request<InboxBody>>`).
    pub fn builder(store: impl Into<StoreConfig>, service: S) -> InboxWorkerBuilder<S> {
        WorkerBuilder::new(store.into(), InboxWork::new(service))
    }
}

impl<S, ResBody> Worker<InboxWork<S>>
where
    S: Service<Request<InboxBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: std::fmt::Display + Send + 'static,
    ResBody: Send + 'static,
{
    /// Runs until `shutdown` completes, then shuts down gracefully (see the
    /// [module docs](self)). Spawn it: `tokio::spawn(worker.run(signal))`.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()> + Send) {
        crate::worker::run(self, shutdown).await;
    }
}
