//! The completer: ends each run. A successful run has already committed
//! its `done` inside the work's transaction (fenced by the lease token); a
//! failed one is put back to `pending` at a backoff with full jitter, or
//! buried as `dead` once its retry budget is spent, fenced by the token too, so
//! a worker whose lease was taken over changes nothing.

use std::time::{Duration, Instant};

use super::{Outcome, Settings};
use crate::store::queue::{AfterFailure, Buried, Leased, QueueKind, TableQueue};

/// Ends `item`'s run with `outcome`, counting and timing it by kind and
/// provider; returns in how long a retried item is due again. Runs inside
/// the item's span.
pub(crate) async fn finish<K: QueueKind>(
    queue: &TableQueue<K>,
    settings: &Settings,
    item: &Leased<K::Payload>,
    outcome: Outcome,
    started: Instant,
) -> Option<Duration> {
    // When a retried item is due again, for the producer to lease it then
    // rather than at its next poll.
    let mut due_in = None;
    let ended = match outcome {
        Outcome::Done => {
            tracing::info!(outcome = "committed", "{} item processed", K::NAME);
            "done"
        }
        Outcome::LeaseLost => {
            tracing::warn!(outcome = "lease_lost", "{} lease taken over; work rolled back", K::NAME);
            "lease_lost"
        }
        Outcome::Unrecorded { error } => {
            tracing::error!(
                outcome = "unrecorded",
                error,
                "{} run ended but its outcome could not be recorded; the lease expires and the row runs again",
                K::NAME
            );
            "unrecorded"
        }
        Outcome::Settled(state) => {
            tracing::warn!(outcome = state, "{} item {state}", K::NAME);
            state
        }
        Outcome::Dead { error, status } => match queue.bury(item, &error, status).await {
            Ok(true) => {
                tracing::error!(outcome = "dead", error, "{} item failed permanently; dead", K::NAME);
                "dead"
            }
            Ok(false) => {
                tracing::warn!(outcome = "lease_lost", "{} lease taken over before the failure was recorded", K::NAME);
                "lease_lost"
            }
            Err(e) => {
                tracing::warn!(error = %e, "{} failure not recorded; the lease will expire", K::NAME);
                "retried"
            }
        },
        Outcome::Failed { error, status, after } => {
            let delay = after.unwrap_or_else(|| settings.retry.delay(item.attempt()));
            let retry = &settings.retry;
            match queue.retry_later(item, retry.budget(), delay, &error, status).await {
                Ok(AfterFailure::Dead) => {
                    tracing::error!(outcome = "dead", error, "{} item dead after its last attempt", K::NAME);
                    "dead"
                }
                Ok(AfterFailure::Expired) => {
                    tracing::error!(
                        outcome = "dead",
                        error,
                        retry_for = %retry.retry_for_shown(),
                        "{} item dead: its retry budget is spent",
                        K::NAME
                    );
                    "dead"
                }
                Ok(AfterFailure::Retry) => {
                    tracing::warn!(outcome = "retried", error, retry_in = ?delay, "{} item failed; retried later", K::NAME);
                    due_in = Some(delay);
                    "retried"
                }
                Ok(AfterFailure::LeaseLost) => {
                    tracing::warn!(
                        outcome = "lease_lost",
                        "{} lease taken over before the failure was recorded",
                        K::NAME
                    );
                    "lease_lost"
                }
                Err(e) => {
                    tracing::warn!(error = %e, "{} failure not recorded; the lease will expire", K::NAME);
                    "retried"
                }
            }
        }
    };
    crate::metrics::worker_run(K::NAME, item.provider(), ended, Some(started.elapsed()));
    K::count(item.provider(), filter::<K>(item), ended);
    due_in
}

/// The item's filter column's value, for the kind's own metrics.
fn filter<K: QueueKind>(item: &Leased<K::Payload>) -> Option<&str> {
    K::FILTER_COLUMN.and_then(|c| item.column(K::KEY, c))
}

/// Logs and counts the rows a lease buried as `dead`: each one's lease
/// expired while it ran alone, on its last allowed run (it killed its
/// worker's process, or the worker could not renew the lease).
pub(crate) fn buried<K: QueueKind>(rows: &[Buried]) {
    for row in rows {
        tracing::error!(
            kind = K::NAME,
            provider = row.provider,
            key = row.key,
            outcome = "dead",
            "{} item dead: its lease expired while it ran alone, on its last allowed run (it killed its worker's \
             process, or the worker could not renew the lease)",
            K::NAME
        );
        crate::metrics::worker_run(K::NAME, &row.provider, "dead", None);
        K::count(&row.provider, row.filter.as_deref(), "dead");
    }
}

/// Hands an unfinished item back at shutdown (`pending`, the attempt not
/// counted).
pub(crate) async fn release<K: QueueKind>(queue: &TableQueue<K>, item: &Leased<K::Payload>) {
    let ended = match queue.release(item).await {
        Ok(true) => {
            tracing::info!(key = item.event_key(), "{}: released unfinished work at shutdown", K::NAME);
            "released"
        }
        Ok(false) => {
            // The run's end landed after all (a commit that outlived its
            // cancellation), or another worker holds the row now.
            tracing::info!(
                key = item.event_key(),
                "{}: nothing to release at shutdown: the row is no longer this lease's (its end committed, or \
                 another worker took it)",
                K::NAME
            );
            "lease_lost"
        }
        Err(e) => {
            tracing::warn!(key = item.event_key(), error = %e, "{}: could not release at shutdown; the lease will expire", K::NAME);
            "released"
        }
    };
    crate::metrics::worker_run(K::NAME, item.provider(), ended, None);
    K::count(item.provider(), filter::<K>(item), ended);
}
