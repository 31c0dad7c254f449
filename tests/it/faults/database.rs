//! The database failing or fighting: a stopped server, killed backends, a
//! dead pooled connection, an exhausted pool, a deadlock, SERIALIZABLE
//! conflicts.

use super::*;

#[tokio::test]
async fn database_stopped_answers_503_then_recovers_after_restart() {
    let server = TempPostgres::start().unwrap();
    let db = TestDb::on(server.url("postgres").parse().unwrap()).await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect).layer(
            stripe_layer(StoreConfig::from(db.pool.clone()).pool_timeout(Duration::from_secs(2))).build().unwrap(),
        ),
    );
    assert_eq!(status(&app, stripe_request(stripe_body("evt_before"))).await.0, StatusCode::OK);

    server.stop_server().unwrap();
    for event in ["evt_during", "evt_before"] {
        let (code, headers) = status(&app, stripe_request(stripe_body(event))).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE, "{event} while the server is down");
        assert!(headers.get("retry-after").is_some());
    }

    server.start_server().unwrap();
    let (code, headers) = status(&app, stripe_request(stripe_body("evt_before"))).await;
    assert_eq!((code, headers.get("idempotent-replayed").is_some()), (StatusCode::OK, true), "kept across restart");
    assert_eq!(status(&app, stripe_request(stripe_body("evt_during"))).await.0, StatusCode::OK);
    assert_eq!(db.effects_for("evt_before").await, 1);
    assert_eq!(db.effects_for("evt_during").await, 1);
}

#[tokio::test]
async fn terminated_backend_mid_handler_is_not_2xx_and_the_retry_succeeds() {
    // Two handlers: one that reports the failed write, one that swallows it.
    for swallow in [false, true] {
        let db = TestDb::new().await;
        let (pid_tx, pid_rx) = once::<i32>();
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let go = Arc::new(Mutex::new(Some(go_rx)));
        let app = Router::new().route(
            "/webhooks/stripe",
            post(move |tx: WebhookTx, event: WebhookEvent| {
                let pid_tx = pid_tx.lock().unwrap().take();
                let go = go.lock().unwrap().take();
                async move {
                    if let (Some(pid_tx), Some(go)) = (pid_tx, go) {
                        let pid: i32 =
                            TxDb::of(&tx).await.unwrap().scalar("SELECT pg_backend_pid()", &[]).await.unwrap();
                        pid_tx.send(pid).unwrap();
                        go.await.unwrap();
                    }
                    match insert_effect(&tx, &event).await {
                        Err(_) if !swallow => StatusCode::INTERNAL_SERVER_ERROR,
                        _ => StatusCode::OK,
                    }
                }
            })
            .layer(stripe_layer(db.pool.clone()).build().unwrap()),
        );
        let body = stripe_body("evt_killed");
        let first = tokio::spawn({
            let app = app.clone();
            let req = stripe_request(body.clone());
            async move { status(&app, req).await.0 }
        });
        let pid = pid_rx.await.unwrap();
        let killed: bool = db
            .pool
            .get()
            .await
            .unwrap()
            .query_one("SELECT pg_terminate_backend($1::int)", &[&pid])
            .await
            .unwrap()
            .get(0);
        assert!(killed);
        go_tx.send(()).unwrap();
        let first = first.await.unwrap();
        assert!(!first.is_success(), "swallow={swallow}: got {first}");
        assert!(first.is_server_error());
        assert_eq!(db.effects().await, 0);

        assert_eq!(status(&app, stripe_request(body)).await.0, StatusCode::OK, "swallow={swallow}");
        assert_eq!(db.effects().await, 1);
    }
}

#[tokio::test]
async fn pool_exhausted_answers_503_within_the_configured_wait() {
    let db = TestDb::new().await;
    let pool = db.pool(1);
    let wait = Duration::from_millis(300);
    let app = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect).layer(stripe_layer(StoreConfig::from(pool.clone()).pool_timeout(wait)).build().unwrap()),
    );
    let held = pool.hold().await;
    let started = Instant::now();
    let (code, headers) = status(&app, stripe_request(stripe_body("evt_pool"))).await;
    let took = started.elapsed();
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers.get("retry-after").unwrap(), "5");
    assert!(took >= wait, "answered after {took:?}, before the wait");
    assert!(took < wait + Duration::from_secs(3), "answered after {took:?}");
    drop(held);
    assert_eq!(status(&app, stripe_request(stripe_body("evt_pool"))).await.0, StatusCode::OK);
}

