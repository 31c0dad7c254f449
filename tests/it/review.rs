//! Inputs from a break-it review: each finding is a test of the fixed
//! behaviour; the others are attacks that held.

use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;
use ::tower::ServiceExt;
use axum::body::Body;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http::{Request, StatusCode};
use tokio::sync::Notify;
use webhook_idempotency::inbox::InboxWorker;
use webhook_idempotency::key::HeaderKey;
use webhook_idempotency::providers::github;
use webhook_idempotency::verify::{Delivery, VerifyError, VerifyErrorKind};
use webhook_idempotency::worker::RetryPolicy;
use webhook_idempotency::{Mode, Provider, SigningSecret, WebhookEvent, WebhookTx};

const EVENTS: &str = "webhook_idempotency.webhook_events";

use crate::inbox::{accept, accepting_app, spawn_worker, stuck_router};

fn fast_policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::attempts(Duration::from_millis(10), Duration::from_millis(20), max_attempts)
}

// ---------------------------------------------------------------------------
// Inbox mode
// ---------------------------------------------------------------------------

/// A 3 MiB delivery (under the layer's 25 MiB limit, over axum's 2 MB
/// default) reaches a `Bytes` extractor in the inbox worker as it does in
/// synchronous mode (it went `dead` on 413s before).
#[tokio::test]
async fn inbox_body_over_axums_default_limit_is_processed() {
    let db = TestDb::new().await;
    let pad = "a".repeat(3 * 1024 * 1024);
    let body = |id: &str| format!("{{\"id\":\"{id}\",\"object\":\"event\",\"type\":\"big\",\"pad\":\"{pad}\"}}");
    let handler = |tx: WebhookTx, event: WebhookEvent, _raw: Bytes| async move { apply_effect(tx, event).await };
    let handlers = Router::new().route("/webhooks/stripe", post(handler));

    // Sync mode: the same handler gets the body.
    let sync = handlers.clone().route_layer(stripe_layer(db.pool.clone()).build().unwrap());
    assert_eq!(sync.oneshot(stripe_request(body("evt_big_sync"))).await.unwrap().status(), StatusCode::OK);
    assert_eq!(db.effects_for("evt_big_sync").await, 1);

    // Inbox mode: acknowledged...
    let app = handlers.clone().route_layer(stripe_layer(db.pool.clone()).mode(Mode::Inbox).build().unwrap());
    assert_eq!(app.oneshot(stripe_request(body("evt_big_inbox"))).await.unwrap().status(), StatusCode::OK);
    // ...and the worker hands the handler the whole body.
    let worker = InboxWorker::builder(db.pool(4), handlers)
        .poll_interval(Duration::from_millis(50))
        .retry(fast_policy(3))
        .build()
        .unwrap();
    let (stop, task) = spawn_worker(worker);
    let done = eventually(Duration::from_secs(20), || async {
        db.event_row("evt_big_inbox").await.map(|r| r.0) == Some("done".into())
    })
    .await;
    let _ = stop.send(());
    task.await.unwrap();
    assert!(done, "the acknowledged event was processed");
    assert_eq!(db.event_row("evt_big_inbox").await, Some(("done".into(), 1, Some(200))));
    assert_eq!(db.effects_for("evt_big_inbox").await, 1);
}

