//! The producer: leases at most the free slots' worth of due items, hands
//! each to the executor, waits for a notification, a poll tick or a free
//! slot, and shuts down gracefully.

use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};

use std::time::Duration;
use tokio::sync::{Notify, Semaphore};

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::isolation::{Gate, Leasing, Waiting};
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
    log_started::<W::Kind>(&settings);
    let notify = Arc::new(Notify::new());
    let listener = settings.listen.as_ref().map(|listen| {
        let (channel, recheck) = (queue.channel().to_owned(), settings.listen_check_interval);
        tokio::spawn(listen_loop(listen.clone(), Arc::clone(&notify), channel, recheck))
    });
    let mut producer = Producer::new(queue, work, settings);
    let mut shutdown = pin!(shutdown);
    loop {
        producer.collect_ended();
        let turn = producer.lease_turn().await;
        if turn.leased_all && producer.slots.available_permits() > 0 {
            continue; // more may be due
        }
        let wake = producer.wake_at(&turn);
        tokio::select! {
            () = &mut shutdown => break,
            () = notify.notified() => {}
            () = tokio::time::sleep_until(wake) => {}
            Some(ended) = producer.jobs.join_next(), if !producer.jobs.is_empty() => producer.ended(ended),
            Ok(()) = producer.gate_changes.changed(), if turn.held_back => {}
        }
    }
    // Graceful shutdown: no more leases; work in hand may finish.
    if let Some(listener) = listener {
        listener.abort();
    }
    producer.stop().await;
}

/// What one turn of the loop did.
struct Turn {
    /// Every free slot was filled: more may be due at once.
    leased_all: bool,
    /// The gate kept this worker from leasing: it looks again when the gate
    /// changes.
    held_back: bool,
    /// Some slots busy and the last lease recent: the turn waited for more
    /// slots to free, until this instant.
    cooling: Option<Instant>,
}

/// The producer's state between turns.
struct Producer<W: Work> {
    queue: TableQueue<W::Kind>,
    work: W,
    settings: Arc<Settings>,
    slots: Arc<Semaphore>,
    in_hand: InHand<<W::Kind as QueueKind>::Payload>,
    next_id: u64,
    jobs: JoinSet<Option<Duration>>,
    /// When items this worker retried are due again: it leases then, not at
    /// its next poll, so a retry runs when its log line says.
    due: Vec<Instant>,
    /// When the last lease statement ran, for the fetch cooldown.
    last_lease: Option<Instant>,
    /// The process's runs on this database, for the rows that must run
    /// alone (`isolation`), and this worker's turn to lease one, when it
    /// asked.
    gate: Arc<Gate>,
    gate_changes: tokio::sync::watch::Receiver<u64>,
    waiting: Option<Waiting>,
}

impl<W: Work> Producer<W> {
    fn new(queue: TableQueue<W::Kind>, work: W, settings: Arc<Settings>) -> Self {
        let gate = Gate::of(queue.database());
        let gate_changes = gate.subscribe();
        Self {
            slots: Arc::new(Semaphore::new(settings.concurrency)),
            queue,
            work,
            settings,
            in_hand: Arc::default(),
            next_id: 0,
            jobs: JoinSet::new(),
            due: Vec::new(),
            last_lease: None,
            gate,
            gate_changes,
            waiting: None,
        }
    }

    /// Notes the retry time of an item that ended.
    fn ended(&mut self, ended: Result<Option<Duration>, tokio::task::JoinError>) {
        self.due.extend(ended.ok().flatten().map(|d| Instant::now() + d));
    }

    /// Collects the items that ended since the last turn and forgets retry
    /// times that have passed.
    fn collect_ended(&mut self) {
        while let Some(ended) = self.jobs.try_join_next() {
            self.ended(ended);
        }
        let now = Instant::now();
        self.due.retain(|at| *at > now);
    }

