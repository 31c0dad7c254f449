//! Deliveries whose sender went away before the answer: the response future
//! is dropped (the client closed the connection, an outer timeout fired), so
//! no answer exists to count. The guard counts them and, when the handler had
//! started, records the failed attempt.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::config::Config;
use crate::event::ScopedEvent;

/// What `failed` rows of abandoned deliveries carry as `last_error`.
pub(crate) const ABANDONED_ERROR: &str =
    "abandoned: the client went away before the answer (the handler's transaction was rolled back)";

/// Lives as long as one delivery's response future; its drop before
/// [`finish`](Self::finish) is an abandoned delivery.
pub(crate) struct Watch {
    config: Arc<Config>,
    started: Instant,
    /// The delivery's event, once authenticated.
    pub(crate) event: Option<ScopedEvent>,
    /// Set once the claim succeeded and the handler was called.
    pub(crate) handler_started: AtomicBool,
    finished: bool,
}

impl Watch {
    pub(crate) fn new(config: &Arc<Config>, started: Instant) -> Self {
        Self {
            config: Arc::clone(config),
            started,
            event: None,
            handler_started: AtomicBool::new(false),
            finished: false,
        }
    }

    /// The delivery has an answer: its outcome is counted where it was made.
    pub(crate) fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let provider = self.config.provider.name();
        crate::metrics::delivery(provider, "abandoned", self.started);
        let ran = self.handler_started.load(Ordering::Relaxed);
        let Some(event) = self.event.take().filter(|_| ran) else {
            tracing::debug!(outcome = "abandoned", "the client went away before the delivery was claimed");
            return;
        };
        tracing::warn!(
            outcome = "abandoned",
            provider,
            scope = event.scope(),
            key = event.key(),
            elapsed_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "the client went away while the handler ran: rolled back; the event is recorded as failed and runs \
             again only if the sender redelivers it (GitHub, for one, does not retry by itself)"
        );
        // The record needs a connection and an await: a task of its own, on
        // the runtime the delivery ran on.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let store = self.config.store.clone();
                runtime.spawn(async move { store.record_abandoned(&event, ABANDONED_ERROR).await });
            }
            Err(_) => tracing::warn!("abandoned delivery not recorded: no Tokio runtime at drop"),
        }
    }
}
