//! The `Idempotency-Key` layer on a real PostgreSQL: the draft's cases, one
//! run under concurrent retries, crashes between the handler's writes and the
//! commit, fingerprints, callers, stored responses, expiry, recovery points,
//! and a real HTTP client retrying over TCP.

use crate::support::*;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::BodyExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Barrier, Notify};
use tower::ServiceExt;
use webhook_idempotency::idempotency_key::{
    ErrorResponses, IdempotencyKeyLayer, IdempotencyKeyLayerBuilder, IdempotentRequest, PROVIDER,
};
use webhook_idempotency::store::retention::Retention;
use webhook_idempotency::WebhookTx;

/// What the test handlers share: how often each ran, and gates.
#[derive(Clone, Default)]
struct Shared {
    runs: Arc<AtomicUsize>,
    entered: Arc<Notify>,
    release: Arc<Notify>,
    observer: Option<TestPool>,
}

/// Writes one effect in the claim's transaction and answers 201 with a
/// payment id, a `Location` and a header that is not replayed.
async fn create(tx: WebhookTx, req: IdempotentRequest, shared: &Shared, body: &Bytes) -> Response {
    let n = shared.runs.fetch_add(1, Ordering::SeqCst) + 1;
    TxDb::of(&tx)
        .await
        .unwrap()
        .execute(
            "INSERT INTO effects (provider, scope, event_key, body) VALUES ('api', $1, $2, $3)",
            &[req.scope().into(), req.key().into(), body.as_ref().into()],
        )
        .await
        .unwrap();
    let id = format!("pay_{n}");
    let mut headers = HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    headers.insert("location", format!("/payments/{id}").parse().unwrap());
    headers.insert("x-run", n.to_string().parse().unwrap());
    (StatusCode::CREATED, headers, format!("{{\"id\":\"{id}\",\"run\":{n}}}")).into_response()
}

/// One write in the claim's transaction: an `effects` row for the request's
/// key.
async fn write(tx: &WebhookTx, req: &IdempotentRequest) {
    let sql = "INSERT INTO effects (provider, scope, event_key) VALUES ('api', $1, $2)";
    TxDb::of(tx).await.unwrap().execute(sql, &[req.scope().into(), req.key().into()]).await.unwrap();
}

fn routes(shared: Shared) -> Router {
    let s = shared.clone();
    let payments = post(move |tx: WebhookTx, req: IdempotentRequest, body: Bytes| {
        let s = s.clone();
        async move { create(tx, req, &s, &body).await }
    });
    let s = shared.clone();
    let hold = post(move |tx: WebhookTx, req: IdempotentRequest, body: Bytes| {
        let s = s.clone();
        async move {
            s.entered.notify_one();
            s.release.notified().await;
            create(tx, req, &s, &body).await
        }
    });
    let s = shared.clone();
    let fail_first = post(move |tx: WebhookTx, req: IdempotentRequest, body: Bytes| {
        let s = s.clone();
        async move {
            let response = create(tx, req.clone(), &s, &body).await;
            if req.attempt() == 1 {
                return (StatusCode::INTERNAL_SERVER_ERROR, "upstream failed").into_response();
            }
            response
        }
    });
    let s = shared.clone();
    let declined = post(move |tx: WebhookTx, req: IdempotentRequest, body: Bytes| {
        let s = s.clone();
        async move {
            let _ = create(tx, req.clone(), &s, &body).await;
            req.began();
            (StatusCode::PAYMENT_REQUIRED, "{\"error\":\"card_declined\"}").into_response()
        }
    });
    let s = shared.clone();
    let big = post(move |tx: WebhookTx, req: IdempotentRequest, body: Bytes| {
        let s = s.clone();
        async move {
            let _ = create(tx, req, &s, &body).await;
            (StatusCode::CREATED, vec![b'x'; 4096]).into_response()
        }
    });
    let s = shared.clone();
    let crash = post(move |tx: WebhookTx, req: IdempotentRequest, body: Bytes| {
        let s = s.clone();
        async move {
            let response = create(tx.clone(), req.clone(), &s, &body).await;
            if req.attempt() == 1 {
                // The claim's own backend dies after the write, before the commit.
                let pid: i32 = TxDb::of(&tx).await.unwrap().scalar("SELECT pg_backend_pid()", &[]).await.unwrap();
                let observer = s.observer.as_ref().unwrap().get().await.unwrap();
                observer.execute("SELECT pg_terminate_backend($1::int)", &[&pid]).await.unwrap();
            }
            response
        }
    });
    let s = shared.clone();
    let phases = post(move |tx: WebhookTx, req: IdempotentRequest, body: Bytes| {
        let s = s.clone();
        async move {
            // Phase "charged": the external call, made at most once per key.
            if req.recovery_point().as_deref() != Some("charged") {
                s.observer
                    .as_ref()
                    .unwrap()
                    .get()
                    .await
                    .unwrap()
                    .execute(
                        "INSERT INTO effects (provider, scope, event_key) VALUES ('charge', $1, $2)",
                        &[&req.scope(), &req.key()],
                    )
                    .await
                    .unwrap();
                assert!(req.record_recovery_point("charged").await.unwrap(), "recorded");
            }
            if req.attempt() == 1 {
                return (StatusCode::BAD_GATEWAY, "crashed after the charge").into_response();
            }
            create(tx, req, &s, &body).await
        }
    });
    Router::new()
        .route("/payments", payments.get(|| async { "listed" }))
        .route("/hold", hold)
        .route("/fail-first", fail_first)
        .route("/declined", declined)
        .route("/big", big)
        .route("/crash", crash)
        .route("/phases", phases)
}

/// The layer for tests: the caller is the `x-caller` header (an
/// authentication middleware's job in an application).
fn layer(db: &TestDb) -> IdempotencyKeyLayerBuilder {
    IdempotencyKeyLayer::builder(db.pool.clone())
        .scope(|parts| parts.headers.get("x-caller")?.to_str().ok().map(str::to_owned))
}

fn app(shared: &Shared, layer: IdempotencyKeyLayerBuilder) -> Router {
    routes(shared.clone()).layer(layer.build().unwrap())
}

