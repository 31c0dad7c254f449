//! The outbox: external effects (an e-mail, a charge, a call to a
//! fulfilment API) decided once in the handler's transaction and delivered
//! at least once afterwards, with a downstream idempotency key that the
//! remote deduplicates on.
//!
//! A local transaction cannot roll back a remote call. So the handler does
//! not call: it records the intent with [`WebhookTx::enqueue`] in the same
//! transaction as the claim and its business writes. They commit together
//! or not at all (a handler that fails leaves no effect behind), and a
//! retried handler that enqueues the same effect again finds it there
//! ([`Enqueued::Duplicate`]). An [`OutboxWorker`] then leases due rows
//! (`FOR UPDATE SKIP LOCKED`, a lease fenced by a token, as the inbox
//! worker does: it is the same runtime, [`crate::worker`]), calls the
//! effect function registered under the effect's name, outside any
//! database transaction, and ends the row by what the function reports.
//!
//! ```no_run
//! use axum::{http::StatusCode, routing::post, Router};
//! use webhook_idempotency::outbox::{Effect, EffectContext, EffectResult, Effects, OutboxWorker};
//! use webhook_idempotency::{Provider, WebhookEvent, WebhookLayer, WebhookTx};
//!
//! async fn on_payment(tx: WebhookTx, event: WebhookEvent) -> StatusCode {
//!     let order = "ord_1"; // read from the event's payload
//!     match tx.claim_action("fulfil_order", order).await {
//!         Ok(true) => {}
//!         Ok(false) => return StatusCode::OK, // the other event of this payment did it
//!         Err(_) => return StatusCode::INTERNAL_SERVER_ERROR,
//!     }
//!     let receipt = Effect::json("send_receipt", serde_json::json!({ "order": order }));
//!     match tx.enqueue(receipt).await {
//!         Ok(_) => StatusCode::OK, // commits with the claim
//!         Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
//!     }
//! }
//!
//! async fn send_receipt(ctx: EffectContext) -> EffectResult {
//!     // POST to the mail API with `Idempotency-Key: ctx.downstream_key()`;
//!     // a timeout after sending is `EffectResult::uncertain(..)`.
//!     EffectResult::delivered()
//! }
//!
//! # async fn run(store: webhook_idempotency::StoreConfig, secret: String) -> Result<(), Box<dyn std::error::Error>> {
//! let layer = WebhookLayer::builder(store.clone(), Provider::stripe()).scope("acct_1").secret(secret).build()?;
//! let app: Router = Router::new().route("/webhooks/stripe", post(on_payment)).route_layer(layer);
//! let worker = OutboxWorker::builder(store, Effects::new().effect("send_receipt", send_receipt)).build()?;
//! let worker = tokio::spawn(worker.run(std::future::pending()));
//! # drop((app, worker)); Ok(()) }
//! ```
//!
//! **The downstream key.** [`EffectContext::downstream_key`] is derived from
//! the row's identity alone (scope, provider, event key, effect name,
//! ordinal; [`downstream_key`] gives the format): equal on every attempt,
//! after every crash and in every process, and never containing the
//! attempt. Send it as the remote's idempotency key (Stripe's
//! `Idempotency-Key` header, Adyen's `idempotency-key`, both within their
//! limits at 61 characters): a repeated call then returns the first result
//! instead of acting twice.
//!
//! **The at-least-once window.** A worker that crashes (or loses its lease)
//! after the remote acted and before the row is marked `done` leaves the row
//! `running`; once its lease expires the row goes back due at a backoff, and
//! its next run (alone: see [`crate::worker`], "Crashes") knows the last call
//! was started and never recorded. With a reconciliation registered for the
//! effect ([`Effects::reconcile`]), that run asks it first: delivered is
//! `done` with the remote's reference, not delivered is called then (same
//! key, same run), failed is `dead`, unknown leaves the row `uncertain`
//! (asked again later, never called blindly). Without one it calls again,
//! with the same key. Nothing in this crate can close that window (the
//! remote call and the local mark cannot be one transaction); the key makes
//! the repeat harmless where the remote honours it, and the reconciliation
//! avoids it where the remote can be asked.
//!
//! **Outcomes.** The function reports [`EffectResult`]:
//! - `Delivered` (with an optional remote reference): `done`, with the time;
//! - `Retry`: back to `pending` after a backoff with full jitter
//!   ([`RetryPolicy`](crate::worker::RetryPolicy)), `dead` once its retry budget is spent (by default 3
//!   days after it was enqueued, or 200 runs);
//! - `RetryAfter` ([`EffectResult::retry_after`]): the same, but due after
//!   the delay the remote asked for (a 429 or 503 with `Retry-After`) instead
//!   of the backoff: at least the policy's base, at most [`MAX_RETRY_AFTER`]
//!   (1 hour), never past the budget's end;
//! - `Failed`: `dead` now;
//! - `Uncertain`, when the remote may have acted and the answer was lost (a
//!   timeout after the request was sent, a reset before the answer). The row
//!   is never called blindly again. With a reconciliation registered for
//!   the effect ([`Effects::reconcile`]) the row is due again after a
//!   backoff and the reconciliation, not the effect, runs: it asks the
//!   remote (by the downstream key) and answers [`Reconciled`]: delivered
//!   (`done`), not delivered (called again at once, same key; `dead`
//!   instead, with the reason in `last_error` and an ERROR line, once the
//!   retry budget is spent), failed (`dead`) or still unknown (asked again
//!   later, `dead` once the budget is spent). Without one the row waits in
//!   `uncertain` for an operator
//!   ([`Admin::resolve_effect`](crate::store::admin::Admin::resolve_effect),
//!   `webhook-admin outbox resolve`).
//!
//! A function that panics or runs past the worker's
//! [`handler_timeout`](crate::worker::WorkerBuilder::handler_timeout) may
//! have sent its call: it counts as uncertain too.
//!
//! **Large payloads.** The lease returns a payload only when it is stored in
//! at most 64 KiB (`octet_length`), so one lease carries at most its batch
//! times 64 KiB; a larger payload is read by a statement of its own, fenced by
//! the lease token, right before its call and within the database timeout: a
//! payload too slow to read (megabytes over a slow link) fails its own run (an
//! attempt, `dead` once its budget is spent, as a poison effect) and never
//! stalls the lease of the effects behind it. That read costs one round trip,
//! for large payloads only.
//!
//! **When an effect runs.** As soon as the transaction commits, or no
//! earlier than [`Effect::delay`] after the enqueue, or [`Effect::not_before`]
//! a time on the application's clock (turned into a delay at the enqueue):
//! either way the database adds the delay to its own clock, and the workers
//! compare with that clock, so a skew between the application's clock and
//! the database's does not move an effect.
//!
//! **Order.** Effects run in any order: rows due together run concurrently,
//! and a failed one waits for its retry while later ones run (a `refunded`
//! notice can reach the remote before the `paid` one that failed once). An
//! effect enqueued with an [ordering key](Effect::ordering_key) (the entity:
//! a payment, an order) is not leased while an effect of the same scope and
//! key enqueued before it is unfinished (`pending`, `running`, `uncertain`;
//! `done` and `dead` ones no longer hold it): effects of one key run one at a
//! time in enqueue order. It costs no lock and no statement: the lease
//! statement checks for an earlier unfinished effect through a partial index
//! (`webhook_outbox_ordering`, migration 12) in the same one statement. The
//! enqueue order is the order the handlers ran in, which inbox mode does not
//! keep for events (see [`crate::inbox`], "Processing order").
//!
//! **Business keys and ordering** are on [`WebhookTx`] too:
//! [`claim_action`](WebhookTx::claim_action) claims a business transition
//! once per scope whatever event carries it, and
//! [`apply_if_newer`](WebhookTx::apply_if_newer) guards a last-writer-wins
//! update against events arriving out of order (see
//! [`store::actions`](crate::store::actions)): order the state the handlers
//! write with it, and the effects they decide with ordering keys.
//!
//! **Workers.** A worker leases only rows of the effects it has functions
//! for, so processes may serve different effects from one database. Every
//! run is counted (`webhook_worker_runs_total{kind="outbox"}`, and
//! `webhook_outbox_effects_total` by effect and outcome); the gauge sampler
//! sets `webhook_outbox_effects` by state and
//! `webhook_outbox_oldest_due_age_seconds`. Leases, heartbeats, wake-ups
//! (`pg_notify` sent in the same flight as the handler's `COMMIT`, with
//! the store's `LISTEN` connection, [`StoreConfig::listen_connection`](crate::StoreConfig::listen_connection)) and shutdown are the
//! inbox worker's: see [`crate::inbox`].

