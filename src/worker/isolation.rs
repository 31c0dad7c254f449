//! Runs alone: a row whose last run ended by its lease expiring runs with
//! nothing else in hand in its process, and nothing else starts meanwhile.
//!
//! A handler that kills its process (`std::process::abort`, a panic in a
//! `panic = "abort"` build, a segfault in a C library, the OOM killer) takes
//! every row that process was running down with it: their leases expire
//! together, and nothing tells which of them did it. Leased together again,
//! they would die together again, until every one of them was `dead` with the
//! crasher's reason. So a row whose lease expired (the lease statement marks
//! it `run_alone` and puts it back at a backoff) is leased only by a worker
//! whose process has no other run in hand on that database, and no other
//! worker of the process leases until it ends: if the process dies then, that
//! row killed it, and only that row spends its retry budget on it.
//!
//! The runs a process holds are counted here, per database (one gate for every
//! worker of the process on it, whatever the kind: inbox and outbox workers
//! share one). A worker that learns from its lease statement that rows must
//! run alone asks for its turn ([`Gate::wait`]): from then on no worker of the
//! process starts a lease until the runs in hand ended, the row ran alone and
//! ended too. A run whose lease lapsed without renewal (its heartbeat failed
//! for a whole lease: the database unreachable, the runtime starved) no longer
//! holds the others back: its row is someone else's by then.
//!
//! What it costs: nothing while no lease expires (a flag the lease statement
//! already returns). After one, each row of the dead process's batch runs
//! alone once: the process drains (its runs in hand finish, no new lease) and
//! runs one row at a time for as long as those runs take. Workers of other
//! databases, or in other processes, are not held up. Not covered: two
//! databases served by one process (each has its own gate, and a crash caused
//! by one takes the other's rows down: run their workers in separate
//! processes if that matters).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// One database's runs in this process.
#[derive(Debug)]
pub(crate) struct Gate {
    state: Mutex<State>,
    /// Bumped at every change, for the producers waiting on the gate.
    changed: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// Runs in hand: when each one's lease lapses unless renewed, and
    /// whether it runs alone.
    runs: HashMap<u64, (Instant, bool)>,
    /// Lease statements in flight for rows that need not run alone.
    leasing: usize,
    /// A lease statement in flight for a row that must run alone.
    leasing_alone: bool,
    /// Producers waiting for their turn to lease a row alone.
    waiting: usize,
}

impl State {
    /// The runs whose lease has not lapsed at `now`.
    fn live(&self, now: Instant) -> impl Iterator<Item = &(Instant, bool)> {
        self.runs.values().filter(move |(lapses, _)| *lapses > now)
    }
}

impl Gate {
    /// The gate of the database `database` (its host, port and name) in this
    /// process: the same for every worker on it.
    pub(crate) fn of(database: &str) -> Arc<Self> {
        static GATES: OnceLock<Mutex<HashMap<String, Weak<Gate>>>> = OnceLock::new();
        let mut gates = lock(GATES.get_or_init(Mutex::default));
        if let Some(gate) = gates.get(database).and_then(Weak::upgrade) {
            return gate;
        }
        gates.retain(|_, gate| gate.strong_count() > 0);
        let gate = Arc::new(Self { state: Mutex::default(), changed: watch::Sender::new(0) });
        gates.insert(database.to_owned(), Arc::downgrade(&gate));
        gate
    }

    /// Whether a lease of rows that need not run alone may start now: none
    /// runs alone, and no producer waits for its turn. The ticket counts the
    /// lease as in flight until it drops.
    pub(crate) fn lease(self: &Arc<Self>) -> Option<Leasing> {
        let now = Instant::now();
        let mut state = lock(&self.state);
        if state.leasing_alone || state.waiting > 0 || state.live(now).any(|(_, alone)| *alone) {
            return None;
        }
        state.leasing += 1;
        Some(Leasing { gate: Arc::clone(self), alone: false, started: now })
    }

    /// Whether a lease of a row that must run alone may start now: nothing in
    /// hand (whose lease has not lapsed) and no other lease in flight.
    pub(crate) fn alone(self: &Arc<Self>) -> Option<Leasing> {
        let now = Instant::now();
        let mut state = lock(&self.state);
        if state.leasing_alone || state.leasing > 0 || state.live(now).next().is_some() {
            return None;
        }
        state.leasing_alone = true;
        Some(Leasing { gate: Arc::clone(self), alone: true, started: now })
    }

    /// Asks for a turn to lease a row alone: until the ticket drops, no lease
    /// of other rows starts in this process.
    pub(crate) fn wait(self: &Arc<Self>) -> Waiting {
        lock(&self.state).waiting += 1;
        self.bump();
        Waiting { gate: Arc::clone(self) }
    }

