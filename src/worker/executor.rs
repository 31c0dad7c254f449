//! The executor: runs one leased item under a heartbeat, inside the item's
//! span, with the user's code guarded ([`Guard`]), then hands the outcome to
//! the completer.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use super::isolation::Run;
use super::{completer, Outcome, Settings, Work};
use crate::store::queue::{Leased, QueueKind, TableQueue};

/// Runs the user's code (a handler, an effect function) for the executor: in
/// a task of its own, so a panic is a failed run and not a dead worker,
/// within the handler timeout, in the item's span, and aborted when the run
/// is dropped (a lost lease, a shutdown past its bound).
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    timeout: Duration,
    retry: super::RetryPolicy,
    /// Where the run is, for the heartbeat: [`RUNNING`], [`ENDING`] (the
    /// work started its fenced end: renewals pause, so none is in flight or
    /// waiting on the row lock of a slow commit when the run ends, and a
    /// renewal that finds the row ended does not count a done run as a lost
    /// lease), [`RETRYING_END`] (the end failed and is tried again: renewals
    /// resume, so the lease holds meanwhile). The end is fenced by the token
    /// itself.
    phase: Arc<std::sync::atomic::AtomicU8>,
}

/// Why [`Guard::call`] returned no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// Past the handler timeout.
    TimedOut,
    /// The code panicked.
    Panicked,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::TimedOut => "timed out",
            Self::Panicked => "panicked",
        })
    }
}

impl Guard {
    /// The retry policy's delay after run `attempt` failed (for a kind that
    /// schedules a later run itself, as the outbox's reconciliation).
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        self.retry.delay(attempt)
    }

    /// The retry policy's budget per row (runs and time), for a kind that
    /// decides a later run itself (the outbox's resend).
    pub(crate) fn budget(&self) -> crate::store::queue::Budget {
        self.retry.budget()
    }

    /// The work starts its fenced end: the heartbeat pauses.
    pub(crate) fn completing(&self) {
        self.phase.store(ENDING, std::sync::atomic::Ordering::SeqCst);
    }

    /// The work's end failed and is tried again: the heartbeat renews the
    /// lease meanwhile.
    pub(crate) fn retrying_end(&self) {
        self.phase.store(RETRYING_END, std::sync::atomic::Ordering::SeqCst);
    }

    /// `fut`'s output, or why there is none.
    pub(crate) async fn call<F>(&self, fut: F) -> Result<F::Output, Stopped>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let task = AbortOnDrop(tokio::spawn(tokio::time::timeout(self.timeout, fut).in_current_span()));
        match task.join().await {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(_)) => Err(Stopped::TimedOut),
            Err(_) => Err(Stopped::Panicked),
        }
    }
}

/// Runs `item` to its end: done, retried later, dead, or left to whoever
/// took the lease over. Returns in how long a retried item is due again.
pub(crate) async fn process<W: Work>(
    queue: TableQueue<W::Kind>,
    work: W,
    settings: Arc<Settings>,
    item: Leased<<W::Kind as QueueKind>::Payload>,
    run: &Run,
) -> Option<std::time::Duration> {
    // An ERROR-level span: its fields reach every event inside it, the
    // handler's own lines included (the guard runs it in this span).
    let span = tracing::error_span!(
        "worker",
        kind = <W::Kind as QueueKind>::NAME,
        provider = item.provider(),
        scope = item.scope(),
        key = item.event_key(),
        attempt = item.attempt(),
        effect = tracing::field::Empty,
    );
    // The kind's filter column (the outbox's effect name), when it has one.
    let kind = <W::Kind as QueueKind>::FILTER_COLUMN;
    if let Some(effect) = kind.and_then(|c| item.column(<W::Kind as QueueKind>::KEY, c)) {
        span.record("effect", effect);
    }
    async move {
        let started = Instant::now();
        let phase = Arc::new(std::sync::atomic::AtomicU8::new(RUNNING));
        let guard = Guard { timeout: settings.handler_timeout, retry: settings.retry, phase: Arc::clone(&phase) };
        let outcome = tokio::select! {
            outcome = work.run(&queue, &item, &guard) => outcome,
            () = heartbeat(&queue, &item, settings.lease, &phase, run) => Outcome::LeaseLost,
        };
        completer::finish(&queue, &settings, &item, outcome, started).await
    }
    .instrument(span)
    .await
}

/// The run executes the user's code.
const RUNNING: u8 = 0;
/// The work is ending the row (fenced): no renewal.
const ENDING: u8 = 1;
/// The work retries its end: renewals resume.
const RETRYING_END: u8 = 2;

/// Renews the lease every third of it (and tells `run`'s gate); returns when
/// the lease is no longer this worker's while the user's code runs. Once the
/// work is ending the row it renews only while that end is retried, and a
/// lease found gone then is the end's to report (it never returns).
async fn heartbeat<K: QueueKind>(
    queue: &TableQueue<K>,
    item: &Leased<K::Payload>,
    lease: Duration,
    phase: &std::sync::atomic::AtomicU8,
    run: &Run,
) {
    use std::sync::atomic::Ordering::SeqCst;
    let mut every = tokio::time::interval(lease / 3);
    every.tick().await;
    loop {
        every.tick().await;
        if phase.load(SeqCst) == ENDING {
            continue;
        }
        let renewing = tokio::time::Instant::now();
        match queue.heartbeat(item, lease).await {
            Ok(true) => run.renewed(renewing, lease),
            Ok(false) if phase.load(SeqCst) != RUNNING => return std::future::pending().await,
            Ok(false) => return,
            Err(e) => tracing::warn!(error = %e, "worker: heartbeat failed; retrying"),
        }
    }
}

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
