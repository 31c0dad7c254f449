//! The SQL text of one kind's queue: the lease, the work transaction's
//! first read, the heartbeat, the fenced completion, the retry, the burial and
//! the release, written once for any [`QueueKind`]'s table and identity.

use super::{key_column, QueueKind};

/// The statement parts that name a kind's identity: the columns, the
/// columns qualified by `e` and `due` (cast to text where needed), and the
/// match of `$1..$k`.
struct KeySql {
    cols: String,
    e_cols: String,
    due_cols: String,
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
        Self { cols: names(""), e_cols: names("e."), due_cols: names("due."), returned, pk }
    }
}

/// The statements of one kind's queue, with the schema spliced in once.
pub(super) struct QueueSql {
    pub(super) lease: String,
    /// The work transaction's first statement, after BEGIN: its `now()`,
    /// and the kind's body columns when it has some.
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
        let KeySql { cols, e_cols, due_cols, returned, pk } = KeySql::new(K::KEY);
        let due_states = K::DUE_STATES;
        let fence = format!("state = 'running' AND lease_token = ${}::text::uuid", k + 1);
        let only = K::FILTER_COLUMN
            .map_or("$6::text[] IS NULL".to_owned(), |c| format!("($6::text[] IS NULL OR {c} = ANY($6))"));
        let filter = format!("($3::text IS NULL OR provider = $3) AND ($4::text IS NULL OR scope = $4) AND {only}");
        let n = |i: usize| format!("${}", k + 1 + i);
        let born = K::BORN;
        // The end of a row's retry budget, `secs` seconds after it arrived (or
        // was requeued).
        let deadline = |secs: &str| format!("coalesce(retry_from, {born}) + make_interval(secs => {secs})");
        Self {
            // One locking subquery per partial index (`run_at`, `locked_until`), so
            // neither scans the table; at most 2 x $2 rows are locked for the
            // statement and $2 leased. $1 lease seconds, $2 limit, $3 provider,
            // $4 scope, $5 max attempts, $6 the `only` list (text[]), $7 the retry
            // budget in seconds. Only identities, attempts, tokens and the kind's
            // narrow columns come back: a kind reads its large columns per item
            // (the inbox: in the item's BEGIN flight; the outbox: one fenced
            // statement of its own before the call), so one slow payload never
            // stalls the lease of every row behind it.
            lease: format!(
                "WITH pending AS (
                     SELECT {cols}, state, attempts, run_at AS at, false AS spent FROM {t}
                     WHERE state IN ({due_states}) AND run_at <= now() AND {filter}
                     ORDER BY run_at LIMIT $2 FOR UPDATE SKIP LOCKED),
                 expired AS (
                     SELECT {cols}, state, attempts, locked_until AS at,
                            (attempts >= $5 OR {expired_deadline} <= now()) AS spent FROM {t}
                     WHERE state = 'running' AND locked_until < now() AND {filter}
                     ORDER BY locked_until LIMIT $2 FOR UPDATE SKIP LOCKED),
                 due AS (
                     SELECT * FROM (SELECT * FROM expired UNION ALL SELECT * FROM pending) c ORDER BY at LIMIT $2),
                 buried AS (
                     UPDATE {t} e SET state = 'dead', run_at = NULL, locked_until = NULL, lease_token = NULL,
                            last_failed_at = now(),
                            last_error = 'the worker lost its lease on the last allowed attempt (crashed or killed)'
                     FROM due
                     WHERE ({e_cols}) = ({due_cols}) AND due.spent
                     RETURNING e.provider, e.event_key, {filter_value} AS filter),
                 leased AS (
                     UPDATE {t} e SET state = 'running', attempts = e.attempts + 1, run_at = NULL,
                            locked_until = now() + make_interval(secs => $1), lease_token = gen_random_uuid()
                     FROM due
                     WHERE ({e_cols}) = ({due_cols}) AND NOT due.spent
                     RETURNING {returned}, e.attempts, e.lease_token::text, {payload})
                 -- At least one row: the buried rows' providers, keys and filter values ride
                 -- along, so the runtime can count and log them; without a leased row the
                 -- leased columns are NULL.
                 SELECT leased.*, b.providers, b.keys, b.filters FROM
                     (SELECT array_agg(provider) AS providers, array_agg(event_key) AS keys,
                             array_agg(filter) AS filters FROM buried) b
                     LEFT JOIN leased ON true",
                payload = K::PAYLOAD_COLUMNS.replace("{schema}", schema),
                filter_value = K::FILTER_COLUMN.map_or("NULL::text".to_owned(), |c| format!("e.{c}")),
                expired_deadline = deadline("$7"),
            ),
            // `mine` is false (and the columns NULL) when the lease is no longer
            // this worker's.
            begin_read: if K::BODY_COLUMNS.is_empty() {
                "SELECT now()".to_owned()
            } else {
                format!(
                    "SELECT now(), e.lease_token IS NOT NULL AS mine, {body}
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
            // Fails (22012) when the lease is no longer this worker's, so the
            // COMMIT sent in the same flight ends an aborted transaction.
            complete: format!(
                "WITH done AS (
                     UPDATE {t} SET state = 'done', {}, locked_until = NULL, lease_token = NULL
                     WHERE {pk} AND {fence} AND now() = {} RETURNING 1)
                 SELECT 1 / count(*)::int FROM done",
                K::DONE_SET.replace("{status}", &n(1)),
                n(2)
            ),
            // Dead past the maximum attempts or once the budget is spent; else due
            // after the delay, never past the budget's end (the last run is at it).
            retry_later: format!(
                "UPDATE {t} SET state = CASE WHEN {spent} THEN 'dead' ELSE {again} END,
                        run_at = CASE WHEN {spent} THEN NULL
                                      ELSE least(now() + make_interval(secs => {delay}), {end}) END,
                        last_error = {error}, response_status = {status},
                        last_failed_at = now(), locked_until = NULL, lease_token = NULL
                 WHERE {pk} AND {fence} RETURNING state, attempts >= {max}",
                spent = format!("(attempts >= {max} OR {} <= now())", deadline(&n(6)), max = n(1)),
                end = deadline(&n(6)),
                max = n(1),
                delay = n(2),
                error = n(3),
                status = n(4),
                again = n(5)
            ),
            bury: format!(
                "UPDATE {t} SET state = 'dead', run_at = NULL, last_error = {}, response_status = {},
                        last_failed_at = now(), locked_until = NULL, lease_token = NULL
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
    let QueueSql { lease, begin_read, read, heartbeat, complete, retry_later, release, bury } =
        QueueSql::new::<K>(schema);
    vec![
        ("lease", lease),
        ("begin_read", begin_read),
        ("read", read),
        ("heartbeat", heartbeat),
        ("complete", complete),
        ("retry_later", retry_later),
        ("release", release),
        ("bury", bury),
    ]
}
