//! Input from the third security review: for presets whose event key comes
//! from a header the signature does not cover (GitHub's `X-GitHub-Delivery`),
//! one captured delivery replayed with fresh key headers ran ten times in
//! synchronous mode and was stored twelve times in inbox mode. The
//! body-digest guard (`WebhookLayerBuilder::body_digest_guard`) claims the
//! signed body's SHA-256 too.

use super::*;
use webhook_idempotency::store::retention::Retention;
use webhook_idempotency::Mode;

const BODY: &str = r#"{"ref":"refs/heads/main","after":"5f3c","repository":{"id":1}}"#;

fn effects_total(db: &TestDb) -> impl std::future::Future<Output = i64> + '_ {
    db.scalar("SELECT count(*) FROM effects")
}

#[tokio::test]
async fn a_replay_under_fresh_keys_runs_once_with_the_guard_and_ten_times_without() {
    for (guard, want_effects) in [(false, 10), (true, 1)] {
        let db = TestDb::new().await;
        let app = Router::new().route(
            "/webhooks/github",
            post(apply_effect).layer(github_layer(db.pool.clone()).body_digest_guard(guard).build().unwrap()),
        );
        let mut replayed = 0;
        for i in 0..10 {
            let (status, headers, _) = send(&app, github_request(&format!("fresh-{i}"), BODY)).await;
            assert_eq!(status, StatusCode::OK, "guard {guard}, replay {i}");
            replayed += usize::from(headers.contains_key("idempotent-replayed"));
        }
        assert_eq!(effects_total(&db).await, want_effects, "guard {guard}");
        assert_eq!(replayed, 10 - usize::try_from(want_effects).unwrap(), "guard {guard}: answered as duplicates");
        if guard {
            // A refused replay leaves no row of its own.
            assert_eq!(db.events().await, 1);
            // A different body under a fresh key is a new event.
            let (status, headers, _) = send(&app, github_request("other", r#"{"after":"9a1b"}"#)).await;
            assert_eq!(status, StatusCode::OK);
            assert!(!headers.contains_key("idempotent-replayed"));
            assert_eq!(effects_total(&db).await, 2);
        }
    }
}

#[tokio::test]
async fn concurrent_replays_under_fresh_keys_run_once() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/github",
        post(apply_effect).layer(github_layer(db.pool.clone()).body_digest_guard(true).build().unwrap()),
    );
    let answers = futures_util::future::join_all(
        (0..16).map(|i| app.clone().oneshot(github_request(&format!("race-{i}"), BODY))),
    )
    .await;
    for res in answers {
        let status = res.unwrap().status();
        // The loser of a race waits for the winner's commit, or is told to retry.
        assert!(status == StatusCode::OK || status == StatusCode::CONFLICT, "{status}");
    }
    assert_eq!(effects_total(&db).await, 1);
}

