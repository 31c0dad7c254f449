//! Every SQL statement of the claim protocol, with the schema spliced in once.
//!
//! This text is driver-neutral: a driver (tokio-postgres here, see
//! [`conn`](super::conn)) sends it with parameters `$1 scope, $2 provider,
//! $3 event_key` and reads the columns each statement documents.

use super::driver::{DETECT_SQL, FENCE_HOLDS, FENCE_ON};
use super::IsolationLevel;

/// The first key of the transaction-level advisory lock a claim takes on
/// its event (PostgreSQL's two-key form `pg_try_advisory_xact_lock(int,
/// int)`, the second key a hash of the event): `0x57484B31`, "WHK1". The
/// two-key form never meets locks taken with the one-`bigint` form.
pub(crate) const CLAIM_LOCK_CLASS: i32 = 0x5748_4B31;

/// The HTTP status the claim row is written with: the one most handlers
/// answer, so committing it needs no second write of the row.
pub(crate) const ASSUMED_STATUS: i16 = 200;

/// The statements the layer runs, with the schema spliced in once at build
/// time. Parameters are always `$1 scope, $2 provider, $3 event_key`.
///
/// Round trips (each "flight" is sent at once, tokio-postgres pipelining
/// requests issued together on one connection):
/// - a done event: [`lookup`](Self::lookup), outside any transaction: one
///   round trip, no transaction id, no WAL;
/// - a new event: `lookup`; then [`begin`](Self::begin) and
///   [`claim`](Self::claim) in one flight; the handler's statements; the
///   fence check (or [`set_status`](Self::set_status) for a status other
///   than 200) and `COMMIT` in one flight. Seven statements (`BEGIN`'s batch
///   sets the fence: `driver::FENCE_ON`), all but `BEGIN`/`COMMIT` prepared
///   once per connection; the row is written once. On Citus eight: the
///   claim's advisory lock ([`claim_lock`](Self::claim_lock)) goes in the
///   claim's flight before [`claim_routed`](Self::claim_routed).
#[derive(Debug)]
pub(crate) struct Statements {
    /// The schema the statements name.
    pub(crate) schema: String,
    /// Simple query: opens the claim transaction at the configured level,
    /// with the fence the commit checks (`driver::FENCE_ON`).
    pub(crate) begin: String,
    /// `$4 event_type, $5 response_status` → `attempts, completed_at` when this
    /// delivery claimed the event: inserted `done` with that status (the
    /// row is invisible to others until the transaction commits, and a
    /// rollback removes it: the state a commit gives it is written at once,
    /// so committing costs no second row version), or taken over from a
    /// `failed` row or an inbox row still `pending` (`attempts + 1`); no row
    /// when another delivery's row stands.
    ///
    /// A delivery in flight is never waited on: the insert happens only
    /// when this transaction takes the event's advisory lock at once
    /// (`pg_try_advisory_xact_lock(CLAIM_LOCK_CLASS, hashtext(...))`, held
    /// to the end of the transaction, PostgreSQL docs "Advisory Locks");
    /// when another claim holds it, nothing is inserted and no row lock is
    /// waited for. The hashed text is `len(scope):scope/len(provider):provider/key`
    /// (lengths in characters): scope and provider are length-prefixed because
    /// every part may contain `/`, so two different events never hash the
    /// same text (plain `scope/provider/key` made the event `k/stripe/z` of
    /// scope `s` and the event `z` of scope `s/stripe/k` share a lock). Two
    /// events whose texts hash alike (32 bits) only take turns. Other
    /// writers of the row (the inbox's, retention's) hold it for one short
    /// statement. With the guard (claim first), a committed `done` row is
    /// neither locked nor written (no transaction id, no WAL): the statement
    /// returns no row; without it (lookup first, where the lookup answered
    /// such rows) a `done` row committed between the lookup and the claim is
    /// locked by the `DO UPDATE` that then does nothing. The guard is a read,
    /// which at SERIALIZABLE takes predicate locks: concurrent claims of
    /// neighbouring keys can then fail each other's COMMIT (40001, answered
    /// 503), so claim-first suits READ COMMITTED. `completed_at` is the
    /// `now()` of the node that wrote the row (on Citus, the worker holding
    /// its shard), read back as the row holds it: the value the commit's
    /// [`set_status`](Self::set_status) and [`record_failure`](Self::record_failure)
    /// compare, whichever node evaluates them.
    pub(crate) claim: String,
    /// On Citus, the claim Citus routes whole to the worker holding the
    /// event's shard: an `INSERT ... VALUES` (Citus docs, "Distributed
    /// INSERT / router execution"), where [`claim`](Self::claim)'s
    /// `INSERT ... SELECT` without a distributed table in its `FROM` is run
    /// through the coordinator, its row sent back as an intermediate result,
    /// which makes every claim's transaction a two-phase commit. The event's
    /// advisory lock is [`claim_lock`](Self::claim_lock), sent before it in
    /// the same flight. A committed `done` row is not changed by its
    /// `DO UPDATE`, whose `WHERE` is false, but PostgreSQL locks it all the
    /// same (a transaction id, and the lock written into the row on the
    /// worker, with its WAL): the statement returns no row.
    pub(crate) claim_routed: String,
    /// `$1 scope, $2 provider, $3 event key`: the event's advisory lock,
    /// without waiting, held to the transaction's end; fails (22012) when
    /// another transaction holds it, so that the claim sent after it in the
    /// same flight does not run (25P02). A statement naming no table: on
    /// Citus it runs on the coordinator.
    pub(crate) claim_lock: String,
    /// [`claim`](Self::claim) that also reads whether a `done` row stands
    /// (claim first: a duplicate then writes nothing and the lookup after it
    /// answers it).
    pub(crate) claim_guarded: String,
    /// → `state, response_status, event_key, synchronous` (whether commits
    /// wait for synchronous standbys on this session, read with the row: see
    /// `Db::confirm_replicated`).
    pub(crate) lookup: String,
    /// `$4 response_status, $5 the claim's completed_at`: for a status other
    /// than [`ASSUMED_STATUS`], stores it on the claimed row (a HOT update)
    /// and is the commit's fence (`driver::TxConn::commit_fenced`): fails
    /// (22012) unless the transaction is still the claim's
    /// (`driver::FENCE_HOLDS`) and its `done` row of the claim's time is
    /// found (25P02 when a swallowed error aborted the transaction).
    pub(crate) set_status: String,
    /// Records a failed attempt after the rollback. `$4 event_type,
    /// $5 last_error, $6 response_status, $7 the claim's completed_at` when the
    /// claim's own transaction may have been committed by the work itself
    /// (a `done` row written by that claim is then turned `failed`), else
    /// NULL.
    pub(crate) record_failure: String,
    /// Simple-query batch: transaction for [`Statements::record_failure`].
    pub(crate) begin_failure: &'static str,
}

