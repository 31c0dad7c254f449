//! Every SQL statement of the claim protocol, with the schema spliced in once.
//!
//! This text is driver-neutral: a driver (tokio-postgres here, see
//! [`conn`](super::conn)) sends it with parameters `$1 scope, $2 provider,
//! $3 event_key` and reads the columns each statement documents.

use super::IsolationLevel;

/// How long one claim attempt waits for the row lock of an in-flight
/// delivery of the same event, in milliseconds (PostgreSQL's `lock_timeout`,
/// whose smallest effective value is 1 ms; 0 would mean no limit). The layer
/// waits for an in-flight delivery between attempts, without a connection.
const CLAIM_LOCK_WAIT_MS: u32 = 1;

/// The custom setting (transaction-local) that keeps the session's own
/// `lock_timeout` while the claim runs with a 1 ms one.
const SAVED_LOCK_TIMEOUT: &str = "webhook_idempotency.saved_lock_timeout";

/// The statements the layer runs, with the schema spliced in once at build
/// time. Parameters are always `$1 scope, $2 provider, $3 event_key`.
///
/// Round trips (each "flight" is sent at once, tokio-postgres pipelining
/// requests issued together on one connection):
/// - a done event: [`lookup`](Self::lookup), outside any transaction: one
///   round trip, no transaction id, no WAL;
/// - a new event: `lookup`; then [`begin`](Self::begin), [`claim`](Self::claim)
///   and [`restore_lock_timeout`](Self::restore_lock_timeout) in one flight;
///   the handler's statements; [`done`](Self::done) and `COMMIT` in one flight.
#[derive(Debug)]
pub(crate) struct Statements {
    /// The schema the statements name.
    pub(crate) schema: String,
    /// Simple-query batch: opens the claim transaction, saves the session's
    /// `lock_timeout` in a transaction-local setting and bounds the wait for
    /// an in-flight claim to 1 ms.
    pub(crate) begin: String,
    /// Simple query: gives the handler the session's own `lock_timeout` back
    /// (`SET LOCAL ... TO DEFAULT` would reset it to the server's).
    pub(crate) restore_lock_timeout: String,
    /// `$4 event_type` → `attempts, now()` when this delivery claimed the
    /// event: inserted as `running`, or taken over from a `failed` row or an
    /// inbox row still `pending` (`attempts + 1`); no row when another
    /// delivery's row stands.
    /// `now()` is the transaction's start time.
    pub(crate) claim: String,
    /// → `state, response_status`.
    pub(crate) lookup: String,
    /// `$4 response_status, $5 the claim's now()`: marks the claimed row
    /// done, only inside the claim's transaction; fails (division by zero,
    /// 22012) when that row is not there, so the `COMMIT` sent with it ends
    /// an aborted transaction (PostgreSQL answers it `ROLLBACK`).
    pub(crate) done: String,
    /// Records a failed attempt after the rollback. `$4 event_type,
    /// $5 last_error, $6 response_status`.
    pub(crate) record_failure: String,
    /// Simple-query batch: transaction for [`Statements::record_failure`].
    pub(crate) begin_failure: &'static str,
}

impl Statements {
    pub(crate) fn new(schema: &str, isolation: IsolationLevel) -> Self {
        let t = format!("{schema}.webhook_events");
        let pk = "scope = $1 AND provider = $2 AND event_key = $3";
        Self {
            schema: schema.to_owned(),
            begin: format!(
                "BEGIN ISOLATION LEVEL {}; \
                 SELECT set_config('{SAVED_LOCK_TIMEOUT}', current_setting('lock_timeout'), true), \
                        set_config('lock_timeout', '{CLAIM_LOCK_WAIT_MS}ms', true)",
                isolation.sql(),
            ),
            restore_lock_timeout: format!(
                "SELECT set_config('lock_timeout', current_setting('{SAVED_LOCK_TIMEOUT}'), true)"
            ),
            claim: format!(
                "INSERT INTO {t} AS e (scope, provider, event_key, event_type, state)
                 VALUES ($1, $2, $3, $4, 'running')
                 ON CONFLICT (scope, provider, event_key) DO UPDATE
                    SET state = 'running', attempts = e.attempts + 1, run_at = NULL,
                        event_type = coalesce(excluded.event_type, e.event_type)
                  -- failed: the last delivery failed and was recorded; pending: an
                  -- inbox row no worker holds (a route switched back to synchronous mode).
                  WHERE e.state IN ('failed', 'pending')
                 RETURNING attempts, now()"
            ),
            lookup: format!("SELECT state, response_status FROM {t} WHERE {pk}"),
            done: format!(
                "WITH done AS (
                     UPDATE {t} SET state = 'done', response_status = $4, completed_at = now()
                     WHERE {pk} AND state = 'running' AND now() = $5
                     RETURNING 1)
                 SELECT 1 / count(*)::int FROM done"
            ),
            record_failure: format!(
                "INSERT INTO {t} AS e (scope, provider, event_key, event_type, state, attempts,
                                      last_error, response_status, last_failed_at)
                 VALUES ($1, $2, $3, $4, 'failed', 1, $5, $6, now())
                 ON CONFLICT (scope, provider, event_key) DO UPDATE
                    -- A committed `running` row: a handler that ended the claim's
                    -- transaction itself; that run was counted at its claim.
                    SET state = 'failed',
                        attempts = e.attempts + CASE WHEN e.state = 'running' THEN 0 ELSE 1 END,
                        last_error = excluded.last_error,
                        response_status = excluded.response_status,
                        last_failed_at = excluded.last_failed_at
                  WHERE e.state IN ('failed', 'running')"
            ),
            begin_failure: "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = 1000",
        }
    }
}
