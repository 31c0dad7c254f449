//! The outbox's kind of work: one leased effect through its registered
//! function, outside any database transaction (a remote call must not hold
//! one open), then the row ended fenced by the lease.

use std::sync::{Arc, OnceLock};

use super::marker::Marker;
use super::registry::{EffectContext, EffectResult, Effects, Reconciled, Registered};
use crate::store::outbox::{uncertain_params, OutboxRow, OutboxRows, OutboxSql};
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
        let ctx = context(row);
        let ended = if row.payload().reconcile {
            reconcile(&registered, ctx, guard).await
        } else {
            call(&registered, ctx, guard).await
        };
        let end = match ended {
            Ok(end) => end,
            Err(outcome) => return outcome,
        };
        let sql = self.sql.get_or_init(|| OutboxSql::new(queue.schema()));
        guard.completing();
        let mut params = row.fence();
        let (statement, what, state) = match &end {
            End::Delivered(remote_ref) => {
                let marker = self.marker.get_or_init(|| Marker::start(queue.db().clone(), sql.delivered.clone()));
                return match marker.mark(row, remote_ref.clone()).await {
                    Ok(true) => Outcome::Done,
                    Ok(false) => Outcome::LeaseLost,
                    // Not recorded: the lease expires and the row runs again (the
                    // documented at-least-once window; the same downstream key).
                    Err(e) => Outcome::failed(format!("the delivery could not be recorded: {e}"), None),
                };
            }
            End::Uncertain(error) => {
                // Reconciled later when a function is registered, else left to an operator.
                let due = registered.reconcile.is_some().then(|| guard.backoff(row.attempt()));
                params.extend(uncertain_params(error, due, None));
                (&sql.uncertain, "outbox uncertain", "uncertain")
            }
            End::Resend => (&sql.resend, "outbox resend", "resent"),
        };
        match queue.db().query(what, statement, &params).await {
            Ok(rows) if rows.is_empty() => Outcome::LeaseLost,
            Ok(_) => Outcome::Settled(state),
            Err(e) => Outcome::failed(format!("the outcome could not be recorded: {e}"), None),
        }
    }
}

/// The function's context for `row`.
fn context(row: &Leased<OutboxRow>) -> EffectContext {
    EffectContext {
        scope: row.scope().to_owned(),
        provider: row.provider().to_owned(),
        event_key: row.event_key().to_owned(),
        effect: row.effect().to_owned(),
        ordinal: row.ordinal(),
        attempt: row.attempt(),
        payload: row.payload().payload.clone(),
        content_type: row.payload().content_type.clone(),
        downstream_key: row.downstream_key(),
    }
}

/// Calls the effect function. A timeout or a panic may have come after the
/// call went out: uncertain, never a blind retry.
async fn call(registered: &Registered, ctx: EffectContext, guard: &Guard) -> Result<End, Outcome> {
    match guard.call((registered.call)(ctx)).await {
        Ok(EffectResult::Delivered { remote_ref }) => Ok(End::Delivered(remote_ref)),
        Ok(EffectResult::Retry { error }) => Err(Outcome::failed(error, None)),
        Ok(EffectResult::Failed { error }) => Err(Outcome::Dead { error, status: None }),
        Ok(EffectResult::Uncertain { error }) => Ok(End::Uncertain(error)),
        Err(stopped) => Ok(End::Uncertain(format!("the effect function {stopped}; the call may have gone out"))),
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
