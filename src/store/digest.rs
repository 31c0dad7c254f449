//! The body-digest guard: one processed (or stored) body per
//! `(scope, provider, SHA-256 of the body)`, whichever event key it came
//! under. See
//! [`WebhookLayerBuilder::body_digest_guard`](crate::layer::WebhookLayerBuilder::body_digest_guard).

use sha2::{Digest as _, Sha256};

use super::driver::{Param, Row, DETECT_SQL};
use crate::event::ScopedEvent;

/// The SHA-256 of a raw body, 32 bytes.
pub(crate) fn digest(body: &[u8]) -> [u8; 32] {
    Sha256::digest(body).into()
}

/// The first key of the advisory lock a delivery takes on its body's digest
/// while it runs (two-key form, as the claim's `CLAIM_LOCK_CLASS`; another
/// first key, so the two never meet): `0x57484B32`, "WHK2".
pub(crate) const DIGEST_LOCK_CLASS: i32 = 0x5748_4B32;

/// The statement that claims a digest for an event (parameters: scope,
/// provider, event key, digest): a row back when the digest is new, or
/// already this event's (the sender's own redelivery); none when another
/// event key holds it. The inbox's insert embeds it (the same statement).
pub(crate) fn claim_sql(schema: &str) -> String {
    format!(
        "INSERT INTO {schema}.webhook_body_digests AS d (scope, provider, body_sha256, event_key)
         VALUES ($1::text, $2::text, $4::bytea, $3::text)
         ON CONFLICT (scope, provider, body_sha256) DO UPDATE SET event_key = excluded.event_key
          WHERE d.event_key = excluded.event_key
         RETURNING 1"
    )
}

/// The synchronous path's claim of a digest inside the claim's transaction:
/// first the digest's advisory lock, without waiting
/// (`pg_try_advisory_xact_lock`, held to the transaction's end), then, only
/// when it was taken, [`claim_sql`]'s insert. A delivery of the same body
/// under another key still running holds the lock: this one is answered as
/// in flight (409) at once instead of waiting on that delivery's uncommitted
/// row (which would hold a pooled connection up to the database timeout and
/// end as a 503). Returns `(locked, claimed, synchronous)`, the last whether
/// commits wait for synchronous standbys (a replay is answered once the
/// standby confirmed the other key's commit: `Db::confirm_replicated`).
fn locked_claim_sql(schema: &str) -> String {
    let insert = claim_sql(schema).replace(
        "VALUES ($1::text, $2::text, $4::bytea, $3::text)",
        "SELECT $1::text, $2::text, $4::bytea, $3::text FROM lock WHERE lock.taken",
    );
    format!(
        "WITH lock AS (SELECT {} AS taken),
         claimed AS ({insert})
         SELECT (SELECT taken FROM lock), EXISTS (SELECT 1 FROM claimed), {DETECT_SQL}",
        lock_expr("$1", "$2", "$4")
    )
}

/// The digest's advisory lock, taken without waiting, on the scope,
/// provider and digest placeholders given.
fn lock_expr(scope: &str, provider: &str, digest: &str) -> String {
    format!(
        "pg_try_advisory_xact_lock({DIGEST_LOCK_CLASS}, hashtext(
             length({scope}::text) || ':' || {scope}::text || '/' || length({provider}::text) || ':' || {provider}::text
             || '/' || encode({digest}::bytea, 'hex')))"
    )
}

/// On Citus, [`locked_claim_sql`] as two statements, since Citus runs an
/// `INSERT ... SELECT` without a distributed table in its `FROM` through the
/// coordinator (and commits the claim's transaction in two phases): the
/// lock, a statement naming no table (taken on the coordinator), with the
/// session's synchronous setting (`$1 scope, $2 provider, $3 digest` →
/// `taken, synchronous`), then, only when it was taken, [`claim_sql`]'s
/// `INSERT ... VALUES`, which Citus routes to the scope's shard.
pub(crate) fn routed_lock_sql() -> String {
    format!("SELECT {}, {DETECT_SQL}", lock_expr("$1", "$2", "$3"))
}

/// What the body-digest claim found (`WebhookTx::claim_body`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyClaim {
    /// New, or this event's own: go on.
    Acquired,
    /// Another event key processed a byte-identical body: a replay.
    Replayed {
        /// Whether commits wait for synchronous standbys on this session.
        synchronous: bool,
    },
    /// A delivery of the same body is running now: retry later.
    InFlight,
}

/// The body-digest claim's statement (the SQL under `schema` and its
/// parameters) for `event` and the body's `digest`: run in the claim's
/// transaction, it commits or rolls back with the claim, and never waits on
/// another delivery.
pub(crate) fn claim_statement<'a>(
    schema: &str,
    event: &'a ScopedEvent,
    digest: &'a [u8; 32],
) -> (String, [Param<'a>; 4]) {
    let params = [
        Param::Text(event.scope()),
        Param::Text(event.provider()),
        Param::Text(event.key()),
        Param::Bytes(&digest[..]),
    ];
    (locked_claim_sql(schema), params)
}

/// The parameters of [`routed_lock_sql`] for `event` and `digest`.
pub(crate) fn routed_lock_params<'a>(event: &'a ScopedEvent, digest: &'a [u8; 32]) -> [Param<'a>; 3] {
    [Param::Text(event.scope()), Param::Text(event.provider()), Param::Bytes(&digest[..])]
}

/// What [`claim_statement`]'s rows say.
pub(crate) fn body_claim(rows: &[Row]) -> BodyClaim {
    let (taken, claimed, synchronous) =
        rows.first().map_or((false, false, true), |r| (r.get(0), r.get(1), r.try_get(2).unwrap_or(true)));
    match (taken, claimed) {
        (false, _) => BodyClaim::InFlight,
        (true, true) => BodyClaim::Acquired,
        (true, false) => BodyClaim::Replayed { synchronous },
    }
}