fn request(path: &str, caller: &str, key: Option<&str>, body: &str) -> Request<Body> {
    let mut req = Request::post(path).header("x-caller", caller).header("content-type", "application/json");
    if let Some(key) = key {
        req = req.header("idempotency-key", key);
    }
    req.body(Body::from(body.to_owned())).unwrap()
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Answer {
    fn replayed(&self) -> bool {
        self.headers.get("idempotent-replayed").is_some_and(|v| v == "true")
    }

    fn problem_title(&self) -> String {
        assert_eq!(self.headers["content-type"], "application/problem+json");
        let problem: serde_json::Value = serde_json::from_slice(&self.body).unwrap();
        assert_eq!(problem["status"], self.status.as_u16());
        problem["title"].as_str().unwrap().to_owned()
    }
}

async fn send(app: &Router, req: Request<Body>) -> Answer {
    let res = app.clone().oneshot(req).await.unwrap();
    let (parts, body) = res.into_parts();
    Answer { status: parts.status, headers: parts.headers, body: body.collect().await.unwrap().to_bytes() }
}

const BODY: &str = r#"{"amount":1000,"currency":"eur"}"#;

#[tokio::test]
async fn the_drafts_cases_first_request_retry_reuse_and_missing_key() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let app = app(&shared, layer(&db));

    // First request: run, stored, committed with its write.
    let first = send(&app, request("/payments", "alice", Some("\"8e03978e-40d5-43e8-bc93-6894a57f9324\""), BODY)).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert!(!first.replayed());
    assert_eq!(db.effects().await, 1);

    // Retry, bare form of the same key: the stored response, byte for byte, not run.
    let retry = send(&app, request("/payments", "alice", Some("8e03978e-40d5-43e8-bc93-6894a57f9324"), BODY)).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(retry.replayed());
    assert_eq!(retry.body, first.body);
    assert_eq!(retry.headers["location"], first.headers["location"]);
    assert_eq!(retry.headers["content-type"], "application/json");
    assert!(retry.headers.get("x-run").is_none(), "a header outside replay_headers is not replayed");
    assert_eq!(shared.runs.load(Ordering::SeqCst), 1);

    // The same key with another payload: 422, nothing run.
    let reused =
        send(&app, request("/payments", "alice", Some("8e03978e-40d5-43e8-bc93-6894a57f9324"), r#"{"amount":1}"#))
            .await;
    assert_eq!(reused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reused.problem_title(), "Idempotency-Key is already used");
    // Another path with the same key and body is another request too.
    let elsewhere = send(&app, request("/declined", "alice", Some("8e03978e-40d5-43e8-bc93-6894a57f9324"), BODY)).await;
    assert_eq!(elsewhere.status, StatusCode::UNPROCESSABLE_ENTITY);

    // No key: 400, nothing run.
    let missing = send(&app, request("/payments", "alice", None, BODY)).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.problem_title(), "Idempotency-Key is missing");
    // A malformed key: 400.
    let long = "k".repeat(256);
    for bad in ["\"open", "two words", long.as_str()] {
        let answer = send(&app, request("/payments", "alice", Some(bad), BODY)).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(answer.problem_title(), "Idempotency-Key is malformed");
    }
    // No caller: 401, nothing claimed.
    let anonymous = Request::post("/payments").header("idempotency-key", "k").body(Body::from(BODY)).unwrap();
    assert_eq!(send(&app, anonymous).await.status, StatusCode::UNAUTHORIZED);

    assert_eq!(shared.runs.load(Ordering::SeqCst), 1);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn methods_outside_post_and_patch_pass_through_and_a_key_may_be_optional() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let app = app(&shared, layer(&db));
    let get = Request::get("/payments")
        .header("x-caller", "alice")
        .header("idempotency-key", "k")
        .body(Body::empty())
        .unwrap();
    let listed = send(&app, get).await;
    assert_eq!((listed.status, listed.body.as_ref()), (StatusCode::OK, b"listed".as_ref()));
    assert_eq!(db.events().await, 0, "GET claims nothing");

    // With required(false), a POST without a key runs without a claim: a
    // handler needing the claim's transaction is told by its extractor.
    let optional = app_optional(&db, &shared);
    let answer = send(&optional, request("/payments", "alice", None, BODY)).await;
    assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(db.events().await, 0);
}

fn app_optional(db: &TestDb, shared: &Shared) -> Router {
    app(shared, layer(db).required(false))
}

#[tokio::test]
async fn two_concurrent_requests_with_one_key_run_the_handler_once() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let app = app(&shared, layer(&db).in_flight_wait(Duration::ZERO));
    let first = tokio::spawn({
        let app = app.clone();
        async move { send(&app, request("/hold", "alice", Some("k-1"), BODY)).await }
    });
    shared.entered.notified().await; // the first holds the claim, its handler running
    let second = send(&app, request("/hold", "alice", Some("k-1"), BODY)).await;
    assert_eq!(second.status, StatusCode::CONFLICT);
    assert_eq!(second.headers["retry-after"], "1");
    assert_eq!(second.problem_title(), "A request is outstanding for this Idempotency-Key");
    shared.release.notify_one();
    let first = first.await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED);
    let third = send(&app, request("/hold", "alice", Some("k-1"), BODY)).await;
    assert!(third.replayed());
    assert_eq!(third.body, first.body);
    assert_eq!(shared.runs.load(Ordering::SeqCst), 1);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn a_retry_waiting_on_the_first_request_gets_its_replay() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let app = app(&shared, layer(&db).in_flight_wait(Duration::from_secs(30)));
    let first = tokio::spawn({
        let app = app.clone();
        async move { send(&app, request("/hold", "alice", Some("k-2"), BODY)).await }
    });
    shared.entered.notified().await;
    let second = tokio::spawn({
        let app = app.clone();
        async move { send(&app, request("/hold", "alice", Some("k-2"), BODY)).await }
    });
    // The second waits for the first (no connection held); release the first.
    shared.release.notify_one();
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(second.status, StatusCode::CREATED);
    assert!(second.replayed());
    assert_eq!(second.body, first.body);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn many_concurrent_retries_of_one_key_run_it_once_and_all_others_replay_or_wait() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let app = app(&shared, layer(&db).in_flight_wait(Duration::from_secs(10)));
    let barrier = Arc::new(Barrier::new(16));
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (app, barrier) = (app.clone(), Arc::clone(&barrier));
            tokio::spawn(async move {
                barrier.wait().await;
                send(&app, request("/payments", "alice", Some("k-many"), BODY)).await
            })
        })
        .collect();
    let mut bodies = Vec::new();
    for task in tasks {
        let answer = task.await.unwrap();
        assert!(matches!(answer.status, StatusCode::CREATED | StatusCode::CONFLICT), "{:?}", answer.status);
        if answer.status == StatusCode::CREATED {
            bodies.push(answer.body);
        }
    }
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "every 201 is the one stored response");
    assert_eq!(shared.runs.load(Ordering::SeqCst), 1);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn a_failed_run_is_not_stored_and_its_retry_runs_and_succeeds() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let app = app(&shared, layer(&db));
    let failed = send(&app, request("/fail-first", "alice", Some("k-f"), BODY)).await;
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(db.effects().await, 0, "the failed run's write rolled back");
    let retried = send(&app, request("/fail-first", "alice", Some("k-f"), BODY)).await;
    assert_eq!(retried.status, StatusCode::CREATED);
    assert!(!retried.replayed());
    assert_eq!(db.effects().await, 1);
    assert!(send(&app, request("/fail-first", "alice", Some("k-f"), BODY)).await.replayed());
    assert_eq!(shared.runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn errors_after_execution_began_are_stored_by_default_and_never_with_the_switch() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let app = app(&shared, layer(&db));
    let declined = send(&app, request("/declined", "alice", Some("k-d"), BODY)).await;
    assert_eq!(declined.status, StatusCode::PAYMENT_REQUIRED);
    let again = send(&app, request("/declined", "alice", Some("k-d"), BODY)).await;
    assert_eq!(again.status, StatusCode::PAYMENT_REQUIRED);
    assert!(again.replayed());
    assert_eq!(again.body, declined.body);
    assert_eq!(db.effects().await, 1, "a stored answer commits with the writes before it");
    assert_eq!(shared.runs.load(Ordering::SeqCst), 1);

    let never = Shared::default();
    let app = routes(never.clone()).layer(layer(&db).error_responses(ErrorResponses::Never).build().unwrap());
    for _ in 0..2 {
        let answer = send(&app, request("/declined", "bob", Some("k-d"), BODY)).await;
        assert_eq!(answer.status, StatusCode::PAYMENT_REQUIRED);
        assert!(!answer.replayed());
    }
    assert_eq!(never.runs.load(Ordering::SeqCst), 2);
    assert_eq!(db.effects().await, 1, "answers not stored roll back their writes");
}

