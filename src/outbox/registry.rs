//! The effect functions an outbox worker delivers with, by effect name, and
//! what they are handed and answer.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

/// The longest delay an effect may ask for with
/// [`EffectResult::RetryAfter`]: 1 hour.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// What an effect function (or a reconciliation) is handed: the effect's
/// payload, which attempt this is, and its downstream idempotency key.
#[derive(Debug, Clone)]
pub struct EffectContext {
    pub(crate) scope: String,
    pub(crate) provider: String,
    pub(crate) event_key: String,
    pub(crate) effect: String,
    pub(crate) ordinal: u32,
    pub(crate) attempt: u32,
    pub(crate) payload: Bytes,
    pub(crate) content_type: String,
    pub(crate) downstream_key: String,
}

impl EffectContext {
    /// The downstream idempotency key: equal on every attempt, after every
    /// crash and in every process, never containing the attempt; 61 ASCII
    /// characters (see [`downstream_key`](super::downstream_key)). Send it as
    /// the remote's idempotency key (Stripe's `Idempotency-Key` header), so
    /// that a repeat of the call returns the first result.
    pub fn downstream_key(&self) -> &str {
        &self.downstream_key
    }

    /// Which run this is: 1 the first time, higher after failures; a
    /// reconciliation is a run too. An operator's requeue or `resolve --as
    /// resend` starts the count again at 1 (a fresh budget). Never part of
    /// the downstream key.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The effect's name.
    pub fn effect(&self) -> &str {
        &self.effect
    }

    /// Which of the event's effects of that name (0 unless the handler set
    /// another).
    pub fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// The event that decided the effect: provider, scope and key.
    pub fn event(&self) -> (&str, &str, &str) {
        (&self.provider, &self.scope, &self.event_key)
    }

    /// The payload as enqueued.
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// The payload's content type (`application/json` for
    /// [`Effect::json`](super::Effect::json)).
    pub fn content_type(&self) -> &str {
        &self.content_type
    }

    /// The payload parsed as JSON into `T`.
    ///
    /// # Errors
    /// The payload is not valid JSON for `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.payload)
    }
}

/// How a call of an effect function went.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EffectResult {
    /// The remote did it: the row is `done`, with the time and the remote's
    /// reference (its id for the call), if it gave one.
    Delivered {
        /// The remote's reference.
        remote_ref: Option<String>,
    },
    /// It failed in a way a later call can fix (a 5xx, a refused
    /// connection): retried with backoff and full jitter, `dead` once the
    /// retry policy's budget (time or runs) is spent. `error` is recorded (never put a secret or a
    /// payload in it).
    Retry {
        /// What went wrong.
        error: String,
    },
    /// It failed in a way a later call can fix, and the remote said when to
    /// call again (a 429 or 503 with `Retry-After`, RFC 9110 section 10.2.3):
    /// retried no earlier than `after`, instead of at the backoff. The delay
    /// is at least the retry policy's base (1 s by default) and at most
    /// [`MAX_RETRY_AFTER`] (1 hour: a longer one is cut, and the remote asked
    /// again then), never past the retry budget's end, and measured on the
    /// database's clock; the run counts as an attempt, and the row is `dead`
    /// once the budget is spent, as with [`Retry`](Self::Retry).
    RetryAfter {
        /// What went wrong.
        error: String,
        /// How long the remote asked to wait.
        after: Duration,
    },
    /// It failed for good (a 4xx the remote will never accept): `dead` now,
    /// kept for an operator.
    Failed {
        /// What went wrong.
        error: String,
    },
    /// The remote may have acted and the answer was lost (a timeout after
    /// the request was sent, a connection reset before the answer): never
    /// retried blindly. With a reconciliation function registered for the
    /// effect, it is asked later; without one the row waits in `uncertain`
    /// for an operator (`webhook-admin outbox resolve`).
    Uncertain {
        /// What happened.
        error: String,
    },
}

impl EffectResult {
    /// [`EffectResult::Delivered`] without a remote reference.
    pub fn delivered() -> Self {
        Self::Delivered { remote_ref: None }
    }

    /// [`EffectResult::Delivered`] with the remote's reference.
    pub fn delivered_as(remote_ref: impl Into<String>) -> Self {
        Self::Delivered { remote_ref: Some(remote_ref.into()) }
    }

    /// [`EffectResult::Retry`].
    pub fn retry(error: impl fmt::Display) -> Self {
        Self::Retry { error: error.to_string() }
    }

    /// [`EffectResult::RetryAfter`]: retry no earlier than `after` (a
    /// `Retry-After: 30` answer: `Duration::from_secs(30)`; an HTTP date:
    /// that time minus now).
    ///
    /// ```
    /// use std::time::Duration;
    /// use webhook_idempotency::outbox::EffectResult;
    ///
    /// // A remote answering `429 Too Many Requests` with `Retry-After: 30`:
    /// let retry_after = "30";
    /// let result = match retry_after.trim().parse::<u64>() {
    ///     Ok(secs) => EffectResult::retry_after("429 Too Many Requests", Duration::from_secs(secs)),
    ///     Err(_) => EffectResult::retry("429 Too Many Requests"),
    /// };
    /// assert_eq!(
    ///     result,
    ///     EffectResult::RetryAfter { error: "429 Too Many Requests".into(), after: Duration::from_secs(30) }
    /// );
    /// ```
    pub fn retry_after(error: impl fmt::Display, after: Duration) -> Self {
        Self::RetryAfter { error: error.to_string(), after }
    }

