use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::ResponseBody;

type Inner<B, E> = Pin<Box<dyn Future<Output = Result<http::Response<ResponseBody<B>>, E>> + Send>>;

/// Response future of [`WebhookService`](super::WebhookService) and
/// [`IdempotencyKeyService`](crate::idempotency_key::IdempotencyKeyService).
///
/// Dropping it while the handler runs (a client disconnect, an outer
/// timeout) drops the claim's transaction: the connection is closed, not
/// returned to the pool, and PostgreSQL rolls back. The delivery is counted
/// as `webhook_deliveries_total{outcome="abandoned"}`, and, if the handler
/// had started, a `failed` row records that the client went away (a task
/// spawned on the current Tokio runtime), with a WARN line.
pub struct ResponseFuture<B, E> {
    pub(crate) inner: Inner<B, E>,
}

impl<B, E> Future for ResponseFuture<B, E> {
    type Output = Result<http::Response<ResponseBody<B>>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<B, E> fmt::Debug for ResponseFuture<B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