#[tokio::test]
async fn duplicate_on_a_dead_pooled_connection_is_still_replayed() {
    let db = TestDb::new().await;
    let pool = db.pool(1);
    let app =
        Router::new().route("/webhooks/stripe", post(apply_effect).layer(stripe_layer(pool.clone()).build().unwrap()));
    let body = stripe_body("evt_dead_conn");
    assert_eq!(status(&app, stripe_request(body.clone())).await.0, StatusCode::OK);
    // Kill the one pooled connection's backend behind the pool's back.
    let pid = pool.hold().await.backend_pid().await;
    let admin = db.pool.get().await.unwrap();
    admin.execute("SELECT pg_terminate_backend($1::int)", &[&pid]).await.unwrap();
    let gone = eventually(Duration::from_secs(10), || async {
        admin.query_one("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", &[&pid]).await.unwrap().get::<_, i64>(0)
            == 0
    })
    .await;
    assert!(gone);
    let (code, headers) = status(&app, stripe_request(body)).await;
    assert_eq!((code, headers.get("idempotent-replayed").is_some()), (StatusCode::OK, true));
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn deadlock_between_two_events_is_503_retryable_and_the_retry_succeeds() {
    let db = TestDb::new().await;
    db.pool
        .get()
        .await
        .unwrap()
        .batch_execute(
            "CREATE TABLE accounts (id int PRIMARY KEY, n int NOT NULL); INSERT INTO accounts VALUES (1, 0), (2, 0);",
        )
        .await
        .unwrap();
    // The first run of each event locks one row, waits for the other event to
    // lock the other row, then asks for it: a deadlock PostgreSQL breaks.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let first_runs = Arc::new(AtomicUsize::new(0));
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx, event: WebhookEvent| {
            let (barrier, first_runs) = (barrier.clone(), first_runs.clone());
            async move {
                let (a, b) = if event.key() == "evt_lock_a" { (1, 2) } else { (2, 1) };
                let mut client = TxDb::of(&tx).await.unwrap();
                let bump = "UPDATE accounts SET n = n + 1 WHERE id = $1";
                if client.execute(bump, &[Value::I32(a)]).await.is_err() {
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                if first_runs.fetch_add(1, Ordering::SeqCst) < 2 {
                    barrier.wait().await;
                }
                if client.execute(bump, &[Value::I32(b)]).await.is_err() {
                    return StatusCode::INTERNAL_SERVER_ERROR; // the handler's own failure answer
                }
                drop(client);
                apply_effect(tx, event).await
            }
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    let send_both = ["evt_lock_a", "evt_lock_b"].map(|key| {
        let (app, req) = (app.clone(), stripe_request(stripe_body(key)));
        tokio::spawn(async move { status(&app, req).await })
    });
    let mut answers = Vec::new();
    for t in send_both {
        answers.push(t.await.unwrap());
    }
    let codes: Vec<StatusCode> = answers.iter().map(|(c, _)| *c).collect();
    assert!(codes.contains(&StatusCode::OK), "one of the two completes: {codes:?}");
    assert!(codes.contains(&StatusCode::SERVICE_UNAVAILABLE), "the deadlock victim is 503, not 500: {codes:?}");
    let (_, victim_headers) = answers.iter().find(|(c, _)| *c == StatusCode::SERVICE_UNAVAILABLE).unwrap();
    assert!(victim_headers.get("retry-after").is_some());
    assert_eq!(db.effects().await, 1);
    // The sender retries both: the victim is processed now, the other replayed.
    for key in ["evt_lock_a", "evt_lock_b"] {
        assert_eq!(status(&app, stripe_request(stripe_body(key))).await.0, StatusCode::OK, "{key}");
    }
    assert_eq!(db.effects().await, 2);
    assert_eq!(db.scalar("SELECT sum(n)::bigint FROM accounts").await, 4, "each event bumped both rows once");
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
                let mut client = TxDb::of(&tx).await.unwrap();
                if client.scalar::<i64>("SELECT count(*) FROM effects", &[]).await.is_err() {
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
        assert_eq!(
            status_code(&app, stripe_request(stripe_body(key))).await,
            StatusCode::OK,
            "{key}: the retry succeeds"
        );
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

/// From the breaker's review: while a migration holds `webhook_events`
/// locked, the claim's first statement fails 55P03 on the session's own
/// `lock_timeout`: an ordinary error that leaves the session fine. The
/// connection goes back to the pool; before, each retry of the claim closed
/// one and opened another (8 closed for one delivery).
#[tokio::test]
async fn a_claim_blocked_by_a_migration_s_lock_keeps_its_pooled_connection() {
    let db = TestDb::new().await;
    let mut config = db.config.clone();
    config.options("-c lock_timeout=100");
    let app_pool = pool(config, 2);
    let layer = stripe_layer(app_pool.clone()).lock_timeout(Duration::from_millis(1500)).build().unwrap();
    let app = Router::new().route("/webhooks/stripe", post(apply_effect).layer(layer));
    assert_eq!(status_code(&app, stripe_request(stripe_body("evt_warm"))).await, StatusCode::OK);
    let (locker, conn) = db.config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    locker
        .batch_execute("BEGIN; LOCK TABLE webhook_idempotency.webhook_events IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let (logs, guard) = Logs::capture();
    let blocked = status_code(&app, stripe_request(stripe_body("evt_locked"))).await;
    drop(guard);
    locker.batch_execute("ROLLBACK").await.unwrap();
    assert!(blocked == StatusCode::CONFLICT || blocked == StatusCode::SERVICE_UNAVAILABLE, "{blocked}");
    assert_eq!(logs.lines_with(&["closing a connection"]), Vec::<String>::new(), "no connection was closed");
    assert_eq!(status_code(&app, stripe_request(stripe_body("evt_locked"))).await, StatusCode::OK, "the retry runs");
    assert_eq!(db.effects_for("evt_locked").await, 1);
}
