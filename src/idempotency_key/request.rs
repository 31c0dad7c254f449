//! What the handler behind [`IdempotencyKeyLayer`](super::IdempotencyKeyLayer)
//! gets besides the claim's transaction.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::StoreError;
use crate::event::ScopedEvent;
use crate::store::idempotency_key::RequestKeys;

/// The request's key, in the handler's request extensions (an axum
/// extractor too, feature `axum`), beside [`WebhookTx`](crate::WebhookTx).
///
/// Cloning is cheap; clones share the recovery point and the
/// [`began`](Self::began) and [`mark_final`](Self::mark_final) marks.
#[derive(Clone)]
pub struct IdempotentRequest {
    inner: Arc<State>,
}

struct State {
    event: ScopedEvent,
    fingerprint: [u8; 32],
    attempt: u32,
    recovery_point: Mutex<Option<String>>,
    began: AtomicBool,
    marked_final: AtomicBool,
    keys: RequestKeys,
}

impl std::fmt::Debug for IdempotentRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotentRequest")
            .field("scope", &self.scope())
            .field("key", &self.key())
            .field("attempt", &self.attempt())
            .field("recovery_point", &self.recovery_point())
            .finish()
    }
}

impl IdempotentRequest {
    pub(crate) fn new(
        event: ScopedEvent,
        fingerprint: [u8; 32],
        attempt: u32,
        recovery_point: Option<String>,
        keys: RequestKeys,
    ) -> Self {
        Self {
            inner: Arc::new(State {
                event,
                fingerprint,
                attempt,
                recovery_point: Mutex::new(recovery_point),
                began: AtomicBool::new(false),
                marked_final: AtomicBool::new(false),
                keys,
            }),
        }
    }

    /// The `Idempotency-Key` value (unquoted, 1 to 255 bytes).
    pub fn key(&self) -> &str {
        self.inner.event.key()
    }

    /// The caller's scope, from the layer's scope resolver.
    pub fn scope(&self) -> &str {
        self.inner.event.scope()
    }

    /// Which run this is for the key: 1 the first time, higher after runs
    /// that failed and were not stored (or were rolled back by a crash after
    /// their claim was recorded).
    pub fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// The last recovery point recorded for this key, by an earlier attempt
    /// (read before the handler ran) or by this one: resume after it.
    /// `None` the first time.
    pub fn recovery_point(&self) -> Option<String> {
        self.inner.recovery_point.lock().map(|p| p.clone()).unwrap_or(None)
    }

    /// Records that the handler reached `phase` (brandur's "atomic phases",
    /// <https://brandur.org/idempotency-keys>): committed at once, in a
    /// transaction of its own on a pooled connection, so it stays even if
    /// the claim's transaction rolls back (a crash, a failed external call
    /// later). The next attempt with the same key reads it from
    /// [`recovery_point`](Self::recovery_point). It does not mark execution
    /// as [`began`](Self::began): an error answered after it is not stored
    /// (unless `began` was called), so the retry resumes from the point.
    ///
    /// Writes made through [`WebhookTx`](crate::WebhookTx) are *not*
    /// committed by this: commit a phase's local writes in the phase's own
    /// transaction (your pool) before recording it, or keep them in the
    /// claim's transaction and let the phase name only the external call
    /// that was made. For an external call whose effect must happen once,
    /// the outbox ([`WebhookTx::enqueue`](crate::WebhookTx::enqueue)) is
    /// usually simpler: see the module docs.
    ///
    /// It takes a second pooled connection for one statement while the
    /// claim's transaction holds the first: size the pool above the number
    /// of handlers that record recovery points at once, or the write waits
    /// up to the pool timeout and fails.
    ///
    /// `Ok(true)`: recorded. `Ok(false)`: nothing written, because the key
    /// already has a stored response or a recovery point of a request with
    /// another fingerprint; stop, the request cannot be resumed.
    ///
    /// # Errors
    /// [`StoreError`] when the write failed (the point is not recorded):
    /// stop before the next phase, or its effect may be made again.
    pub async fn record_recovery_point(&self, phase: &str) -> Result<bool, StoreError> {
        let recorded = self.inner.keys.record_phase(&self.inner.event, &self.inner.fingerprint, phase).await?;
        if recorded {
            if let Ok(mut point) = self.inner.recovery_point.lock() {
                *point = Some(phase.to_owned());
            }
        } else {
            tracing::warn!(phase, "recovery point not recorded: the key is completed or holds another request");
        }
        Ok(recorded)
    }

    /// Marks that execution began: from here on, an error answer is a result
    /// to store and replay under
    /// [`ErrorResponses::AfterExecution`](super::ErrorResponses::AfterExecution)
    /// (the default), as Stripe replays the errors of requests that started
    /// executing (a 402 `card_declined`, a 409 on the business state), except
    /// a 5xx or a 429: a transient failure is not the key's result, it rolls
    /// back and the retry runs again, unless [`mark_final`](Self::mark_final)
    /// says otherwise. Answers before this mark (validation 4xx) are not
    /// stored: a corrected retry with the same key runs.
    pub fn began(&self) {
        self.inner.began.store(true, Ordering::Relaxed);
    }

    /// Marks the answer the handler is about to give as the key's final
    /// result, whatever its status: under
    /// [`ErrorResponses::AfterExecution`](super::ErrorResponses::AfterExecution)
    /// (the default) a 5xx or a 429 is then stored, committed with the
    /// handler's writes and replayed to every retry with the key until it
    /// expires, instead of rolled back and run again. Use it when running the
    /// request again cannot succeed or must not happen: an external call went
    /// out and its outcome is unknown, and no
    /// [`recovery point`](Self::record_recovery_point) lets a retry resume
    /// (the client then learns the outcome elsewhere, never by a second
    /// call). Implies [`began`](Self::began). `Retry-After` is replayed only
    /// when it is among the replay headers: a final answer should not ask for
    /// a retry. Under [`ErrorResponses::Never`](super::ErrorResponses::Never)
    /// no error answer is stored, marked or not.
    pub fn mark_final(&self) {
        self.inner.began.store(true, Ordering::Relaxed);
        self.inner.marked_final.store(true, Ordering::Relaxed);
    }

    pub(crate) fn has_begun(&self) -> bool {
        self.inner.began.load(Ordering::Relaxed)
    }

    pub(crate) fn is_marked_final(&self) -> bool {
        self.inner.marked_final.load(Ordering::Relaxed)
    }
}

#[cfg(feature = "axum")]
impl<S: Send + Sync> axum_core::extract::FromRequestParts<S> for IdempotentRequest {
    type Rejection = crate::extract::MissingWebhookLayer;

    async fn from_request_parts(parts: &mut http::request::Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<IdempotentRequest>()
            .cloned()
            .ok_or(crate::extract::MissingWebhookLayer::new("IdempotentRequest"))
    }
}