#[tokio::test]
async fn a_backend_killed_between_the_handlers_write_and_the_commit_stores_nothing_and_the_retry_runs() {
    let db = TestDb::new().await;
    let shared = Shared { observer: Some(db.observer()), ..Shared::default() };
    let app = app(&shared, layer(&db));
    let crashed = send(&app, request("/crash", "alice", Some("k-c"), BODY)).await;
    assert_eq!(crashed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(db.effects().await, 0);
    assert_eq!(db.scalar("SELECT count(*) FROM webhook_idempotency.webhook_request_keys").await, 0);
    let retried = send(&app, request("/crash", "alice", Some("k-c"), BODY)).await;
    assert_eq!(retried.status, StatusCode::CREATED);
    assert!(!retried.replayed());
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn a_dropped_request_future_rolls_back_and_the_retry_runs() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let app = app(&shared, layer(&db));
    let dropped = tokio::spawn({
        let app = app.clone();
        async move { send(&app, request("/hold", "alice", Some("k-x"), BODY)).await }
    });
    shared.entered.notified().await;
    dropped.abort(); // the client went away while the handler ran
    let _ = dropped.await;
    assert!(eventually(Duration::from_secs(10), || async { db.idle_in_transaction().await == 0 }).await);
    shared.release.notify_one(); // (a permit for the retry's handler)
    let retried = send(&app, request("/hold", "alice", Some("k-x"), BODY)).await;
    assert_eq!(retried.status, StatusCode::CREATED);
    assert!(!retried.replayed());
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn two_callers_with_the_same_key_are_independent() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let app = app(&shared, layer(&db));
    let alice = send(&app, request("/payments", "alice", Some("same"), BODY)).await;
    let bob = send(&app, request("/payments", "bob", Some("same"), r#"{"amount":5,"currency":"usd"}"#)).await;
    assert_eq!((alice.status, bob.status), (StatusCode::CREATED, StatusCode::CREATED));
    assert!(!bob.replayed());
    assert_ne!(alice.body, bob.body, "bob never sees alice's stored response");
    assert_eq!(db.effects().await, 2);
}

#[tokio::test]
async fn a_response_over_the_storage_limit_is_refused_and_nothing_commits() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let app = app(&shared, layer(&db).max_response_bytes(1024));
    for _ in 0..2 {
        let answer = send(&app, request("/big", "alice", Some("k-big"), BODY)).await;
        assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!answer.replayed());
    }
    assert_eq!(db.effects().await, 0);
    assert_eq!(shared.runs.load(Ordering::SeqCst), 2, "nothing stored: each retry runs");
    // Within the limit it is stored.
    let app = routes(shared.clone()).layer(layer(&db).max_response_bytes(4096).build().unwrap());
    assert_eq!(send(&app, request("/big", "alice", Some("k-big"), BODY)).await.status, StatusCode::CREATED);
    let replay = send(&app, request("/big", "alice", Some("k-big"), BODY)).await;
    assert!(replay.replayed());
    assert_eq!(replay.body.len(), 4096);
}

#[tokio::test]
async fn an_expired_key_is_purged_by_retention_and_its_retry_runs_again() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let app = app(&shared, layer(&db));
    assert_eq!(send(&app, request("/payments", "alice", Some("k-e"), BODY)).await.status, StatusCode::CREATED);
    let retention = Retention::builder(db.pool.clone()).build().unwrap();
    assert_eq!(retention.window(PROVIDER), Duration::from_secs(24 * 3600));
    // Within the window nothing goes.
    assert_eq!(retention.purge().await.unwrap().deleted, 0);
    assert!(send(&app, request("/payments", "alice", Some("k-e"), BODY)).await.replayed());
    // Past it (everything older than now), the key and its claim go.
    let purged = retention.purge_older_than(Some(Duration::ZERO)).await.unwrap();
    assert_eq!(purged.deleted, 2, "the claim row and the stored response");
    let again = send(&app, request("/payments", "alice", Some("k-e"), BODY)).await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert!(!again.replayed());
    assert_eq!(db.effects().await, 2);
}