/// A row whose handler takes its worker down on every run (crash, OOM kill,
/// abort) goes `dead` once its lease expires after the last allowed run,
/// instead of crash-looping every worker.
#[tokio::test]
async fn inbox_an_event_that_kills_its_worker_goes_dead_after_max_attempts() {
    let db = TestDb::new().await;
    let app = accepting_app(db.pool.clone());
    assert_eq!(accept(&app, "evt_crash").await.0, StatusCode::OK);
    for _ in 0..2 {
        let entered = Arc::new(Notify::new());
        let worker = InboxWorker::builder(db.pool(2), stuck_router(Arc::clone(&entered)))
            .poll_interval(Duration::from_millis(50))
            .lease(Duration::from_secs(1))
            .retry(fast_policy(2))
            .build()
            .unwrap();
        let (_stop, task) = spawn_worker(worker);
        tokio::time::timeout(Duration::from_secs(10), entered.notified()).await.expect("leased again");
        task.abort(); // the worker dies mid-handler
        let _ = task.await;
    }
    // A third worker finds the row past its attempts once the lease expires.
    let runs = Arc::new(AtomicUsize::new(0));
    let counting = {
        let runs = Arc::clone(&runs);
        Router::new().route(
            "/webhooks/stripe",
            post(move |tx: WebhookTx, event: WebhookEvent| {
                runs.fetch_add(1, Ordering::SeqCst);
                apply_effect(tx, event)
            }),
        )
    };
    let worker = InboxWorker::builder(db.pool(2), counting)
        .poll_interval(Duration::from_millis(50))
        .retry(fast_policy(2))
        .build()
        .unwrap();
    let (stop, task) = spawn_worker(worker);
    assert!(
        eventually(Duration::from_secs(10), || async {
            db.event_row("evt_crash").await.map(|r| (r.0, r.1)) == Some(("dead".into(), 2))
        })
        .await
    );
    let _ = stop.send(());
    task.await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 0, "not run a third time");
    assert_eq!(db.effects_for("evt_crash").await, 0);
}

/// A worker whose heartbeat finds its lease gone stops the handler and rolls
/// its work back (the handler ran on in its own task before).
#[tokio::test]
async fn inbox_lease_lost_stops_the_handler() {
    let (logs, _guard) = Logs::capture();
    let db = TestDb::new().await;
    let app = accepting_app(db.pool.clone());
    assert_eq!(accept(&app, "evt_lost").await.0, StatusCode::OK);
    let (entered, release, after) = (Arc::new(Notify::new()), Arc::new(Notify::new()), Arc::new(AtomicUsize::new(0)));
    let handlers = {
        let (entered, release, after) = (Arc::clone(&entered), Arc::clone(&release), Arc::clone(&after));
        Router::new().route(
            "/webhooks/stripe",
            post(move |tx: WebhookTx, event: WebhookEvent| {
                let (entered, release, after) = (Arc::clone(&entered), Arc::clone(&release), Arc::clone(&after));
                async move {
                    insert_effect(&tx, &event).await.unwrap();
                    entered.notify_one();
                    release.notified().await; // e.g. an external call
                    after.fetch_add(1, Ordering::SeqCst); // e.g. an e-mail sent
                                                          // The transaction is still usable here, after the lease was lost.
                    insert_effect(&tx, &event).await.unwrap();
                    StatusCode::OK
                }
            }),
        )
    };
    let worker = InboxWorker::builder(db.pool(4), handlers)
        .poll_interval(Duration::from_millis(50))
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let (stop, task) = spawn_worker(worker);
    entered.notified().await;
    // Another worker takes the row over (as after an expiry).
    db.pool
        .get()
        .await
        .unwrap()
        .execute(
            &format!(
                "UPDATE {EVENTS} SET lease_token = gen_random_uuid(), locked_until = now() + interval '1 hour'
                  WHERE event_key = 'evt_lost'"
            ),
            &[],
        )
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || async { !logs.lines_with(&["lease_lost"]).is_empty() }).await,
        "the worker noticed the lost lease"
    );
    // The handler was stopped with its run: its transaction is gone...
    assert!(eventually(Duration::from_secs(5), || async { db.idle_in_transaction().await == 0 }).await);
    // ...and it does not go on after the worker gave the row up.
    release.notify_one();
    let _ = stop.send(());
    task.await.unwrap();
    assert_eq!(after.load(Ordering::SeqCst), 0, "the handler did not run on");
    assert_eq!(db.effects_for("evt_lost").await, 0, "its writes rolled back");
}