impl Statements {
    /// The statements on `schema`'s tables, the claim's transaction at
    /// `isolation`.
    pub(crate) fn new(schema: &str, isolation: IsolationLevel) -> Self {
        let t = format!("{schema}.webhook_events");
        let pk = "scope = $1 AND provider = $2 AND event_key = $3";
        let guard = format!("NOT EXISTS (SELECT FROM {t} WHERE {pk} AND state = 'done')\n                    AND ");
        let lock = format!(
            "pg_try_advisory_xact_lock({CLAIM_LOCK_CLASS}, hashtext(
                          length($1) || ':' || $1 || '/' || length($2) || ':' || $2 || '/' || $3))"
        );
        let claim = |rows: &str| {
            format!(
                "INSERT INTO {t} AS e (scope, provider, event_key, event_type, state, response_status,
                                      completed_at)
                 {rows}
                 ON CONFLICT (scope, provider, event_key) DO UPDATE
                    SET state = 'done', attempts = e.attempts + 1, run_at = NULL,
                        response_status = excluded.response_status, completed_at = excluded.completed_at,
                        event_type = coalesce(excluded.event_type, e.event_type)
                  -- failed: the last delivery failed and was recorded; pending: an
                  -- inbox row no worker holds (a route switched back to synchronous mode).
                  WHERE e.state IN ('failed', 'pending')
                 RETURNING attempts, completed_at"
            )
        };
        Self {
            schema: schema.to_owned(),
            begin: format!("BEGIN ISOLATION LEVEL {}; {FENCE_ON}", isolation.sql()),
            claim: claim(&format!("SELECT $1, $2, $3, $4, 'done', $5, now() WHERE {lock}")),
            claim_guarded: claim(&format!("SELECT $1, $2, $3, $4, 'done', $5, now() WHERE {guard}{lock}")),
            claim_routed: claim("VALUES ($1, $2, $3, $4, 'done', $5, now())"),
            claim_lock: format!("SELECT 1 / {lock}::int"),
            // The key comes back too: rows that are not this event's (another
            // client's statement of the same name behind a pooler) are seen.
            lookup: format!("SELECT state, response_status, event_key, {DETECT_SQL} FROM {t} WHERE {pk}"),
            set_status: format!(
                "WITH done AS (
                     UPDATE {t} SET response_status = $4
                     WHERE {pk} AND state = 'done' AND completed_at = $5 AND {FENCE_HOLDS}
                     RETURNING 1)
                 SELECT 1 / count(*)::int FROM done"
            ),
            record_failure: format!(
                "INSERT INTO {t} AS e (scope, provider, event_key, event_type, state, attempts,
                                      last_error, response_status, last_failed_at)
                 VALUES ($1, $2, $3, $4, 'failed', 1, $5, $6, now())
                 ON CONFLICT (scope, provider, event_key) DO UPDATE
                    -- A committed `running` row (older releases) or a `done` row with
                    -- this claim's time ($7): a handler that ended the claim's
                    -- transaction itself; that run was counted at its claim.
                    SET state = 'failed',
                        attempts = e.attempts + CASE WHEN e.state = 'failed' THEN 1 ELSE 0 END,
                        last_error = excluded.last_error,
                        response_status = excluded.response_status,
                        last_failed_at = excluded.last_failed_at
                  WHERE e.state IN ('failed', 'running')
                     OR (e.state = 'done' AND e.completed_at = $7::timestamptz)"
            ),
            begin_failure: "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = 1000",
        }
    }
}