#[tokio::test]
async fn a_failed_first_run_does_not_hold_the_body_and_the_sender_s_retry_runs() {
    let db = TestDb::new().await;
    let fail_once = Arc::new(AtomicUsize::new(0));
    let app = Router::new().route(
        "/webhooks/github",
        post({
            let fail_once = Arc::clone(&fail_once);
            move |tx: WebhookTx, event: WebhookEvent| async move {
                if fail_once.fetch_add(1, Ordering::SeqCst) == 0 {
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                apply_effect(tx, event).await
            }
        })
        .layer(github_layer(db.pool.clone()).body_digest_guard(true).build().unwrap()),
    );
    assert_eq!(send(&app, github_request("d-1", BODY)).await.0, StatusCode::INTERNAL_SERVER_ERROR);
    // The sender's retry of the same delivery runs, and a later replay under a fresh key does not.
    assert_eq!(send(&app, github_request("d-1", BODY)).await.0, StatusCode::OK);
    let (status, headers, _) = send(&app, github_request("d-2", BODY)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.contains_key("idempotent-replayed"));
    assert_eq!(effects_total(&db).await, 1);
}

#[tokio::test]
async fn inbox_mode_stores_a_body_replayed_under_fresh_keys_once() {
    let db = TestDb::new().await;
    let layer = github_layer(db.pool.clone()).mode(Mode::Inbox).body_digest_guard(true).build().unwrap();
    let app = Router::new().route("/webhooks/github", post(apply_effect).layer(layer));
    let big = format!(r#"{{"after":"5f3c","pad":"{}"}}"#, "x".repeat(1 << 20));
    for i in 0..12 {
        let (status, headers, _) = send(&app, github_request(&format!("inbox-{i}"), big.clone())).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers.contains_key("idempotent-replayed"), i > 0, "replay {i}");
    }
    assert_eq!(db.events().await, 1, "one stored row, not twelve");
    // The sender's own redelivery of the stored event is a duplicate, as without the guard.
    let (_, headers, _) = send(&app, github_request("inbox-0", big)).await;
    assert!(headers.contains_key("idempotent-replayed"));
    assert_eq!(db.events().await, 1);
}

#[tokio::test]
async fn retention_purges_digests_past_the_provider_s_window() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/github",
        post(apply_effect).layer(github_layer(db.pool.clone()).body_digest_guard(true).build().unwrap()),
    );
    for (i, body) in ["{\"n\":1}", "{\"n\":2}"].iter().enumerate() {
        assert_eq!(send(&app, github_request(&format!("r-{i}"), *body)).await.0, StatusCode::OK);
    }
    // One digest past GitHub's 3-day window, one inside it.
    db.execute(
        "UPDATE webhook_idempotency.webhook_body_digests SET created_at = now() - interval '4 days'
          WHERE event_key = 'r-0'",
    )
    .await;
    Retention::builder(db.pool.clone()).build().unwrap().purge().await.unwrap();
    let left = db.scalar_text("SELECT string_agg(event_key, ',') FROM webhook_idempotency.webhook_body_digests").await;
    assert_eq!(left, "r-1");
}

/// From the breaker's trial: a replay under a fresh key while the original
/// delivery's handler still ran waited on its uncommitted digest until the
/// 2 s database deadline, was answered 503 (a 5xx for a duplicate) and closed
/// the idle pooled connections as if the network had died. It is answered as
/// in flight (409) at once, holds nothing, and once the original committed
/// the sender's retry is a replayed 200.
#[tokio::test]
async fn a_replay_while_the_original_runs_is_409_at_once_and_leaves_the_pool_alone() {
    let db = TestDb::new().await;
    let (entered, release) = (Arc::new(tokio::sync::Notify::new()), Arc::new(tokio::sync::Notify::new()));
    let app_pool = db.pool(8);
    let app = Router::new().route(
        "/webhooks/github",
        post({
            let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
            move |tx: WebhookTx, event: WebhookEvent| async move {
                if event.key() == "orig" {
                    entered.notify_one();
                    release.notified().await;
                }
                apply_effect(tx, event).await
            }
        })
        .layer(github_layer(app_pool.clone()).body_digest_guard(true).build().unwrap()),
    );
    // Warm the pool.
    let warm = futures_util::future::join_all(
        (0..8).map(|i| app.clone().oneshot(github_request(&format!("warm-{i}"), format!("{{\"w\":{i}}}")))),
    )
    .await;
    assert!(warm.into_iter().all(|r| r.unwrap().status() == StatusCode::OK));
    let warm_size = app_pool.status().size;
    let original = tokio::spawn(app.clone().oneshot(github_request("orig", BODY)));
    entered.notified().await;
    let started = std::time::Instant::now();
    let (status, headers, _) = send(&app, github_request("replay", BODY)).await;
    assert_eq!(status, StatusCode::CONFLICT, "in flight, never a 5xx");
    assert!(headers.contains_key("retry-after"));
    assert!(started.elapsed() < Duration::from_secs(1), "answered at once, took {:?}", started.elapsed());
    assert_eq!(app_pool.status().size, warm_size, "no pooled connection closed");
    release.notify_one();
    assert_eq!(original.await.unwrap().unwrap().status(), StatusCode::OK);
    let (status, headers, _) = send(&app, github_request("replay", BODY)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.contains_key("idempotent-replayed"), "the retry after the commit is a replay");
    assert_eq!(db.effects_for("orig").await + db.effects_for("replay").await, 1);
}
