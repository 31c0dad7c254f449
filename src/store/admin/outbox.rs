//! Operator actions on the outbox: statistics, listings, one effect in
//! full, resolving an uncertain effect, requeuing dead ones and purging
//! delivered ones. Every change runs in one transaction with its audit row
//! (actions `outbox_resolve`, `outbox_requeue`, `outbox_purge`); a dry run
//! runs the same statements and rolls back.

use std::time::{Duration, SystemTime};

use super::{audit_params, listing, Admin};
use crate::error::StoreError;
use crate::store::driver::{DbError, Param, Row};
use crate::store::outbox::downstream_key;

/// Which outbox rows a listing or action applies to: every part given must
/// match.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EffectFilter {
    /// The provider of the event that decided the effect.
    pub provider: Option<String>,
    /// Its scope.
    pub scope: Option<String>,
    /// Its event key. For provider `idempotency-key` (the
    /// [`Idempotency-Key` layer](crate::idempotency_key)'s requests, whose
    /// effects are stored under the client's key, `#` and the claim's id, 32
    /// hex digits) the client's key matches its requests' effects too: the
    /// key as stored, or the key followed by `#` and a claim id. Never a
    /// pattern: `%` and `_` are plain characters.
    pub key: Option<String>,
    /// The effect's name.
    pub effect: Option<String>,
}

/// One outbox row's identity: the event that decided it and which of its
/// effects.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EffectId {
    /// The provider.
    pub provider: String,
    /// The scope.
    pub scope: String,
    /// The event key.
    pub key: String,
    /// The effect's name.
    pub effect: String,
    /// Which of the event's effects of that name (0 unless the handler set
    /// another; at most `i32::MAX`: a larger one matches no row).
    pub ordinal: u32,
}

impl EffectId {
    /// The downstream idempotency key the effect is sent with
    /// ([`downstream_key`]).
    pub fn downstream_key(&self) -> String {
        downstream_key(&self.scope, &self.provider, &self.key, &self.effect, self.ordinal)
    }

    /// `$1..$5` of [`ONE`]; `None` for an ordinal no row can have (over
    /// `i32::MAX`, which the enqueue refuses).
    fn params(&self) -> Option<[Param<'_>; 5]> {
        let ordinal = i32::try_from(self.ordinal).ok()?;
        Some([
            Param::Text(&self.provider),
            Param::Text(&self.scope),
            Param::Text(&self.key),
            Param::Text(&self.effect),
            Param::I32(ordinal),
        ])
    }
}

/// An outbox row as operators see it (no payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectRow {
    /// Its identity.
    pub id: EffectId,
    /// `pending`, `running`, `done`, `uncertain` or `dead`.
    pub state: String,
    /// Runs so far.
    pub attempts: i32,
    /// The last failure or uncertainty, as the effect function described it.
    pub last_error: Option<String>,
    /// The remote's reference of a delivered effect.
    pub remote_ref: Option<String>,
    /// When the handler's transaction enqueued it.
    pub created_at: SystemTime,
    /// When it was delivered.
    pub delivered_at: Option<SystemTime>,
    /// When a run last failed or was uncertain.
    pub last_failed_at: Option<SystemTime>,
    /// When it became uncertain (its runs reconcile since).
    pub uncertain_since: Option<SystemTime>,
    /// When it is due (`None`: not scheduled; an uncertain row without a
    /// reconciliation waits for an operator).
    pub run_at: Option<SystemTime>,
    /// When the running lease expires.
    pub locked_until: Option<SystemTime>,
}

/// Outbox counts for operators and the gauges.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutboxStats {
    /// `(effect, state, rows)`.
    pub by_state: Vec<(String, String, i64)>,
    /// How long the oldest due row (`pending`, or `uncertain` with a
    /// reconciliation due) has been due.
    pub oldest_due: Option<Duration>,
    /// Uncertain rows without a scheduled reconciliation: an operator must
    /// resolve them.
    pub awaiting_operator: i64,
}

/// How an operator resolves an uncertain effect, having asked the remote.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "as", rename_all = "snake_case")]
pub enum Resolution {
    /// The remote did it: `done`, with its reference if known.
    Delivered {
        /// The remote's reference.
        remote_ref: Option<String>,
    },
    /// It did not happen and must not: `dead`, with the reason.
    Dead {
        /// Why.
        reason: String,
    },
    /// It did not happen: call again now (same downstream key), a fresh
    /// attempt budget.
    Resend,
}

const COLUMNS: &str = "provider, scope, event_key, effect, ordinal, state, attempts, last_error, remote_ref,
                       created_at, delivered_at, last_failed_at, uncertain_since, run_at, locked_until";

