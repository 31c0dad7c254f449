//! The layer end to end on a real PostgreSQL: claims, duplicates, failures,
//! verification and bodies.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use support::*;
use tower::ServiceExt;
use webhook_idempotency::{SigningSecret, WebhookEvent, WebhookTx};

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

async fn send(app: &Router, req: Request<Body>) -> (StatusCode, http::HeaderMap, bytes::Bytes) {
    let res = app.clone().oneshot(req).await.unwrap();
    let (parts, body) = res.into_parts();
    (parts.status, parts.headers, body.collect().await.unwrap().to_bytes())
}

#[tokio::test]
async fn first_delivery_commits_business_write_and_claim_together() {
    let db = TestDb::new().await;
    let app = stripe_app(&db, Arc::default());
    let (status, headers, _) = send(&app, stripe_request(stripe_body("evt_first"))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.get("idempotent-replayed").is_none());
    assert_eq!(db.effects_for("evt_first").await, 1);
    assert_eq!(db.event_row("evt_first").await, Some(("done".into(), 1, Some(200))));
}

#[tokio::test]
async fn sequential_duplicate_is_replayed_without_running_the_handler() {
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let app = stripe_app(&db, runs.clone());
    let body = stripe_body("evt_dup");
    assert_eq!(send(&app, stripe_request(body.clone())).await.0, StatusCode::OK);
    for _ in 0..3 {
        let (status, headers, _) = send(&app, stripe_request(body.clone())).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers.get("idempotent-replayed").unwrap(), "true");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn stored_replay_status_answers_the_first_status() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(|tx: WebhookTx, event: WebhookEvent| async move {
            apply_effect(tx, event).await;
            StatusCode::ACCEPTED
        })
        .layer(stripe_layer(db.pool.clone()).replay_status(webhook_idempotency::ReplayStatus::Stored).build().unwrap()),
    );
    let body = stripe_body("evt_202");
    assert_eq!(send(&app, stripe_request(body.clone())).await.0, StatusCode::ACCEPTED);
    let (status, headers, _) = send(&app, stripe_request(body)).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(headers.get("idempotent-replayed").unwrap(), "true");
}

