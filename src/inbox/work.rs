//! The inbox's kind of work: one leased row through the handler service, in
//! the work's transaction, completed fenced by the lease.

use std::future::poll_fn;

use http::{Request, Response};
use tower_service::Service;

use super::{request, InboxBody};
use crate::store::inbox::{InboxRow, InboxRows, IntegrityKey, StoredDelivery};
use crate::store::queue::{Incomplete, Leased, TableQueue, BODY_FIRST};
use crate::worker::{Guard, Outcome, Work};

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
}

impl<S> std::fmt::Debug for InboxWork<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxWork").finish_non_exhaustive()
    }
}

impl<S> InboxWork<S> {
    pub(crate) fn new(service: S) -> Self {
        Self { service, integrity: Vec::new() }
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
        let mut service = self.service;
        let answered = guard
            .call(async move {
                poll_fn(|cx| service.poll_ready(cx)).await?;
                service.call(request).await
            })
            .await;
        let status = match answered {
            Ok(Ok(response)) => response.status(),
            Ok(Err(e)) => {
                tx.rollback().await;
                return Outcome::failed(format!("the service failed: {e}"), None);
            }
            Err(stopped) => {
                tx.rollback().await;
                return Outcome::failed(format!("the handler {stopped}"), None);
            }
        };
        let code = Some(status.as_u16());
        if let Some(conflict) = tx.retryable_conflict() {
            tx.rollback().await;
            return Outcome::failed(format!("retryable conflict in the handler's transaction ({conflict})"), code);
        }
        if !status.is_success() {
            tx.rollback().await;
            return Outcome::failed(format!("the handler answered {}", status.as_u16()), code);
        }
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
