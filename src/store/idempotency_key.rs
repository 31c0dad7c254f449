//! The `Idempotency-Key` layer's rows: the request fingerprint, recovery
//! points and the stored response (migration 9, table
//! `webhook_request_keys`), beside the claim in `webhook_events`.
//!
//! The claim itself is the ordinary claim protocol ([`ClaimStore`]) with
//! provider [`PROVIDER`]; this module only adds what a retry with the same
//! key needs. Round trips:
//! - a replay: [`RequestKeys::lookup`], one autocommit `SELECT`, no
//!   transaction, no WAL;
//! - a first request: that lookup, then the claim (claim-first: `BEGIN` and
//!   the claim in one flight), the handler's statements, then the stored
//!   response and the fence in one statement sent with `COMMIT`.

use std::time::Duration;

use bytes::Bytes;

use super::driver::{Conn, Db, Param, Row, DETECT_SQL, FENCE_HOLDS};
use super::StoreConfig;
use crate::error::{ConfigError, StoreError};
use crate::event::ScopedEvent;

/// The provider column of every claim the `Idempotency-Key` layer makes:
/// `"idempotency-key"`. Its retention window is [`RETENTION`].
pub const PROVIDER: &str = "idempotency-key";

/// How long a key is kept by default: 24 hours (Stripe keeps keys "at least
/// 24 hours", <https://docs.stripe.com/api/idempotent_requests>).
/// [`Retention`](super::retention::Retention) purges keys older than this
/// unless its [`window`](super::retention::RetentionBuilder::window) for
/// [`PROVIDER`] says otherwise; a retry after the purge runs again.
pub const RETENTION: Duration = Duration::from_secs(24 * 3600);

/// A response kept for replays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredResponse {
    pub(crate) status: u16,
    /// Header names and values, in order.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Bytes,
}

impl StoredResponse {
    /// The headers as one `text[]`: name, value, name, value, ...
    pub(crate) fn flat_headers(&self) -> Vec<String> {
        self.headers.iter().flat_map(|(n, v)| [n.clone(), v.clone()]).collect()
    }

    /// The commit statement's parameters after the fence's five:
    /// `$6 fingerprint, $7 headers, $8 body`.
    pub(crate) fn params<'a>(&'a self, fingerprint: &'a [u8; 32], flat: &'a [String]) -> [Param<'a>; 3] {
        [Param::Bytes(fingerprint), Param::OptTexts(Some(flat)), Param::Bytes(&self.body)]
    }
}

/// What the lookup found for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredKey {
    pub(crate) fingerprint: [u8; 32],
    /// The last recovery point recorded, if any.
    pub(crate) phase: Option<String>,
    /// Set once the first request's claim committed.
    pub(crate) response: Option<StoredResponse>,
    /// Whether commits wait for synchronous standbys on the session that
    /// read the row.
    pub(crate) synchronous: bool,
}

/// The statements on `webhook_request_keys`, schema spliced in.
#[derive(Debug, Clone)]
pub(crate) struct RequestKeys {
    db: Db,
    schema: String,
    lookup: String,
    commit: String,
    phase: String,
}