/// `$1..$4` of a filter. An `idempotency-key` row's event key is the
/// client's key, `#` and a claim id of 32 hex digits
/// (`idempotency_key::service::effects_key`): the key given matches it,
/// compared as text (`starts_with` and the length, no `LIKE` pattern made of
/// what the operator typed).
const MATCH: &str = "($1::text IS NULL OR provider = $1) AND ($2::text IS NULL OR scope = $2)
                     AND ($3::text IS NULL OR event_key = $3
                          OR (provider = 'idempotency-key' AND length(event_key) = length($3) + 33
                              AND starts_with(event_key, $3 || '#')))
                     AND ($4::text IS NULL OR effect = $4)";

/// `$1..$5` of an identity.
const ONE: &str = "provider = $1 AND scope = $2 AND event_key = $3 AND effect = $4 AND ordinal = $5";

impl EffectFilter {
    fn params(&self) -> [Param<'_>; 4] {
        [
            Param::OptText(self.provider.as_deref()),
            Param::OptText(self.scope.as_deref()),
            Param::OptText(self.key.as_deref()),
            Param::OptText(self.effect.as_deref()),
        ]
    }
}

fn effect_row(r: &Row) -> EffectRow {
    EffectRow {
        id: EffectId {
            provider: r.get(0),
            scope: r.get(1),
            key: r.get(2),
            effect: r.get(3),
            ordinal: u32::try_from(r.get::<i32>(4)).unwrap_or(0),
        },
        state: r.get(5),
        attempts: r.get(6),
        last_error: r.get(7),
        remote_ref: r.get(8),
        created_at: r.get(9),
        delivered_at: r.get(10),
        last_failed_at: r.get(11),
        uncertain_since: r.get(12),
        run_at: r.get(13),
        locked_until: r.get(14),
    }
}

