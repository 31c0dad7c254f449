//! The SQL text of one kind's queue: the lease, the work transaction's
//! first read, the heartbeat, the fenced completion, the retry, the burial and
//! the release, written once for any [`QueueKind`]'s table and identity.

use super::{key_column, QueueKind};
use crate::store::driver::FENCE_HOLDS;

/// The statement parts that name a kind's identity: the columns, the
/// columns qualified by `e` and `due` (cast to text where needed), and the
/// match of `$1..$k`.
struct KeySql {
    cols: String,
    e_cols: String,
    due_cols: String,
    /// Qualified by `x` (the expired rows).
    x_cols: String,
    returned: String,
    pk: String,
}

impl KeySql {
    fn new(key: &'static [&'static str]) -> Self {
        let columns: Vec<(&str, &str)> = key.iter().map(|c| key_column(c)).collect();
        let names = |alias: &str| columns.iter().map(|(c, _)| format!("{alias}{c}")).collect::<Vec<_>>().join(", ");
        let returned = columns
            .iter()
            .map(|(c, ty)| if *ty == "text" { format!("e.{c}") } else { format!("e.{c}::text") })
            .collect::<Vec<_>>()
            .join(", ");
        let pk = columns
            .iter()
            .enumerate()
            .map(
                |(i, (c, ty))| {
                    if *ty == "text" {
                        format!("{c} = ${}", i + 1)
                    } else {
                        format!("{c} = ${}::text::{ty}", i + 1)
                    }
                },
            )
            .collect::<Vec<_>>()
            .join(" AND ");
        Self { cols: names(""), e_cols: names("e."), due_cols: names("due."), x_cols: names("x."), returned, pk }
    }
}

/// `last_error` of a row whose lease expired while it ran beside others.
pub(crate) const EXPIRED_IN_BATCH: &str = "the lease expired while other rows ran beside it (the process died or was \
     killed, or the worker could not renew the lease): its next run is alone";
/// `last_error` of a row whose lease expired while it ran alone.
pub(crate) const EXPIRED_ALONE: &str = "the lease expired while it ran alone: the process died or was killed, or the \
     worker could not renew the lease, while running this row";
/// `last_error` of a row buried for it.
pub(crate) const EXPIRED_ALONE_SPENT: &str = "the lease expired while it ran alone, on its last allowed run (or past \
     its retry budget): the process died or was killed, or the worker could not renew the lease, while running \
     this row";

/// The statements of one kind's queue, with the schema spliced in once.
pub(super) struct QueueSql {
    pub(super) lease: String,
    /// `$1 provider` (NULL: all) → the scopes with rows due or leases
    /// expired: what a worker serving every scope leases on Citus, scope by
    /// scope.
    pub(super) due_scopes: String,
    /// The work transaction's first statement, after BEGIN: the kind's body
    /// columns of the row, when it has some (else `SELECT 1`).
    pub(super) begin_read: String,
    /// The kind's body columns of one leased row, fenced by its token,
    /// outside any transaction (none when the row is no longer this lease's).
    pub(super) read: String,
    pub(super) heartbeat: String,
    pub(super) complete: String,
    pub(super) retry_later: String,
    pub(super) release: String,
    pub(super) bury: String,
}

