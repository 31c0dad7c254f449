//! More rows of the fault matrix: an outer timeout, server-side timeouts
//! mid-handler, a slow body, a replay after retention, two events for one
//! object.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{Request, StatusCode};
use support::*;
use tower::ServiceExt;
use webhook_idempotency::{WebhookEvent, WebhookTx};

async fn status(app: &Router, req: Request<Body>) -> StatusCode {
    app.clone().oneshot(req).await.unwrap().status()
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
            match tx.client().await.unwrap().execute("SELECT 1", &[]).await {
                Ok(_) => StatusCode::OK,
                Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
            }
        })
    }
}

#[tokio::test]
async fn outer_tower_timeout_rolls_back_and_the_retry_processes_once() {
    let db = TestDb::new().await;
    let pool = db.pool(4);
    let app = Router::new()
        .route(
            "/webhooks/stripe",
            post(slow_once(Duration::from_secs(30))).layer(stripe_layer(pool.clone()).build().unwrap()),
        )
        .layer(
            tower::ServiceBuilder::new()
                .layer(axum::error_handling::HandleErrorLayer::new(|_: tower::BoxError| async {
                    StatusCode::GATEWAY_TIMEOUT
                }))
                .layer(tower::timeout::TimeoutLayer::new(Duration::from_millis(300))),
        );
    let body = stripe_body("evt_outer_timeout");
    assert_eq!(app.clone().oneshot(stripe_request(body.clone())).await.unwrap().status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(eventually(Duration::from_secs(10), || async { db.idle_in_transaction().await == 0 }).await);
    assert_eq!(app.clone().oneshot(stripe_request(body)).await.unwrap().status(), StatusCode::OK);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn server_timeouts_mid_handler_are_5xx_and_the_pool_recovers() {
    // idle_in_transaction_session_timeout ends the session while the handler
    // pauses; statement_timeout cancels a slow statement.
    for (setting, handler_sleeps_in_sql) in
        [("idle_in_transaction_session_timeout = '200ms'", false), ("statement_timeout = '200ms'", true)]
    {
        let db = TestDb::new().await;
        db.pool.get().await.unwrap().batch_execute(&format!("ALTER DATABASE {} SET {setting}", db.name)).await.unwrap();
        let pool = db.pool(2);
        let runs = Arc::new(AtomicUsize::new(0));
        let app = Router::new().route(
            "/webhooks/stripe",
            post(move |tx: WebhookTx, event: WebhookEvent| {
                let first = runs.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    if insert_effect(&tx, &event).await.is_err() {
                        return StatusCode::INTERNAL_SERVER_ERROR;
                    }
                    if first {
                        if handler_sleeps_in_sql {
                            let slow = tx.client().await.unwrap().execute("SELECT pg_sleep(2)", &[]).await;
                            if slow.is_err() {
                                return StatusCode::INTERNAL_SERVER_ERROR;
                            }
                        } else {
                            tokio::time::sleep(Duration::from_millis(800)).await;
                            // idle in transaction
                        }
                    }
                    match tx.client().await.unwrap().execute("SELECT 1", &[]).await {
                        Ok(_) => StatusCode::OK,
                        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
                    }
                }
            })
            .layer(stripe_layer(pool.clone()).build().unwrap()),
        );
        let body = stripe_body("evt_server_timeout");
        let first = status(&app, stripe_request(body.clone())).await;
        assert!(first.is_server_error(), "{setting}: {first}");
        assert_eq!(db.effects().await, 0, "{setting}");
        // Both pooled connections are usable afterwards.
        let (a, b) = (pool.get().await.unwrap(), pool.get().await.unwrap());
        a.execute("SELECT 1", &[]).await.unwrap();
        b.execute("SELECT 1", &[]).await.unwrap();
        drop((a, b));
        assert_eq!(status(&app, stripe_request(body)).await, StatusCode::OK, "{setting}: retry");
        assert_eq!(db.effects().await, 1, "{setting}");
    }
}

#[tokio::test]
async fn trickling_body_is_408_within_the_body_timeout() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/github",
        post(apply_effect)
            .layer(github_layer(db.pool.clone()).body_timeout(Duration::from_millis(300)).build().unwrap()),
    );
    // One byte, then nothing more: the body never completes.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
    tx.send(Ok(bytes::Bytes::from_static(b"{"))).await.unwrap();
    let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
    let mut req = github_request("trickle-1", "");
    *req.body_mut() = Body::from_stream(stream);
    let started = std::time::Instant::now();
    assert_eq!(status(&app, req).await, StatusCode::REQUEST_TIMEOUT);
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(tx);
    assert_eq!(db.events().await, 0);
}

#[tokio::test]
async fn replay_after_retention_removed_the_key_is_processed_again() {
    // Documented behaviour: once retention deletes an event's row, a replay
    // of that event is a new event. Keep keys longer than the provider's
    // retry and manual-replay window (Stripe: 30 days with the CLI).
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/stripe", post(apply_effect).layer(stripe_layer(db.pool.clone()).build().unwrap()));
    let body = stripe_body("evt_old");
    assert_eq!(status(&app, stripe_request(body.clone())).await, StatusCode::OK);
    assert_eq!(status(&app, stripe_request(body.clone())).await, StatusCode::OK); // replayed
    assert_eq!(db.effects().await, 1);
    db.pool
        .get()
        .await
        .unwrap()
        .execute("DELETE FROM webhook_idempotency.webhook_events WHERE event_key = 'evt_old'", &[])
        .await
        .unwrap();
    assert_eq!(status(&app, stripe_request(body)).await, StatusCode::OK);
    assert_eq!(db.effects().await, 2, "the purged key no longer protects the replay");
}

