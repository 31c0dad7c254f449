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

/// The statements the layer runs, with the schema spliced in once at build
/// time. Parameters are always `$1 scope, $2 provider, $3 event_key`.
#[derive(Debug)]
pub(crate) struct Statements {
    /// The schema the statements name.
    pub(crate) schema: String,
    /// Simple-query batch: opens the claim transaction, reads the session's
    /// `lock_timeout` (one row), and bounds the wait for an in-flight claim.
    pub(crate) begin: String,
    /// `$1` the session's `lock_timeout`: restores it for the handler's own
    /// statements (`SET LOCAL ... TO DEFAULT` would reset it to the server's).
    pub(crate) restore_lock_timeout: &'static str,
    /// `$4 event_type` → `attempts, now()` when this delivery claimed the
    /// event; `now()` is the transaction's start time.
    pub(crate) claim: String,
    /// → `state, response_status` of a committed row.
    pub(crate) lookup: String,
    /// Re-claims an event whose last delivery failed. `$4 event_type` →
    /// `attempts, now()`.
    pub(crate) reclaim: String,
    /// `$4 response_status, $5 the claim's now()`: marks the claimed row
    /// done, only inside the claim's transaction (a handler that sent COMMIT
    /// or ROLLBACK itself is running in another one: 0 rows).
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
                "BEGIN ISOLATION LEVEL {}; SELECT current_setting('lock_timeout'); \
                 SET LOCAL lock_timeout = {CLAIM_LOCK_WAIT_MS}",
                isolation.sql(),
            ),
            restore_lock_timeout: "SELECT set_config('lock_timeout', $1, true)",
            claim: format!(
                "INSERT INTO {t} (scope, provider, event_key, event_type, state)
                 VALUES ($1, $2, $3, $4, 'running')
                 ON CONFLICT (scope, provider, event_key) DO NOTHING
                 RETURNING attempts, now()"
            ),
            lookup: format!("SELECT state, response_status FROM {t} WHERE {pk}"),
            reclaim: format!(
                "UPDATE {t} SET state = 'running', attempts = attempts + 1,
                        event_type = coalesce($4, event_type)
                 WHERE {pk} AND state = 'failed'
                 RETURNING attempts, now()"
            ),
            done: format!(
                "UPDATE {t} SET state = 'done', response_status = $4, completed_at = now()
                 WHERE {pk} AND state = 'running' AND now() = $5
                 RETURNING 1"
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
