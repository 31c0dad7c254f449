//! The confirming commits of synchronous replication (see the
//! [`replication`](super::replication) module docs): one in flight per
//! pool, each asker joining the next one not yet sent.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use tokio::sync::watch;

use super::db::Db;
use super::replication::{Outcome, RoundState, Rounds, SynchronousReplication};
use crate::error::{StoreError, StoreErrorKind};

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
    /// the standby, given the [`DETECT_SQL`](super::DETECT_SQL) column read with the row.
    pub(crate) fn confirms(&self, detected: bool) -> bool {
        match self.replication() {
            SynchronousReplication::Detect => detected,
            SynchronousReplication::Always => true,
            SynchronousReplication::Never => false,
        }
    }

    /// Waits until the synchronous standby confirmed every commit visible
    /// now (see the module docs), when [`SynchronousReplication`] says so:
    /// `detected` is the [`DETECT_SQL`](super::DETECT_SQL) column read with the stored row.
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
        let mut outcome = self.rounds().join(self);
        let confirmed = outcome.wait_for(Option::is_some);
        let confirmed = match self.deadline() {
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
                self.deadline().unwrap_or_default()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::{testing, StoreConfig};

    fn db(store: &StoreConfig, replication: SynchronousReplication) -> Db {
        let store = store.clone().database_timeout(Duration::from_secs(5)).synchronous_replication(replication);
        store.open().unwrap().0
    }

    /// 64 duplicates asking at once share the confirming commits: one in
    /// flight at a time, each asker in the next one sent after it asked, so
    /// at most a first commit and the one the rest joined meanwhile (a third
    /// when the task takes over while the askers still arrive). On a server
    /// without standbys the commit does not wait, and every asker is
    /// confirmed. `Never` and an undetected `Detect` send nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_duplicates_share_the_confirming_commits_and_none_is_sent_when_not_wanted() {
        let store = testing::fresh(8).await;
        let always = db(&store, SynchronousReplication::Always);
        let asked = futures_util::future::join_all((0..64).map(|_| {
            let db = always.clone();
            tokio::spawn(async move { db.confirm_replicated(false, "test").await })
        }))
        .await;
        assert!(asked.into_iter().all(|a| a.unwrap().is_ok()), "every asker confirmed");
        let sent = always.rounds().sent.load(Ordering::Relaxed);
        assert!((1..=3).contains(&sent), "64 askers, {sent} confirming commits");

        let store = testing::fresh(2).await;
        for (mode, detected) in [(SynchronousReplication::Never, true), (SynchronousReplication::Detect, false)] {
            let db = db(&store, mode);
            db.confirm_replicated(detected, "test").await.unwrap();
            assert_eq!(db.rounds().sent.load(Ordering::Relaxed), 0, "{mode:?}, detected {detected}");
        }
        let detect = db(&store, SynchronousReplication::Detect);
        detect.confirm_replicated(true, "test").await.unwrap();
        assert_eq!(detect.rounds().sent.load(Ordering::Relaxed), 1, "Detect, detected");
    }
}
