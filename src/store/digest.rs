//! The body-digest guard: one processed (or stored) body per
//! `(scope, provider, SHA-256 of the body)`, whichever event key it came
//! under. See
//! [`WebhookLayerBuilder::body_digest_guard`](crate::layer::WebhookLayerBuilder::body_digest_guard).

use sha2::{Digest as _, Sha256};

use super::driver::{Param, TxError, WebhookTx};

/// The SHA-256 of a raw body, 32 bytes.
pub(crate) fn digest(body: &[u8]) -> [u8; 32] {
    Sha256::digest(body).into()
}

/// The statement that claims a digest for an event: a row back when the
/// digest is new, or already this event's (the sender's own redelivery);
/// none when another event key holds it. Parameters: scope, provider, event
/// key, digest. In READ COMMITTED a digest another transaction inserted and
/// has not committed is waited for (PostgreSQL docs, "INSERT", "ON CONFLICT
/// Clause"), so two replays racing each other run once.
pub(crate) fn claim_sql(schema: &str) -> String {
    format!(
        "INSERT INTO {schema}.webhook_body_digests AS d (scope, provider, body_sha256, event_key)
         VALUES ($1::text, $2::text, $4::bytea, $3::text)
         ON CONFLICT (scope, provider, body_sha256) DO UPDATE SET event_key = excluded.event_key
          WHERE d.event_key = excluded.event_key
         RETURNING 1"
    )
}

impl WebhookTx {
    /// Claims the body's digest in this transaction (it commits or rolls back
    /// with the claim): `Ok(false)` when another event key already holds a
    /// byte-identical body.
    pub(crate) async fn claim_body(&self, digest: &[u8; 32]) -> Result<bool, TxError> {
        let scope = self.scope();
        let event = &scope.event;
        let sql = claim_sql(&scope.tables.schema);
        let params = [
            Param::Text(event.scope()),
            Param::Text(event.provider()),
            Param::Text(event.key()),
            Param::Bytes(&digest[..]),
        ];
        Ok(!self.run(&sql, &params).await?.is_empty())
    }
}