#[tokio::test]
async fn two_events_about_the_same_object_are_both_processed() {
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/stripe", post(apply_effect).layer(stripe_layer(db.pool.clone()).build().unwrap()));
    // payment_intent.processing then payment_intent.succeeded for pi_1: two event ids.
    for id in ["evt_pi1_processing", "evt_pi1_succeeded"] {
        assert_eq!(status(&app, stripe_request(stripe_body(id))).await, StatusCode::OK, "{id}");
    }
    assert_eq!(db.effects().await, 2);
}

#[tokio::test]
async fn response_lost_after_commit_the_retry_is_a_duplicate() {
    use tokio::io::AsyncWriteExt;
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx, event: WebhookEvent| {
            counter.fetch_add(1, Ordering::SeqCst);
            apply_effect(tx, event)
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    let addr = serve(app.clone()).await;
    let body = stripe_body("evt_lost_response");
    let sig = webhook_idempotency::providers::stripe::sign(
        &webhook_idempotency::SigningSecret::from(STRIPE_SECRET),
        unix_now(),
        &body,
    );
    // The sender's connection: request sent, then it goes away without reading
    // the answer once the effect is committed (a timeout or a dropped link on
    // the way back).
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /webhooks/stripe HTTP/1.1\r\nhost: x\r\nstripe-signature: {sig}\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    assert!(eventually(Duration::from_secs(10), || async { db.effects().await == 1 }).await, "committed");
    drop(stream); // the 2xx never reaches the sender
                  // The sender retries: answered as a duplicate, the handler does not run again.
    let res = app.clone().oneshot(stripe_request(body)).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers().get("idempotent-replayed").unwrap(), "true");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn serializable_isolation_conflicts_are_retryable_never_2xx_or_500() {
    use webhook_idempotency::IsolationLevel;
    let db = TestDb::new().await;
    // Write skew: each handler counts the effects, waits for the other to have
    // counted too, then writes. At SERIALIZABLE one of the two fails (40001).
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let first_runs = Arc::new(AtomicUsize::new(0));
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx, event: WebhookEvent| {
            let (barrier, first_runs) = (barrier.clone(), first_runs.clone());
            async move {
                let client = tx.client().await.unwrap();
                if client.query_one("SELECT count(*) FROM effects", &[]).await.is_err() {
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                if first_runs.fetch_add(1, Ordering::SeqCst) < 2 {
                    barrier.wait().await;
                }
                drop(client);
                apply_effect(tx, event).await
            }
        })
        .layer(stripe_layer(db.pool.clone()).isolation_level(IsolationLevel::Serializable).build().unwrap()),
    );
    let both = ["evt_skew_a", "evt_skew_b"].map(|key| {
        let (app, req) = (app.clone(), stripe_request(stripe_body(key)));
        tokio::spawn(async move {
            let res = app.oneshot(req).await.unwrap();
            (res.status(), res.headers().contains_key("retry-after"))
        })
    });
    let mut answers = Vec::new();
    for t in both {
        answers.push(t.await.unwrap());
    }
    assert!(answers.contains(&(StatusCode::OK, false)), "{answers:?}");
    assert!(
        answers.contains(&(StatusCode::SERVICE_UNAVAILABLE, true)),
        "the serialization victim is 503 + Retry-After: {answers:?}"
    );
    for key in ["evt_skew_a", "evt_skew_b"] {
        assert_eq!(status(&app, stripe_request(stripe_body(key))).await, StatusCode::OK, "{key}: the retry succeeds");
    }
    assert_eq!(db.effects().await, 2);
}

#[tokio::test]
async fn serializable_concurrent_duplicate_is_replayed_not_5xx() {
    use webhook_idempotency::IsolationLevel;
    let db = TestDb::new().await;
    let (inside_tx, inside_rx) = tokio::sync::oneshot::channel::<()>();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let gates = Arc::new(std::sync::Mutex::new(Some((inside_tx, go_rx))));
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx, event: WebhookEvent| {
            let gate = gates.lock().unwrap().take();
            async move {
                let status = apply_effect(tx, event).await;
                if let Some((inside, go)) = gate {
                    inside.send(()).unwrap();
                    go.await.unwrap();
                }
                status
            }
        })
        .layer(stripe_layer(db.pool.clone()).isolation_level(IsolationLevel::Serializable).build().unwrap()),
    );
    let body = stripe_body("evt_ser_dup");
    let first = tokio::spawn({
        let (app, req) = (app.clone(), stripe_request(body.clone()));
        async move { app.oneshot(req).await.unwrap().status() }
    });
    let (logs, _guard) = Logs::capture();
    inside_rx.await.unwrap();
    // The duplicate finds the first one's row in flight and checks again...
    let second = tokio::spawn({
        let (app, req) = (app.clone(), stripe_request(body.clone()));
        async move { app.oneshot(req).await.unwrap() }
    });
    // ...until the first commits; a check in a transaction whose snapshot
    // predates that commit fails with 40001 at SERIALIZABLE and is retried in
    // a new one, which sees the event done.
    let waiting = || !logs.lines_with(&["another delivery of this event is in flight"]).is_empty();
    assert!(eventually(Duration::from_secs(10), || std::future::ready(waiting())).await);
    go_tx.send(()).unwrap();
    assert_eq!(first.await.unwrap(), StatusCode::OK);
    let second = second.await.unwrap();
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(second.headers().get("idempotent-replayed").unwrap(), "true");
    let again = app.clone().oneshot(stripe_request(body)).await.unwrap();
    assert_eq!((again.status(), again.headers().contains_key("idempotent-replayed")), (StatusCode::OK, true));
    assert_eq!(db.effects().await, 1);
}