mod marker;
mod registry;
mod work;

pub use registry::{EffectContext, EffectResult, Effects, Reconciled, MAX_RETRY_AFTER};
pub use work::OutboxWork;

pub use crate::store::outbox::{downstream_key, Effect, Enqueued, MAX_EFFECT_BYTES, MAX_ORDERING_KEY_BYTES};
use crate::store::StoreConfig;
use crate::worker::{Worker, WorkerBuilder};
#[cfg(doc)]
use crate::WebhookTx;

/// Delivers outbox rows with registered effect functions. Build with
/// [`OutboxWorker::builder`], start with [`OutboxWorker::run`] (a future to
/// spawn). See the [module docs](self).
pub type OutboxWorker = Worker<OutboxWork>;

/// Builds an [`OutboxWorker`]: the settings every worker shares
/// ([`WorkerBuilder`]).
pub type OutboxWorkerBuilder = WorkerBuilder<OutboxWork>;

impl Worker<OutboxWork> {
    /// A worker on `store`'s outbox (a [`StoreConfig`], or a bare pool for
    /// the defaults) delivering with `effects`. It leases only the rows of
    /// the effects registered there.
    pub fn builder(store: impl Into<StoreConfig>, effects: Effects) -> OutboxWorkerBuilder {
        let work = OutboxWork::new(effects);
        let names = work.names();
        WorkerBuilder::new(store.into(), work).only(names)
    }

    /// Runs until `shutdown` completes, then shuts down gracefully: stops
    /// leasing, lets calls in hand finish for up to the shutdown timeout,
    /// then releases the rest (`pending`, the attempt not counted; a call
    /// that went out before is repeated with the same key). Spawn it:
    /// `tokio::spawn(worker.run(signal))`.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()> + Send) {
        crate::worker::run(self, shutdown).await;
    }
}
