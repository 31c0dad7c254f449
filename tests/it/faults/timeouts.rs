//! Time limits running out: an outer tower timeout, server-side timeouts
//! mid-handler, a trickling body, lock and statement timeouts, the wait for
//! an in-flight duplicate.

use super::*;

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
                            let slow = TxDb::of(&tx).await.unwrap().execute("SELECT pg_sleep(2)", &[]).await;
                            if slow.is_err() {
                                return StatusCode::INTERNAL_SERVER_ERROR;
                            }
                        } else {
                            tokio::time::sleep(Duration::from_millis(800)).await;
                            // idle in transaction
                        }
                    }
                    match TxDb::of(&tx).await.unwrap().execute("SELECT 1", &[]).await {
                        Ok(_) => StatusCode::OK,
                        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
                    }
                }
            })
            .layer(stripe_layer(pool.clone()).build().unwrap()),
        );
        let body = stripe_body("evt_server_timeout");
        let first = status_code(&app, stripe_request(body.clone())).await;
        assert!(first.is_server_error(), "{setting}: {first}");
        assert_eq!(db.effects().await, 0, "{setting}");
        // Both pooled connections are usable afterwards.
        let (a, b) = (pool.get().await.unwrap(), pool.get().await.unwrap());
        a.execute("SELECT 1", &[]).await.unwrap();
        b.execute("SELECT 1", &[]).await.unwrap();
        drop((a, b));
        assert_eq!(status_code(&app, stripe_request(body)).await, StatusCode::OK, "{setting}: retry");
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
    assert_eq!(status_code(&app, req).await, StatusCode::REQUEST_TIMEOUT);
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(tx);
    assert_eq!(db.events().await, 0);
}

#[tokio::test]
async fn in_flight_duplicate_waits_then_409_and_the_first_completes() {
    let db = TestDb::new().await;
    let (inside_tx, inside_rx) = once::<()>();
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let go = Arc::new(Mutex::new(Some(go_rx)));
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let lock_timeout = Duration::from_millis(300);
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx, event: WebhookEvent| {
            counter.fetch_add(1, Ordering::SeqCst);
            let inside = inside_tx.lock().unwrap().take();
            let go = go.lock().unwrap().take();
            async move {
                insert_effect(&tx, &event).await.unwrap();
                if let (Some(inside), Some(go)) = (inside, go) {
                    inside.send(()).unwrap();
                    go.await.unwrap();
                }
                StatusCode::OK
            }
        })
        .layer(stripe_layer(db.pool.clone()).lock_timeout(lock_timeout).build().unwrap()),
    );
    let body = stripe_body("evt_slow");
    let first = tokio::spawn({
        let app = app.clone();
        let req = stripe_request(body.clone());
        async move { status(&app, req).await.0 }
    });
    inside_rx.await.unwrap();
    let started = Instant::now();
    let (code, headers) = status(&app, stripe_request(body.clone())).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(headers.get("retry-after").is_some());
    assert!(started.elapsed() >= lock_timeout, "waited the bound first");
    go_tx.send(()).unwrap();
    assert_eq!(first.await.unwrap(), StatusCode::OK);
    let (code, headers) = status(&app, stripe_request(body)).await;
    assert_eq!((code, headers.get("idempotent-replayed").unwrap().to_str().unwrap()), (StatusCode::OK, "true"));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn handler_sees_the_connections_own_lock_timeout() {
    let db = TestDb::new().await;
    let pool = db.pool(1);
    pool.hold().await.batch("SET lock_timeout = '1234ms'").await;
    let (seen_tx, seen_rx) = once::<String>();
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx| {
            let seen = seen_tx.lock().unwrap().take().unwrap();
            async move {
                let value: String = TxDb::of(&tx).await.unwrap().scalar("SHOW lock_timeout", &[]).await.unwrap();
                seen.send(value).unwrap();
                StatusCode::OK
            }
        })
        .layer(stripe_layer(pool).lock_timeout(Duration::from_millis(777)).build().unwrap()),
    );
    assert_eq!(status(&app, stripe_request(stripe_body("evt_lt"))).await.0, StatusCode::OK);
    assert_eq!(seen_rx.await.unwrap(), "1234ms");
}

#[tokio::test]
async fn statement_timeout_shorter_than_the_wait_gives_409_not_503() {
    let db = TestDb::new().await;
    db.pool
        .get()
        .await
        .unwrap()
        .batch_execute(&format!("ALTER DATABASE {} SET statement_timeout = '300ms'", db.name))
        .await
        .unwrap();
    let pool = db.pool(8); // new connections pick the setting up
    let (inside_tx, inside_rx) = once::<()>();
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let go = Arc::new(Mutex::new(Some(go_rx)));
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx, event: WebhookEvent| {
            let inside = inside_tx.lock().unwrap().take();
            let go = go.lock().unwrap().take();
            async move {
                insert_effect(&tx, &event).await.unwrap();
                if let (Some(inside), Some(go)) = (inside, go) {
                    inside.send(()).unwrap();
                    go.await.unwrap();
                }
                StatusCode::OK
            }
        })
        .layer(stripe_layer(pool).lock_timeout(Duration::from_secs(2)).build().unwrap()),
    );
    let body = stripe_body("evt_stmt_timeout");
    let first = tokio::spawn({
        let (app, req) = (app.clone(), stripe_request(body.clone()));
        async move { status(&app, req).await.0 }
    });
    inside_rx.await.unwrap();
    assert_eq!(status(&app, stripe_request(body)).await.0, StatusCode::CONFLICT);
    go_tx.send(()).unwrap();
    assert_eq!(first.await.unwrap(), StatusCode::OK);
}
