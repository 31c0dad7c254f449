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

/// The `Idempotency-Key` layer of these tests on `pool`: the caller is the
/// `x-caller` header.
fn key_layer(pool: &deadpool_postgres::Pool) -> webhook_idempotency::idempotency_key::IdempotencyKeyLayer {
    webhook_idempotency::idempotency_key::IdempotencyKeyLayer::builder(pool.clone())
        .scope(|parts| parts.headers.get("x-caller")?.to_str().ok().map(str::to_owned))
        .build()
        .unwrap()
}

/// `POST /payments` by `alice` with the key `key`.
fn keyed_payment(key: &str) -> Request<Body> {
    Request::post("/payments")
        .header("x-caller", "alice")
        .header("idempotency-key", format!("\"{key}\""))
        .body(Body::from("{}"))
        .unwrap()
}

/// One write in the claim's transaction: an `effects` row for the request's
/// key.
async fn write_payment(tx: &WebhookTx, req: &webhook_idempotency::idempotency_key::IdempotentRequest) {
    let sql = "INSERT INTO effects (provider, scope, event_key) VALUES ('api', $1, $2)";
    TxDb::of(tx).await.unwrap().execute(sql, &[req.scope().into(), req.key().into()]).await.unwrap();
}

/// Where the first run of a payment handler panics.
#[derive(Clone, Copy)]
enum PanicIn {
    /// Its future.
    Handler,
    /// The response body it returns, which the `Idempotency-Key` layer
    /// reads to store it.
    ResponseBody,
}

/// A response body whose first poll panics (a serialiser or a stream the
/// handler returns).
struct PanickingBody;

impl http_body::Body for PanickingBody {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        panic!("the handler's response body panicked")
    }
}

/// A payment through the `Idempotency-Key` layer, with `key`, whose first
/// run panics after its write (`at`): the 500 problem over HTTP, the row
/// says the handler panicked, nothing committed, no response stored, and
/// the retry with the key runs.
async fn assert_key_layer_panic_is_answered_500_recorded_and_rolled_back(key: &str, at: PanicIn) {
    use webhook_idempotency::idempotency_key::{IdempotentRequest, PROVIDER};
    let db = TestDb::new().await;
    let pool = db.pool(2);
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let handler = move |tx: WebhookTx, req: IdempotentRequest| {
        let run = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            write_payment(&tx, &req).await;
            let body = match (run, at) {
                (0, PanicIn::Handler) => panic!("handler bug on the first run"),
                (0, PanicIn::ResponseBody) => Body::new(PanickingBody),
                _ => Body::from("{\"id\":\"pay_1\"}"),
            };
            (StatusCode::CREATED, body)
        }
    };
    let addr = serve(Router::new().route("/payments", post(handler)).layer(key_layer(&pool))).await;
    let first = over_http(addr, keyed_payment(key)).await;
    assert!(
        matches!(&first, Ok((StatusCode::INTERNAL_SERVER_ERROR, problem)) if problem.contains("handler-error")),
        "an answer, the 500 problem: {first:?}"
    );
    assert_panic_rolled_back_and_recorded(&db, &pool, PROVIDER, key).await;
    let stored = "SELECT count(*) FROM webhook_idempotency.webhook_request_keys";
    assert_eq!(db.scalar(stored).await, 0, "no response stored");

    let retry = over_http(addr, keyed_payment(key)).await;
    assert!(matches!(retry, Ok((StatusCode::CREATED, _))), "the retry runs: {retry:?}");
    assert_eq!((runs.load(Ordering::SeqCst), db.effects().await), (2, 1));
}

/// The same for the `Idempotency-Key` layer (the processing step both
/// layers share): its 500 problem, the row says the handler panicked, no
/// response stored, and the retry with the key runs.
#[tokio::test]
async fn idempotency_key_handler_panic_is_answered_500_recorded_and_rolled_back() {
    assert_key_layer_panic_is_answered_500_recorded_and_rolled_back("k-panic", PanicIn::Handler).await;
}

/// Breaker of the issue 33 fixes: the `Idempotency-Key` layer reads the
/// handler's response body inside the claim (to store it), and that read
/// was outside the `catch_unwind` that covers the handler's future. A body
/// that panics (a streamed serialiser, a `Body::from_stream` whose stream
/// panics) unwound through the layer: no HTTP answer (the connection
/// closed), and nothing recorded the attempt. The read is caught as the
/// handler's future is: the 500 problem, the row says the handler panicked,
/// nothing committed or stored, and the retry runs.
#[tokio::test]
async fn idempotency_key_panic_in_the_response_body_it_stores_is_answered_500_recorded_and_rolled_back() {
    assert_key_layer_panic_is_answered_500_recorded_and_rolled_back("k-body-panic", PanicIn::ResponseBody).await;
}