#[tokio::test]
async fn a_recovery_point_survives_the_rollback_and_the_retry_resumes_after_it() {
    let db = TestDb::new().await;
    let shared = Shared { observer: Some(db.observer()), ..Shared::default() };
    let app = app(&shared, layer(&db));
    let crashed = send(&app, request("/phases", "alice", Some("k-p"), BODY)).await;
    assert_eq!(crashed.status, StatusCode::BAD_GATEWAY);
    assert!(!crashed.replayed());
    let charges = "SELECT count(*) FROM effects WHERE provider = 'charge'";
    let payments = "SELECT count(*) FROM effects WHERE provider = 'api'";
    assert_eq!((db.scalar(charges).await, db.scalar(payments).await), (1, 0));
    // Another payload under the key: the recovery point carries the fingerprint.
    let reused = send(&app, request("/phases", "alice", Some("k-p"), r#"{"amount":2}"#)).await;
    assert_eq!(reused.status, StatusCode::UNPROCESSABLE_ENTITY);
    // The retry reads "charged", does not charge again, and finishes.
    let resumed = send(&app, request("/phases", "alice", Some("k-p"), BODY)).await;
    assert_eq!(resumed.status, StatusCode::CREATED);
    assert_eq!((db.scalar(charges).await, db.scalar(payments).await), (1, 1));
    assert!(send(&app, request("/phases", "alice", Some("k-p"), BODY)).await.replayed());
}

/// A real HTTP client over TCP that retries 409 and 503 with the same key
/// (as an SDK does), against a route whose first run fails after its write.
#[tokio::test]
async fn a_real_http_client_retrying_with_one_key_gets_one_effect() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let addr = serve(app(&shared, layer(&db).in_flight_wait(Duration::ZERO))).await;
    let client = reqwest::Client::new();
    let key = "b0c4a3f2-5d7e-4d36-9a52-1f0e2c3b4a59";
    let mut statuses = Vec::new();
    // Two clients race with the same key; each retries until it gets a final answer.
    let attempt = |path: &'static str| {
        let client = client.clone();
        async move {
            for _ in 0..50 {
                let res = client
                    .post(format!("http://{addr}{path}"))
                    .header("x-caller", "alice")
                    .header("idempotency-key", key)
                    .body(BODY)
                    .send()
                    .await
                    .unwrap();
                let status = res.status();
                let replayed = res.headers().contains_key("idempotent-replayed");
                let body = res.bytes().await.unwrap();
                if status == reqwest::StatusCode::CONFLICT || status.is_server_error() {
                    tokio::time::sleep(Duration::from_millis(20)).await; // the client's own backoff
                    continue;
                }
                return (status.as_u16(), replayed, body);
            }
            panic!("no final answer after 50 attempts");
        }
    };
    let (a, b) = tokio::join!(attempt("/fail-first"), attempt("/fail-first"));
    statuses.push(a.0);
    statuses.push(b.0);
    assert_eq!(statuses, vec![201, 201]);
    assert_eq!(a.2, b.2, "both clients hold the one stored response");
    assert!(a.1 || b.1, "one of them is a replay");
    assert_eq!(db.effects().await, 1);
}

