//! Faults: the database failing or fighting, time limits running out, the
//! handler and the request going wrong, a soak under random faults.

mod causes;
mod database;
pub(crate) mod handler;
mod network;
mod pooler;
mod soak;
mod timeouts;
mod tls;

use crate::support::*;
use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{Request, StatusCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tower::ServiceExt;
use webhook_idempotency::{WebhookEvent, WebhookTx};

/// The status and headers of `req` through `app`.
async fn status(app: &Router, req: Request<Body>) -> (StatusCode, http::HeaderMap) {
    let res = app.clone().oneshot(req).await.unwrap();
    (res.status(), res.headers().clone())
}

/// The status of `req` through `app`.
async fn status_code(app: &Router, req: Request<Body>) -> StatusCode {
    app.clone().oneshot(req).await.unwrap().status()
}

/// A one-shot channel the test can take out of a `Fn` handler.
fn once<T>() -> (Arc<Mutex<Option<oneshot::Sender<T>>>>, oneshot::Receiver<T>) {
    let (tx, rx) = oneshot::channel();
    (Arc::new(Mutex::new(Some(tx))), rx)
}

/// A handler that writes its effect, then takes `delay` the first time only.
fn slow_once(
    delay: Duration,
) -> impl Fn(WebhookTx, WebhookEvent) -> std::pin::Pin<Box<dyn std::future::Future<Output = StatusCode> + Send>> + Clone
{
    let runs = Arc::new(AtomicUsize::new(0));
    move |tx, event| {
        let first = runs.fetch_add(1, Ordering::SeqCst) == 0;
        Box::pin(async move {
            if insert_effect(&tx, &event).await.is_err() {
                return StatusCode::INTERNAL_SERVER_ERROR;
            }
            if first {
                tokio::time::sleep(delay).await; // the fault: a slow handler
            }
            // A second statement after the pause: fails if the server ended the session.
            match TxDb::of(&tx).await.unwrap().execute("SELECT 1", &[]).await {
                Ok(_) => StatusCode::OK,
                Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
            }
        })
    }
}
