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
//! drop, [`Conn::query_commit`](super::Conn::query_commit): the seam's
//! `Connection::close_uncancelled`), but an operator,
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

use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use tokio::sync::watch;

/// Whether duplicates are answered only after the synchronous standby
/// confirmed the stored row's commit
/// ([`StoreConfig::synchronous_replication`](crate::StoreConfig::synchronous_replication)).
///
/// Where it applies: the webhook layer's duplicate of a done event
/// ([`Claim::Done`](crate::store::claim::Claim::Done)), the body-digest guard's
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

/// The outcome of one confirming commit: `None` while it runs, then whether
/// it committed (the standby confirmed).
pub(super) type Outcome = Option<bool>;

/// The confirming commits of one pool (kept with the pool's shared state,
/// so every part built on the pool shares them); sent by the `confirm`
/// module.
#[derive(Default)]
pub(super) struct Rounds {
    pub(super) state: Mutex<RoundState>,
    /// Confirming commits sent so far.
    pub(super) sent: AtomicU64,
}

#[derive(Default)]
pub(super) struct RoundState {
    /// The next confirming commit, not sent yet: askers join it.
    pub(super) next: Option<watch::Sender<Outcome>>,
    /// A task is sending confirming commits.
    pub(super) running: bool,
}
