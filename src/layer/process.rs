//! The processing step: claim the event, hand the claim's transaction
//! to the inner service with the request, then commit or roll back from the
//! response. No HTTP answer is made here: the step says what happened, and
//! each layer on the store (the webhook layer today, the `Idempotency-Key`
//! layer next) turns that into its own response. The request is built by
//! the caller once the claim exists, so each layer puts its own extensions
//! in it.
//!
//! Per claimed request, in this order: the claim (a pooled connection, a
//! transaction, `INSERT ... ON CONFLICT`; see [`ClaimStore`]); the inner
//! service, called and its answer decided by the handler-end step
//! ([`crate::handler`], which the inbox worker runs too); then, on a status
//! the success rule accepts and no retryable conflict in the handler's
//! statements, the fenced commit (only a confirmed `COMMIT` is a success),
//! otherwise a rollback and the failed attempt recorded. A panic of the
//! inner service is caught there, for both layers: rolled back, recorded as
//! [`PANICKED_ERROR`](handler::PANICKED_ERROR), answered 500 by the layer (no
//! `CatchPanicLayer` needed); so is one in the response body a layer reads
//! before committing (the `Idempotency-Key` layer, to store it:
//! [`handler::catching`]).

use std::time::Instant;

use http::{Request, Response};
use tower_service::Service;

use crate::event::ScopedEvent;
use crate::handler::{self, End, Failed, Success};
use crate::store::claim::{Claim, ClaimStore, ClaimedEvent, CommitErrorKind};
use crate::store::digest::BodyClaim;
use crate::store::driver::{Conn, Param, Row};