    /// Changes of the gate, for a producer it kept from leasing.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// When the earliest live run's lease lapses: a producer the gate kept
    /// from leasing looks again then, if nothing changed before.
    pub(crate) fn next_lapse(&self) -> Option<Instant> {
        let now = Instant::now();
        lock(&self.state).live(now).map(|(lapses, _)| *lapses).min()
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// A lease statement in flight (see [`Gate::lease`], [`Gate::alone`]).
#[derive(Debug)]
pub(crate) struct Leasing {
    gate: Arc<Gate>,
    alone: bool,
    /// Before the statement: its leases lapse no earlier than `lease` after.
    started: Instant,
}

impl Leasing {
    /// Whether it leases a row that must run alone.
    pub(crate) fn alone(&self) -> bool {
        self.alone
    }

    /// A row this lease leased for `lease`: in hand until the run drops.
    pub(crate) fn run(&self, lease: Duration) -> Run {
        let mut state = lock(&self.gate.state);
        let id = state.next_id;
        state.next_id += 1;
        state.runs.insert(id, (later(self.started, lease), self.alone));
        Run { gate: Arc::clone(&self.gate), id }
    }
}

impl Drop for Leasing {
    fn drop(&mut self) {
        let mut state = lock(&self.gate.state);
        if self.alone {
            state.leasing_alone = false;
        } else {
            state.leasing -= 1;
        }
        drop(state);
        self.gate.bump();
    }
}

/// A producer's turn to lease a row alone, asked for (see [`Gate::wait`]).
#[derive(Debug)]
pub(crate) struct Waiting {
    gate: Arc<Gate>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        lock(&self.gate.state).waiting -= 1;
        self.gate.bump();
    }
}

/// A run in hand (see [`Leasing::run`]).
#[derive(Debug)]
pub(crate) struct Run {
    gate: Arc<Gate>,
    id: u64,
}

impl Run {
    /// The run's lease was renewed for `lease` by a statement sent at `sent`.
    pub(crate) fn renewed(&self, sent: Instant, lease: Duration) {
        if let Some(run) = lock(&self.gate.state).runs.get_mut(&self.id) {
            run.0 = later(sent, lease);
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        lock(&self.gate.state).runs.remove(&self.id);
        self.gate.bump();
    }
}

/// `lease` after `at`, saturating a year ahead.
fn later(at: Instant, lease: Duration) -> Instant {
    at.checked_add(lease.min(Duration::from_secs(365 * 86_400))).unwrap_or(at)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn a_row_runs_alone_only_once_nothing_else_is_in_hand_and_nothing_starts_meanwhile() {
        let gate = Gate::of("isolation-test-1");
        let other = Gate::of("isolation-test-2");
        assert!(Arc::ptr_eq(&gate, &Gate::of("isolation-test-1")), "one gate per database");
        let leasing = gate.lease().unwrap();
        let run = leasing.run(LEASE);
        assert!(gate.alone().is_none(), "a lease in flight");
        drop(leasing);
        assert!(gate.alone().is_none(), "a run in hand");
        let waiting = gate.wait();
        assert!(gate.lease().is_none(), "a producer waits for its turn: no other lease starts");
        assert!(other.lease().is_some(), "another database's workers are not held up");
        drop(run);
        let alone = gate.alone().unwrap();
        assert!(gate.alone().is_none(), "one at a time");
        drop(waiting);
        assert!(gate.lease().is_none(), "no other lease while one runs alone is leased");
        let run = alone.run(LEASE);
        drop(alone);
        assert!(gate.lease().is_none() && gate.alone().is_none(), "nothing while it runs");
        drop(run);
        assert!(gate.lease().is_some());
    }

    #[tokio::test]
    async fn a_run_whose_lease_lapsed_no_longer_holds_the_others_back() {
        let gate = Gate::of("isolation-test-3");
        let mut changes = gate.subscribe();
        changes.borrow_and_update();
        let run = gate.lease().unwrap().run(Duration::from_millis(50));
        assert!(gate.alone().is_none());
        let lapse = gate.next_lapse().unwrap();
        assert!(changes.has_changed().unwrap(), "the gate's watchers hear of it");
        tokio::time::sleep_until(lapse + Duration::from_millis(1)).await;
        assert!(gate.alone().is_some(), "its lease lapsed unrenewed: its row is someone else's");
        drop(run);
        let renewed = gate.lease().unwrap().run(Duration::from_millis(50));
        renewed.renewed(Instant::now(), LEASE);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(gate.alone().is_none(), "a renewed lease holds");
    }
}