/// A synchronous-mode event whose handler failed leaves a `failed` row. After
/// the route switches to inbox mode (or during a rolling deploy), the
/// provider's retry is taken over by the inbox and processed once (it was
/// acknowledged as a duplicate and lost before).
#[tokio::test]
async fn switching_to_inbox_mode_takes_over_a_failed_event() {
    let db = TestDb::new().await;
    let failing = Router::new().route(
        "/webhooks/stripe",
        post(|| async { StatusCode::INTERNAL_SERVER_ERROR }).layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    let res = failing.oneshot(stripe_request(stripe_body("evt_switch"))).await.unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(db.event_row("evt_switch").await, Some(("failed".into(), 1, Some(500))));

    let app = accepting_app(db.pool.clone());
    assert_eq!(accept(&app, "evt_switch").await, (StatusCode::OK, false), "accepted, not a duplicate");
    let worker = InboxWorker::builder(db.pool(4), Router::new().route("/webhooks/stripe", post(apply_effect)))
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let (stop, task) = spawn_worker(worker);
    assert!(
        eventually(Duration::from_secs(10), || async { db.effects_for("evt_switch").await == 1 }).await,
        "processed"
    );
    let _ = stop.send(());
    task.await.unwrap();
    assert_eq!(db.event_row("evt_switch").await.map(|r| r.0), Some("done".into()));
}

/// A schema name of 58 to 63 bytes works in inbox mode too: the NOTIFY
/// channel is a short digest of it (it was `<schema>_inbox`, over
/// PostgreSQL's 63-byte limit, and every delivery was 503).
#[tokio::test]
async fn inbox_with_a_long_schema_name_accepts() {
    let (logs, _guard) = Logs::capture();
    let db = TestDb::new().await;
    let schema = "s".repeat(60);
    let in_schema = StoreConfig::from(db.pool.clone()).schema(schema.clone());
    webhook_idempotency::migrate(&in_schema).await.unwrap();
    webhook_idempotency::store::check_schema(&in_schema).await.unwrap();
    let sync = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect)
            .layer(stripe_layer(StoreConfig::from(db.pool.clone()).schema(schema.clone())).build().unwrap()),
    );
    assert_eq!(sync.oneshot(stripe_request(stripe_body("evt_long1"))).await.unwrap().status(), StatusCode::OK);
    let inbox = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect).layer(
            stripe_layer(StoreConfig::from(db.pool.clone()).schema(schema.clone())).mode(Mode::Inbox).build().unwrap(),
        ),
    );
    for id in ["evt_long2", "evt_long3"] {
        let res = inbox.clone().oneshot(stripe_request(stripe_body(id))).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{id}");
    }
    assert!(logs.lines_with(&["inbox: the delivery could not be stored"]).is_empty(), "{}", logs.text());
}

/// A custom scheme whose credential travels in its own header (GitLab's
/// `X-Gitlab-Token` is the shared secret itself) names it with
/// `inbox_drop_header`, and the secret is not stored (it was, in clear). The
/// URI is stored whole: the docs say not to put credentials in the query.
#[tokio::test]
async fn inbox_does_not_store_a_secret_header_it_is_told_to_drop() {
    let db = TestDb::new().await;
    let secret = "gl-shared-secret-0123456789";
    let provider = Provider::new(
        "gitlab",
        |d: &Delivery<'_>| {
            let got = d.parts.headers.get("x-gitlab-token").ok_or(VerifyError::new(VerifyErrorKind::MissingHeader))?;
            if d.require_secrets()?.iter().any(|s| s.expose() == got.as_bytes()) {
                Ok(())
            } else {
                Err(VerifyError::new(VerifyErrorKind::NoMatchingSignature))
            }
        },
        HeaderKey::new(http::HeaderName::from_static("x-gitlab-event-uuid")),
    )
    // A custom provider declares the headers its handler reads (the keep-list);
    // a dropped header stays out even when declared.
    .reads_headers([
        http::HeaderName::from_static("x-gitlab-event-uuid"),
        http::HeaderName::from_static("x-gitlab-token"),
    ]);
    let layer = webhook_idempotency::WebhookLayer::builder(db.pool.clone(), provider)
        .scope("g")
        .secret(secret)
        .mode(Mode::Inbox)
        .inbox_drop_header(http::HeaderName::from_static("x-gitlab-token"))
        .build()
        .unwrap();
    let app = Router::new().route("/webhooks/gitlab", post(|| async { StatusCode::OK }).layer(layer));
    let req = Request::post("/webhooks/gitlab?token=q-secret-42")
        .header("x-gitlab-token", secret)
        .header("x-gitlab-event-uuid", "uuid-1")
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(app.oneshot(req).await.unwrap().status(), StatusCode::OK);
    let head = db.scalar_text(&format!("SELECT request_head::text FROM {EVENTS} WHERE event_key = 'uuid-1'")).await;
    assert!(!head.contains(secret), "the shared secret is not stored: {head}");
    assert!(head.contains("x-gitlab-event-uuid"), "other headers are: {head}");
}