    /// Leases up to the free slots' worth of due rows, unless the cooldown
    /// or the gate says wait, and hands each to the executor.
    async fn lease_turn(&mut self) -> Turn {
        let settings = Arc::clone(&self.settings);
        let now = Instant::now();
        let free = self.slots.available_permits().min(settings.batch());
        let mut turn = Turn { leased_all: false, held_back: false, cooling: None };
        turn.cooling = self
            .last_lease
            .map(|at| later(at, settings.fetch_cooldown.min(settings.poll_interval)))
            .filter(|until| free < settings.batch().min(settings.concurrency) && *until > now);
        if free == 0 || turn.cooling.is_some() {
            return turn;
        }
        self.gate_changes.borrow_and_update();
        let leasing = if self.waiting.is_some() { self.gate.alone() } else { self.gate.lease() };
        let Some(leasing) = leasing else {
            turn.held_back = true;
            return turn;
        };
        self.last_lease = Some(now);
        let alone = leasing.alone();
        let filter = LeaseFilter {
            provider: settings.provider.as_deref(),
            scope: settings.scope.as_deref(),
            only: settings.only.as_deref(),
        };
        let kind = <W::Kind as QueueKind>::NAME;
        match self.queue.lease(free, settings.lease, filter, settings.retry.budget(), alone).await {
            Ok(leases) => {
                completer::buried::<W::Kind>(&leases.buried);
                self.due.extend(leases.requeued_due_in.map(|d| later(Instant::now(), d)));
                if alone {
                    self.waiting = None;
                } else if leases.alone_due && self.waiting.is_none() {
                    tracing::info!(
                        kind,
                        "{kind} worker: rows whose lease expired are due; once this process has nothing \
                         else in hand, each runs alone"
                    );
                    self.waiting = Some(self.gate.wait());
                }
                turn.leased_all = !alone && leases.leased.len() == free;
                for row in leases.leased {
                    self.spawn(row, &leasing);
                }
            }
            Err(e) => {
                tracing::warn!(kind, error = %e, "worker: leasing due rows failed; retrying after the poll interval")
            }
        }
        turn
    }

    /// Hands one leased row to the executor in a slot of its own.
    fn spawn(&mut self, row: Leased<<W::Kind as QueueKind>::Payload>, leasing: &Leasing) {
        let Ok(permit) = Arc::clone(&self.slots).try_acquire_owned() else { return };
        let id = self.next_id;
        self.next_id += 1;
        lock(&self.in_hand).insert(id, row.clone());
        let run = leasing.run(self.settings.lease);
        let (queue, work, settings, in_hand) =
            (self.queue.clone(), self.work.clone(), Arc::clone(&self.settings), Arc::clone(&self.in_hand));
        self.jobs.spawn(async move {
            let due_in = executor::process(queue, work, settings, row, &run).await;
            lock(&in_hand).remove(&id);
            drop((permit, run));
            due_in
        });
    }

    /// When the loop looks again without a notification: the next poll (or
    /// the end of the cooldown), a retried item's due time, or the gate's
    /// next lapse when it held this worker back.
    fn wake_at(&self, turn: &Turn) -> Instant {
        let next_poll = turn.cooling.unwrap_or_else(|| later(Instant::now(), self.settings.poll_interval));
        let lapse = turn.held_back.then(|| self.gate.next_lapse()).flatten();
        self.due.iter().copied().chain(lapse).min().map_or(next_poll, |at| at.min(next_poll))
    }

    /// Lets work in hand finish for up to the shutdown timeout, aborts the
    /// rest and releases the rows of what did not finish.
    async fn stop(mut self) {
        drop(self.waiting.take());
        let jobs = &mut self.jobs;
        let finished =
            tokio::time::timeout(self.settings.shutdown_timeout, async { while jobs.join_next().await.is_some() {} })
                .await;
        if finished.is_err() {
            self.jobs.abort_all();
            while self.jobs.join_next().await.is_some() {}
        }
        let unfinished: Vec<_> = lock(&self.in_hand).drain().map(|(_, row)| row).collect();
        for row in unfinished {
            completer::release(&self.queue, &row).await;
        }
        let kind = <W::Kind as QueueKind>::NAME;
        tracing::info!(
            kind,
            provider = serves(&self.settings.provider),
            scope = serves(&self.settings.scope),
            "{kind} worker stopped"
        );
    }
}

/// The start line: what the worker serves and its limits.
fn log_started<K: QueueKind>(settings: &Settings) {
    let kind = K::NAME;
    let only = settings.only.as_ref().map(|o| o.join(",")).unwrap_or_else(|| "(all)".to_owned());
    tracing::info!(
        kind,
        provider = serves(&settings.provider),
        scope = serves(&settings.scope),
        only,
        concurrency = settings.concurrency,
        retry_for = %settings.retry.retry_for_shown(),
        max_attempts = %settings.retry.max_attempts_shown(),
        "{kind} worker started"
    );
}

/// A filter setting as the log shows it: its value, or `(all)`.
fn serves(filter: &Option<String>) -> String {
    filter.clone().unwrap_or_else(|| "(all)".to_owned())
}

/// `at + d`, saturating at a year from `at` (`Instant + Duration` panics on
/// overflow, and a setting of `Duration::MAX` means "never").
fn later(at: Instant, d: Duration) -> Instant {
    const YEAR: Duration = Duration::from_secs(365 * 86_400);
    at.checked_add(d.min(YEAR)).unwrap_or(at)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
