//! The producer: leases at most the free slots' worth of due items, hands
//! each to the executor, waits for a notification, a poll tick or a free
//! slot, and shuts down gracefully.

use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

use super::isolation::{Gate, Waiting};
use super::{completer, executor, Settings, Work};
use crate::store::driver::listen_loop;
use crate::store::queue::{LeaseFilter, Leased, QueueKind, TableQueue};

/// Items in hand, by a local id: what shutdown releases if they do not
/// finish.
type InHand<P> = Arc<Mutex<HashMap<u64, Leased<P>>>>;

/// Runs until `shutdown` completes, then stops leasing, lets work in hand
/// finish for up to the shutdown timeout, aborts the rest (rolling their
/// work back) and releases their rows.
pub(crate) async fn run<W: Work>(
    queue: TableQueue<W::Kind>,
    work: W,
    settings: Arc<Settings>,
    shutdown: impl Future<Output = ()> + Send,
) {
    let kind = <W::Kind as QueueKind>::NAME;
    let serves = |filter: &Option<String>| filter.clone().unwrap_or_else(|| "(all)".to_owned());
    let only = settings.only.as_ref().map(|o| o.join(",")).unwrap_or_else(|| "(all)".to_owned());
    tracing::info!(
        kind,
        provider = serves(&settings.provider),
        scope = serves(&settings.scope),
        only,
        concurrency = settings.concurrency,
        retry_for = ?settings.retry.retry_for,
        "{kind} worker started"
    );
    let notify = Arc::new(Notify::new());
    let listener = settings.listen.as_ref().map(|listen| {
        let (channel, recheck) = (queue.channel().to_owned(), settings.listen_check_interval);
        tokio::spawn(listen_loop(listen.clone(), Arc::clone(&notify), channel, recheck))
    });
    let slots = Arc::new(Semaphore::new(settings.concurrency));
    let in_hand: InHand<<W::Kind as QueueKind>::Payload> = Arc::default();
    let mut next_id = 0u64;
    let mut jobs = JoinSet::new();
    // When items this worker retried are due again: it leases then, not at
    // its next poll, so a retry runs when its log line says.
    let mut due: Vec<tokio::time::Instant> = Vec::new();
    let mut shutdown = pin!(shutdown);
    // When the last lease statement ran, for the fetch cooldown.
    let mut last_lease: Option<tokio::time::Instant> = None;
    // The process's runs on this database, for the rows that must run alone
    // (`isolation`), and this worker's turn to lease one, when it asked.
    let gate = Gate::of(queue.database());
    let mut gate_changes = gate.subscribe();
    let mut waiting: Option<Waiting> = None;
    let filter = LeaseFilter {
        provider: settings.provider.as_deref(),
        scope: settings.scope.as_deref(),
        only: settings.only.as_deref(),
    };
    loop {
        while let Some(ended) = jobs.try_join_next() {
            due.extend(ended.ok().flatten().map(|d| tokio::time::Instant::now() + d));
        }
        let now = tokio::time::Instant::now();
        due.retain(|at| *at > now);
        let free = slots.available_permits().min(settings.batch());
        let mut leased_all = false;
        // Whether the gate kept this worker from leasing: it looks again when
        // the gate changes.
        let mut held_back = false;
        // Some slots busy and the last lease recent: wait for more to free.
        let cooling = last_lease
            .map(|at| later(at, settings.fetch_cooldown.min(settings.poll_interval)))
            .filter(|until| free < settings.batch().min(settings.concurrency) && *until > now);
        if free > 0 && cooling.is_none() {
            gate_changes.borrow_and_update();
            let leasing = if waiting.is_some() { gate.alone() } else { gate.lease() };
            if let Some(leasing) = leasing {
                last_lease = Some(now);
                let alone = leasing.alone();
                match queue.lease(free, settings.lease, filter, settings.retry.budget(), alone).await {
                    Ok(leases) => {
                        completer::buried::<W::Kind>(&leases.buried);
                        due.extend(leases.requeued_due_in.map(|d| later(tokio::time::Instant::now(), d)));
                        if alone {
                            waiting = None;
                        } else if leases.alone_due && waiting.is_none() {
                            tracing::info!(
                                kind,
                                "{kind} worker: rows whose lease expired are due; once this process has nothing \
                                 else in hand, each runs alone"
                            );
                            waiting = Some(gate.wait());
                        }
                        let rows = leases.leased;
                        leased_all = !alone && rows.len() == free;
                        for row in rows {
                            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else { break };
                            let id = next_id;
                            next_id += 1;
                            lock(&in_hand).insert(id, row.clone());
                            let run = leasing.run(settings.lease);
                            let (queue, work, settings, in_hand) =
                                (queue.clone(), work.clone(), Arc::clone(&settings), Arc::clone(&in_hand));
                            jobs.spawn(async move {
                                let due_in = executor::process(queue, work, settings, row, &run).await;
                                lock(&in_hand).remove(&id);
                                drop((permit, run));
                                due_in
                            });
                        }
                    }
                    Err(e) => tracing::warn!(
                        kind = <W::Kind as QueueKind>::NAME,
                        error = %e,
                        "worker: leasing due rows failed; retrying after the poll interval"
                    ),
                }
            } else {
                held_back = true;
            }
        }
        if leased_all && slots.available_permits() > 0 {
            continue; // more may be due
        }
        let next_poll = cooling.unwrap_or_else(|| later(tokio::time::Instant::now(), settings.poll_interval));
        let lapse = held_back.then(|| gate.next_lapse()).flatten();
        let wake = due.iter().copied().chain(lapse).min().map_or(next_poll, |at| at.min(next_poll));
        tokio::select! {
            () = &mut shutdown => break,
            () = notify.notified() => {}
            () = tokio::time::sleep_until(wake) => {}
            Some(ended) = jobs.join_next(), if !jobs.is_empty() => {
                due.extend(ended.ok().flatten().map(|d| tokio::time::Instant::now() + d));
            }
            Ok(()) = gate_changes.changed(), if held_back => {}
        }
    }
    drop(waiting);
    // Graceful shutdown: no more leases; work in hand may finish.
    if let Some(listener) = listener {
        listener.abort();
    }
    let finished =
        tokio::time::timeout(settings.shutdown_timeout, async { while jobs.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        jobs.abort_all();
        while jobs.join_next().await.is_some() {}
    }
    let unfinished: Vec<_> = lock(&in_hand).drain().map(|(_, row)| row).collect();
    for row in unfinished {
        completer::release(&queue, &row).await;
    }
    tracing::info!(
        kind,
        provider = serves(&settings.provider),
        scope = serves(&settings.scope),
        "{kind} worker stopped"
    );
}

/// `at + d`, saturating at a year from `at` (`Instant + Duration` panics on
/// overflow, and a setting of `Duration::MAX` means "never").
fn later(at: tokio::time::Instant, d: std::time::Duration) -> tokio::time::Instant {
    const YEAR: std::time::Duration = std::time::Duration::from_secs(365 * 86_400);
    at.checked_add(d.min(YEAR)).unwrap_or(at)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
