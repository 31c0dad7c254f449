//! Synchronous replication: before a duplicate is answered 2xx from a stored
//! row, the synchronous standby confirms the commit that wrote the row.
//!
//! A `COMMIT` that waits for a synchronous standby and is cancelled
//! (`pg_cancel_backend`), terminated (`pg_terminate_backend`) or interrupted
//! by a fast shutdown stays committed on the primary alone and becomes
//! visible there: PostgreSQL only warns ("canceling wait for synchronous
//! replication ... The transaction has already committed locally, but might
//! not have been replicated to the standby"; PostgreSQL docs, "Synchronous
//! Replication"; `SyncRepWaitForLSN` in `src/backend/replication/syncrep.c`).
//! The crate never cancels such a `COMMIT` itself ([`TxConn`](super::TxConn)'s
//! drop, [`Conn::query_commit`](super::Conn::query_commit)), but an operator,
//! a restart or a crash of a backend can. A redelivery that then reads the
//! row `done` and is answered 2xx is an acknowledgement a failover loses.
//!
//! The confirmation is a write that must itself wait for the standby,
//! committed after the row's commit became visible: a transaction that
//! writes a transactional logical message to the WAL
//! (`pg_logical_emit_message(true, 'webhook_idempotency', '')`: no table, no
//! lock; executable by every role by default, at `wal_level = replica`) and
//! commits with `synchronous_commit` at least `on`. WAL is sequential and a
//! standby confirms positions in order, so once that commit is confirmed
//! every commit before it is, the row's included. A transaction that only
//! takes a transaction id (`pg_current_xact_id()`) would not do: PostgreSQL
//! neither flushes nor waits for the standby at the commit of a transaction
//! that wrote no WAL of its own (`RecordTransactionCommit` in
//! `src/backend/access/transam/xact.c`). Logical decoding clients that ask
//! for messages see these, with the prefix `webhook_idempotency`.
//!
//! Concurrent duplicates on one pool share these commits: one is in flight
//! at a time, and each asker joins the next one not yet sent, so the commit
//! that answers it was sent after its row was read. Under load that is one
//! confirming commit per round trip to the standby, whatever the rate of
//! duplicates (BENCHMARKS.md, "Synchronous replication").

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use super::Db;
use crate::error::{StoreError, StoreErrorKind};

/// Whether duplicates are answered only after the synchronous standby
/// confirmed the stored row's commit
/// ([`StoreConfig::synchronous_replication`](crate::store::StoreConfig::synchronous_replication)).
///
/// Where it applies: the webhook layer's duplicate of a done event
/// ([`Claim::Done`](crate::store::Claim::Done)), the body-digest guard's
/// replay and the `Idempotency-Key` layer's stored response. (The inbox's
/// accept of a stored event needs no confirmation of its own: its
/// `INSERT ... ON CONFLICT DO UPDATE` locks the stored row even when it
/// changes nothing, which takes a transaction id, so its own commit waits
/// for the standby, after the row's.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SynchronousReplication {
    /// The default: read from the server, in the same statement that reads
    /// the stored row (no statement of its own): confirmed when the server
    /// names synchronous standbys (`synchronous_standby_names` is not empty)
    /// and the session's `synchronous_commit` waits for them (not `off` or
    /// `local`). That is PostgreSQL's own rule for whether a commit waits
    /// (PostgreSQL docs, "synchronous_commit"), read at the moment the row
    /// is, so it follows Patroni switching `synchronous_mode` on and off.
    /// Without synchronous standbys a duplicate costs what it always did.
    #[default]
    Detect,
    /// Always confirm, whatever the settings read: when the handler's own
    /// transactions raise `synchronous_commit` (`SET LOCAL`) above the
    /// session's, or a setting is hidden from the application's role. Without
    /// synchronous standbys the confirming commit does not wait, but still
    /// costs a durable commit (a WAL flush) per round.
    Always,
    /// Never confirm: duplicates are answered from the row the primary shows
    /// (what releases before 0.x did). A duplicate of a commit no standby
    /// confirmed may then be answered 2xx and lost at a failover; for
    /// measurements, or where replication is asynchronous anyway.
    Never,
}

