//! Business keys and object versions: "this transition happened", kept
//! apart from "this event was received".
//!
//! The claim deduplicates deliveries of one event. Two different events can
//! still mean one transition: Stripe sends `checkout.session.completed` and
//! `payment_intent.succeeded` for one payment, two event ids for one order.
//! [`WebhookTx::claim_action`](crate::WebhookTx::claim_action) claims the transition itself, `(action,
//! business key)` unique per scope, in the handler's transaction: the first
//! event to commit it performs the transition, the other finds it taken.
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer) guards last-writer-wins updates against
//! events arriving out of order.
//!
//! This module holds their statements and bounds; the methods are
//! [`WebhookTx`](crate::WebhookTx)'s, which runs them in the handler's
//! transaction.

use super::driver::{Param, Row};
use crate::event::ScopedEvent;

/// Longest action and object-kind name, in bytes.
pub const MAX_ACTION_BYTES: usize = 128;
/// Longest business key and object id, in bytes.
pub const MAX_BUSINESS_KEY_BYTES: usize = 512;

/// Whether `text` is 1 to `max` bytes without NUL.
fn fits(text: &str, max: usize) -> bool {
    !text.is_empty() && text.len() <= max && !text.contains('\0')
}

/// [`WebhookTx::claim_action`](crate::WebhookTx::claim_action)'s statement (the SQL under `schema` and its
/// parameters) for `event`'s scope, or `None` when the action or the key is
/// out of its range.
pub(crate) fn claim_action_statement<'a>(
    schema: &str,
    event: &'a ScopedEvent,
    action: &'a str,
    business_key: &'a str,
) -> Option<(String, Vec<Param<'a>>)> {
    guard_statement(claim_action_sql(schema), event, action, business_key, None)
}

/// [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)'s statement, as [`claim_action_statement`].
pub(crate) fn apply_if_newer_statement<'a>(
    schema: &str,
    event: &'a ScopedEvent,
    object_kind: &'a str,
    object_id: &'a str,
    version: i64,
) -> Option<(String, Vec<Param<'a>>)> {
    guard_statement(apply_if_newer_sql(schema), event, object_kind, object_id, Some(version))
}

/// `sql`, a statement of `event`'s scope on the name (`$2`, an action or
/// object kind) and key (`$3`, a business key or object id), then the
/// `version` if any, then the event's provider and key.
fn guard_statement<'a>(
    sql: String,
    event: &'a ScopedEvent,
    name: &'a str,
    key: &'a str,
    version: Option<i64>,
) -> Option<(String, Vec<Param<'a>>)> {
    if !fits(name, MAX_ACTION_BYTES) || !fits(key, MAX_BUSINESS_KEY_BYTES) {
        return None;
    }
    let mut params = vec![Param::Text(event.scope()), Param::Text(name), Param::Text(key)];
    params.extend(version.map(Param::I64));
    params.extend([Param::Text(event.provider()), Param::Text(event.key())]);
    Some((sql, params))
}

/// Whether a guard statement's rows say this transaction got the action
/// (or applied the version).
pub(crate) fn taken(rows: &[Row]) -> bool {
    !rows.is_empty()
}

/// [`WebhookTx::claim_action`](crate::WebhookTx::claim_action)'s insert.
pub(crate) fn claim_action_sql(schema: &str) -> String {
    format!(
        "INSERT INTO {schema}.webhook_actions (scope, action, business_key, provider, event_key)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (scope, action, business_key) DO NOTHING
         RETURNING 1"
    )
}

/// [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)'s upsert.
pub(crate) fn apply_if_newer_sql(schema: &str) -> String {
    format!(
        "INSERT INTO {schema}.webhook_versions AS v (scope, object_kind, object_id, version, provider, event_key)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (scope, object_kind, object_id) DO UPDATE
            SET version = excluded.version, provider = excluded.provider, event_key = excluded.event_key,
                updated_at = excluded.updated_at
          WHERE v.version < excluded.version
         RETURNING 1"
    )
}
