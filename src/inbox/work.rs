//! The inbox's kind of work: one leased row through the handler service, in
//! the work's transaction, ended by the handler-end step
//! ([`crate::handler`], the layer's) and completed fenced by the lease.

use http::{Request, Response};
use tower_service::Service;

use super::{request, InboxBody};
use crate::handler::{self, End, Failed, Success};
use crate::store::inbox::{InboxRow, InboxRows, IntegrityKey, StoredDelivery};
use crate::store::queue::{Incomplete, Leased, TableQueue, BODY_FIRST};
use crate::worker::{Guard, Outcome, Stopped, Work};

/// The inbox worker's work: the handler service, called with each leased
/// row's rebuilt request. Built by
/// [`InboxWorker::builder`](super::InboxWorker::builder); it has no API of
/// its own.
#[derive(Clone)]
pub struct InboxWork<S> {
    service: S,
    /// The integrity keys a row's tag must verify with (any of them: a key
    /// rotation); empty: rows are not checked.
    integrity: Vec<IntegrityKey>,
    /// Which statuses commit (the layer's rule, given to the builder).
    success: Success,
}

impl<S> std::fmt::Debug for InboxWork<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxWork").finish_non_exhaustive()
    }
}

impl<S> InboxWork<S> {
    pub(crate) fn new(service: S) -> Self {
        Self { service, integrity: Vec::new(), success: Success::default() }
    }

    pub(crate) fn success(&mut self, success: Success) {
        self.success = success;
    }

    pub(crate) fn integrity_key(&mut self, key: IntegrityKey) {
        self.integrity.push(key);
    }

    /// Why `stored` must not run, when the worker checks integrity tags and
    /// its tag is missing or does not verify.
    fn refused(&self, row: &Leased<InboxRow>, stored: &StoredDelivery) -> Option<&'static str> {
        if self.integrity.is_empty() {
            return None;
        }
        let Some(tag) = &stored.tag else { return Some("missing") };
        let event = row.event();
        let head = stored.head.as_ref().ok().and_then(Option::as_ref);
        let verifies = self.integrity.iter().any(|k| k.verifies(tag, &event, head, &stored.body));
        (!verifies).then_some("mismatch")
    }
}

impl<S, ResBody> Work for InboxWork<S>
where
    S: Service<Request<InboxBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: std::fmt::Display + Send + 'static,
    ResBody: Send + 'static,
{
    type Kind = InboxRows;

    async fn run(self, queue: &TableQueue<InboxRows>, row: &Leased<InboxRow>, guard: &Guard) -> Outcome {
        // The payload is read here, in the item's own BEGIN flight within the
        // database timeout: a payload too slow to read fails this item (an
        // attempt, dead after the last), never the lease of the rows behind it.
        let tx = match queue.begin(row).await {
            Ok(tx) => tx,
            Err(e) => {
                return Outcome::failed(
                    format!("could not begin the transaction and read the stored delivery: {e}"),
                    None,
                )
            }
        };
        let Some(read) = tx.read() else {
            tx.rollback().await;
            return Outcome::LeaseLost;
        };
        let stored = StoredDelivery::read(read, BODY_FIRST);
        if let Some(reason) = self.refused(row, &stored) {
            tracing::error!(
                reason,
                "inbox: the row's integrity tag is {} ({}): not run",
                if reason == "missing" { "missing" } else { "wrong" },
                "written without the layer's integrity key, or altered in the database"
            );
            crate::metrics::inbox_integrity_failure(row.provider(), reason);
            tx.rollback().await;
            let error = format!(
                "integrity tag {reason}: the row was not written by a layer holding the integrity key, or was altered; \
                 not run"
            );
            return Outcome::Dead { error, status: None };
        }
        // A head that does not parse would run as another request (or fail
        // every run alike): dead now, with the reason (the completer logs it
        // at ERROR, without the head's content).
        let request = match request::rebuild(row, stored, tx.tx()) {
            Ok(request) => request,
            Err(error) => {
                tx.rollback().await;
                return Outcome::Dead { error, status: None };
            }
        };
        let provider = row.provider().to_owned();
        let service = self.service;
        // The layer's call (its panic catch) inside the worker's guard (its
        // handler timeout, in a task of its own that a lost lease aborts).
        let decided = match guard.call(async move { handler::call(service, request, &provider).await }).await {
            Ok(answer) => handler::decide(answer, tx.retryable_conflict(), |s| self.success.accepts(s)),
            Err(Stopped::TimedOut) => End::RollBack(Failed::TimedOut),
            // A panic past the call's own catch (dropping the handler's future).
            Err(Stopped::Panicked) => End::RollBack(Failed::Panicked),
        };
        let response = match decided {
            End::Commit(response) => response,
            End::RollBack(failed) => {
                tx.rollback().await;
                return Outcome::failed(failed.reason(|e| Some(e.to_string())), failed.status());
            }
        };
        let code = Some(response.status().as_u16());
        guard.completing();
        match tx.complete(code).await {
            Ok(()) => Outcome::Done,
            // The lease was taken over, or the handler ended the transaction
            // itself: recording the failure is fenced by the lease, so it lands
            // only in the second case.
            Err(e @ Incomplete::LeaseLost) => Outcome::failed(e.to_string(), code),
            Err(e) => Outcome::failed(format!("not committed: {e}"), code),
        }
    }
}