/// Held: duplicates while pending / running / done are 200 replayed, and
/// the operator-replay header is neither stored nor handed on.
#[tokio::test]
async fn inbox_stored_head_has_no_signature_or_replay_token() {
    let db = TestDb::new().await;
    let layer = stripe_layer(db.pool.clone())
        .mode(Mode::Inbox)
        .operator_replay(http::HeaderName::from_static("x-ops-replay"), "ops-token-0123456789")
        .build()
        .unwrap();
    let app = Router::new().route("/webhooks/stripe", post(|| async { StatusCode::OK }).layer(layer));
    let mut req = stripe_request(stripe_body("evt_head"));
    req.headers_mut().insert("x-ops-replay", "ops-token-0123456789".parse().unwrap());
    req.headers_mut().append("x-ops-replay", "other".parse().unwrap());
    assert_eq!(app.oneshot(req).await.unwrap().status(), StatusCode::OK);
    let head = db.scalar_text(&format!("SELECT request_head::text FROM {EVENTS} WHERE event_key = 'evt_head'")).await;
    assert!(
        !head.contains("stripe-signature") && !head.contains("ops-token") && !head.contains("x-ops-replay"),
        "{head}"
    );
}

// ---------------------------------------------------------------------------
// Sync mode: the claim
// ---------------------------------------------------------------------------

