//! The handler-end step: call the handler (the inner service), then decide
//! from its answer how its transaction ends. One step for every caller that
//! runs a handler in a transaction: the webhook layer (synchronous mode),
//! the `Idempotency-Key` layer and the inbox worker. Each caller keeps only
//! its own commit mechanics (the layer's fenced commit, the `Idempotency-Key`
//! layer's commit that stores the response, the inbox's lease-fenced
//! completion) and its own answer.
//!
//! [`call`] runs the inner service once it is ready, with a panic in its
//! `poll_ready`, `call` or response future caught (each poll runs under
//! `catch_unwind`) and its run timed; the inbox runs that same call inside
//! the worker's guard (its handler timeout, its heartbeat), and a run the
//! guard stopped ends as [`Failed::TimedOut`]. [`decide`] turns the answer
//! into an [`End`], in this order:
//!
//! | the answer | end | `last_error` recorded |
//! |---|---|---|
//! | the service returned an error | roll back | `the service failed` (the inbox adds the error's text) |
//! | the handler panicked | roll back | [`PANICKED_ERROR`] |
//! | past the worker's handler timeout (inbox) | roll back | `the handler timed out` |
//! | a statement met a retryable conflict (40P01, 40001, 55P03) | roll back | `retryable conflict in the handler's transaction (40P01)` |
//! | a status the success rule refuses, not 2xx | roll back | `the handler answered 500` |
//! | a 2xx the success rule refuses | roll back | `the handler answered 200, a 2xx the success rule refuses` |
//! | a status the success rule accepts | commit | |
//!
//! The success rule ([`Success`]) is the same in both modes: the predicate
//! given to [`WebhookLayerBuilder::success`](crate::layer::WebhookLayerBuilder::success)
//! decides in synchronous mode, the one given to
//! [`InboxWorkerBuilder::success`](crate::inbox::InboxWorkerBuilder::success)
//! in inbox mode (the worker runs the stored requests without the layer:
//! give it the same predicate); both default to 2xx.

use std::any::Any;
use std::fmt;
use std::future::poll_fn;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt as _;
use http::{Request, Response, StatusCode};
use tower_service::Service;

/// Which statuses of the handler commit its transaction: a predicate on the
/// status, 2xx by default (`Default`). Built once per layer or worker from
/// the predicate its builder was given.
#[derive(Clone)]
pub(crate) struct Success(Arc<dyn Fn(StatusCode) -> bool + Send + Sync>);

impl Success {
    /// The rule `predicate` says.
    pub(crate) fn new(predicate: impl Fn(StatusCode) -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(predicate))
    }

    /// Whether an answer of `status` commits.
    pub(crate) fn accepts(&self, status: StatusCode) -> bool {
        (self.0)(status)
    }
}

/// 2xx commits; every other status rolls back (a redirect too).
impl Default for Success {
    fn default() -> Self {
        Self::new(|s: StatusCode| s.is_success())
    }
}

impl fmt::Debug for Success {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Success").finish_non_exhaustive()
    }
}

/// How the inner service ended without a response.
pub(crate) enum Failure<E> {
    /// It returned an error.
    Error(E),
    /// It panicked: the panic's payload (its message was printed by the
    /// panic hook). Its future is dropped by then, the `WebhookTx` clones it
    /// held with it.
    Panicked(Box<dyn Any + Send>),
}

/// What `failed` rows carry as `last_error` when the handler panicked.
pub(crate) const PANICKED_ERROR: &str = "panicked: the handler panicked (its transaction was rolled back)";

/// Calls `inner` once it is ready, timing the handler
/// (`webhook_handler_duration_seconds` for `provider`); a panic in its
/// `poll_ready`, `call` or response future is caught and returned as
/// [`Failure::Panicked`].
pub(crate) async fn call<S, ReqBody, ResBody>(
    mut inner: S,
    req: Request<ReqBody>,
    provider: &str,
) -> Result<Response<ResBody>, Failure<S::Error>>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    let handler_started = Instant::now();
    let run = async move {
        match poll_fn(|cx| inner.poll_ready(cx)).await {
            Ok(()) => inner.call(req).await,
            Err(e) => Err(e),
        }
    };
    let result = catching(run).await;
    crate::metrics::handler(provider, handler_started.elapsed());
    match result {
        Ok(result) => result.map_err(Failure::Error),
        Err(panic) => Err(Failure::Panicked(panic)),
    }
}

/// Runs `work` of the handler's (its future, or its response body a layer
/// reads before committing), each poll under `catch_unwind`: its output, or
/// the panic's payload, which the caller ends as [`Failed::Panicked`].
pub(crate) async fn catching<F: std::future::Future>(work: F) -> Result<F::Output, Box<dyn Any + Send>> {
    // Unwind safety: nothing the handler touched is used after its panic but
    // its transaction, which is rolled back (or its connection closed).
    AssertUnwindSafe(work).catch_unwind().await
}

/// How the handler's transaction ends, decided by [`decide`].
pub(crate) enum End<R, E> {
    /// Commit the handler's writes with the caller's own end (its fenced
    /// commit); the response goes on.
    Commit(Response<R>),
    /// Roll back and record [`Failed::reason`] with [`Failed::status`].
    RollBack(Failed<R, E>),
}