/// The expression, for the statement that reads a stored row, saying
/// whether commits on this session wait for synchronous standbys
/// ([`SynchronousReplication::Detect`]): a `boolean` column.
pub(crate) const DETECT_SQL: &str = "(current_setting('synchronous_standby_names') <> '' \
                                     AND current_setting('synchronous_commit') NOT IN ('off', 'local'))";

/// The confirming transaction: `BEGIN`, then a WAL record of its own and
/// `synchronous_commit` raised to `on` for this transaction (`remote_apply`
/// kept), committed by [`Db::transact`].
const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED";
const CONFIRM: &str =
    "SELECT pg_logical_emit_message(true, 'webhook_idempotency', '')::text, set_config('synchronous_commit',
                         CASE current_setting('synchronous_commit') WHEN 'remote_apply' THEN 'remote_apply'
                                                                    ELSE 'on' END, true)";

/// How many database timeouts a confirming commit may wait for the standby
/// before its connection is closed (without a cancel request: PostgreSQL
/// keeps waiting there) and the next one may be sent. The askers stop
/// waiting after one database timeout each (503); a longer bound here keeps
/// a long stall of the standby down to one waiting server backend per pool
/// per bound instead of one per duplicate.
const PATIENCE: u32 = 30;

/// The outcome of one confirming commit: `None` while it runs, then whether
/// it committed (the standby confirmed).
type Outcome = Option<bool>;

/// The confirming commits of one pool (kept with the pool's shared state,
/// so every part built on the pool shares them).
#[derive(Default)]
pub(super) struct Rounds {
    state: Mutex<RoundState>,
    /// Confirming commits sent so far.
    sent: AtomicU64,
}

#[derive(Default)]
struct RoundState {
    /// The next confirming commit, not sent yet: askers join it.
    next: Option<watch::Sender<Outcome>>,
    /// A task is sending confirming commits.
    running: bool,
}

impl Rounds {
    fn lock(&self) -> std::sync::MutexGuard<'_, RoundState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Joins the next confirming commit (sent after this call), starting
    /// the task that sends them when none runs.
    fn join(self: &Arc<Self>, db: &Db) -> watch::Receiver<Outcome> {
        let mut state = self.lock();
        let outcome = match &state.next {
            Some(next) => next.subscribe(),
            None => {
                let (next, outcome) = watch::channel(None);
                state.next = Some(next);
                outcome
            }
        };
        if !state.running {
            state.running = true;
            let rounds = Arc::clone(self);
            let db = db.patient(PATIENCE);
            tokio::spawn(async move { rounds.send_all(&db).await });
        }
        outcome
    }

    /// Sends confirming commits one after the other while askers joined the
    /// next one; ends when none did.
    async fn send_all(&self, db: &Db) {
        // A task dropped in the middle (its runtime shutting down) lets the
        // next asker start another.
        struct Running<'a>(&'a Rounds, bool);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                if self.1 {
                    self.0.lock().running = false;
                }
            }
        }
        let mut running = Running(self, true);
        loop {
            let round = {
                let mut state = self.lock();
                match state.next.take() {
                    Some(round) => round,
                    None => {
                        // Under the lock that joiners take: the next one starts a task.
                        state.running = false;
                        running.1 = false;
                        return;
                    }
                }
            };
            if round.receiver_count() == 0 {
                continue; // every asker gave up (their deadline passed)
            }
            self.sent.fetch_add(1, Ordering::Relaxed);
            let confirmed = match db.transact("synchronous replication: confirm", BEGIN, CONFIRM, &[]).await {
                Ok(_) => true,
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        "synchronous replication: the standby's confirmation did not come; duplicates are \
                         answered 503 meanwhile"
                    );
                    false
                }
            };
            round.send_replace(Some(confirmed));
        }
    }
}