/// Held: 20 concurrent deliveries of an event whose row is `failed` run the
/// handler once; no 5xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_row_is_reclaimed_once_by_concurrent_deliveries() {
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = {
        let runs = Arc::clone(&runs);
        move |tx: WebhookTx, event: WebhookEvent| {
            let runs = Arc::clone(&runs);
            async move {
                if event.attempt() == 1 {
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                runs.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                apply_effect(tx, event).await
            }
        }
    };
    let app = Router::new().route("/webhooks/stripe", post(handler).layer(stripe_layer(db.pool(8)).build().unwrap()));
    let first = app.clone().oneshot(stripe_request(stripe_body("evt_refail"))).await.unwrap();
    assert_eq!(first.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let copies = (0..20).map(|_| {
        let app = app.clone();
        tokio::spawn(async move { app.oneshot(stripe_request(stripe_body("evt_refail"))).await.unwrap().status() })
    });
    let mut statuses = Vec::new();
    for c in copies.collect::<Vec<_>>() {
        statuses.push(c.await.unwrap());
    }
    assert!(statuses.iter().all(|s| *s == StatusCode::OK || *s == StatusCode::CONFLICT), "{statuses:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(db.effects_for("evt_refail").await, 1);
    assert_eq!(db.event_row("evt_refail").await.map(|r| (r.0, r.1)), Some(("done".into(), 2)));
}

/// Held: the handler sees the session's own `lock_timeout` (set per
/// database here), in both statement modes, and 1 ms never leaks into the
/// pooled session after claims, duplicates, in-flight checks or failures.
#[tokio::test]
async fn the_sessions_lock_timeout_survives_the_claim_and_does_not_leak() {
    let db = TestDb::new().await;
    db.pool
        .get()
        .await
        .unwrap()
        .batch_execute(&format!("ALTER DATABASE {} SET lock_timeout = '3s'", db.name))
        .await
        .unwrap();
    for pooler in [false, true] {
        let pool = db.pool(1);
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let handler = {
            let seen = Arc::clone(&seen);
            move |tx: WebhookTx, event: WebhookEvent| {
                let seen = Arc::clone(&seen);
                async move {
                    {
                        let v: String = TxDb::of(&tx).await.unwrap().scalar("SHOW lock_timeout", &[]).await.unwrap();
                        seen.lock().unwrap().push(v);
                    }
                    if event.key().ends_with("fail") {
                        return StatusCode::INTERNAL_SERVER_ERROR;
                    }
                    apply_effect(tx, event).await
                }
            }
        };
        let layer = stripe_layer(StoreConfig::from(pool.clone()).transaction_pooler(pooler)).build().unwrap();
        let app = Router::new().route("/webhooks/stripe", post(handler).layer(layer));
        for id in ["evt_lt_a", "evt_lt_a", "evt_lt_fail", "evt_lt_fail", "evt_lt_b"] {
            let id = format!("{id}_{pooler}");
            let _ = app.clone().oneshot(stripe_request(stripe_body(&id))).await.unwrap();
            let v: String = pool.get().await.unwrap().query_one("SHOW lock_timeout", &[]).await.unwrap().get(0);
            assert_eq!(v, "3s", "pooled session after {id}");
        }
        assert!(seen.lock().unwrap().iter().all(|v| v == "3s"), "handler saw {:?}", seen.lock().unwrap());
    }
}

/// Documented limit: a duplicate needs a pooled connection for its check.
/// With every connection held by first deliveries' handlers (a pool of 1), it
/// is answered 503 + `Retry-After` after `pool_timeout` (README, "What the
/// sender sees").
#[tokio::test]
async fn a_duplicate_with_the_pool_held_by_the_first_delivery_is_503() {
    let db = TestDb::new().await;
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let handler = {
        let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
        move |tx: WebhookTx, event: WebhookEvent| {
            let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
            async move {
                entered.notify_one();
                release.notified().await;
                apply_effect(tx, event).await
            }
        }
    };
    let layer = stripe_layer(StoreConfig::from(db.pool(1)).pool_timeout(Duration::from_millis(300)))
        .lock_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let app = Router::new().route("/webhooks/stripe", post(handler).layer(layer));
    let first = tokio::spawn(app.clone().oneshot(stripe_request(stripe_body("evt_p1"))));
    entered.notified().await;
    let dup = app.clone().oneshot(stripe_request(stripe_body("evt_p1"))).await.unwrap();
    assert_eq!(dup.status(), StatusCode::SERVICE_UNAVAILABLE, "a duplicate answered 5xx");
    release.notify_one();
    assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(db.effects_for("evt_p1").await, 1);
}

/// Held: 30 copies of an in-flight event on a pool of 2 (one held by the
/// slow first handler for 1.5 s) all answer 200 replayed once it commits; one
/// effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_in_flight_duplicates_on_a_pool_of_two() {
    let db = TestDb::new().await;
    let entered = Arc::new(Notify::new());
    let handler = {
        let entered = Arc::clone(&entered);
        move |tx: WebhookTx, event: WebhookEvent| {
            let entered = Arc::clone(&entered);
            async move {
                entered.notify_one();
                tokio::time::sleep(Duration::from_millis(1500)).await;
                apply_effect(tx, event).await
            }
        }
    };
    let app = Router::new().route("/webhooks/stripe", post(handler).layer(stripe_layer(db.pool(2)).build().unwrap()));
    let first = tokio::spawn(app.clone().oneshot(stripe_request(stripe_body("evt_many"))));
    entered.notified().await;
    let t = Instant::now();
    let copies: Vec<_> = (0..30)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let r = app.oneshot(stripe_request(stripe_body("evt_many"))).await.unwrap();
                (r.status(), r.headers().contains_key("idempotent-replayed"))
            })
        })
        .collect();
    let mut answers = Vec::new();
    for c in copies {
        answers.push(c.await.unwrap());
    }
    assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
    println!("30 duplicates answered in {:?}", t.elapsed());
    assert!(answers.iter().all(|a| *a == (StatusCode::OK, true)), "{answers:?}");
    assert_eq!(db.effects_for("evt_many").await, 1);
}

/// Held: a task the handler spawned still holding the transaction when the
/// handler answers 200 makes the layer answer 500 (never 2xx); the task's
/// later write is rolled back; nothing stays stuck; the retry processes once.
#[tokio::test]
async fn a_spawned_task_holding_the_tx_is_never_a_2xx() {
    let db = TestDb::new().await;
    let written = Arc::new(Notify::new());
    let handler = {
        let written = Arc::clone(&written);
        move |tx: WebhookTx, event: WebhookEvent| {
            let written = Arc::clone(&written);
            async move {
                let mut client = TxDb::of(&tx).await.unwrap();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(300)).await; // outlives the handler
                    let _ = client
                        .execute(
                            "INSERT INTO effects (scope, event_key) VALUES ($1, $2)",
                            &[event.scope().into(), event.key().into()],
                        )
                        .await;
                    drop(client); // the connection closes: PostgreSQL rolls back
                    written.notify_one();
                });
                StatusCode::OK
            }
        }
    };
    let app =
        Router::new().route("/webhooks/stripe", post(handler).layer(stripe_layer(db.pool.clone()).build().unwrap()));
    let res = app.clone().oneshot(stripe_request(stripe_body("evt_spawn"))).await.unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    tokio::time::timeout(Duration::from_secs(10), written.notified()).await.expect("the task finished");
    assert!(eventually(Duration::from_secs(10), || async { db.idle_in_transaction().await == 0 }).await);
    assert_eq!(db.effects_for("evt_spawn").await, 0);
    let ok = Router::new()
        .route("/webhooks/stripe", post(apply_effect).layer(stripe_layer(db.pool.clone()).build().unwrap()));
    assert_eq!(ok.oneshot(stripe_request(stripe_body("evt_spawn"))).await.unwrap().status(), StatusCode::OK);
    assert_eq!(db.effects_for("evt_spawn").await, 1);
}