impl QueueSql {
    pub(super) fn new<K: QueueKind>(schema: &str) -> Self {
        let t = format!("{schema}.{}", K::TABLE);
        let k = K::KEY.len();
        let KeySql { cols, e_cols, due_cols, x_cols, returned, pk } = KeySql::new(K::KEY);
        let due_states = K::DUE_STATES;
        let fence = format!("state = 'running' AND lease_token = ${}::text::uuid", k + 1);
        let only = K::FILTER_COLUMN
            .map_or("$6::text[] IS NULL".to_owned(), |c| format!("($6::text[] IS NULL OR {c} = ANY($6))"));
        let filter = format!("($3::text IS NULL OR provider = $3) AND ($4::text IS NULL OR scope = $4) AND {only}");
        // Every fenced end but the release clears `run_alone`: the run ended
        // some other way than by its lease expiring.
        let n = |i: usize| format!("${}", k + 1 + i);
        let born = K::BORN;
        // The end of a row's retry budget, `secs` seconds after it arrived (or
        // was requeued).
        // (`plus_seconds`, migration 13: IMMUTABLE, as Citus needs it in an UPDATE.)
        let deadline = |secs: &str| format!("{schema}.plus_seconds(coalesce(retry_from, {born}), {secs})");
        Self {
            // $1 lease seconds, $2 limit, $3 provider, $4 scope, $5 max attempts,
            // $6 the `only` list (text[]), $7 the retry budget in seconds, $8 and
            // $9 the backoff's base and cap in seconds, $10 whether to lease a row
            // that must run alone (then at most one, and nothing else), $11 the
            // lease token (32 hex digits, made by the worker: one per lease
            // statement, every row it leases fenced by it; Citus refuses a
            // VOLATILE gen_random_uuid() in an UPDATE).
            //
            // A row whose lease expired (its worker's process died, was killed, or
            // could not renew it) is not leased again here: which row of that
            // process's batch killed it is unknown, so it goes back due after a
            // backoff with full jitter, marked `run_alone`; a worker leases it only
            // when its process has nothing else in hand (`$10`, see
            // `worker::isolation`). Its run counts as a run (`attempts`), but a
            // lease expiry buries only a row that ran alone: that one killed its
            // process, `dead` once its budget is spent (keeping `run_alone`, so an
            // operator's requeue runs it alone too). Every other row is leased only when no row must run alone
            // is asked for (`NOT $10`), the kind's ordering guard permitting.
            //
            // One locking subquery per partial index (`locked_until`, `run_at`,
            // `run_at` of the rows that run alone), so none scans the table; at
            // most 2 x $2 rows are locked and $2 leased. Only identities, attempts,
            // tokens and the kind's narrow columns come back: a kind reads its large
            // columns per item (the inbox: in the item's BEGIN flight; the outbox:
            // one fenced statement of its own before the call), so one slow payload
            // never stalls the lease of every row behind it. The one row returned
            // whatever was leased carries the buried rows (to count and log), when
            // the earliest requeued row is due (seconds from now) and whether rows
            // that must run alone are due for this worker.
            lease: format!(
                "WITH expired AS (
                     SELECT {cols}, run_alone AS alone,
                            (run_alone AND (attempts >= $5 OR {expired_deadline} <= now())) AS spent FROM {t}
                     WHERE state = 'running' AND locked_until < now() AND {filter}
                     ORDER BY locked_until LIMIT $2 FOR UPDATE SKIP LOCKED),
                 buried AS (
                     UPDATE {t} e SET state = 'dead', run_at = NULL, locked_until = NULL, lease_token = NULL,
                            last_failed_at = now(), last_error = '{buried_error}'
                     FROM expired x
                     WHERE ({e_cols}) = ({x_cols}) AND {scope_e} AND x.spent
                     RETURNING e.provider, e.event_key, {filter_value} AS filter),
                 requeued AS (
                     UPDATE {t} e SET state = {expired_state}, run_alone = true, locked_until = NULL,
                            lease_token = NULL, last_failed_at = now(),
                            run_at = least({schema}.plus_seconds(now(),
                                             {jitter} * least($9, $8 * 2 ^ greatest(e.attempts - 1, 0))),
                                           {expired_deadline}),
                            last_error = CASE WHEN x.alone THEN '{alone_error}' ELSE '{batch_error}' END
                     FROM expired x
                     WHERE ({e_cols}) = ({x_cols}) AND {scope_e} AND NOT x.spent
                     RETURNING e.run_at),
                 alone AS (
                     SELECT {cols}, run_at FROM {t} c
                     WHERE $10 AND run_alone AND state IN ({due_states}) AND run_at <= now() AND {filter} {guard}
                     ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED),
                 pending AS (
                     SELECT {cols}, run_at FROM {t} c
                     WHERE NOT $10 AND NOT run_alone AND state IN ({due_states}) AND run_at <= now() AND {filter}
                           {guard}
                     ORDER BY run_at LIMIT $2 FOR UPDATE SKIP LOCKED),
                 due AS (SELECT * FROM alone UNION ALL SELECT * FROM pending),
                 leased AS (
                     UPDATE {t} e SET state = 'running', attempts = e.attempts + 1, run_at = NULL,
                            locked_until = now() + make_interval(secs => $1), lease_token = $11::text::uuid
                     FROM due
                     WHERE ({e_cols}) = ({due_cols}) AND {scope_e}
                     RETURNING {returned}, e.attempts, e.lease_token::text, {payload})
                 -- Without a leased row the leased columns are NULL.
                 SELECT leased.*, b.providers, b.keys, b.filters, r.next_due, a.alone_due FROM
                     (SELECT array_agg(provider) AS providers, array_agg(event_key) AS keys,
                             array_agg(filter) AS filters FROM buried) b
                     CROSS JOIN (SELECT extract(epoch FROM min(run_at) - now())::float8 AS next_due
                                   FROM requeued) r
                     CROSS JOIN (SELECT EXISTS (
                                     SELECT 1 FROM {t} c
                                     WHERE run_alone AND state IN ({due_states}) AND run_at <= now() AND {filter}
                                           {guard})
                                   AS alone_due) a
                     LEFT JOIN leased ON true",
                payload = K::PAYLOAD_COLUMNS.replace("{schema}", schema),
                // The lease's scope again on each updated table: with a scope
                // bound, Citus then routes the whole statement to its shard's
                // worker as one task (without it, it planned the updates as
                // subplans over every shard, and concurrent leases met as
                // distributed deadlocks). A no-op on one PostgreSQL.
                scope_e = "($4::text IS NULL OR e.scope = $4)",
                // Full jitter in [0, 1], per row: a hash of the row's key salted
                // by this lease's token (an IMMUTABLE function: Citus refuses
                // VOLATILE ones such as random() in an UPDATE).
                jitter = "((hashtext(e.provider || '/' || e.event_key || '/' || $11::text) & 2147483647)::float8 \
                          / 2147483647)",
                filter_value = K::FILTER_COLUMN.map_or("NULL::text".to_owned(), |c| format!("e.{c}")),
                expired_deadline = deadline("$7"),
                expired_state = K::EXPIRED_STATE,
                guard = K::ORDER_GUARD.replace("{t}", &t),
                buried_error = EXPIRED_ALONE_SPENT,
                alone_error = EXPIRED_ALONE,
                batch_error = EXPIRED_IN_BATCH,
            ),
            due_scopes: format!(
                "SELECT DISTINCT scope FROM {t}
                  WHERE ($1::text IS NULL OR provider = $1)
                    AND ((state IN ({due_states}) AND run_at <= now())
                         OR (state = 'running' AND locked_until < now()))"
            ),
            // `mine` is false (and the columns NULL) when the lease is no longer
            // this worker's.
            begin_read: if K::BODY_COLUMNS.is_empty() {
                "SELECT 1".to_owned()
            } else {
                format!(
                    "SELECT e.lease_token IS NOT NULL AS mine, {body}
                       FROM (SELECT 1) one LEFT JOIN {t} e ON {pk} AND {fence}",
                    body = K::BODY_COLUMNS
                )
            },
            read: if K::BODY_COLUMNS.is_empty() {
                "SELECT 1".to_owned()
            } else {
                format!("SELECT {body} FROM {t} e WHERE {pk} AND {fence}", body = K::BODY_COLUMNS)
            },
            heartbeat: format!(
                "UPDATE {t} SET locked_until = now() + make_interval(secs => {}) WHERE {pk} AND {fence} RETURNING 1",
                n(1)
            ),
            // Fails (22012) when the lease is no longer this worker's or the
            // transaction no longer the work's (`FENCE_HOLDS`: the handler
            // ended it, and the statement would run on its own), so the
            // COMMIT sent in the same flight ends an aborted transaction.
            complete: format!(
                "WITH done AS (
                     UPDATE {t} SET state = 'done', {}, locked_until = NULL, lease_token = NULL, run_alone = false
                     WHERE {pk} AND {fence} AND {FENCE_HOLDS} RETURNING 1)
                 SELECT 1 / count(*)::int FROM done",
                K::DONE_SET.replace("{status}", &n(1)),
            ),
            // Dead past the maximum attempts or once the budget is spent; else due
            // after the delay, never past the budget's end (the last run is at it).
            // `now()` is read once in `FROM` (`c.now`): Citus refuses a
            // non-IMMUTABLE function inside CASE in an UPDATE.
            retry_later: format!(
                "UPDATE {t} SET state = CASE WHEN {spent} THEN 'dead' ELSE {again} END,
                        run_at = CASE WHEN {spent} THEN NULL
                                      ELSE least({schema}.plus_seconds(c.now, {delay}), {end}) END,
                        last_error = {error}, response_status = {status},
                        last_failed_at = c.now, locked_until = NULL, lease_token = NULL, run_alone = false
                 FROM (SELECT now() AS now) c
                 WHERE {pk} AND {fence} RETURNING state, attempts >= {max}",
                spent = format!("(attempts >= {max} OR {} <= c.now)", deadline(&n(6)), max = n(1)),
                end = deadline(&n(6)),
                max = n(1),
                delay = n(2),
                error = n(3),
                status = n(4),
                again = n(5)
            ),
            bury: format!(
                "UPDATE {t} SET state = 'dead', run_at = NULL, last_error = {}, response_status = {},
                        last_failed_at = now(), locked_until = NULL, lease_token = NULL, run_alone = false
                 WHERE {pk} AND {fence} RETURNING 1",
                n(1),
                n(2)
            ),
            release: format!(
                "UPDATE {t} SET state = 'pending', attempts = greatest(attempts - 1, 0), run_at = now(),
                        locked_until = NULL, lease_token = NULL
                 WHERE {pk} AND {fence} RETURNING 1"
            ),
        }
    }
}

/// Every statement of kind `K`'s queue, named (for the statement checks of
/// `store::citus`).
#[cfg(test)]
pub(crate) fn statement_texts<K: QueueKind>(schema: &str) -> Vec<(&'static str, String)> {
    let QueueSql { lease, due_scopes, begin_read, read, heartbeat, complete, retry_later, release, bury } =
        QueueSql::new::<K>(schema);
    vec![
        ("lease", lease),
        ("due_scopes", due_scopes),
        ("begin_read", begin_read),
        ("read", read),
        ("heartbeat", heartbeat),
        ("complete", complete),
        ("retry_later", retry_later),
        ("release", release),
        ("bury", bury),
    ]
}
