//! The outbox's kind of work: one leased effect through its registered
//! function, outside any database transaction (a remote call must not hold
//! one open), then the row ended fenced by the lease.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::marker::{mark_one, Marker};
use super::registry::{EffectContext, EffectResult, Effects, ReconcileFn, Reconciled, Registered, MAX_RETRY_AFTER};
use crate::store::driver::Param;
use crate::store::outbox::{uncertain_params, OutboxRow, OutboxRows, OutboxSql, StoredEffect};
use crate::store::queue::{Leased, TableQueue};
use crate::worker::{Guard, Outcome, Work};

/// The outbox worker's work: the effect functions. Built by
/// [`OutboxWorker::builder`](super::OutboxWorker::builder); it has no API of
/// its own.
#[derive(Clone)]
pub struct OutboxWork {
    effects: Arc<Effects>,
    sql: Arc<OnceLock<OutboxSql>>,
    marker: Arc<OnceLock<Marker>>,
}

impl std::fmt::Debug for OutboxWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboxWork").field("effects", &self.effects).finish_non_exhaustive()
    }
}

impl OutboxWork {
    pub(crate) fn new(effects: Effects) -> Self {
        Self { effects: Arc::new(effects), sql: Arc::default(), marker: Arc::default() }
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.effects.names().into_iter().map(str::to_owned).collect()
    }
}

/// What became of a row after the effect function or the reconciliation,
/// when the outbox ends it itself (the runtime's completer ends the rest:
/// retries and the dead).
enum End {
    Delivered(Option<String>),
    Uncertain(String),
    Resend,
}

impl Work for OutboxWork {
    type Kind = OutboxRows;

    async fn run(self, queue: &TableQueue<OutboxRows>, row: &Leased<OutboxRow>, guard: &Guard) -> Outcome {
        let Some(registered) = self.effects.get(row.effect()).cloned() else {
            // The lease filters on the registered names: only an operator's
            // hand-written row gets here.
            return Outcome::failed(format!("no effect function is registered for `{}`", row.effect()), None);
        };
        // A small payload came with the lease; a larger one is read here, one
        // fenced statement per item within the database timeout: a payload too
        // slow to read fails this item (an attempt, dead once its budget is
        // spent), never the lease of the effects behind it.
        let stored = match &row.payload().inline {
            Some(inline) => inline.clone(),
            None => match queue.read(row, "outbox read the stored effect").await {
                Ok(Some(read)) => StoredEffect::read(&read),
                Ok(None) => return Outcome::LeaseLost,
                Err(e) => return Outcome::failed(format!("could not read the stored effect: {e}"), None),
            },
        };
        let ctx = context(row, stored);
        let ended = if row.payload().reconcile {
            reconcile(&registered, ctx, guard).await
        } else if let (true, Some(reconcile)) = (row.payload().interrupted, &registered.reconcile) {
            // The last run's lease expired (its process died, or it lost the
            // lease): its call may have gone out and never been recorded.
            tracing::info!("outbox: the last run was interrupted; asking the reconciliation before calling again");
            ask_first(&registered, reconcile, ctx, guard).await
        } else {
            call(&registered, ctx, guard).await
        };
        let end = match ended {
            Ok(end) => end,
            Err(outcome) => return outcome,
        };
        let sql = self.sql.get_or_init(|| OutboxSql::new(queue.schema()));
        guard.completing();
        // The remote may have acted: the end is recorded, retried while the
        // database fails (the heartbeat keeps the lease meanwhile), and never
        // turned into a blind retry of the call.
        let mut tries = 0u32;
        loop {
            tries += 1;
            let recorded = match &end {
                // The first try joins the batch; a retry goes alone, with a
                // deadline doubled each time (a mark slower than the deadline
                // would otherwise never land).
                End::Delivered(remote_ref) if tries == 1 => {
                    let marker = self.marker.get_or_init(|| Marker::start(queue.db().clone(), sql.delivered.clone()));
                    marker.mark(row, remote_ref.clone()).await.map(|marked| marked.then_some(Outcome::Done))
                }
                End::Delivered(remote_ref) => {
                    let db = queue.db().patient(2u32.pow((tries - 1).min(3)));
                    let marked = mark_one(&db, &sql.delivered, row, remote_ref.clone()).await;
                    marked.map(|marked| marked.then_some(Outcome::Done))
                }
                End::Uncertain(error) => {
                    // Reconciled later when a function is registered, else left to an operator.
                    let due = registered.reconcile.is_some().then(|| guard.backoff(row.attempt()));
                    let mut params = row.fence();
                    params.extend(uncertain_params(error, due, None));
                    let rows = queue
                        .db()
                        .patient(2u32.pow((tries - 1).min(3)))
                        .query("outbox uncertain", &sql.uncertain, &params)
                        .await;
                    rows.map(|r| (!r.is_empty()).then_some(Outcome::Settled("uncertain"))).map_err(|e| e.to_string())
                }
                End::Resend => {
                    let budget = guard.budget();
                    let mut params = row.fence();
                    params.push(Param::I32(i32::try_from(budget.max_attempts).unwrap_or(i32::MAX)));
                    params.push(Param::F64(budget.retry_for.as_secs_f64()));
                    let rows = queue
                        .db()
                        .patient(2u32.pow((tries - 1).min(3)))
                        .query("outbox resend", &sql.resend, &params)
                        .await;
                    rows.map(|r| r.first().map(|r| resent(r.get(0), r.get(1), budget.retry_for)))
                        .map_err(|e| e.to_string())
                }
            };
            match recorded {
                Ok(Some(outcome)) => return outcome,
                Ok(None) => return Outcome::LeaseLost,
                Err(error) if tries >= END_TRIES => return Outcome::Unrecorded { error },
                Err(error) => {
                    guard.retrying_end();
                    tracing::warn!(error, tries, "outbox: the run's end could not be recorded; trying again");
                    tokio::time::sleep(END_RETRY_BASE * 2u32.pow(tries - 1)).await;
                }
            }
        }
    }
}