// ---------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// A multi-member gzip body (RFC 1952 allows several members) is decoded
/// whole, and bytes after the last member that are not a member are refused
/// (only the first member was decoded, and trailing bytes ignored, before).
#[tokio::test]
async fn gzip_multi_member_and_trailing_bytes() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/github",
        post(apply_effect).layer(github_layer(db.pool.clone()).gzip(1 << 20).build().unwrap()),
    );
    let secret = SigningSecret::from(GITHUB_SECRET);
    let req = |delivery: &str, body: Vec<u8>, signed_over: &[u8]| {
        Request::post("/webhooks/github")
            .header("x-github-event", "push")
            .header("x-github-delivery", delivery)
            .header("content-encoding", "gzip")
            .header("x-hub-signature-256", github::FACTS.sign(&secret, 0, signed_over))
            .body(Body::from(body))
            .unwrap()
    };
    let (a, b) = (b"{\"part\":1,".as_slice(), b"\"more\":2}\n".as_slice());
    let whole = [a, b].concat();
    let multi = [gzip(a), gzip(b)].concat();
    let res = app.clone().oneshot(req("gz-multi", multi, &whole)).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK, "a valid two-member gzip body is decoded whole");
    let mut trailing = gzip(&whole);
    trailing.extend_from_slice(b"\x00garbage that is never looked at");
    let res = app.clone().oneshot(req("gz-trail", trailing, &whole)).await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST, "trailing bytes after the member are refused");
}

// ---------------------------------------------------------------------------
// Retention
// ---------------------------------------------------------------------------