/// Breaker of the issue 33 fixes (held): many handlers panicking at once,
/// with string and non-string payloads (`panic_any(42)`), on a pool of 4:
/// each answered 500 and recorded as panicked, nothing committed, no
/// connection left in a transaction (pooled or on the server), and the pool
/// then serves a delivery that succeeds.
#[tokio::test]
async fn many_concurrent_panics_with_any_payload_leave_the_pool_healthy() {
    const PANICS: usize = 24;
    let db = TestDb::new().await;
    let pool = db.pool(4);
    let handler = post(|tx: WebhookTx, event: WebhookEvent| async move {
        insert_effect(&tx, &event).await.unwrap();
        if event.key().starts_with("evt_ok") {
            return StatusCode::OK;
        }
        if event.key().ends_with('0') {
            std::panic::panic_any(42_u32);
        }
        panic!("handler bug on {}", event.key())
    });
    let app = Router::new().route("/webhooks/stripe", handler).layer(stripe_layer(pool.clone()).build().unwrap());
    let addr = serve(app).await;
    let sends = (0..PANICS).map(|i| over_http(addr, stripe_request(stripe_body(&format!("evt_panic_{i}")))));
    let answers = futures_util::future::join_all(sends).await;
    let statuses: Vec<_> = answers.iter().map(|a| a.as_ref().map(|(s, _)| *s).map_err(|e| e.to_string())).collect();
    assert!(statuses.iter().all(|s| *s == Ok(StatusCode::INTERNAL_SERVER_ERROR)), "{statuses:?}");
    let recorded = db
        .scalar(
            "SELECT count(*) FROM webhook_idempotency.webhook_events
              WHERE state = 'failed' AND last_error LIKE '%the handler panicked%'",
        )
        .await;
    assert_eq!(recorded, PANICS as i64);
    assert_eq!(db.effects().await, 0);
    assert_eq!(db.idle_in_transaction().await, 0);
    let ok = over_http(addr, stripe_request(stripe_body("evt_ok_after"))).await;
    assert!(matches!(ok, Ok((StatusCode::OK, _))), "{ok:?}");
    assert_eq!(db.effects().await, 1);
}

/// Breaker of the issue 33 fixes (held): a handler that panics while a task
/// it spawned still holds a `WebhookTx` clone is answered 500, recorded as
/// panicked and rolled back at once (the clone does not keep the
/// transaction open); the task's later use of its clone gets no connection,
/// and the retry runs.
#[tokio::test]
async fn a_panic_while_a_spawned_task_holds_the_transaction_is_answered_500_and_rolled_back() {
    let db = TestDb::new().await;
    let pool = db.pool(2);
    let release = Arc::new(tokio::sync::Notify::new());
    let (used, late_use) = oneshot::channel::<bool>();
    let used = Arc::new(Mutex::new(Some(used)));
    let runs = Arc::new(AtomicUsize::new(0));
    let (r, rel) = (Arc::clone(&runs), Arc::clone(&release));
    let handler = post(move |tx: WebhookTx, event: WebhookEvent| {
        let (run, release, used) = (r.fetch_add(1, Ordering::SeqCst), Arc::clone(&rel), used.lock().unwrap().take());
        async move {
            insert_effect(&tx, &event).await.unwrap();
            if let (0, Some(used)) = (run, used) {
                let held = tx.clone();
                tokio::spawn(async move {
                    release.notified().await;
                    let _ = used.send(TxDb::of(&held).await.is_ok());
                });
                panic!("handler bug while its task holds the transaction");
            }
            StatusCode::OK
        }
    });
    let app = Router::new().route("/webhooks/stripe", handler).layer(stripe_layer(pool.clone()).build().unwrap());
    let addr = serve(app).await;
    let body = stripe_body("evt_spawned");
    let first = over_http(addr, stripe_request(body.clone())).await;
    assert!(matches!(first, Ok((StatusCode::INTERNAL_SERVER_ERROR, _))), "{first:?}");
    assert_panic_rolled_back_and_recorded(&db, &pool, "stripe", "evt_spawned").await;
    release.notify_one();
    assert!(!late_use.await.unwrap(), "the task's clone still reached the rolled-back transaction");
    let retry = over_http(addr, stripe_request(body)).await;
    assert!(matches!(retry, Ok((StatusCode::OK, _))), "the retry runs: {retry:?}");
    assert_eq!((db.effects().await, runs.load(Ordering::SeqCst)), (1, 2));
}

/// An inner service whose `poll_ready` panics (a readiness bug, a
/// load-shedding layer that asserts).
#[derive(Clone)]
struct PanicsWhenPolledReady;

impl ::tower::Service<Request<Body>> for PanicsWhenPolledReady {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        panic!("the inner service's poll_ready panicked")
    }

    fn call(&mut self, _: Request<Body>) -> Self::Future {
        std::future::ready(Ok(axum::response::IntoResponse::into_response(StatusCode::OK)))
    }
}

/// Breaker of the issue 33 fixes (held): a panic in the inner service's
/// `poll_ready` (run inside the layer's response future, after the claim)
/// is answered 500, recorded as panicked and rolled back, like a panic in
/// the handler.
#[tokio::test]
async fn a_panic_in_the_inner_service_s_poll_ready_is_answered_500_and_recorded() {
    use ::tower::Layer as _;
    let db = TestDb::new().await;
    let pool = db.pool(2);
    let service = stripe_layer(pool.clone()).build().unwrap().layer(PanicsWhenPolledReady);
    let addr = serve(Router::new().route_service("/webhooks/stripe", service)).await;
    let answer = over_http(addr, stripe_request(stripe_body("evt_ready_panic"))).await;
    assert!(matches!(answer, Ok((StatusCode::INTERNAL_SERVER_ERROR, _))), "{answer:?}");
    assert_panic_rolled_back_and_recorded(&db, &pool, "stripe", "evt_ready_panic").await;
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
                        TxDb::of(&tx).await.unwrap().batch("COMMIT").await.unwrap();
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
