//! Faults for real: a stopped server, killed backends, dropped futures,
//! panics, an exhausted pool, an in-flight duplicate.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;
use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{Request, StatusCode};
use tokio::sync::oneshot;
use tower::ServiceExt;
use webhook_idempotency::{WebhookEvent, WebhookTx};

async fn status(app: &Router, req: Request<Body>) -> (StatusCode, http::HeaderMap) {
    let res = app.clone().oneshot(req).await.unwrap();
    (res.status(), res.headers().clone())
}

/// A one-shot channel the test can take out of a `Fn` handler.
fn once<T>() -> (Arc<Mutex<Option<oneshot::Sender<T>>>>, oneshot::Receiver<T>) {
    let (tx, rx) = oneshot::channel();
    (Arc::new(Mutex::new(Some(tx))), rx)
}

#[tokio::test]
async fn database_stopped_answers_503_then_recovers_after_restart() {
    let server = TempPostgres::start().unwrap();
    let db = TestDb::on(server.url("postgres").parse().unwrap()).await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect).layer(stripe_layer(db.pool.clone()).pool_timeout(Duration::from_secs(2)).build().unwrap()),
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
                            tx.client().await.unwrap().query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
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
        let killed: bool =
            db.pool.get().await.unwrap().query_one("SELECT pg_terminate_backend($1)", &[&pid]).await.unwrap().get(0);
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
async fn pool_exhausted_answers_503_within_the_configured_wait() {
    let db = TestDb::new().await;
    let pool = db.pool(1);
    let wait = Duration::from_millis(300);
    let app = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect).layer(stripe_layer(pool.clone()).pool_timeout(wait).build().unwrap()),
    );
    let held = pool.get().await.unwrap();
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
async fn handler_sees_the_connections_own_lock_timeout() {
    let db = TestDb::new().await;
    let pool = db.pool(1);
    pool.get().await.unwrap().batch_execute("SET lock_timeout = '1234ms'").await.unwrap();
    let (seen_tx, seen_rx) = once::<String>();
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx| {
            let seen = seen_tx.lock().unwrap().take().unwrap();
            async move {
                let value: String =
                    tx.client().await.unwrap().query_one("SHOW lock_timeout", &[]).await.unwrap().get(0);
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

#[tokio::test]
async fn duplicate_on_a_dead_pooled_connection_is_still_replayed() {
    let db = TestDb::new().await;
    let pool = db.pool(1);
    let app =
        Router::new().route("/webhooks/stripe", post(apply_effect).layer(stripe_layer(pool.clone()).build().unwrap()));
    let body = stripe_body("evt_dead_conn");
    assert_eq!(status(&app, stripe_request(body.clone())).await.0, StatusCode::OK);
    // Kill the one pooled connection's backend behind the pool's back.
    let pid: i32 = pool.get().await.unwrap().query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    let admin = db.pool.get().await.unwrap();
    admin.execute("SELECT pg_terminate_backend($1)", &[&pid]).await.unwrap();
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
                let client = tx.client().await.unwrap();
                let bump = "UPDATE accounts SET n = n + 1 WHERE id = $1";
                if client.execute(bump, &[&a]).await.is_err() {
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                if first_runs.fetch_add(1, Ordering::SeqCst) < 2 {
                    barrier.wait().await;
                }
                if client.execute(bump, &[&b]).await.is_err() {
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