    /// [`EffectResult::Failed`].
    pub fn failed(error: impl fmt::Display) -> Self {
        Self::Failed { error: error.to_string() }
    }

    /// [`EffectResult::Uncertain`].
    pub fn uncertain(error: impl fmt::Display) -> Self {
        Self::Uncertain { error: error.to_string() }
    }
}

/// What a reconciliation found out about an uncertain effect (asking the
/// remote by the downstream key, for example).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reconciled {
    /// The remote did it: `done`.
    Delivered {
        /// The remote's reference.
        remote_ref: Option<String>,
    },
    /// The remote did not do it: the effect is called again (same
    /// downstream key), or `dead` once the retry policy's budget (time or
    /// runs) is spent.
    NotDelivered,
    /// It cannot be done: `dead`.
    Failed {
        /// Why.
        error: String,
    },
    /// Still unknown (the remote did not answer): asked again after a
    /// backoff, `dead` once the retry policy's budget (time or runs) is
    /// spent.
    Unknown {
        /// Why.
        error: String,
    },
}

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type EffectFn = Arc<dyn Fn(EffectContext) -> Boxed<EffectResult> + Send + Sync>;
pub(crate) type ReconcileFn = Arc<dyn Fn(EffectContext) -> Boxed<Reconciled> + Send + Sync>;

/// One effect's functions.
#[derive(Clone)]
pub(crate) struct Registered {
    pub(crate) call: EffectFn,
    pub(crate) reconcile: Option<ReconcileFn>,
}

/// The effect functions of an [`OutboxWorker`](super::OutboxWorker), by
/// effect name: what delivers each effect, and optionally what reconciles
/// an uncertain one. A worker leases only the rows of the effects it has
/// functions for, so several workers may serve different effects on one
/// database.
///
/// ```
/// use webhook_idempotency::outbox::{EffectContext, EffectResult, Effects, Reconciled};
///
/// async fn send_receipt(ctx: EffectContext) -> EffectResult {
///     // POST the receipt with `Idempotency-Key: ctx.downstream_key()` ...
///     EffectResult::delivered_as("msg_123")
/// }
///
/// async fn was_sent(ctx: EffectContext) -> Reconciled {
///     // GET the remote's record of `ctx.downstream_key()` ...
///     Reconciled::NotDelivered
/// }
///
/// let effects = Effects::new().effect("send_receipt", send_receipt).reconcile("send_receipt", was_sent);
/// assert_eq!(effects.names(), ["send_receipt"]);
/// ```
#[derive(Clone, Default)]
#[must_use]
pub struct Effects {
    map: BTreeMap<String, Registered>,
}

impl fmt::Debug for Effects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Effects").field("names", &self.names()).finish()
    }
}

impl Effects {
    /// No effects yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Delivers the effect `name` with `function` (an `async fn(EffectContext)
    /// -> EffectResult`). It runs in a task of its own, bounded by the
    /// worker's handler timeout; a timeout or a panic counts as
    /// [`EffectResult::Uncertain`] (the call may have gone out).
    pub fn effect<F, Fut>(mut self, name: impl Into<String>, function: F) -> Self
    where
        F: Fn(EffectContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = EffectResult> + Send + 'static,
    {
        let call: EffectFn = Arc::new(move |ctx| Box::pin(function(ctx)));
        self.map
            .entry(name.into())
            .and_modify(|r| r.call = Arc::clone(&call))
            .or_insert(Registered { call, reconcile: None });
        self
    }

    /// Reconciles an uncertain `name` effect with `function` (an `async
    /// fn(EffectContext) -> Reconciled`), instead of leaving it to an
    /// operator. Register the effect itself with [`effect`](Self::effect)
    /// too: a reconciliation alone delivers nothing.
    pub fn reconcile<F, Fut>(mut self, name: impl Into<String>, function: F) -> Self
    where
        F: Fn(EffectContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Reconciled> + Send + 'static,
    {
        let reconcile: ReconcileFn = Arc::new(move |ctx| Box::pin(function(ctx)));
        let name = name.into();
        match self.map.get_mut(&name) {
            Some(r) => r.reconcile = Some(reconcile),
            None => {
                let call: EffectFn = Arc::new(|ctx: EffectContext| {
                    Box::pin(async move { EffectResult::retry(no_function(&ctx.effect)) })
                });
                self.map.insert(name, Registered { call, reconcile: Some(reconcile) });
            }
        }
        self
    }

    /// The registered effect names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.map.keys().map(String::as_str).collect()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Registered> {
        self.map.get(name)
    }
}

/// The error of a call to an effect that only a reconciliation was
/// registered for.
fn no_function(effect: &str) -> String {
    format!("no effect function is registered for `{effect}` (only a reconciliation)")
}
