//! [`ClaimedEvent`], an event this caller claimed, and how its transaction
//! ends: [`ClaimedEvent::commit`] (the fenced commit that also marks the
//! claim done), [`ClaimedEvent::fail`] and its [`CommitError`].

use std::fmt;
use std::time::SystemTime;

use super::*;

/// An event this caller claimed: its transaction is open. Do the event's
/// work through [`tx`](Self::tx), then [`commit`](Self::commit) or
/// [`fail`](Self::fail). Dropping it instead closes the connection and
/// PostgreSQL rolls back (nothing recorded; the next delivery claims again).
#[must_use = "a claimed event is rolled back when dropped: commit or fail it"]
pub struct ClaimedEvent {
    /// The claim transaction's connection, shared with the `WebhookTx`
    /// handles [`tx`](Self::tx) gives (`crate::tx`).
    pub(super) slot: TxSlot,
    pub(super) attempt: u32,
    /// The claim row's `completed_at` as the claim wrote it: the commit's
    /// status update and a failure record find that row by it.
    pub(super) started: SystemTime,
    pub(super) event: ScopedEvent,
    pub(super) store: ClaimStore,
}

impl fmt::Debug for ClaimedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimedEvent").field("event", &self.event).field("attempt", &self.attempt).finish()
    }
}

/// Why [`ClaimedEvent::commit`] did not commit. The event is not done; where
/// the connection survived, the failed attempt is recorded.
#[derive(Debug, Clone)]
pub struct CommitError {
    kind: CommitErrorKind,
    sqlstate: Option<String>,
    source: Option<Arc<Cause>>,
}

/// See [`CommitError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CommitErrorKind {
    /// A clone of the [`WebhookTx`](crate::WebhookTx) still holds the connection (a task the
    /// handler spawned): rolled back when that clone drops.
    StillInUse,
    /// The transaction was already aborted (a statement failed and the error
    /// was swallowed): PostgreSQL would have turned COMMIT into ROLLBACK
    /// (rust-postgres#1334). Rolled back.
    Aborted,
    /// The claim row was not found in this transaction: the work ended the
    /// transaction itself (sent COMMIT or ROLLBACK). Rolled back.
    ClaimLost,
    /// COMMIT was sent and no answer came, or it failed: PostgreSQL may or
    /// may not have committed. The next claim finds out (done, or claims again).
    Unknown,
}

impl CommitError {
    pub(crate) fn of(kind: CommitErrorKind, e: Option<&DbError>) -> Self {
        Self { kind, sqlstate: e.and_then(DbError::code).map(str::to_owned), source: e.and_then(DbError::cause) }
    }

    /// What went wrong.
    pub fn kind(&self) -> CommitErrorKind {
        self.kind
    }

    /// The SQLSTATE of the failed statement, when there was one.
    pub fn sqlstate(&self) -> Option<&str> {
        self.sqlstate.as_deref()
    }
}

impl fmt::Display for CommitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            CommitErrorKind::StillInUse => "the transaction handle is still in use",
            CommitErrorKind::Aborted => "the transaction was aborted by a failed statement",
            CommitErrorKind::ClaimLost => "the claim is no longer in this transaction",
            CommitErrorKind::Unknown => "the commit failed or its outcome is unknown",
        };
        let own = match (self.sqlstate(), &self.source) {
            (Some(code), None) => format!("not committed: {what} (SQLSTATE {code})"),
            _ => format!("not committed: {what}"),
        };
        f.write_str(&own)?;
        Cause::write_chain(f, &own, self.source.as_deref())
    }
}

/// The failed statement's error (the server's message and SQLSTATE, or the
/// connection's cause), also written after the message.
impl std::error::Error for CommitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Cause::as_source(&self.source)
    }
}

impl ClaimedEvent {
    /// The transaction's connection, the claimed event and the tables: what
    /// the claim's `WebhookTx` is made of ([`tx`](Self::tx)).
    pub(crate) fn parts(&self) -> (&TxSlot, &ScopedEvent, &Arc<TxTables>) {
        (&self.slot, &self.event, &self.store.inner.tables)
    }

    /// Which run this is for the event: 1 the first time, higher after
    /// recorded failures.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The claimed event.
    pub fn event(&self) -> &ScopedEvent {
        &self.event
    }