#[tokio::test]
async fn handler_failure_rolls_back_and_the_next_delivery_succeeds() {
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx, event: WebhookEvent| {
            let run = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                // The write happens either way; only the status decides.
                apply_effect(tx, event).await;
                if run == 0 {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                }
            }
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    let body = stripe_body("evt_fail_once");
    assert_eq!(send(&app, stripe_request(body.clone())).await.0, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(db.effects().await, 0, "the failed run's write was rolled back");
    assert_eq!(db.event_row("evt_fail_once").await, Some(("failed".into(), 1, Some(500))));

    assert_eq!(send(&app, stripe_request(body.clone())).await.0, StatusCode::OK);
    assert_eq!(db.effects().await, 1);
    assert_eq!(db.event_row("evt_fail_once").await, Some(("done".into(), 2, Some(200))));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn redirect_is_not_a_success_and_does_not_commit() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(|tx: WebhookTx, event: WebhookEvent| async move {
            apply_effect(tx, event).await;
            (StatusCode::SEE_OTHER, [("location", "/elsewhere")])
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    assert_eq!(send(&app, stripe_request(stripe_body("evt_303"))).await.0, StatusCode::SEE_OTHER);
    assert_eq!(db.effects().await, 0);
}

#[tokio::test]
async fn swallowed_sql_error_answers_503_and_commits_nothing() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(|tx: WebhookTx, event: WebhookEvent| async move {
            let client = tx.client().await.unwrap();
            client
                .execute("INSERT INTO effects (scope, event_key) VALUES ($1, $2)", &[&event.scope(), &event.key()])
                .await
                .unwrap();
            // Fails and aborts the transaction; the handler ignores it.
            let _ = client.execute("SELECT 1 / 0", &[]).await;
            StatusCode::OK
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    let (status, headers, _) = send(&app, stripe_request(stripe_body("evt_swallow"))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(headers.get("retry-after").is_some());
    assert_eq!(db.effects().await, 0);
    let row = db.event_row("evt_swallow").await;
    assert!(matches!(row, Some((ref s, 1, _)) if s == "failed"), "{row:?}");
}

#[tokio::test]
async fn same_event_key_in_two_scopes_is_two_events() {
    let db = TestDb::new().await;
    let layer_for = |scope: &str| stripe_layer(db.pool.clone()).scope(scope);
    let app = Router::new()
        .route("/a", post(apply_effect).layer(layer_for("acct_a").build().unwrap()))
        .route("/b", post(apply_effect).layer(layer_for("acct_b").build().unwrap()));
    let body = stripe_body("evt_shared");
    for path in ["/a", "/b", "/a", "/b"] {
        let mut req = stripe_request(body.clone());
        *req.uri_mut() = path.parse().unwrap();
        assert_eq!(send(&app, req).await.0, StatusCode::OK, "{path}");
    }
    assert_eq!(db.effects_for("evt_shared").await, 2);
    assert_eq!(db.scalar("SELECT count(DISTINCT scope) FROM effects").await, 2);
}

#[tokio::test]
async fn bad_signatures_answer_401_and_store_nothing() {
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let app = stripe_app(&db, runs.clone());
    let body = stripe_body("evt_bad");
    let now = unix_now();
    let tampered = {
        let mut req = stripe_request(body.clone());
        *req.body_mut() = Body::from(stripe_body("evt_bad2"));
        req
    };
    let unsigned = {
        let mut req = stripe_request(body.clone());
        req.headers_mut().remove("stripe-signature");
        req
    };
    let cases: Vec<(&str, Request<Body>)> = vec![
        ("wrong secret", stripe_request_at(body.clone(), now, "whsec_wrong")),
        ("tampered body", tampered),
        ("stale timestamp", stripe_request_at(body.clone(), now - 301, STRIPE_SECRET)),
        ("future timestamp", stripe_request_at(body.clone(), now + 301, STRIPE_SECRET)),
        ("missing header", unsigned),
    ];
    for (name, req) in cases {
        let (status, _, text) = send(&app, req).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{name}");
        assert_eq!(&text[..], b"invalid webhook signature\n", "{name}: the answer reveals nothing");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(db.events().await, 0);
    assert_eq!(db.effects().await, 0);
}

#[tokio::test]
async fn github_missing_headers_and_bad_key_are_rejected() {
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).build().unwrap()));
    let strip = |name: &'static str| {
        let mut req = github_request("0b6f1e8e-0000-4000-8000-000000000001", "{}");
        req.headers_mut().remove(name);
        req
    };
    let long_key = github_request(&"k".repeat(513), "{}");
    let cases: Vec<(&str, Request<Body>, StatusCode)> = vec![
        ("no signature", strip("x-hub-signature-256"), StatusCode::UNAUTHORIZED),
        ("no delivery id", strip("x-github-delivery"), StatusCode::BAD_REQUEST),
        ("key too long", long_key, StatusCode::BAD_REQUEST),
    ];
    for (name, req, want) in cases {
        assert_eq!(send(&app, req).await.0, want, "{name}");
    }
    assert_eq!(db.events().await, 0);
}

#[tokio::test]
async fn stripe_json_without_id_is_400_after_verification() {
    let db = TestDb::new().await;
    let app = stripe_app(&db, Arc::default());
    assert_eq!(send(&app, stripe_request(&b"{\"type\":\"x\"}"[..])).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(send(&app, stripe_request(&b"not json"[..])).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(send(&app, stripe_request(&b"{\"id\":\"evt_\\u0000x\"}"[..])).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(db.events().await, 0);
}

#[tokio::test]
async fn github_docs_vector_passes_through_the_layer() {
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).build().unwrap()));
    // GitHub's worked example: secret "It's a Secret to Everybody", body "Hello, World!".
    let req = Request::post("/webhooks/github")
        .header("x-github-event", "ping")
        .header("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
        .header("x-hub-signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
        .body(Body::from("Hello, World!"))
        .unwrap();
    assert_eq!(send(&app, req).await.0, StatusCode::OK);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn stripe_header_with_two_v1_signatures_during_rotation() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect).layer(
            // The endpoint knows only the new secret; Stripe signs with both while rolling.
            webhook_idempotency::WebhookLayer::builder(db.pool.clone(), webhook_idempotency::Provider::stripe())
                .scope("acct_test")
                .secret("whsec_new")
                .build()
                .unwrap(),
        ),
    );
    let body = stripe_body("evt_rotate");
    let ts = unix_now();
    let sig = |secret: &str| {
        let h = webhook_idempotency::providers::stripe::sign(&SigningSecret::from(secret), ts, &body);
        h.split_once(",v1=").unwrap().1.to_owned()
    };
    let header = format!("t={ts},v1={},v1={},v0={}", sig("whsec_old"), sig("whsec_new"), "0".repeat(64));
    let req = Request::post("/webhooks/stripe").header("stripe-signature", header).body(Body::from(body)).unwrap();
    assert_eq!(send(&app, req).await.0, StatusCode::OK);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn bodies_reach_the_handler_byte_for_byte() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/github",
        post(|tx: WebhookTx, event: WebhookEvent, raw: bytes::Bytes| async move {
            assert_eq!(event.body(), &raw, "WebhookEvent::body and the Bytes extractor agree");
            apply_effect(tx, event).await
        })
        .layer(github_layer(db.pool.clone()).build().unwrap()),
    );
    let cases: &[(&str, &[u8])] = &[
        ("non-ascii utf-8", "{\"name\": \"Zoë ✓ 日本\"}".as_bytes()),
        ("invalid utf-8", b"{\"a\": \"\xff\xfe\x00\"}"),
        ("crlf", b"{\r\n  \"a\": 1\r\n}\r\n"),
        ("trailing newline", b"{\"b\":2}\n"),
        ("odd whitespace and key order", b"{ \"z\" :1,\t\"a\":  [ ] }"),
        ("empty", b""),
    ];
    for (i, (name, body)) in cases.iter().enumerate() {
        let delivery = format!("00000000-0000-4000-8000-{i:012}");
        assert_eq!(send(&app, github_request(&delivery, body.to_vec())).await.0, StatusCode::OK, "{name}");
        let c = db.pool.get().await.unwrap();
        let stored: Vec<u8> =
            c.query_one("SELECT body FROM effects WHERE event_key = $1", &[&delivery]).await.unwrap().get(0);
        assert_eq!(&stored[..], *body, "{name}");
    }
}

#[tokio::test]
async fn stripe_json_extractor_still_works_after_the_layer() {
    #[derive(serde::Deserialize)]
    struct Event {
        id: String,
    }
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(|axum::Json(e): axum::Json<Event>| async move {
            assert_eq!(e.id, "evt_json");
            StatusCode::NO_CONTENT
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    assert_eq!(send(&app, stripe_request(stripe_body("evt_json"))).await.0, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn body_over_the_limit_is_413() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/github",
        post(apply_effect).layer(github_layer(db.pool.clone()).body_limit(1024).build().unwrap()),
    );
    let big = vec![b'x'; 4096];
    // With Content-Length: rejected before reading.
    let mut declared = github_request("d-1", big.clone());
    declared.headers_mut().insert("content-length", "4096".parse().unwrap());
    assert_eq!(send(&app, declared).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    // Streamed without Content-Length: rejected while reading.
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = big.chunks(100).map(|c| Ok(c.to_vec().into())).collect();
    let mut streamed = github_request("d-2", "");
    *streamed.body_mut() = Body::from_stream(futures_stream(chunks));
    assert_eq!(send(&app, streamed).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    // At the limit: accepted.
    assert_eq!(send(&app, github_request("d-3", vec![b'y'; 1024])).await.0, StatusCode::OK);
    assert_eq!(db.events().await, 1);
}

fn futures_stream(
    items: Vec<Result<bytes::Bytes, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static {
    futures_util::stream::iter(items)
}

#[tokio::test]
async fn webhook_tx_after_the_response_is_an_error_not_a_hang() {
    let db = TestDb::new().await;
    let (sent, got) = tokio::sync::oneshot::channel();
    let sent = Arc::new(std::sync::Mutex::new(Some(sent)));
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx| {
            let sent = sent.lock().unwrap().take().unwrap();
            async move {
                sent.send(tx).unwrap();
                StatusCode::OK
            }
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    assert_eq!(send(&app, stripe_request(stripe_body("evt_late"))).await.0, StatusCode::OK);
    let kept = got.await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), kept.client()).await.expect("no hang").unwrap_err();
    assert_eq!(err, webhook_idempotency::TxError::Finished);
}

#[tokio::test]
async fn migrate_is_safe_twice_and_concurrently() {
    let db = TestDb::new().await; // already migrated once
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let pool = db.pool.clone();
            tokio::spawn(async move { webhook_idempotency::migrate(&pool).await })
        })
        .collect();
    for r in runs {
        r.await.unwrap().expect("concurrent migrate");
    }
    assert_eq!(db.scalar("SELECT count(*) FROM webhook_idempotency.webhook_schema_migrations").await, 1);
}

#[tokio::test]
async fn injected_clock_decides_the_tolerance() {
    let db = TestDb::new().await;
    let fixed = 1_700_000_000u64;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect).layer(
            stripe_layer(db.pool.clone())
                .clock(move || std::time::UNIX_EPOCH + Duration::from_secs(fixed))
                .build()
                .unwrap(),
        ),
    );
    let cases = [
        ("300 s old", fixed - 300, StatusCode::OK),
        ("301 s old", fixed - 301, StatusCode::UNAUTHORIZED),
        ("300 s ahead", fixed + 300, StatusCode::OK),
        ("301 s ahead", fixed + 301, StatusCode::UNAUTHORIZED),
        ("signed now by the wall clock", unix_now(), StatusCode::UNAUTHORIZED),
    ];
    for (i, (name, ts, want)) in cases.into_iter().enumerate() {
        let req = stripe_request_at(stripe_body(&format!("evt_clock_{i}")), ts, STRIPE_SECRET);
        assert_eq!(send(&app, req).await.0, want, "{name}");
    }
    assert_eq!(db.events().await, 2);
}

#[tokio::test]
async fn resolver_picks_scope_and_secrets_from_the_route() {
    use webhook_idempotency::scope::{Endpoint, ResolveError};
    let db = TestDb::new().await;
    let resolver = |parts: &http::request::Parts| {
        // /tenants/{tenant}/stripe; the "broken" tenant's config store is down.
        let tenant = parts.uri.path().split('/').nth(2).map(str::to_owned);
        async move {
            match tenant.as_deref() {
                Some("acme") => Ok(Endpoint::new("acme", [SigningSecret::from("whsec_acme")])),
                Some("globex") => Ok(Endpoint::new("globex", [SigningSecret::from("whsec_globex")])),
                Some("broken") => Err(ResolveError::unavailable("tenant store timed out")),
                _ => Err(ResolveError::not_found()),
            }
        }
    };
    let layer = webhook_idempotency::WebhookLayer::builder(db.pool.clone(), webhook_idempotency::Provider::stripe())
        .resolver(resolver)
        .build()
        .unwrap();
    let app = Router::new().route("/tenants/{tenant}/stripe", post(apply_effect).layer(layer));
    let body = stripe_body("evt_tenant");
    let to = |path: &str, secret: &str| {
        let mut req = stripe_request_at(body.clone(), unix_now(), secret);
        *req.uri_mut() = path.parse().unwrap();
        req
    };
    let cases = [
        ("acme with its secret", to("/tenants/acme/stripe", "whsec_acme"), StatusCode::OK),
        ("globex with its secret", to("/tenants/globex/stripe", "whsec_globex"), StatusCode::OK),
        ("globex with acme's secret", to("/tenants/globex/stripe", "whsec_acme"), StatusCode::UNAUTHORIZED),
        ("unknown tenant", to("/tenants/initech/stripe", "whsec_acme"), StatusCode::NOT_FOUND),
        ("resolver failure", to("/tenants/broken/stripe", "whsec_acme"), StatusCode::SERVICE_UNAVAILABLE),
    ];
    for (name, req, want) in cases {
        assert_eq!(send(&app, req).await.0, want, "{name}");
    }
    assert_eq!(db.scalar("SELECT count(DISTINCT scope) FROM effects WHERE event_key = 'evt_tenant'").await, 2);
    assert_eq!(db.events().await, 2);
}

#[test]
fn builder_rejects_incomplete_configurations() {
    let pool = support::pool("host=127.0.0.1 user=nobody".parse().unwrap(), 1);
    let stripe = || webhook_idempotency::WebhookLayer::builder(pool.clone(), webhook_idempotency::Provider::stripe());
    let cases = [
        ("no scope", stripe().secret("s").build().err()),
        ("no secret", stripe().scope("a").build().err()),
        ("empty scope", stripe().scope("").secret("s").build().err()),
        ("bad schema", stripe().scope("a").secret("s").schema("x;drop").build().err()),
        ("zero limit", stripe().scope("a").secret("s").body_limit(0).build().err()),
        ("lock_timeout 0", stripe().scope("a").secret("s").lock_timeout(Duration::ZERO).build().err()),
        (
            "lock_timeout > i32 ms",
            stripe().scope("a").secret("s").lock_timeout(Duration::from_secs(30 * 86400)).build().err(),
        ),
        ("resolver and scope", stripe().scope("a").resolver(webhook_idempotency::Endpoint::new("b", [])).build().err()),
    ];
    for (name, err) in cases {
        assert!(err.is_some(), "{name}");
    }
    assert!(stripe().scope("a").secret("s").build().is_ok());
}

#[tokio::test]
async fn unsigned_request_is_rejected_before_its_body_is_read() {
    let db = TestDb::new().await;
    let app = stripe_app(&db, Arc::default());
    // A body that never ends: buffering it would hang.
    let (_keep_open, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
    let endless = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
    let req = Request::post("/webhooks/stripe").body(Body::from_stream(endless)).unwrap();
    let (status, _, _) =
        tokio::time::timeout(Duration::from_secs(10), send(&app, req)).await.expect("answered at once");
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn migrate_into_public_ignores_another_tools_schema_migrations() {
    let db = TestDb::new().await;
    let c = db.pool.get().await.unwrap();
    // golang-migrate's bookkeeping table, already at version 1.
    c.batch_execute(
        "CREATE TABLE public.schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL);
         INSERT INTO public.schema_migrations VALUES (1, false);",
    )
    .await
    .unwrap();
    webhook_idempotency::migrate_schema(&db.pool, "public").await.expect("migrate into public");
    let n: i64 = c.query_one("SELECT count(*) FROM public.webhook_events", &[]).await.unwrap().get(0);
    assert_eq!(n, 0, "the table exists");
    let theirs: i64 = c.query_one("SELECT count(*) FROM public.schema_migrations", &[]).await.unwrap().get(0);
    assert_eq!(theirs, 1, "their bookkeeping untouched");
}