/// What [`run`] did with a request.
#[derive(Debug)]
pub(crate) enum Processed<R, E> {
    /// The handler ran; `committed` when its writes and the claim committed
    /// (a success status), else rolled back and the attempt recorded.
    Handled { response: R, committed: bool },
    /// Processed before: the status the handler answered then, if stored.
    Duplicate { status: Option<u16> },
    /// Another delivery still held the event after the in-flight wait.
    InFlight,
    /// The store failed: the claim could not be made (`"claim"`) or the
    /// commit did not happen or its outcome is unknown (`"commit"`); or the
    /// handler was stopped past a timeout (`"handler_timeout"`: only the
    /// inbox worker times handlers out, so no layer meets it today).
    Unavailable(&'static str),
    /// A statement of the handler met a retryable conflict (its SQLSTATE):
    /// rolled back and recorded; the sender's retry will succeed.
    Conflict(&'static str),
    /// The handler answered while a clone of the transaction was still in
    /// use (a task it spawned): rolled back when that clone drops.
    StillInUse,
    /// The inner service failed: rolled back and recorded.
    ServiceError(E),
    /// The inner service panicked: rolled back and recorded as
    /// [`PANICKED_ERROR`](handler::PANICKED_ERROR); the layer answers 500.
    Panicked,
    /// The handler answered a 2xx that the success predicate refuses:
    /// rolled back and recorded. Passing the 2xx on would tell the sender
    /// the event was processed and lose it; the layer answers 500.
    RefusedSuccess,
}

/// Claims `event` in `store` and, when claimed, calls `inner` with the
/// request `request` builds from the claim; commits when `success` accepts
/// the response's status (the handler-end step, [`crate::handler`]).
pub(crate) async fn run<S, ReqBody, ResBody>(
    store: &ClaimStore,
    event: &ScopedEvent,
    success: &Success,
    inner: S,
    request: impl FnOnce(&ClaimedEvent) -> Request<ReqBody>,
    body_digest: Option<[u8; 32]>,
) -> Processed<Response<ResBody>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    let claimed = match claim(store, event, body_digest).await {
        Ok(claimed) => claimed,
        Err(answered) => return answered,
    };
    let req = request(&claimed);
    let answer = handler::call(inner, req, event.provider()).await;
    let decided = handler::decide(answer, claimed.retryable_conflict(), |s| success.accepts(s));
    end(claimed, decided, None).await
}

/// The claim of `event` (and of its body digest, when given): the open
/// claim, or what answers the request instead (a duplicate, in flight, the
/// store unavailable).
pub(crate) async fn claim<R, E>(
    store: &ClaimStore,
    event: &ScopedEvent,
    body_digest: Option<[u8; 32]>,
) -> Result<ClaimedEvent, Processed<R, E>> {
    let (mut claimed, _) = claim_reading(store, event, None, None).await?;
    if let Some(digest) = body_digest {
        claimed = guard_body(claimed, &digest).await?;
    }
    tracing::info!(outcome = "claimed", attempt = claimed.attempt(), "key claimed");
    Ok(claimed)
}

/// The claim of `event`, and when claimed the rows of `read` run in the
/// claim's flight, inside its transaction (see [`ClaimStore::claim_reading`]),
/// first on `conn` when given.
pub(crate) async fn claim_reading<R, E>(
    store: &ClaimStore,
    event: &ScopedEvent,
    read: Option<(&str, &[Param<'_>])>,
    conn: Option<Conn>,
) -> Result<(ClaimedEvent, Vec<Row>), Processed<R, E>> {
    let claim_started = Instant::now();
    let claim = store.claim_reading(event, read, conn).await;
    crate::metrics::claim(event.provider(), claim_started.elapsed());
    match claim {
        Ok((Claim::Acquired(claimed), rows)) => Ok((claimed, rows)),
        Ok((Claim::Done { status }, _)) => {
            tracing::info!(outcome = "duplicate", "key already processed; replayed, not run");
            Err(Processed::Duplicate { status })
        }
        Ok((Claim::InFlight, _)) => Err(Processed::InFlight),
        Err(e) => {
            tracing::error!(error = %e, "claim failed");
            Err(Processed::Unavailable("claim"))
        }
    }
}

/// The body-digest guard's claim in the claim's transaction: the claim back,
/// or, when the body is another key's, in flight or done, the claim
/// discarded and the answer (a replay once the synchronous standby confirmed
/// the other key's commit).
async fn guard_body<R, E>(claimed: ClaimedEvent, digest: &[u8; 32]) -> Result<ClaimedEvent, Processed<R, E>> {
    let answer = match claimed.tx().claim_body(digest).await {
        Ok(BodyClaim::Acquired) => return Ok(claimed),
        Ok(BodyClaim::InFlight) => {
            tracing::info!(
                outcome = "in_flight",
                reason = "body_in_flight",
                "a delivery of the same body under another key is running; answered as in flight"
            );
            Processed::InFlight
        }
        Ok(BodyClaim::Replayed { synchronous }) => {
            tracing::info!(
                outcome = "duplicate",
                reason = "body_replayed",
                "the same signed body was processed under another event key; replayed, not run"
            );
            return Err(match claimed.discard_replayed(synchronous).await {
                Ok(()) => Processed::Duplicate { status: None },
                Err(_) => Processed::Unavailable("body_digest"),
            });
        }
        Err(e) => {
            // Another delivery with this body holds it past the lock timeout, or the database failed.
            tracing::warn!(error = %e, "body-digest guard: the digest could not be claimed; rolled back");
            match claimed.retryable_conflict() {
                Some(_) => Processed::InFlight,
                None => Processed::Unavailable("body_digest"),
            }
        }
    };
    claimed.discard().await;
    Err(answer)
}

/// Ends the claim's transaction as `end` says: the fenced commit (with the
/// caller's own fence statement and its extra parameters when given, see
/// [`ClaimedEvent::commit_with`]: the `Idempotency-Key` layer stores the
/// response in the same statement), or the rollback with the failed attempt
/// recorded.
pub(crate) async fn end<R, E>(
    claimed: ClaimedEvent,
    end: End<R, E>,
    commit_with: Option<(&str, &[Param<'_>])>,
) -> Processed<Response<R>, E> {
    match end {
        End::Commit(response) => commit(claimed, response, commit_with).await,
        End::RollBack(failed) => roll_back(claimed, failed).await,
    }
}

/// The fenced commit of the claim with the handler's writes.
async fn commit<R, E>(
    claimed: ClaimedEvent,
    response: Response<R>,
    commit_with: Option<(&str, &[Param<'_>])>,
) -> Processed<Response<R>, E> {
    let status = response.status().as_u16();
    let committed = match commit_with {
        Some((check, params)) => claimed.commit_with(status, check, params).await,
        None => claimed.commit(status).await,
    };
    match committed {
        Ok(()) => {
            tracing::info!(outcome = "committed", status, "processed: the claim committed with the handler's writes");
            Processed::Handled { response, committed: true }
        }
        Err(e) if e.kind() == CommitErrorKind::StillInUse => Processed::StillInUse,
        Err(e) => {
            tracing::error!(error = %e, "not committed");
            Processed::Unavailable("commit")
        }
    }
}

/// Rolls back and records the failed attempt (`StillInUse` when a clone of
/// the transaction still holds it), then says what the layer answers.
async fn roll_back<R, E>(claimed: ClaimedEvent, failed: Failed<R, E>) -> Processed<Response<R>, E> {
    if claimed.fail(&failed.reason(|_| None), failed.status()).await.is_err() {
        return Processed::StillInUse;
    }
    match failed {
        Failed::Error(e) => Processed::ServiceError(e),
        Failed::Panicked => {
            tracing::error!(
                outcome = "failed",
                "the handler panicked (the panic hook printed where): rolled back, the attempt recorded, answered 500"
            );
            Processed::Panicked
        }
        // No layer times its handler out (an outer timeout drops the whole
        // future); were one to, the sender's retry is the answer.
        Failed::TimedOut => Processed::Unavailable("handler_timeout"),
        Failed::Conflict(code, _) => Processed::Conflict(code),
        Failed::RefusedSuccess(response) => {
            tracing::error!(
                outcome = "failed",
                status = response.status().as_u16(),
                "handler answered a 2xx the success predicate refuses; rolled back, answered 500 so the sender retries"
            );
            Processed::RefusedSuccess
        }
        Failed::NotSuccess(response) => {
            tracing::warn!(
                outcome = "failed",
                status = response.status().as_u16(),
                "handler did not succeed; rolled back"
            );
            Processed::Handled { response, committed: false }
        }
    }
}