    /// The SQLSTATE of a retryable conflict (deadlock 40P01, serialization
    /// failure 40001, lock timeout 55P03) a statement through
    /// [`tx`](Self::tx) met: the work should fail and be retried.
    pub fn retryable_conflict(&self) -> Option<&'static str> {
        self.slot.retryable()
    }

    /// Marks the event done with `status` (the HTTP status of the work's
    /// answer, kept for replays) and commits, together with every write made
    /// through [`tx`](Self::tx). Only `Ok` means committed.
    ///
    /// A check runs first inside the transaction, in the same flight as
    /// `COMMIT`: in an aborted transaction it fails (25P02), where a bare
    /// COMMIT would be answered ROLLBACK without an error
    /// (rust-postgres#1334); and it passes only inside the transaction the
    /// claim began (a setting of that transaction, not a clock: it holds on
    /// Citus too), so work that ended the transaction itself is
    /// caught ([`CommitErrorKind::ClaimLost`]; a claim row that work
    /// committed is turned `failed`, so the next delivery runs again). A
    /// status other than 200 is stored on the row by that check.
    ///
    /// # Errors
    /// [`CommitError`]; the failed attempt is recorded unless the handle is
    /// still in use.
    pub async fn commit(self, status: u16) -> Result<(), CommitError> {
        let sql = &self.store.inner.sql;
        let code = i16::try_from(status).unwrap_or(i16::MAX);
        let ev = &self.event;
        // The row was written `done` with the assumed status; another status
        // is stored by a HOT update, in the same flight.
        if code == ASSUMED_STATUS {
            return self.commit_fenced_by(status, None).await;
        }
        let (scope, provider, key) = (Param::Text(ev.scope()), Param::Text(ev.provider()), Param::Text(ev.key()));
        let params = [scope, provider, key, Param::I16(code), Param::Time(self.started)];
        self.commit_fenced_by(status, Some((sql.set_status.as_str(), &params))).await
    }

    /// [`commit`](Self::commit) with the caller's own fence statement `check`
    /// (sent with `COMMIT` in one flight): it must store `status` on the
    /// claim row and fail (22012) unless the transaction is still the claim's
    /// (`driver::FENCE_HOLDS` in its `WHERE`) and that row is found, as
    /// [`Statements::set_status`](super::Statements) does (its
    /// parameters `$1 scope, $2 provider, $3 event_key, $4 status, $5 the
    /// claim's completed_at` come first); it may write more in the same statement
    /// (a data-modifying `WITH`), so that work costs no round trip of its own.
    pub(crate) async fn commit_with(self, status: u16, check: &str, more: &[Param<'_>]) -> Result<(), CommitError> {
        let ev = &self.event;
        let code = i16::try_from(status).unwrap_or(i16::MAX);
        let mut params = vec![
            Param::Text(ev.scope()),
            Param::Text(ev.provider()),
            Param::Text(ev.key()),
            Param::I16(code),
            Param::Time(self.started),
        ];
        params.extend_from_slice(more);
        self.commit_fenced_by(status, Some((check, &params))).await
    }

    /// The fenced commit with the caller's `own` statement and its
    /// parameters, when given; see [`commit`](Self::commit).
    async fn commit_fenced_by(&self, status: u16, own: Option<(&str, &[Param<'_>])>) -> Result<(), CommitError> {
        let tx = self.slot.take().ok_or(CommitError::of(CommitErrorKind::StillInUse, None))?;
        let first_error = tx.first_error().map(str::to_owned);
        // In a transaction a swallowed error aborted, the check fails (25P02)
        // and PostgreSQL answers the COMMIT with ROLLBACK (rust-postgres#1334);
        // when the transaction is no longer the claim's (the work ended it),
        // the check divides by zero (22012): either way nothing commits.
        let result = match tx.commit_fenced(own).await {
            Ok(()) => Ok(()),
            Err(Fenced::Lost) => {
                tracing::error!("the claim's transaction was ended by the work; not committed here");
                Err(CommitError::of(CommitErrorKind::ClaimLost, None))
            }
            Err(Fenced::Aborted(e)) => {
                tracing::error!(
                    sqlstate = e.sqlstate(),
                    error = %e,
                    first_failed_statement = first_error.as_deref().unwrap_or("none seen through WebhookTx"),
                    "transaction unusable after the work (a statement of the handler failed and the error was \
                     answered, not propagated); rolled back"
                );
                Err(CommitError::of(CommitErrorKind::Aborted, Some(&e)))
            }
            Err(Fenced::Unknown(e)) => {
                // The connection is closed; a retry finds out (done → replayed).
                tracing::error!(sqlstate = e.sqlstate(), error = %e, "commit failed or its result is unknown");
                Err(CommitError::of(CommitErrorKind::Unknown, Some(&e)))
            }
        };
        if let Err(e) = &result {
            // Only when the work ended the transaction itself may the claim
            // row it committed be turned `failed`; after an unknown COMMIT
            // outcome a `done` row is ours and stays.
            let own = (e.kind == CommitErrorKind::ClaimLost).then_some(self.started);
            self.store.record_failure(&self.event, "transaction could not be committed", Some(status), own).await;
        }
        result
    }

    /// Rolls back the work and records a failed attempt (`attempts`, the
    /// error text, the status if any, the time) in a transaction of its own,
    /// so the next delivery claims the event again.
    ///
    /// # Errors
    /// [`CommitErrorKind::StillInUse`] when a clone of the handle still
    /// holds the connection (it is rolled back when that clone drops;
    /// nothing is recorded).
    pub async fn fail(self, error: &str, status: Option<u16>) -> Result<(), CommitError> {
        let tx = self.slot.take().ok_or(CommitError::of(CommitErrorKind::StillInUse, None))?;
        if let Err(e) = tx.rollback().await {
            tracing::warn!(sqlstate = e.sqlstate(), error = %e, "rollback failed; connection closed");
        }
        // This path never commits: a `done` row with the claim's time was
        // committed by the work itself, and is turned `failed`.
        self.store.record_failure(&self.event, error, status, Some(self.started)).await;
        Ok(())
    }
}

impl ClaimedEvent {
    /// Rolls back the claim and everything in its transaction, recording
    /// nothing (a replay the body-digest guard refused: nothing was
    /// attempted). A rollback that fails closes the connection.
    pub(crate) async fn discard(self) {
        if let Some(tx) = self.slot.take() {
            if let Err(e) = tx.rollback().await {
                tracing::warn!(sqlstate = e.sqlstate(), "rollback failed; connection closed");
            }
        }
    }

    /// [`discard`](Self::discard) for a replay of another event's stored
    /// outcome (the body-digest guard's), then, under synchronous
    /// replication (`synchronous`: read with that outcome), the standby's
    /// confirmation of its commit, with no connection held meanwhile.
    ///
    /// # Errors
    /// [`StoreErrorKind::Unconfirmed`]: answer 503, not the replay.
    pub(crate) async fn discard_replayed(self, synchronous: bool) -> Result<(), StoreError> {
        let db = self.store.inner.db.clone();
        self.discard().await;
        db.confirm_replicated(synchronous, "body digest: replay").await
    }
}