/// A retry that arrives while the first run is between its external call
/// and its answer waits for the claim; it must see the recovery point the
/// first run records meanwhile (read in the claim's flight, after the wait),
/// not the one it looked up before waiting: the external call is made once.
/// With another body, the same retry is refused 422.
#[tokio::test]
async fn a_retry_that_waited_resumes_from_the_recovery_point_recorded_meanwhile() {
    for (retry_body, want) in [(BODY, StatusCode::CREATED), (r#"{"amount":999999}"#, StatusCode::UNPROCESSABLE_ENTITY)]
    {
        let db = TestDb::new().await;
        let (logs, _guard) = Logs::capture();
        let entered = Arc::new(Notify::new());
        let release = Arc::new(Notify::new());
        let observer = db.observer();
        // The first request's run, told by order and not by `attempt()`: the first run's failure is recorded
        // after the rollback that frees the key, so a retry waiting on the key may claim it in between and run
        // as attempt 1 too (it then waited for a release that had been spent: the test hung once in CI).
        let first_run = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (e, r) = (Arc::clone(&entered), Arc::clone(&release));
        let handler = post(move |tx: WebhookTx, req: IdempotentRequest| {
            let (entered, release, observer) = (Arc::clone(&e), Arc::clone(&r), observer.clone());
            let is_first = first_run.swap(false, std::sync::atomic::Ordering::SeqCst);
            async move {
                if is_first {
                    entered.notify_one();
                    release.notified().await;
                }
                if req.recovery_point().as_deref() != Some("charged") {
                    let c = observer.get().await.unwrap();
                    c.execute(
                        "INSERT INTO effects (provider, scope, event_key) VALUES ('charge', $1, $2)",
                        &[&req.scope(), &req.key()],
                    )
                    .await
                    .unwrap();
                    assert!(req.record_recovery_point("charged").await.unwrap());
                }
                if is_first {
                    return (StatusCode::BAD_GATEWAY, "timed out after the charge").into_response();
                }
                write(&tx, &req).await;
                (StatusCode::CREATED, "{}").into_response()
            }
        });
        let app = Router::new()
            .route("/phases", handler)
            .layer(layer(&db).in_flight_wait(Duration::from_secs(30)).build().unwrap());
        let first = tokio::spawn({
            let app = app.clone();
            async move { send(&app, request("/phases", "alice", Some("k-race"), BODY)).await }
        });
        entered.notified().await;
        let retry = tokio::spawn({
            let app = app.clone();
            async move { send(&app, request("/phases", "alice", Some("k-race"), retry_body)).await }
        });
        // The retry has looked the key up (nothing recorded yet) and waits in the claim.
        let waiting = || async { !logs.lines_with(&["in flight; checking again"]).is_empty() };
        assert!(eventually(Duration::from_secs(10), waiting).await, "the retry waits for the first run");
        release.notify_one();
        let (first, retry) = (first.await.unwrap(), retry.await.unwrap());
        assert_eq!(first.status, StatusCode::BAD_GATEWAY);
        assert_eq!(retry.status, want, "retry body {retry_body}");
        let charges = db.scalar("SELECT count(*) FROM effects WHERE provider = 'charge'").await;
        assert_eq!(charges, 1, "the external call is made once per key");
    }
}

/// POST/redirect/GET: a 303 after a write is a result, committed and
/// replayed like a 2xx.
#[tokio::test]
async fn a_redirect_after_a_write_commits_and_replays() {
    let db = TestDb::new().await;
    let handler = post(|tx: WebhookTx, req: IdempotentRequest| async move {
        write(&tx, &req).await;
        (StatusCode::SEE_OTHER, [(http::header::LOCATION, "/payments/café")]).into_response()
    });
    let app = Router::new().route("/p", handler).layer(layer(&db).build().unwrap());
    let first = send(&app, request("/p", "alice", Some("k-303"), "{}")).await;
    assert_eq!(first.status, StatusCode::SEE_OTHER);
    let again = send(&app, request("/p", "alice", Some("k-303"), "{}")).await;
    assert!(again.replayed());
    assert_eq!(again.status, StatusCode::SEE_OTHER);
    // A UTF-8 header value is replayed byte for byte.
    assert_eq!(again.headers["location"].as_bytes(), "/payments/café".as_bytes());
    assert_eq!(db.effects().await, 1);
}

/// A validation answer before execution began is not stored and not a
/// failure: no row is left for the key; an answer after `began()` whose
/// transaction a failed statement aborted cannot be stored, so the handler's
/// own answer goes out (not a 503), nothing is kept, and the log names the
/// statement that failed.
#[tokio::test]
async fn a_validation_answer_leaves_nothing_and_an_aborted_error_answer_is_passed_on() {
    let db = TestDb::new().await;
    let (logs, _guard) = Logs::capture();
    let handler = post(|tx: WebhookTx, req: IdempotentRequest, body: String| async move {
        if body == "invalid" {
            return (StatusCode::BAD_REQUEST, "invalid").into_response();
        }
        req.began();
        let failed = TxDb::of(&tx).await.unwrap().execute("INSERT INTO effects (no_such_column) VALUES (1)", &[]).await;
        assert!(failed.is_err());
        // An answer the policy stores: a 4xx after `began()` (a 5xx is transient, never stored).
        (StatusCode::CONFLICT, "could not write").into_response()
    });
    let app = Router::new().route("/p", handler).layer(layer(&db).build().unwrap());
    let invalid = send(&app, request("/p", "alice", Some("k-v"), "invalid")).await;
    assert_eq!(invalid.status, StatusCode::BAD_REQUEST);
    assert_eq!(db.events().await, 0, "nothing recorded for a request refused before execution");
    for _ in 0..2 {
        let aborted = send(&app, request("/p", "alice", Some("k-a"), "valid")).await;
        assert_eq!((aborted.status, aborted.body.as_ref()), (StatusCode::CONFLICT, b"could not write".as_ref()));
        assert!(!aborted.replayed());
    }
    assert_eq!(db.scalar("SELECT count(*) FROM webhook_idempotency.webhook_request_keys").await, 0);
    assert!(!logs.lines_with(&["first_failed_statement", "no_such_column", "42703"]).is_empty(), "{}", logs.text());
}

/// Issue 33 item 2: inside `Router::nest("/accounts/{acct}", ..)` the layer
/// sees `/payments` for every account. The fingerprint is taken over the
/// original request target (axum's `OriginalUri`), so one caller's key sent
/// again for another account is another request: refused 422, neither
/// replayed with the first account's payment nor run. The same key, path and
/// body with another `Content-Type` is another request too.
#[tokio::test]
async fn under_router_nest_a_key_sent_for_another_account_is_refused_never_replayed() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let accounts = Router::new().nest("/accounts/{acct}", app(&shared, layer(&db)));
    let first = send(&accounts, request("/accounts/acct_1/payments", "alice", Some("k-nest"), BODY)).await;
    assert_eq!((first.status, first.replayed()), (StatusCode::CREATED, false));
    let other = send(&accounts, request("/accounts/acct_2/payments", "alice", Some("k-nest"), BODY)).await;
    assert!(!other.replayed(), "acct_2 was answered with acct_1's stored payment: {:?}", other.body);
    assert_eq!(other.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(other.problem_title(), "Idempotency-Key is already used");
    // The first account's retry is still its replay.
    let retry = send(&accounts, request("/accounts/acct_1/payments", "alice", Some("k-nest"), BODY)).await;
    assert!(retry.replayed());
    assert_eq!(retry.body, first.body);
    // Each account with its own key runs.
    let own = send(&accounts, request("/accounts/acct_2/payments", "alice", Some("k-nest-2"), BODY)).await;
    assert_eq!((own.status, own.replayed()), (StatusCode::CREATED, false));
    assert_eq!(shared.runs.load(Ordering::SeqCst), 2);

    // The same bytes under another media type are another request.
    let mut form = request("/accounts/acct_1/payments", "alice", Some("k-nest"), BODY);
    form.headers_mut().insert("content-type", "application/x-www-form-urlencoded".parse().unwrap());
    let form = send(&accounts, form).await;
    assert_eq!((form.status, form.replayed()), (StatusCode::UNPROCESSABLE_ENTITY, false));
    assert_eq!(shared.runs.load(Ordering::SeqCst), 2);
    assert_eq!(db.effects().await, 2);
}

/// Breaker of the issue 33 fixes: the fingerprint took the path and the
/// query of the request target but not its authority, so an API that tells
/// accounts apart by host (`acct-1.api.example`, `acct-2.api.example`:
/// per-tenant subdomains) answered one caller's key sent for a second
/// account with the first account's stored payment (`Idempotent-Replayed:
/// true`, the handler not run). The host is in the fingerprint now, from an
/// absolute URI (HTTP/2's `:authority`) or the `Host` header (HTTP/1.1):
/// the second host's request is refused 422, the first host's retry is
/// still its replay, and a host differing only in case is the same host.
#[tokio::test]
async fn a_key_sent_again_for_another_host_is_refused_never_replayed() {
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&runs);
    let handler = post(move |headers: HeaderMap, tx: WebhookTx, req: IdempotentRequest| {
        r.fetch_add(1, Ordering::SeqCst);
        async move {
            let account = headers["host"].to_str().unwrap().split('.').next().unwrap().to_lowercase();
            write(&tx, &req).await;
            (StatusCode::CREATED, format!("{{\"account\":\"{account}\"}}"))
        }
    });
    let app = Router::new().route("/payments", handler).layer(layer(&db).build().unwrap());
    // An absolute URI with its Host (what hyper makes of an HTTP/2
    // request), or the Host header alone (HTTP/1.1's origin form).
    for absolute in [true, false] {
        let key = if absolute { "k-host" } else { "k-host-header" };
        let keyed = |host: &str| {
            let uri = if absolute { format!("http://{host}/payments") } else { "/payments".to_owned() };
            let mut req = request(&uri, "alice", Some(key), BODY);
            req.headers_mut().insert("host", host.parse().unwrap());
            req
        };
        let first = send(&app, keyed("acct-1.api.example")).await;
        assert_eq!((first.status, first.replayed()), (StatusCode::CREATED, false), "absolute {absolute}");
        assert_eq!(first.body, Bytes::from_static(br#"{"account":"acct-1"}"#));
        let other = send(&app, keyed("acct-2.api.example")).await;
        assert!(!other.replayed(), "acct-2 was answered with acct-1's stored payment: {:?}", other.body);
        assert_eq!(other.status, StatusCode::UNPROCESSABLE_ENTITY, "absolute {absolute}");
        let retry = send(&app, keyed("ACCT-1.api.example")).await;
        assert_eq!((retry.status, retry.replayed(), &retry.body), (StatusCode::CREATED, true, &first.body));
    }
    assert_eq!((runs.load(Ordering::SeqCst), db.effects().await), (2, 2));
}

/// Breaker of the issue 33 fixes (held): nested twice (`/orgs/{org}` around
/// `/accounts/{acct}`) and through `Router::nest_service`, the fingerprint
/// still has the whole original path: another account's request with the
/// key is 422, the same one a replay.
#[tokio::test]
async fn nested_twice_or_through_nest_service_the_fingerprint_keeps_the_whole_path() {
    let db = TestDb::new().await;
    let handler = post(|tx: WebhookTx, req: IdempotentRequest| async move {
        write(&tx, &req).await;
        StatusCode::CREATED
    });
    let inner = Router::new().route("/payments", handler).layer(layer(&db).build().unwrap());
    let twice = Router::new().nest("/orgs/{org}", Router::new().nest("/accounts/{acct}", inner.clone()));
    let service = Router::new().nest_service("/svc/{acct}", inner);
    let cases = [
        (&twice, "/orgs/o1/accounts/a1/payments", "/orgs/o1/accounts/a2/payments", "k-twice"),
        (&twice, "/orgs/o1/accounts/a1/payments", "/orgs/o2/accounts/a1/payments", "k-twice-org"),
        (&service, "/svc/a1/payments", "/svc/a2/payments", "k-service"),
    ];
    for (app, first, other, key) in cases {
        assert_eq!(send(app, request(first, "alice", Some(key), "{}")).await.status, StatusCode::CREATED, "{first}");
        let answer = send(app, request(other, "alice", Some(key), "{}")).await;
        assert_eq!((answer.status, answer.replayed()), (StatusCode::UNPROCESSABLE_ENTITY, false), "{other}");
        let again = send(app, request(first, "alice", Some(key), "{}")).await;
        assert_eq!((again.status, again.replayed()), (StatusCode::CREATED, true), "{first} again");
    }
    assert_eq!(db.effects().await, 3);
}

/// Breaker of the issue 33 fixes (held): a response body that fails mid-way
/// (an error, not a panic) while the layer reads it for storing: 500
/// `response-not-stored`, rolled back, the attempt recorded, and the retry
/// runs.
#[tokio::test]
async fn a_response_body_that_fails_midway_is_not_stored_and_the_retry_runs() {
    use futures_util::StreamExt as _;
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&runs);
    let handler = post(move |tx: WebhookTx, req: IdempotentRequest| {
        let run = r.fetch_add(1, Ordering::SeqCst);
        async move {
            write(&tx, &req).await;
            if run > 0 {
                return (StatusCode::CREATED, Body::from("{\"id\":\"pay_1\"}"));
            }
            let chunks = futures_util::stream::iter([Ok(Bytes::from_static(b"{\"id\":"))])
                .chain(futures_util::stream::once(async { Err(std::io::Error::other("upstream reset")) }));
            (StatusCode::CREATED, Body::from_stream(chunks))
        }
    });
    let app = Router::new().route("/payments", handler).layer(layer(&db).build().unwrap());
    let first = send(&app, request("/payments", "alice", Some("k-midway"), "{}")).await;
    assert_eq!(first.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(String::from_utf8_lossy(&first.body).contains("response-not-stored"), "{:?}", first.body);
    assert_eq!(db.effects().await, 0);
    let failed = "SELECT count(*) FROM webhook_idempotency.webhook_events WHERE state = 'failed'";
    assert_eq!(db.scalar(failed).await, 1);
    let retry = send(&app, request("/payments", "alice", Some("k-midway"), "{}")).await;
    assert_eq!((retry.status, retry.replayed()), (StatusCode::CREATED, false));
    assert_eq!((runs.load(Ordering::SeqCst), db.effects().await), (2, 1));
}

/// Issue 33 item 5: a 503 or a 429 answered after `began()` is a transient
/// failure, not the key's result. It is not stored (its writes roll back, the
/// handler's own answer goes out with its `Retry-After`), so the client's
/// retry with the same key runs the handler again, and that run's 201 is
/// stored and replayed.
#[tokio::test]
async fn a_503_or_429_after_began_is_not_stored_and_the_recovered_retry_runs_and_is_replayed() {
    for transient in [StatusCode::SERVICE_UNAVAILABLE, StatusCode::TOO_MANY_REQUESTS] {
        let db = TestDb::new().await;
        let runs = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&runs);
        let handler = post(move |tx: WebhookTx, req: IdempotentRequest| {
            let runs = Arc::clone(&r);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                req.began();
                write(&tx, &req).await;
                if req.attempt() == 1 {
                    // The upstream (a card network) is down, or the caller is throttled.
                    return (transient, [(http::header::RETRY_AFTER, "7")], "try again later").into_response();
                }
                (StatusCode::CREATED, format!("{{\"run\":{}}}", req.attempt())).into_response()
            }
        });
        let app = Router::new().route("/p", handler).layer(layer(&db).build().unwrap());
        let failed = send(&app, request("/p", "alice", Some("k-transient"), BODY)).await;
        assert_eq!(failed.status, transient);
        assert!(!failed.replayed());
        assert_eq!(failed.headers["retry-after"], "7", "{transient}: the handler's own Retry-After goes out");
        assert_eq!(db.effects().await, 0, "{transient}: the failed run's write rolled back");
        let recovered = send(&app, request("/p", "alice", Some("k-transient"), BODY)).await;
        assert!(!recovered.replayed(), "{transient} was stored and replayed to the retry");
        assert_eq!(recovered.status, StatusCode::CREATED, "{transient}");
        assert_eq!(runs.load(Ordering::SeqCst), 2, "{transient}: the retry ran the handler again");
        let replay = send(&app, request("/p", "alice", Some("k-transient"), BODY)).await;
        assert!(replay.replayed());
        assert_eq!((replay.status, &replay.body), (StatusCode::CREATED, &recovered.body));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert_eq!(db.effects().await, 1);
    }
}

/// Issue 33 item 6: outbox rows outlive keys (30 days against 24 hours), and
/// a client may use a key again once it expired. Each claim of a key has its
/// own outbox identity (a claim id in the event key of its effects, and so in
/// their downstream keys): the new request's effect is added and delivered
/// with a downstream key of its own, both while the first request's outbox
/// row is still kept and after it was purged too.
#[tokio::test]
async fn a_key_used_again_after_its_expiry_gets_its_own_outbox_effect_in_both_windows() {
    use webhook_idempotency::outbox::{Effect, EffectContext, EffectResult, Effects, Enqueued, OutboxWorker};
    let db = TestDb::new().await;
    let handler = post(|tx: WebhookTx, req: IdempotentRequest| async move {
        req.began();
        let receipt = Effect::json("send_receipt", serde_json::json!({ "key": req.key() }));
        match tx.enqueue(receipt).await {
            Ok(Enqueued::Added) => (StatusCode::CREATED, "added").into_response(),
            Ok(Enqueued::Duplicate) => (StatusCode::CREATED, "duplicate").into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        }
    });
    let app = Router::new().route("/p", handler).layer(layer(&db).build().unwrap());
    let delivered = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let d = Arc::clone(&delivered);
    let effects = Effects::new().effect("send_receipt", move |ctx: EffectContext| {
        let delivered = Arc::clone(&d);
        async move {
            delivered.lock().unwrap().push(ctx.downstream_key().to_owned());
            EffectResult::delivered()
        }
    });
    let worker =
        OutboxWorker::builder(db.pool.clone(), effects).poll_interval(Duration::from_millis(50)).build().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    let retention = Retention::builder(db.pool.clone()).build().unwrap();
    let all_delivered = |n: usize| {
        let delivered = Arc::clone(&delivered);
        async move { eventually(Duration::from_secs(20), || async { delivered.lock().unwrap().len() == n }).await }
    };

    let first = send(&app, request("/p", "alice", Some("k-reused"), BODY)).await;
    assert_eq!((first.status, first.body.as_ref()), (StatusCode::CREATED, b"added".as_ref()));
    assert!(all_delivered(1).await, "the first request's receipt is delivered");
    assert!(send(&app, request("/p", "alice", Some("k-reused"), BODY)).await.replayed(), "within 24 h: a replay");

    // Window 1: the key expired (purged), its delivered outbox row is kept.
    assert_eq!(retention.purge_older_than(Some(Duration::ZERO)).await.unwrap().deleted, 2);
    assert_eq!(db.scalar("SELECT count(*) FROM webhook_idempotency.webhook_outbox").await, 1);
    let second = send(&app, request("/p", "alice", Some("k-reused"), BODY)).await;
    assert!(!second.replayed());
    assert_eq!(second.body.as_ref(), b"added", "the new request's effect was dropped as the old one's duplicate");
    assert!(all_delivered(2).await, "the second request's receipt is delivered");

    // Window 2: the key and every delivered outbox row purged.
    assert_eq!(retention.purge_older_than(Some(Duration::ZERO)).await.unwrap().deleted, 2);
    assert_eq!(retention.purge_effects_older_than(Some(Duration::ZERO)).await.unwrap().deleted, 2);
    let third = send(&app, request("/p", "alice", Some("k-reused"), BODY)).await;
    assert_eq!((third.status, third.body.as_ref()), (StatusCode::CREATED, b"added".as_ref()));
    assert!(all_delivered(3).await, "the third request's receipt is delivered");
    let _ = stop.send(());
    worker.await.unwrap();

    let keys = delivered.lock().unwrap().clone();
    assert_eq!(keys.len(), 3);
    assert_ne!(keys[0], keys[1], "window 1: the new effect has its own downstream key");
    assert_ne!(keys[0], keys[2], "window 2: the first request's downstream key is not reused");
    assert_ne!(keys[1], keys[2]);
}

/// Breaker of the issue 33 fixes: each claim's effects are stored under
/// `<client key>#<claim id>`, and the admin filters (`Admin::list_effects`,
/// `requeue_effects`, `webhook-admin outbox list|requeue --key`) matched the
/// event key exactly, so the key the operator has (from the client, the
/// request log) found none of its request's effects. For provider
/// `idempotency-key` the key now matches the key followed by `#` and a claim
/// id, exactly: not another key that starts with it, and `%` or `_` in a key
/// are characters, not patterns.
#[tokio::test]
async fn an_idempotency_key_request_s_effects_are_found_by_the_client_s_key() {
    use webhook_idempotency::outbox::Effect;
    use webhook_idempotency::store::admin::{Admin, EffectFilter};
    let db = TestDb::new().await;
    let handler = post(|tx: WebhookTx, req: IdempotentRequest| async move {
        req.began();
        tx.enqueue(Effect::json("send_receipt", serde_json::json!({ "key": req.key() }))).await.unwrap();
        StatusCode::CREATED
    });
    let app = Router::new().route("/payments", handler).layer(layer(&db).build().unwrap());
    let keys = ["k-ops", "k-ops-2", "k-ops#x", "k-%", "k_ops"];
    for key in keys {
        assert_eq!(send(&app, request("/payments", "alice", Some(key), BODY)).await.status, StatusCode::CREATED);
    }
    assert_eq!(db.scalar("SELECT count(*) FROM webhook_idempotency.webhook_outbox").await, keys.len() as i64);
    let admin = Admin::new(db.pool.clone()).unwrap();
    let by_key = |key: &str| EffectFilter {
        provider: Some(PROVIDER.to_owned()),
        scope: Some("alice".to_owned()),
        key: Some(key.to_owned()),
        effect: None,
    };
    for key in keys {
        let found = admin.list_effects("pending", &by_key(key), 10).await.unwrap();
        let found: Vec<&str> = found.iter().map(|e| e.id.key.as_str()).collect();
        assert_eq!(found.len(), 1, "{key}: {found:?}");
        assert!(found[0].starts_with(&format!("{key}#")) && found[0].len() == key.len() + 33, "{key}: {found:?}");
    }
    // The stored key still matches itself; another provider's key is exact.
    let stored = admin.list_effects("pending", &by_key("k-ops"), 10).await.unwrap().remove(0).id.key;
    assert_eq!(admin.list_effects("pending", &by_key(&stored), 10).await.unwrap().len(), 1);
    let other = EffectFilter { provider: Some("stripe".to_owned()), ..by_key("k-ops") };
    assert!(admin.list_effects("pending", &other, 10).await.unwrap().is_empty());
    // Requeue finds them by the key too.
    db.execute("UPDATE webhook_idempotency.webhook_outbox SET state = 'dead', run_at = NULL").await;
    assert_eq!(admin.requeue_effects(&by_key("k-ops"), false, "ops").await.unwrap(), 1);
}

/// Issue 33 item 5: a transient status is stored when the handler marks its
/// answer final (`mark_final`: the outcome of an external call is unknown and
/// running the request again must not happen): committed with its writes and
/// replayed, the handler not run again.
#[tokio::test]
async fn a_5xx_the_handler_marks_final_is_stored_and_replayed() {
    let db = TestDb::new().await;
    let shared = Shared::default();
    let s = shared.clone();
    let handler = post(move |tx: WebhookTx, req: IdempotentRequest, body: Bytes| {
        let s = s.clone();
        async move {
            let _ = create(tx, req.clone(), &s, &body).await;
            req.mark_final();
            (StatusCode::BAD_GATEWAY, "the card network did not answer; see the payment's status").into_response()
        }
    });
    let app = Router::new().route("/p", handler).layer(layer(&db).build().unwrap());
    let first = send(&app, request("/p", "alice", Some("k-final"), BODY)).await;
    assert_eq!((first.status, first.replayed()), (StatusCode::BAD_GATEWAY, false));
    let again = send(&app, request("/p", "alice", Some("k-final"), BODY)).await;
    assert_eq!((again.status, again.replayed()), (StatusCode::BAD_GATEWAY, true));
    assert_eq!(again.body, first.body);
    assert_eq!(shared.runs.load(Ordering::SeqCst), 1);
    assert_eq!(db.effects().await, 1, "a stored answer commits with the writes before it");
}

/// Issue 33 item 3: a body that stops arriving is answered 408 once
/// `body_timeout` passed (before, the request waited for ever, holding its
/// connection and buffer); nothing is claimed and the handler does not run.
/// The same key with the whole body then runs.
#[tokio::test]
async fn a_body_slower_than_body_timeout_is_answered_408_and_nothing_is_claimed() {
    use futures_util::StreamExt as _;
    let db = TestDb::new().await;
    let shared = Shared::default();
    let app = app(&shared, layer(&db).body_timeout(Duration::from_millis(300)));
    let stalled = futures_util::stream::once(async { Ok::<_, std::io::Error>(Bytes::from_static(b"{\"amount\":")) })
        .chain(futures_util::stream::pending());
    let req = Request::post("/payments")
        .header("x-caller", "alice")
        .header("idempotency-key", "k-slow")
        .header("content-type", "application/json")
        .body(Body::from_stream(stalled))
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(20), send(&app, req)).await.expect("answered, not held");
    assert_eq!(answer.status, StatusCode::REQUEST_TIMEOUT);
    assert_eq!(answer.problem_title(), "Request body timeout");
    assert_eq!(shared.runs.load(Ordering::SeqCst), 0);
    assert_eq!(db.events().await, 0, "nothing claimed");
    let whole = send(&app, request("/payments", "alice", Some("k-slow"), BODY)).await;
    assert_eq!((whole.status, whole.replayed()), (StatusCode::CREATED, false));
}

