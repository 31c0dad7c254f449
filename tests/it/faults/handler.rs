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

/// `req` sent over TCP to the app served at `addr` (no `oneshot`: a panic
/// that escaped the layer would close the connection, not fail the test
/// task): the status and the body, or the client's error.
pub(crate) async fn over_http(
    addr: std::net::SocketAddr,
    req: Request<Body>,
) -> Result<(StatusCode, String), reqwest::Error> {
    use http_body_util::BodyExt;
    let (mut parts, body) = req.into_parts();
    parts.uri = format!("http://{addr}{}", parts.uri).parse().unwrap();
    let body = body.collect().await.unwrap().to_bytes();
    let req = reqwest::Request::try_from(Request::from_parts(parts, body)).unwrap();
    let res = reqwest::Client::new().execute(req).await?;
    Ok((res.status(), res.text().await?))
}

/// That every connection `pool` holds is outside a transaction: checks out
/// all `n` and sends each a `SAVEPOINT`, which PostgreSQL refuses outside a
/// transaction block (25P01) and takes inside one.
async fn pooled_outside_transactions(pool: &deadpool_postgres::Pool, n: usize) -> bool {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(pool.get().await.unwrap());
    }
    let mut outside = true;
    for c in &held {
        let refused = c.batch_execute("SAVEPOINT probe").await.err().and_then(|e| e.code().cloned());
        outside &= refused == Some(tokio_postgres::error::SqlState::NO_ACTIVE_SQL_TRANSACTION);
    }
    outside
}

/// After a first run of `provider`'s `key` whose handler panicked: its row
/// `failed` (attempt 1) saying so, no effect committed, and no connection of
/// `pool` (its size) left inside a transaction.
pub(crate) async fn assert_panic_rolled_back_and_recorded(
    db: &TestDb,
    pool: &deadpool_postgres::Pool,
    provider: &str,
    key: &str,
) {
    let c = db.pool.get().await.unwrap();
    let row: Option<(String, i32, Option<String>)> = c
        .query_opt(
            "SELECT state, attempts, last_error FROM webhook_idempotency.webhook_events
              WHERE provider = $1 AND event_key = $2",
            &[&provider, &key],
        )
        .await
        .unwrap()
        .map(|r| (r.get(0), r.get(1), r.get(2)));
    drop(c);
    assert!(
        matches!(&row, Some((state, 1, Some(why))) if state == "failed" && why.contains("the handler panicked")),
        "{row:?}"
    );
    assert_eq!(db.effects().await, 0, "nothing committed");
    assert_eq!(db.idle_in_transaction().await, 0);
    let size = pool.status().max_size;
    assert!(pooled_outside_transactions(pool, size).await, "a pooled connection is inside a transaction");
}

/// Input from the fourth reliability review: without `CatchPanicLayer` a
/// panicking handler got no HTTP answer (the connection closed) and its row
/// said the client went away. The layer catches the panic: 500, the row
/// says the handler panicked, nothing committed, no pooled connection in a
/// transaction, and the retry runs.
#[tokio::test]
async fn handler_panic_is_answered_500_recorded_and_rolled_back_without_catch_panic_layer() {
    let db = TestDb::new().await;
    let pool = db.pool(2);
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let app = Router::new().route(
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
    );
    let addr = serve(app).await;
    let body = stripe_body("evt_panic");
    let first = over_http(addr, stripe_request(body.clone())).await;
    assert!(matches!(first, Ok((StatusCode::INTERNAL_SERVER_ERROR, _))), "an answer, 500: {first:?}");
    assert_panic_rolled_back_and_recorded(&db, &pool, "stripe", "evt_panic").await;

    let retry = over_http(addr, stripe_request(body)).await;
    assert!(matches!(retry, Ok((StatusCode::OK, _))), "the retry runs: {retry:?}");
    assert_eq!(db.event_row("evt_panic").await, Some(("done".into(), 2, Some(200))));
    assert_eq!(db.effects().await, 1);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// The same for the `Idempotency-Key` layer (the claimed-request step both
/// layers share): its 500 problem, the row says the handler panicked, no
/// response stored, and the retry with the key runs.
#[tokio::test]
async fn idempotency_key_handler_panic_is_answered_500_recorded_and_rolled_back() {
    use webhook_idempotency::idempotency_key::{IdempotencyKeyLayer, IdempotentRequest, PROVIDER};
    let db = TestDb::new().await;
    let pool = db.pool(2);
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let handler = move |tx: WebhookTx, req: IdempotentRequest| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move {
            tx.client()
                .await
                .unwrap()
                .execute(
                    "INSERT INTO effects (provider, scope, event_key) VALUES ('api', $1, $2)",
                    &[&req.scope(), &req.key()],
                )
                .await
                .unwrap();
            assert!(req.attempt() > 1, "handler bug on the first run");
            StatusCode::CREATED
        }
    };
    let layer = IdempotencyKeyLayer::builder(pool.clone())
        .scope(|parts| parts.headers.get("x-caller")?.to_str().ok().map(str::to_owned))
        .build()
        .unwrap();
    let addr = serve(Router::new().route("/payments", post(handler)).layer(layer)).await;
    let request = || {
        Request::post("/payments")
            .header("x-caller", "alice")
            .header("idempotency-key", "\"k-panic\"")
            .body(Body::from("{}"))
            .unwrap()
    };
    let first = over_http(addr, request()).await;
    assert!(
        matches!(&first, Ok((StatusCode::INTERNAL_SERVER_ERROR, problem)) if problem.contains("handler-error")),
        "an answer, the 500 problem: {first:?}"
    );
    assert_panic_rolled_back_and_recorded(&db, &pool, PROVIDER, "k-panic").await;

    let retry = over_http(addr, request()).await;
    assert!(matches!(retry, Ok((StatusCode::CREATED, _))), "the retry runs: {retry:?}");
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
    let sig = webhook_idempotency::providers::stripe::FACTS.sign(
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
