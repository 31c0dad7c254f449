//! The handler and the request going wrong: a dropped request future, a
//! panic, a handler ending the transaction itself, a response lost after the
//! commit, a replay after retention, two events about one object.

use super::*;

#[tokio::test]
async fn dropped_request_future_leaves_no_idle_in_transaction_backend() {
    let db = TestDb::new().await;
    let pool = db.pool(4);
    let (inside_tx, inside_rx) = once::<()>();
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx, event: WebhookEvent| {
            let inside = inside_tx.lock().unwrap().take();
            async move {
                insert_effect(&tx, &event).await.unwrap();
                if let Some(inside) = inside {
                    inside.send(()).unwrap();
                    std::future::pending::<()>().await; // the client goes away meanwhile
                }
                StatusCode::OK
            }
        })
        .layer(stripe_layer(pool.clone()).lock_timeout(Duration::from_secs(10)).build().unwrap()),
    );
    let body = stripe_body("evt_dropped");
    let pending = tokio::spawn({
        let app = app.clone();
        let req = stripe_request(body.clone());
        async move { status(&app, req).await }
    });
    inside_rx.await.unwrap();
    assert_eq!(db.idle_in_transaction().await, 1, "the claim's transaction is open");
    pending.abort();
    assert!(pending.await.unwrap_err().is_cancelled());

    assert!(
        eventually(Duration::from_secs(10), || async { db.idle_in_transaction().await == 0 }).await,
        "the abandoned transaction's backend is gone"
    );
    // The pool keeps serving, and the claim was rolled back (not a 409 or a replay).
    for _ in 0..8 {
        drop(pool.get().await.unwrap());
    }
    let (code, headers) = status(&app, stripe_request(body)).await;
    assert_eq!(code, StatusCode::OK);
    assert!(headers.get("idempotent-replayed").is_none());
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn handler_panic_rolls_back_and_the_connection_is_not_reused_in_a_transaction() {
    let db = TestDb::new().await;
    let pool = db.pool(2);
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let app = Router::new()
        .route(
            "/webhooks/stripe",
            post(move |tx: WebhookTx, event: WebhookEvent| {
                let run = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    insert_effect(&tx, &event).await.unwrap();
                    assert!(run > 0, "handler bug on the first run");
                    StatusCode::OK
                }
            })
            .layer(stripe_layer(pool.clone()).build().unwrap()),
        )
        .layer(tower_http::catch_panic::CatchPanicLayer::new());
    let body = stripe_body("evt_panic");
    assert_eq!(status(&app, stripe_request(body.clone())).await.0, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(eventually(Duration::from_secs(10), || async { db.idle_in_transaction().await == 0 }).await);
    // Every connection the pool hands out now is outside a transaction.
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    for c in [&a, &b] {
        c.query_one("SELECT 1", &[]).await.unwrap();
    }
    assert_eq!(db.idle_in_transaction().await, 0);
    drop((a, b));
    assert_eq!(status(&app, stripe_request(body)).await.0, StatusCode::OK);
    assert_eq!(db.effects().await, 1);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn handler_that_ends_the_transaction_itself_is_never_2xx_and_never_stuck() {
    // The handler breaks the contract: it sends COMMIT (then answers 500 or 200).
    for answer in [StatusCode::INTERNAL_SERVER_ERROR, StatusCode::OK] {
        let db = TestDb::new().await;
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let app = Router::new().route(
            "/webhooks/stripe",
            post(move |tx: WebhookTx, event: WebhookEvent| {
                let run = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    insert_effect(&tx, &event).await.unwrap();
                    if run == 0 {
                        tx.client().await.unwrap().batch_execute("COMMIT").await.unwrap();
                        return answer;
                    }
                    StatusCode::OK
                }
            })
            .layer(stripe_layer(db.pool.clone()).build().unwrap()),
        );
        let body = stripe_body("evt_self_commit");
        let first = status(&app, stripe_request(body.clone())).await.0;
        assert!(!first.is_success(), "{answer}: got {first}");
        let row = db.event_row("evt_self_commit").await;
        assert!(matches!(row, Some((ref state, 1, _)) if state == "failed"), "{answer}: {row:?}");
        // Not stuck in `running`: the next delivery is processed.
        let (code, headers) = status(&app, stripe_request(body)).await;
        assert_eq!((code, headers.get("idempotent-replayed").is_some()), (StatusCode::OK, false), "{answer}");
        assert_eq!(db.event_row("evt_self_commit").await.map(|r| r.0), Some("done".into()));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }
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
async fn replay_after_retention_removed_the_key_is_processed_again() {
    // Documented behaviour: once retention deletes an event's row, a replay
    // of that event is a new event. Keep keys longer than the provider's
    // retry and manual-replay window (Stripe: 30 days with the CLI).
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/stripe", post(apply_effect).layer(stripe_layer(db.pool.clone()).build().unwrap()));
    let body = stripe_body("evt_old");
    assert_eq!(status_code(&app, stripe_request(body.clone())).await, StatusCode::OK);
    assert_eq!(status_code(&app, stripe_request(body.clone())).await, StatusCode::OK); // replayed
    assert_eq!(db.effects().await, 1);
    db.pool
        .get()
        .await
        .unwrap()
        .execute("DELETE FROM webhook_idempotency.webhook_events WHERE event_key = 'evt_old'", &[])
        .await
        .unwrap();
    assert_eq!(status_code(&app, stripe_request(body)).await, StatusCode::OK);
    assert_eq!(db.effects().await, 2, "the purged key no longer protects the replay");
}

#[tokio::test]
async fn two_events_about_the_same_object_are_both_processed() {
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/stripe", post(apply_effect).layer(stripe_layer(db.pool.clone()).build().unwrap()));
    // payment_intent.processing then payment_intent.succeeded for pi_1: two event ids.
    for id in ["evt_pi1_processing", "evt_pi1_succeeded"] {
        assert_eq!(status_code(&app, stripe_request(stripe_body(id))).await, StatusCode::OK, "{id}");
    }
    assert_eq!(db.effects().await, 2);
}