/// Issue 33 item 4: a response header that carries a credential or a session
/// is replayed only when allowed explicitly: `replay_headers` naming one is
/// refused at build; with `allow_credential_replay_headers` it is stored and
/// replayed.
#[tokio::test]
async fn credential_headers_are_replayed_only_when_explicitly_allowed() {
    use http::header::{HeaderName, CONTENT_TYPE, SET_COOKIE};
    use webhook_idempotency::ConfigErrorKind;
    let db = TestDb::new().await;
    for name in ["set-cookie", "authorization", "proxy-authorization", "www-authenticate", "proxy-authenticate"] {
        let header = HeaderName::from_static(name);
        let refused = layer(&db).replay_headers([CONTENT_TYPE, header.clone()]).build();
        let error = refused.expect_err(name);
        assert_eq!(error.kind(), ConfigErrorKind::CredentialReplayHeader, "{name}");
        assert!(error.to_string().contains(name), "{error}");
        // Allowing another credential header does not allow this one.
        let other = if name == "set-cookie" { http::header::AUTHORIZATION } else { SET_COOKIE };
        let refused = layer(&db).replay_headers([header.clone()]).allow_credential_replay_headers([other]).build();
        assert!(refused.is_err(), "{name}");
    }
    let handler = post(|tx: WebhookTx, req: IdempotentRequest| async move {
        write(&tx, &req).await;
        (StatusCode::CREATED, [(SET_COOKIE, "theme=dark; Path=/")], "{}").into_response()
    });
    let allowed = layer(&db).replay_headers([CONTENT_TYPE, SET_COOKIE]).allow_credential_replay_headers([SET_COOKIE]);
    let app = Router::new().route("/p", handler.clone()).layer(allowed.build().unwrap());
    assert_eq!(send(&app, request("/p", "alice", Some("k-cookie"), "{}")).await.status, StatusCode::CREATED);
    let replay = send(&app, request("/p", "alice", Some("k-cookie"), "{}")).await;
    assert!(replay.replayed());
    assert_eq!(replay.headers["set-cookie"], "theme=dark; Path=/");
    // By default it is neither stored nor replayed.
    let app = Router::new().route("/p", handler).layer(layer(&db).build().unwrap());
    assert_eq!(send(&app, request("/p", "bob", Some("k-cookie"), "{}")).await.status, StatusCode::CREATED);
    let replay = send(&app, request("/p", "bob", Some("k-cookie"), "{}")).await;
    assert!(replay.replayed());
    assert!(replay.headers.get("set-cookie").is_none());
    let stored = "SELECT count(*) FROM webhook_idempotency.webhook_request_keys
                   WHERE scope = 'bob' AND 'set-cookie' = ANY(response_headers)";
    assert_eq!(db.scalar(stored).await, 0);
}