/// How often a run's end is tried before it is left to the lease (about 3 s
/// of pauses in all; each retry's deadline twice the one before, up to 8x).
const END_TRIES: u32 = 6;
/// The first pause between tries, doubled each time.
const END_RETRY_BASE: Duration = Duration::from_millis(100);

/// What the resend statement did: `state` the row's state after it,
/// `attempts_spent` whether its runs were spent (else, when `dead`, its time
/// budget `retry_for` was).
fn resent(state: &str, attempts_spent: bool, retry_for: Duration) -> Outcome {
    match (state, attempts_spent) {
        ("dead", true) => {
            tracing::error!(
                outcome = "dead",
                "outbox effect dead: reconciled as not delivered on its last allowed attempt; not sent again"
            );
            Outcome::Settled("dead")
        }
        ("dead", false) => {
            tracing::error!(
                outcome = "dead",
                ?retry_for,
                "outbox effect dead: reconciled as not delivered and its retry budget is spent; not sent again"
            );
            Outcome::Settled("dead")
        }
        _ => Outcome::Settled("resent"),
    }
}

/// The function's context for `row`, with its stored payload.
fn context(row: &Leased<OutboxRow>, stored: StoredEffect) -> EffectContext {
    EffectContext {
        scope: row.scope().to_owned(),
        provider: row.provider().to_owned(),
        event_key: row.event_key().to_owned(),
        effect: row.effect().to_owned(),
        ordinal: row.ordinal(),
        attempt: row.attempt(),
        payload: stored.payload,
        content_type: stored.content_type,
        downstream_key: row.downstream_key(),
    }
}

/// Calls the effect function. A timeout or a panic may have come after the
/// call went out: uncertain, never a blind retry.
async fn call(registered: &Registered, ctx: EffectContext, guard: &Guard) -> Result<End, Outcome> {
    match guard.call((registered.call)(ctx)).await {
        Ok(EffectResult::Delivered { remote_ref }) => Ok(End::Delivered(remote_ref)),
        Ok(EffectResult::Retry { error }) => Err(Outcome::failed(error, None)),
        Ok(EffectResult::RetryAfter { error, after }) => {
            // At least the policy's base, at most an hour.
            let after = after.max(guard.budget().base).min(MAX_RETRY_AFTER);
            Err(Outcome::Failed { error, status: None, after: Some(after) })
        }
        Ok(EffectResult::Failed { error }) => Err(Outcome::Dead { error, status: None }),
        Ok(EffectResult::Uncertain { error }) => Ok(End::Uncertain(error)),
        Err(stopped) => Ok(End::Uncertain(format!("the effect function {stopped}; the call may have gone out"))),
    }
}

/// Asks the reconciliation whether the interrupted call of the last run went
/// out, then calls only if it did not: delivered is `done`, not delivered is
/// called now (same key, this run), failed is `dead`; unknown (or a
/// reconciliation that failed) leaves the row `uncertain`, asked again later,
/// never called blindly.
async fn ask_first(
    registered: &Registered,
    reconcile: &ReconcileFn,
    ctx: EffectContext,
    guard: &Guard,
) -> Result<End, Outcome> {
    match guard.call(reconcile(ctx.clone())).await {
        Ok(Reconciled::Delivered { remote_ref }) => Ok(End::Delivered(remote_ref)),
        Ok(Reconciled::NotDelivered) => call(registered, ctx, guard).await,
        Ok(Reconciled::Failed { error }) => Err(Outcome::Dead { error, status: None }),
        Ok(Reconciled::Unknown { error }) => Ok(End::Uncertain(error)),
        Err(stopped) => Ok(End::Uncertain(format!("the reconciliation of an interrupted call {stopped}"))),
    }
}

/// Asks the reconciliation what became of an uncertain effect.
async fn reconcile(registered: &Registered, ctx: EffectContext, guard: &Guard) -> Result<End, Outcome> {
    let Some(reconcile) = &registered.reconcile else {
        // Leased after its reconciliation was unregistered: back to an operator.
        return Ok(End::Uncertain("uncertain; no reconciliation is registered: an operator resolves it".to_owned()));
    };
    match guard.call(reconcile(ctx)).await {
        Ok(Reconciled::Delivered { remote_ref }) => Ok(End::Delivered(remote_ref)),
        Ok(Reconciled::NotDelivered) => Ok(End::Resend),
        Ok(Reconciled::Failed { error }) => Err(Outcome::Dead { error, status: None }),
        // Still unknown: asked again after a backoff (the retry keeps it uncertain).
        Ok(Reconciled::Unknown { error }) => Err(Outcome::failed(error, None)),
        Err(stopped) => Err(Outcome::failed(format!("the reconciliation {stopped}"), None)),
    }
}
