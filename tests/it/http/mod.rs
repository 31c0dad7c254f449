//! The layer's HTTP behaviour on a real PostgreSQL: claims and duplicates,
//! verification of what senders and proxies send, bodies and their limits,
//! first-use traps, inputs from the security review.

mod bodies;
mod claims;
mod first_use;
mod rejections;
mod replays;
mod security;
mod verification;

use crate::support::*;
use axum::body::Body;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;
use webhook_idempotency::providers::{github, stripe};
use webhook_idempotency::{SigningSecret, WebhookEvent, WebhookTx};

/// Status, headers and body of `req` through `app`.
async fn send(app: &Router, req: Request<Body>) -> (StatusCode, http::HeaderMap, bytes::Bytes) {
    let res = app.clone().oneshot(req).await.unwrap();
    let (parts, body) = res.into_parts();
    (parts.status, parts.headers, body.collect().await.unwrap().to_bytes())
}

/// Status and body of `req` through `app`.
async fn status_and_body(app: &Router, req: Request<Body>) -> (StatusCode, Bytes) {
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    (status, res.into_body().collect().await.unwrap().to_bytes())
}

/// The Stripe route applying one effect per event, counting handler runs in `runs`.
fn stripe_app(db: &TestDb, runs: Arc<AtomicUsize>) -> Router {
    Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx, event: WebhookEvent| {
            runs.fetch_add(1, Ordering::SeqCst);
            apply_effect(tx, event)
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    )
}