impl RequestKeys {
    pub(crate) fn new(store: &StoreConfig) -> Result<Self, ConfigError> {
        let (db, schema) = store.open()?;
        let t = format!("{schema}.webhook_request_keys");
        let pk = "scope = $1 AND provider = $2 AND idempotency_key = $3";
        Ok(Self {
            db,
            schema: schema.to_owned(),
            lookup: format!(
                "SELECT fingerprint, phase, response_status, response_headers, response_body, idempotency_key,
                        {DETECT_SQL}
                   FROM {t} WHERE {pk}"
            ),
            // The fenced commit's statement (`ClaimedEvent::commit_with`):
            // the claim row's status and the stored response in one
            // statement, sent with COMMIT; it fails (22012) unless the
            // transaction is still the claim's (`FENCE_HOLDS`) and its row
            // of the claim's time is found.
            commit: format!(
                "WITH done AS (
                     UPDATE {schema}.webhook_events SET response_status = $4
                      WHERE scope = $1 AND provider = $2 AND event_key = $3 AND state = 'done'
                        AND completed_at = $5 AND {FENCE_HOLDS}
                      RETURNING 1),
                 saved AS (
                     INSERT INTO {t} AS k (scope, provider, idempotency_key, fingerprint, response_status,
                                          response_headers, response_body, completed_at)
                     VALUES ($1, $2, $3, $6, $4, $7, $8, now())
                     ON CONFLICT (scope, provider, idempotency_key) DO UPDATE
                        SET fingerprint = excluded.fingerprint, response_status = excluded.response_status,
                            response_headers = excluded.response_headers, response_body = excluded.response_body,
                            completed_at = excluded.completed_at, created_at = excluded.created_at
                     RETURNING 1)
                 SELECT 1 / ((SELECT count(*) FROM done) * (SELECT count(*) FROM saved))::int"
            ),
            phase: format!(
                "INSERT INTO {t} AS k (scope, provider, idempotency_key, fingerprint, phase)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (scope, provider, idempotency_key) DO UPDATE SET phase = excluded.phase
                  WHERE k.response_status IS NULL AND k.fingerprint = excluded.fingerprint
                 RETURNING 1"
            ),
        })
    }

    /// The key's row, if any: one autocommit `SELECT`, on a pooled
    /// connection returned with it for the claim that may follow (one
    /// checkout per request). A stored response comes back only once the
    /// synchronous standby confirmed its commit, when the store confirms
    /// duplicates ([`StoreConfig::synchronous_replication`]); the connection
    /// is back in the pool while that waits, and a fresh one is returned.
    ///
    /// # Errors
    /// [`StoreError`]: no connection or the statement failed (a schema
    /// without migration 9 is reported once, with what to run), or the
    /// standby did not confirm the stored response in time
    /// ([`Unconfirmed`](crate::error::StoreErrorKind::Unconfirmed)).
    pub(crate) async fn lookup(&self, event: &ScopedEvent) -> Result<(Option<StoredKey>, Conn), StoreError> {
        let step = "idempotency key lookup";
        let conn = self.db.connect(step).await?;
        match conn.query(&self.lookup, &Self::key(event)).await {
            Ok(rows) => {
                let stored = self.parse(&rows, event);
                let Some(synchronous) = stored.as_ref().filter(|k| k.response.is_some()).map(|k| k.synchronous) else {
                    return Ok((stored, conn));
                };
                if !self.db.confirms(synchronous) {
                    return Ok((stored, conn));
                }
                conn.release();
                self.db.confirm_replicated(synchronous, step).await?;
                Ok((stored, self.db.connect(step).await?))
            }
            Err(e) => {
                conn.release(); // or discarded, after an error that left the session unusable
                super::report_unmigrated(&self.schema, &e);
                Err(self.db.error(&e, step))
            }
        }
    }

    /// The lookup's statement and parameters, to run in the claim's flight
    /// ([`ClaimStore::claim_reading`](super::claim::ClaimStore)): read after the claim
    /// took the key's lock, it sees a recovery point or fingerprint recorded
    /// while this request waited. [`parse`](Self::parse) reads its rows.
    pub(crate) fn lookup_sql(&self) -> &str {
        &self.lookup
    }

    /// `$1 scope, $2 provider, $3 key` of `event`.
    pub(crate) fn key(event: &ScopedEvent) -> [Param<'_>; 3] {
        [Param::Text(event.scope()), Param::Text(event.provider()), Param::Text(event.key())]
    }

    /// The key's row among the lookup's `rows`, if any.
    pub(crate) fn parse(&self, rows: &[Row], event: &ScopedEvent) -> Option<StoredKey> {
        let row = rows.first()?;
        // Rows that are not this key's (another client's named statement
        // behind a shared pooler) are not trusted.
        if row.try_get::<&str>(5) != Some(event.key()) {
            self.db.named_statement_ran_other_sql();
            return None;
        }
        let fingerprint: &[u8] = row.get(0);
        let mut print = [0u8; 32];
        if fingerprint.len() == 32 {
            print.copy_from_slice(fingerprint);
        }
        let response = row.get::<Option<i16>>(2).map(|status| {
            let flat: Vec<String> = row.get::<Option<Vec<String>>>(3).unwrap_or_default();
            let headers = flat.chunks_exact(2).map(|pair| (pair[0].clone(), pair[1].clone())).collect();
            let body: Option<&[u8]> = row.get(4);
            StoredResponse {
                status: u16::try_from(status).unwrap_or(500),
                headers,
                body: Bytes::copy_from_slice(body.unwrap_or_default()),
            }
        });
        let synchronous = row.try_get::<bool>(6).unwrap_or(true);
        Some(StoredKey { fingerprint: print, phase: row.get::<Option<String>>(1), response, synchronous })
    }

    /// The fence statement that commits the claim with `response` stored
    /// ([`ClaimedEvent::commit_with`](crate::store::claim::ClaimedEvent)); its extra
    /// parameters are [`StoredResponse::params`].
    pub(crate) fn commit_sql(&self) -> &str {
        &self.commit
    }

    /// Records the recovery point `phase` for the key, committed at once in a
    /// transaction of its own (autocommit), so it outlives the claim's
    /// transaction if that rolls back. `false` when the key already has a
    /// stored response or another fingerprint (nothing written).
    ///
    /// # Errors
    /// [`StoreError`]: no connection or the statement failed.
    pub(crate) async fn record_phase(
        &self,
        event: &ScopedEvent,
        fingerprint: &[u8; 32],
        phase: &str,
    ) -> Result<bool, StoreError> {
        let params = [
            Param::Text(event.scope()),
            Param::Text(event.provider()),
            Param::Text(event.key()),
            Param::Bytes(fingerprint),
            Param::Text(phase),
        ];
        Ok(!self.db.query_commit("idempotency key recovery point", &self.phase, &params).await?.is_empty())
    }
}
