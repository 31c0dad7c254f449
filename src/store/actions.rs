//! Business keys and object versions: "this transition happened", kept
//! apart from "this event was received".
//!
//! The claim deduplicates deliveries of one event. Two different events can
//! still mean one transition: Stripe sends `checkout.session.completed` and
//! `payment_intent.succeeded` for one payment, two event ids for one order.
//! [`WebhookTx::claim_action`] claims the transition itself, `(action,
//! business key)` unique per scope, in the handler's transaction: the first
//! event to commit it performs the transition, the other finds it taken.
//! [`WebhookTx::apply_if_newer`] guards last-writer-wins updates against
//! events arriving out of order.

use super::driver::{Param, TxError, WebhookTx};

/// Longest action and object-kind name, in bytes.
pub const MAX_ACTION_BYTES: usize = 128;
/// Longest business key and object id, in bytes.
pub const MAX_BUSINESS_KEY_BYTES: usize = 512;

fn check(text: &str, max: usize) -> Result<(), TxError> {
    if text.is_empty() || text.len() > max || text.contains('\0') {
        return Err(TxError::invalid());
    }
    Ok(())
}

impl WebhookTx {
    /// Claims the business transition `(action, business_key)` in this
    /// transaction's scope: `Ok(true)` when this transaction got it (perform
    /// the transition: it commits with the claim), `Ok(false)` when another
    /// event already performed it (committed). Repeated legitimate updates
    /// are never suppressed unless you claim them: choose an action whose
    /// business key names one transition (`("fulfil_order", order_id)`, not
    /// `("order_updated", order_id)`).
    ///
    /// A transition another delivery is performing right now (its
    /// transaction holds the row uncommitted) is waited for (PostgreSQL docs,
    /// "INSERT", "ON CONFLICT Clause": in READ COMMITTED the insert waits for
    /// that transaction): `false` once it commits, `true` when it rolled
    /// back. Two handlers claiming two actions in opposite orders can
    /// deadlock; PostgreSQL ends one (40P01) and the layer answers it 503,
    /// so its sender retries.
    ///
    /// Like [`enqueue`](WebhookTx::enqueue), it borrows the transaction's
    /// connection: drop a [`TxClient`](super::driver::TxClient) you hold first.
    ///
    /// # Errors
    /// [`TxErrorKind::Invalid`](super::driver::TxErrorKind::Invalid) for an
    /// empty or too long action (over [`MAX_ACTION_BYTES`]) or business key
    /// (over [`MAX_BUSINESS_KEY_BYTES`]); as [`WebhookTx::enqueue`] otherwise.
    pub async fn claim_action(&self, action: &str, business_key: &str) -> Result<bool, TxError> {
        self.guard(claim_action_sql, action, business_key, None).await
    }

    /// The ordering guard of a last-writer-wins update: records `version` as
    /// the newest applied to the object `(object_kind, object_id)` in this
    /// transaction's scope and returns `Ok(true)` when it is newer than the
    /// one stored (or none is): apply the change. `Ok(false)`: an event
    /// carrying a newer (or the same) version was applied before; leave the
    /// object as it is. The record commits with the change.
    ///
    /// `version` is what the provider orders the object's changes by: the
    /// object's own version or `updated_at` where it has one (Shopify's
    /// `updated_at`, in Unix milliseconds), else the event's time (Stripe's
    /// event `created`, Unix seconds: two changes in the same second are
    /// then equal, and the second is not applied). Each preset's module
    /// docs say which field it is.
    ///
    /// # Errors
    /// As [`WebhookTx::claim_action`].
    pub async fn apply_if_newer(&self, object_kind: &str, object_id: &str, version: i64) -> Result<bool, TxError> {
        self.guard(apply_if_newer_sql, object_kind, object_id, Some(version)).await
    }

    /// Runs `sql`, a statement of this transaction's scope on the name
    /// (`$2`, an action or object kind) and key (`$3`, a business key or
    /// object id), then the `version` if any, then the event's provider and
    /// key: whether it returned a row.
    async fn guard(
        &self,
        sql: fn(&str) -> String,
        name: &str,
        key: &str,
        version: Option<i64>,
    ) -> Result<bool, TxError> {
        check(name, MAX_ACTION_BYTES)?;
        check(key, MAX_BUSINESS_KEY_BYTES)?;
        let scope = self.scope();
        let sql = sql(&scope.tables.schema);
        let event = &scope.event;
        let mut params = vec![Param::Text(event.scope()), Param::Text(name), Param::Text(key)];
        params.extend(version.map(Param::I64));
        params.extend([Param::Text(event.provider()), Param::Text(event.key())]);
        Ok(!self.run(&sql, &params).await?.is_empty())
    }
}

/// [`WebhookTx::claim_action`]'s insert.
pub(crate) fn claim_action_sql(schema: &str) -> String {
    format!(
        "INSERT INTO {schema}.webhook_actions (scope, action, business_key, provider, event_key)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (scope, action, business_key) DO NOTHING
         RETURNING 1"
    )
}

/// [`WebhookTx::apply_if_newer`]'s upsert.
pub(crate) fn apply_if_newer_sql(schema: &str) -> String {
    format!(
        "INSERT INTO {schema}.webhook_versions AS v (scope, object_kind, object_id, version, provider, event_key)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (scope, object_kind, object_id) DO UPDATE
            SET version = excluded.version, provider = excluded.provider, event_key = excluded.event_key,
                updated_at = now()
          WHERE v.version < excluded.version
         RETURNING 1"
    )
}