/// SECURITY.md's per-key storage cost (issue 33 item 7): 1,000 keys stored
/// through the layer, each with a payment-sized 201 (about 550 bytes of JSON
/// with `Content-Type` and `Location`), a UUID key and a 20-byte caller
/// scope, measured as the growth of the key's two tables (`webhook_events`
/// and `webhook_request_keys`: heap, indexes and TOAST, from
/// `pg_total_relation_size`, before any vacuum) divided by the keys. The
/// request body is not stored, only its digest in the fingerprint.
#[tokio::test]
async fn a_stored_key_costs_under_2_kib_with_a_payment_sized_response() {
    const KEYS: usize = 1_000;
    const TASKS: usize = 8;
    let db = TestDb::new().await;
    let handler = post(|req: IdempotentRequest, _tx: WebhookTx| async move {
        let id = format!("pay_{}", req.key().replace('-', ""));
        let payment = serde_json::json!({
            "id": id, "object": "payment", "amount": 125_000, "currency": "eur", "status": "succeeded",
            "created": 1_767_225_600, "customer": "cus_9s6XKzkNRiz8i3", "payment_method": "pm_1QHj9tLkdIwHu7ix",
            "description": "Order 4711, 3 items", "receipt_email": "jenny.rosen@example.com",
            "statement_descriptor": "EXAMPLE SHOP", "livemode": false,
            "metadata": { "order_id": "ord_4711", "cart": "crt_8fd0a2c4", "channel": "mobile-ios" },
            "links": { "self": format!("/payments/{id}"), "refunds": format!("/payments/{id}/refunds") },
        });
        let location = format!("/payments/{id}");
        (StatusCode::CREATED, [(http::header::LOCATION, location)], axum::Json(payment)).into_response()
    });
    let app = Router::new().route("/payments", handler).layer(layer(&db).build().unwrap());
    let events = "SELECT pg_total_relation_size('webhook_idempotency.webhook_events')";
    let keys = "SELECT pg_total_relation_size('webhook_idempotency.webhook_request_keys')";
    let before = (db.scalar(events).await, db.scalar(keys).await);
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let app = app.clone();
            tokio::spawn(async move {
                let mut response_bytes = 0;
                for i in (t..KEYS).step_by(TASKS) {
                    let key = format!("{:08x}-40d5-43e8-bc93-{:012x}", i, i * 7919);
                    let answer = send(&app, request("/payments", "key_3f9a1c2b7d4e5f60", Some(&key), BODY)).await;
                    assert_eq!(answer.status, StatusCode::CREATED);
                    response_bytes += answer.body.len();
                }
                response_bytes
            })
        })
        .collect();
    let mut response_bytes = 0;
    for task in tasks {
        response_bytes += task.await.unwrap();
    }
    let grown = (db.scalar(events).await - before.0, db.scalar(keys).await - before.1);
    let per_key = (grown.0 + grown.1) as usize / KEYS;
    println!(
        "{KEYS} stored keys with {}-byte responses: webhook_events grew by {} bytes, webhook_request_keys by {} \
         bytes: {per_key} bytes per key",
        response_bytes / KEYS,
        grown.0,
        grown.1
    );
    assert_eq!(db.scalar("SELECT count(*) FROM webhook_idempotency.webhook_request_keys").await, KEYS as i64);
    assert!((500..=700).contains(&(response_bytes / KEYS)), "a payment-sized response: {}", response_bytes / KEYS);
    // SECURITY.md states the figure; a key that costs more (the request body
    // stored, a wider index) fails here.
    assert!(per_key <= 2_048, "{per_key} bytes per stored key");
}