impl Db {
    /// Whether [`confirm_replicated`](Self::confirm_replicated) waits for
    /// the standby, given the [`DETECT_SQL`] column read with the row.
    pub(crate) fn confirms(&self, detected: bool) -> bool {
        match self.inner.replication {
            SynchronousReplication::Detect => detected,
            SynchronousReplication::Always => true,
            SynchronousReplication::Never => false,
        }
    }

    /// Waits until the synchronous standby confirmed every commit visible
    /// now (see the module docs), when [`SynchronousReplication`] says so:
    /// `detected` is the [`DETECT_SQL`] column read with the stored row.
    /// Waits at most the database timeout.
    ///
    /// # Errors
    /// [`StoreErrorKind::Unconfirmed`]: no confirmation within the database
    /// timeout, or the confirming commit failed: answer 503, never the
    /// stored outcome.
    pub(crate) async fn confirm_replicated(&self, detected: bool, step: &str) -> Result<(), StoreError> {
        if !self.confirms(detected) {
            return Ok(());
        }
        let mut outcome = self.inner.state.rounds.join(self);
        let confirmed = outcome.wait_for(Option::is_some);
        let confirmed = match self.inner.deadline {
            Some(deadline) => tokio::time::timeout(deadline, confirmed).await.ok(),
            None => Some(confirmed.await),
        };
        if let Some(Ok(outcome)) = confirmed {
            if *outcome == Some(true) {
                return Ok(());
            }
        }
        tracing::warn!(
            "synchronous replication: the standby has not confirmed the stored row's commit; answered as \
             unavailable, not as a duplicate"
        );
        Err(StoreError::new(
            StoreErrorKind::Unconfirmed,
            step,
            format!(
                "the synchronous standby did not confirm the stored outcome's commit within the database timeout \
                 ({:?})",
                self.inner.deadline.unwrap_or_default()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::testing;

    fn db(pool: &deadpool_postgres::Pool, replication: SynchronousReplication) -> Db {
        Db::new(pool.clone(), Duration::from_secs(5), Duration::from_secs(5), false, None).with_replication(replication)
    }

    /// 64 duplicates asking at once share the confirming commits: one in
    /// flight at a time, each asker in the next one sent after it asked, so
    /// at most a first commit and the one the rest joined meanwhile (a third
    /// when the task takes over while the askers still arrive). On a server
    /// without standbys the commit does not wait, and every asker is
    /// confirmed. `Never` and an undetected `Detect` send nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_duplicates_share_the_confirming_commits_and_none_is_sent_when_not_wanted() {
        let pool = testing::fresh(8).await;
        let always = db(&pool, SynchronousReplication::Always);
        let asked = futures_util::future::join_all((0..64).map(|_| {
            let db = always.clone();
            tokio::spawn(async move { db.confirm_replicated(false, "test").await })
        }))
        .await;
        assert!(asked.into_iter().all(|a| a.unwrap().is_ok()), "every asker confirmed");
        let sent = always.inner.state.rounds.sent.load(Ordering::Relaxed);
        assert!((1..=3).contains(&sent), "64 askers, {sent} confirming commits");

        let pool = testing::fresh(2).await;
        for (mode, detected) in [(SynchronousReplication::Never, true), (SynchronousReplication::Detect, false)] {
            let db = db(&pool, mode);
            db.confirm_replicated(detected, "test").await.unwrap();
            assert_eq!(db.inner.state.rounds.sent.load(Ordering::Relaxed), 0, "{mode:?}, detected {detected}");
        }
        let detect = db(&pool, SynchronousReplication::Detect);
        detect.confirm_replicated(true, "test").await.unwrap();
        assert_eq!(detect.inner.state.rounds.sent.load(Ordering::Relaxed), 1, "Detect, detected");
    }
}