/// Why the handler's transaction rolls back.
pub(crate) enum Failed<R, E> {
    /// The service returned an error.
    Error(E),
    /// The handler panicked.
    Panicked,
    /// The handler ran past the worker's handler timeout (inbox mode: the
    /// worker's guard stopped it, [`decide`] never sees an answer).
    TimedOut,
    /// A statement of the handler met a retryable conflict (its SQLSTATE):
    /// the sender's retry (or the row's next run) will succeed.
    Conflict(&'static str, Response<R>),
    /// The handler answered a status the success rule refuses, not a 2xx.
    NotSuccess(Response<R>),
    /// The handler answered a 2xx the success rule refuses: passing it on
    /// would tell the sender the event was processed, and lose it.
    RefusedSuccess(Response<R>),
}

impl<R, E> Failed<R, E> {
    /// The handler's status, when it answered.
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            Self::Conflict(_, r) | Self::NotSuccess(r) | Self::RefusedSuccess(r) => Some(r.status().as_u16()),
            Self::Error(_) | Self::Panicked | Self::TimedOut => None,
        }
    }

    /// The text recorded as the attempt's `last_error` (see the
    /// [module docs](self)); `error` describes a service error, when the
    /// caller can (the inbox's service errors are `Display`, the layers'
    /// need not be).
    pub(crate) fn reason(&self, error: impl FnOnce(&E) -> Option<String>) -> String {
        match self {
            Self::Error(e) => match error(e) {
                Some(text) => format!("the service failed: {text}"),
                None => "the service failed".to_owned(),
            },
            Self::Panicked => PANICKED_ERROR.to_owned(),
            Self::TimedOut => "the handler timed out".to_owned(),
            Self::Conflict(code, _) => format!("retryable conflict in the handler's transaction ({code})"),
            Self::NotSuccess(r) => format!("the handler answered {}", r.status().as_u16()),
            Self::RefusedSuccess(r) => {
                format!("the handler answered {}, a 2xx the success rule refuses", r.status().as_u16())
            }
        }
    }
}

/// How the handler's transaction ends after `answer`: `conflict` is the
/// retryable conflict noted on the transaction (read after the handler
/// answered), `accepts` the success rule (see the [module docs](self) for
/// the order of the checks).
pub(crate) fn decide<R, E>(
    answer: Result<Response<R>, Failure<E>>,
    conflict: Option<&'static str>,
    accepts: impl FnOnce(StatusCode) -> bool,
) -> End<R, E> {
    let response = match answer {
        Ok(response) => response,
        Err(Failure::Error(e)) => return End::RollBack(Failed::Error(e)),
        Err(Failure::Panicked(_)) => return End::RollBack(Failed::Panicked),
    };
    if let Some(code) = conflict {
        // The sender's retry will succeed: say so instead of passing on the
        // handler's failure (or a success over an aborted transaction).
        return End::RollBack(Failed::Conflict(code, response));
    }
    let status = response.status();
    match (accepts(status), status.is_success()) {
        (true, _) => End::Commit(response),
        (false, true) => End::RollBack(Failed::RefusedSuccess(response)),
        (false, false) => End::RollBack(Failed::NotSuccess(response)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16) -> Result<Response<()>, Failure<&'static str>> {
        let mut response = Response::new(());
        *response.status_mut() = StatusCode::from_u16(status).unwrap();
        Ok(response)
    }

    /// `(commits, recorded reason, recorded status)` of one decision.
    fn ended(end: End<(), &'static str>) -> (bool, Option<String>, Option<u16>) {
        match end {
            End::Commit(r) => (true, None, Some(r.status().as_u16())),
            End::RollBack(f) => (false, Some(f.reason(|e| Some((*e).to_owned()))), f.status()),
        }
    }

    #[test]
    fn each_answer_ends_as_the_table_says() {
        let rule = |s: StatusCode| s == StatusCode::ACCEPTED || s == StatusCode::CONFLICT;
        let cases: [(&str, Result<Response<()>, Failure<&'static str>>, Option<&'static str>, _); 7] = [
            ("accepted 202", answer(202), None, (true, None, Some(202))),
            ("accepted 409", answer(409), None, (true, None, Some(409))),
            (
                "refused 2xx",
                answer(200),
                None,
                (false, Some("the handler answered 200, a 2xx the success rule refuses".into()), Some(200)),
            ),
            ("refused 500", answer(500), None, (false, Some("the handler answered 500".into()), Some(500))),
            (
                "conflict before the rule",
                answer(202),
                Some("40P01"),
                (false, Some("retryable conflict in the handler's transaction (40P01)".into()), Some(202)),
            ),
            (
                "service error before a conflict",
                Err(Failure::Error("boom")),
                Some("40001"),
                (false, Some("the service failed: boom".into()), None),
            ),
            ("panic", Err(Failure::Panicked(Box::new("p"))), None, (false, Some(PANICKED_ERROR.into()), None)),
        ];
        for (name, answer, conflict, want) in cases {
            assert_eq!(ended(decide(answer, conflict, rule)), want, "{name}");
        }
        let timed_out = End::RollBack(Failed::TimedOut);
        assert_eq!(ended(timed_out), (false, Some("the handler timed out".into()), None), "timeout");
    }

    #[test]
    fn the_default_rule_is_2xx() {
        let rule = Success::default();
        for (status, commits) in [(200, true), (204, true), (302, false), (409, false), (500, false)] {
            assert_eq!(rule.accepts(StatusCode::from_u16(status).unwrap()), commits, "{status}");
        }
    }
}