impl Admin {
    /// Outbox rows by effect and state; how long the oldest due row has
    /// waited; uncertain rows waiting for an operator.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn outbox_stats(&self) -> Result<OutboxStats, StoreError> {
        let t = &self.outbox;
        let sql = format!("SELECT effect, state, count(*) FROM {t} GROUP BY 1, 2 ORDER BY 1, 2");
        let by_state =
            self.query("outbox stats", &sql, &[]).await?.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
        let sql = format!(
            "SELECT extract(epoch FROM now() - min(run_at) FILTER (WHERE state IN ('pending', 'uncertain')
                                                                  AND run_at <= now()))::float8,
                    count(*) FILTER (WHERE state = 'uncertain' AND run_at IS NULL)
             FROM {t} WHERE state IN ('pending', 'uncertain')"
        );
        let row = &self.query("outbox stats", &sql, &[]).await?[0];
        let oldest: Option<f64> = row.get(0);
        Ok(OutboxStats {
            by_state,
            oldest_due: oldest.map(|s| Duration::from_secs_f64(s.max(0.0))),
            awaiting_operator: row.get(1),
        })
    }

    /// Up to `limit` outbox rows in `state` matching `filter`, oldest first.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn list_effects(
        &self,
        state: &str,
        filter: &EffectFilter,
        limit: usize,
    ) -> Result<Vec<EffectRow>, StoreError> {
        let sql =
            format!("SELECT {COLUMNS} FROM {} WHERE state = $5 AND {MATCH} ORDER BY created_at LIMIT $6", self.outbox);
        let params = listing(filter.params(), state, limit);
        Ok(self.query("outbox list", &sql, &params).await?.iter().map(effect_row).collect())
    }

    /// One outbox row, with its payload and content type when
    /// `with_payload`.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn show_effect(
        &self,
        id: &EffectId,
        with_payload: bool,
    ) -> Result<Option<(EffectRow, Option<(String, Vec<u8>)>)>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS}, CASE WHEN $6 THEN content_type END, CASE WHEN $6 THEN payload END
             FROM {} WHERE {ONE}",
            self.outbox
        );
        let Some(id_params) = id.params() else { return Ok(None) };
        let mut params = id_params.to_vec();
        params.push(Param::Bool(with_payload));
        let found = self.query("outbox show", &sql, &params).await?;
        Ok(found.first().map(|r| {
            let payload = match (r.get::<Option<String>>(15), r.get::<Option<Vec<u8>>>(16)) {
                (Some(content_type), Some(bytes)) => Some((content_type, bytes)),
                _ => None,
            };
            (effect_row(r), payload)
        }))
    }

    /// Resolves one `uncertain` row as the operator found it at the remote
    /// (asking by [`EffectId::downstream_key`]). `Ok(false)` when the row is
    /// not uncertain (another operator or a reconciliation got there first,
    /// or a worker holds it right now): nothing changed.
    ///
    /// # Errors
    /// [`StoreError`]; nothing changed.
    pub async fn resolve_effect(
        &self,
        id: &EffectId,
        resolution: &Resolution,
        dry_run: bool,
        actor: &str,
    ) -> Result<bool, StoreError> {
        let Some(id_params) = id.params() else { return Ok(false) };
        let mut params = id_params.to_vec();
        let set = match resolution {
            Resolution::Delivered { remote_ref } => {
                params.push(Param::OptText(remote_ref.as_deref()));
                "state = 'done', delivered_at = now(), remote_ref = $6, run_at = NULL"
            }
            Resolution::Dead { reason } => {
                params.push(Param::Text(reason));
                "state = 'dead', last_error = $6, last_failed_at = now(), run_at = NULL"
            }
            Resolution::Resend => "state = 'pending', attempts = 0, run_at = now(), uncertain_since = NULL",
        };
        let sql = format!(
            "WITH changed AS (
                 UPDATE {} SET {set} WHERE {ONE} AND state = 'uncertain'
                 RETURNING 1)
             SELECT count(*) FROM changed",
            self.outbox
        );
        let audit = serde_json::json!({ "effect": id, "resolution": resolution }).to_string();
        Ok(self.audited("outbox_resolve", &sql, &params, &audit, dry_run, actor).await? > 0)
    }

    /// Puts matching `dead` outbox rows back to `pending`, due now, with a
    /// fresh attempt budget: they are called again with the same downstream
    /// key. Returns the rows changed (or that would change).
    ///
    /// # Errors
    /// [`StoreError`]; nothing changed.
    pub async fn requeue_effects(&self, filter: &EffectFilter, dry_run: bool, actor: &str) -> Result<u64, StoreError> {
        let sql = format!(
            "WITH changed AS (
                 UPDATE {} SET state = 'pending', attempts = 0, run_at = now(), retry_from = now(), uncertain_since = NULL
                 WHERE state = 'dead' AND {MATCH}
                 RETURNING 1)
             SELECT count(*) FROM changed",
            self.outbox
        );
        let audit = serde_json::to_string(filter).unwrap_or_default();
        self.audited("outbox_requeue", &sql, &filter.params(), &audit, dry_run, actor).await
    }

    /// Deletes delivered outbox rows delivered more than `older_than` ago
    /// (never `pending`, `running`, `uncertain` or `dead`), in batches as
    /// [`Retention`](crate::store::retention::Retention) does, and records
    /// it. A dry run counts what would go.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn purge_effects(&self, older_than: Duration, dry_run: bool, actor: &str) -> Result<u64, StoreError> {
        if dry_run {
            let sql = format!(
                "SELECT count(*) FROM {} WHERE ($2::text IS NULL OR scope = $2)
                    AND state = 'done' AND delivered_at < now() - make_interval(secs => $1)",
                self.outbox
            );
            let params = [Param::F64(older_than.as_secs_f64()), Param::OptText(self.scope.as_deref())];
            let n: i64 = self.query("outbox purge", &sql, &params).await?[0].get(0);
            return Ok(u64::try_from(n).unwrap_or(0));
        }
        let report = self.retention.purge_effects_older_than(Some(older_than)).await?;
        let filter = serde_json::json!({ "older_than_secs": older_than.as_secs(), "scope": self.scope }).to_string();
        let params = audit_params(actor, "outbox_purge", &filter, report.deleted);
        self.query("outbox purge: audit", &self.audit_insert(), &params).await?;
        Ok(report.deleted)
    }

    /// Runs `sql` (which returns the count of rows it changed) and the audit
    /// row of `action` in one transaction; a dry run rolls both back, so the
    /// count is exactly what the action changes.
    pub(super) async fn audited(
        &self,
        action: &str,
        sql: &str,
        params: &[Param<'_>],
        filter_json: &str,
        dry_run: bool,
        actor: &str,
    ) -> Result<u64, StoreError> {
        let err = |e: DbError| self.db.error(&e, action);
        let conn = self.db.connect(action).await?;
        let (tx, rows) = conn.begin("BEGIN", sql, params).await.map_err(err)?;
        let changed = u64::try_from(rows[0].get::<i64>(0)).unwrap_or(0);
        tx.query(&self.audit_insert(), &audit_params(actor, action, filter_json, changed)).await.map_err(err)?;
        if dry_run { tx.rollback().await } else { tx.commit().await }.map_err(err)?;
        Ok(changed)
    }
}