/// Held: a purge deletes only old `done`/`failed` rows; a `failed` row being
/// re-claimed right now (locked) is skipped, and done afterwards is kept.
#[tokio::test]
async fn retention_spares_live_states_and_a_row_being_reclaimed() {
    let db = TestDb::new().await;
    let c = db.pool.get().await.unwrap();
    for (key, state) in [
        ("r_p", "pending"),
        ("r_r", "running"),
        ("r_x", "dead"),
        ("r_d", "done"),
        ("r_f", "failed"),
        ("r_busy", "failed"),
    ] {
        c.execute(
            &format!(
                "INSERT INTO {EVENTS} (scope, provider, event_key, state, received_at)
                 VALUES ('acct_test', 'stripe', $1, $2, now() - interval '40 days')"
            ),
            &[&key, &state],
        )
        .await
        .unwrap();
    }
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let handler = {
        let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
        move |tx: WebhookTx, event: WebhookEvent| {
            let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
            async move {
                entered.notify_one();
                release.notified().await;
                apply_effect(tx, event).await
            }
        }
    };
    let app =
        Router::new().route("/webhooks/stripe", post(handler).layer(stripe_layer(db.pool.clone()).build().unwrap()));
    let busy = tokio::spawn(app.clone().oneshot(stripe_request(stripe_body("r_busy"))));
    entered.notified().await;
    let report = webhook_idempotency::store::retention::Retention::builder(db.pool.clone())
        .build()
        .unwrap()
        .purge()
        .await
        .unwrap();
    assert_eq!(report.deleted, 2, "r_d and r_f only");
    release.notify_one();
    assert_eq!(busy.await.unwrap().unwrap().status(), StatusCode::OK);
    let left: Vec<String> = c
        .query(&format!("SELECT event_key FROM {EVENTS} ORDER BY 1"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(left, ["r_busy", "r_p", "r_r", "r_x"]);
}

/// A handler that sends `ROLLBACK` itself and answers 200: caught in
/// synchronous mode (503, `failed`) and now in inbox mode too (the row was
/// marked `done` without its writes before).
#[tokio::test]
async fn inbox_handler_that_rolls_back_itself_is_never_done_without_its_writes() {
    let db = TestDb::new().await;
    let handler = |tx: WebhookTx, event: WebhookEvent| async move {
        insert_effect(&tx, &event).await.unwrap();
        // Around the crate's detection, as `TxClient::raw` and `SqlxTx::raw` allow.
        TxDb::of(&tx).await.unwrap().raw_batch("ROLLBACK").await.unwrap();
        StatusCode::OK
    };
    // Sync mode: caught.
    let sync =
        Router::new().route("/webhooks/stripe", post(handler).layer(stripe_layer(db.pool.clone()).build().unwrap()));
    let res = sync.oneshot(stripe_request(stripe_body("evt_rb_sync"))).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(db.event_row("evt_rb_sync").await.map(|r| r.0), Some("failed".into()));
    // Inbox mode: the completion is fenced on the work's transaction too.
    let app = accepting_app(db.pool.clone());
    assert_eq!(accept(&app, "evt_rb_inbox").await.0, StatusCode::OK);
    let worker = InboxWorker::builder(db.pool(4), Router::new().route("/webhooks/stripe", post(handler)))
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let (stop, task) = spawn_worker(worker);
    let failed_once = eventually(Duration::from_secs(10), || async {
        db.scalar_text(&format!("SELECT coalesce(last_error, '') FROM {EVENTS} WHERE event_key = 'evt_rb_inbox'"))
            .await
            .contains("not this lease's")
    })
    .await;
    let _ = stop.send(());
    task.await.unwrap();
    assert!(failed_once, "the run is recorded as failed");
    assert_ne!(db.event_row("evt_rb_inbox").await.map(|r| r.0), Some("done".into()));
    assert_eq!(db.effects_for("evt_rb_inbox").await, 0);
}

/// `webhook-admin` escapes what could make the operator read something else
/// than what is stored: a bidi override (U+202E) in a key (Mailgun's
/// `event-data.id` is not signed), and a payload's bare CR (it printed both
/// raw before).
#[cfg(feature = "cli")]
#[tokio::test]
async fn admin_cli_escapes_bidi_overrides_and_bare_cr() {
    use webhook_idempotency::store::inbox::{Inbox, RequestHead};
    use webhook_idempotency::ScopedEvent;
    let db = TestDb::new().await;
    let inbox = Inbox::new(db.pool.clone()).unwrap();
    let key = "evt_\u{202E}fdp.exe";
    let head = RequestHead { method: "POST".into(), uri: "/m".into(), headers: vec![] };
    let payload = b"{\"amount\": 100000, \"to\": \"mallory\"}\r{\"amount\": 1, \"to\": \"alice\"}             \n";
    assert!(inbox.accept(&ScopedEvent::new("mailgun", "s", key), payload, &head).await.unwrap());
    let mut conninfo = Vec::new();
    if let Some(tokio_postgres::config::Host::Tcp(h)) = db.config.get_hosts().first() {
        conninfo.push(format!("host={h}"));
    }
    if let Some(p) = db.config.get_ports().first() {
        conninfo.push(format!("port={p}"));
    }
    if let Some(u) = db.config.get_user() {
        conninfo.push(format!("user={u}"));
    }
    conninfo.push(format!("dbname={}", db.name));
    let run = |args: Vec<&str>| {
        let url = conninfo.join(" ");
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        async move {
            let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_webhook-admin"))
                .args(&args)
                .env("DATABASE_URL", url)
                .output()
                .await
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    let list = run(vec!["list", "--state", "pending"]).await;
    assert!(!list.contains('\u{202E}') && list.contains("evt_"), "bidi override escaped by list:\n{list}");
    let show = run(vec!["show", "mailgun", "s", key, "--payload"]).await;
    assert!(!show.contains('\u{202E}'), "bidi override escaped by show");
    assert!(!show.contains('\r'), "no bare CR printed:\n{show:?}");
}
