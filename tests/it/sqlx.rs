//! The sqlx driver (feature `sqlx`) on a real PostgreSQL: a store built from
//! an `sqlx::PgPool`, handlers writing through `WebhookTx::sqlx` as an
//! `sqlx::Executor`, and the guarantees against sqlx's own failure modes (a
//! `COMMIT` the handler sent itself, a retryable conflict met through the
//! executor, futures dropped around `BEGIN`, the claim, the handler and
//! `COMMIT` on a pool of one).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::post;
use axum::Router;
use http::StatusCode;
use tower::ServiceExt;
use webhook_idempotency::sqlx::sqlx::postgres::PgPoolOptions;
use webhook_idempotency::sqlx::sqlx::{self, PgPool};
use webhook_idempotency::store::claim::{Claim, ClaimStore};
use webhook_idempotency::{ScopedEvent, StoreConfig, WebhookEvent, WebhookTx};

use crate::support::*;

/// An sqlx pool of `max` connections on `db`.
fn sqlx_pool(db: &TestDb, max: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy(&db.url())
        .expect("an sqlx pool")
}

/// The suite's effect, written through the sqlx executor.
async fn insert_effect_sqlx(tx: &WebhookTx, event: &WebhookEvent) -> Result<(), sqlx::Error> {
    let mut db = tx.sqlx().await.expect("the transaction is open during the handler");
    sqlx::query("INSERT INTO effects (scope, event_key, body) VALUES ($1, $2, $3)")
        .bind(event.scope())
        .bind(event.key())
        .bind(event.body().as_ref())
        .execute(&mut db)
        .await
        .map(drop)
}

/// A Stripe route whose handler writes the effect through sqlx and counts
/// its runs; an event whose id ends in `_fails` answers 500 after writing.
fn app(store: StoreConfig, runs: &Arc<AtomicUsize>) -> Router {
    let runs = Arc::clone(runs);
    Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx, event: WebhookEvent| {
            let runs = Arc::clone(&runs);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                match (insert_effect_sqlx(&tx, &event).await, event.key().ends_with("_fails")) {
                    (Ok(()), false) => StatusCode::OK,
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                }
            }
        })
        .layer(stripe_layer(store).build().unwrap()),
    )
}

async fn send(app: &Router, id: &str) -> StatusCode {
    app.clone().oneshot(stripe_request(stripe_body(id))).await.unwrap().status()
}

#[tokio::test]
async fn sqlx_writes_commit_with_the_claim_a_duplicate_is_replayed_and_a_failure_rolls_back() {
    let db = TestDb::new().await;
    let store = StoreConfig::from(sqlx_pool(&db, 4));
    webhook_idempotency::migrate(&store).await.expect("migrate through sqlx: a no-op on a migrated schema");
    let runs = Arc::new(AtomicUsize::new(0));
    let app = app(store, &runs);
    assert_eq!(send(&app, "evt_sqlx").await, StatusCode::OK);
    assert_eq!(send(&app, "evt_sqlx").await, StatusCode::OK, "the duplicate, replayed");
    assert_eq!((runs.load(Ordering::SeqCst), db.effects_for("evt_sqlx").await), (1, 1));
    assert_eq!(db.event_row("evt_sqlx").await, Some(("done".into(), 1, Some(200))));

    assert_eq!(send(&app, "evt_sqlx_fails").await, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(db.effects_for("evt_sqlx_fails").await, 0, "the failed run's write rolled back");
    assert_eq!(db.event_row("evt_sqlx_fails").await.map(|r| r.0), Some("failed".into()));
    assert_eq!(db.idle_in_transaction().await, 0);
}

#[tokio::test]
async fn concurrent_copies_through_sqlx_run_the_handler_once() {
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let app = app(StoreConfig::from(sqlx_pool(&db, 16)), &runs);
    let copies: Vec<_> = (0..16)
        .map(|_| {
            tokio::spawn({
                let app = app.clone();
                async move { send(&app, "evt_sqlx_burst").await }
            })
        })
        .collect();
    for copy in copies {
        let status = copy.await.unwrap();
        assert!(status == StatusCode::OK || status == StatusCode::CONFLICT, "a copy answered {status}");
    }
    assert_eq!(send(&app, "evt_sqlx_burst").await, StatusCode::OK);
    assert_eq!((runs.load(Ordering::SeqCst), db.effects_for("evt_sqlx_burst").await), (1, 1));
}

#[tokio::test]
async fn a_commit_the_handler_sent_itself_through_sqlx_is_never_answered_2xx() {
    // sqlx's raw connection lets a handler send COMMIT: its writes are
    // committed without the claim's row, and the layer's own COMMIT would
    // run outside any transaction. The fence check fails instead: not 2xx.
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(|tx: WebhookTx, event: WebhookEvent| async move {
            insert_effect_sqlx(&tx, &event).await.unwrap();
            let mut db = tx.sqlx().await.unwrap();
            sqlx::raw_sql("COMMIT").execute(db.raw()).await.unwrap();
            StatusCode::OK
        })
        .layer(stripe_layer(sqlx_pool(&db, 4)).build().unwrap()),
    );
    let status = send(&app, "evt_sqlx_self_commit").await;
    assert!(status.is_server_error(), "answered {status}");
    assert_ne!(db.event_row("evt_sqlx_self_commit").await.map(|r| r.0), Some("done".into()), "never recorded done");
    assert_eq!(db.idle_in_transaction().await, 0);
}

#[tokio::test]
async fn a_lock_timeout_met_through_the_sqlx_executor_is_answered_503_with_retry_after() {
    let db = TestDb::new().await;
    db.execute("CREATE TABLE accounts (id text PRIMARY KEY, balance bigint); INSERT INTO accounts VALUES ('a', 0)")
        .await;
    // Another session holds the account's row lock.
    let holder = db.session_for_scope("acct_test").await;
    holder.batch_execute("BEGIN; UPDATE accounts SET balance = balance + 1 WHERE id = 'a'").await.unwrap();
    let app = Router::new().route(
        "/webhooks/stripe",
        post(|tx: WebhookTx| async move {
            let mut db = tx.sqlx().await.unwrap();
            sqlx::query("SET LOCAL lock_timeout = '100ms'").execute(&mut db).await.unwrap();
            let updated =
                sqlx::query("UPDATE accounts SET balance = balance + 10 WHERE id = 'a'").execute(&mut db).await;
            // The handler turns the error into a 500; the layer knows better.
            if updated.is_ok() {
                StatusCode::OK
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        })
        .layer(stripe_layer(sqlx_pool(&db, 4)).build().unwrap()),
    );
    let answer = app.clone().oneshot(stripe_request(stripe_body("evt_sqlx_locked"))).await.unwrap();
    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE, "a retryable conflict: the sender retries");
    assert!(answer.headers().contains_key(http::header::RETRY_AFTER));
    holder.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(db.scalar("SELECT balance FROM accounts WHERE id = 'a'").await, 0);
}

#[tokio::test]
async fn futures_dropped_around_begin_the_claim_the_handler_and_commit_leave_no_transaction_open_on_a_pool_of_one() {
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let pool = sqlx_pool(&db, 1);
    let app = app(StoreConfig::from(pool.clone()), &runs);
    // Each delivery is dropped after a random time: before its checkout,
    // during BEGIN or the claim, inside the handler's write, or around the
    // COMMIT. Whatever was dropped, the one connection must come back usable.
    // How long a whole delivery takes here once the connection is open
    // (the fastest seen so far): each deadline falls inside it, so most
    // deliveries are dropped midway; until 30 were.
    let mut whole = u64::MAX;
    for i in 0..5 {
        let started = std::time::Instant::now();
        assert_eq!(send(&app, &format!("evt_sqlx_timed_{i}")).await, StatusCode::OK);
        whole = whole.min(u64::try_from(started.elapsed().as_micros()).unwrap());
    }
    let (mut dropped, mut i) = (0, 0);
    while dropped < 30 {
        assert!(i < 600, "only {dropped} of {i} deliveries were dropped midway (fastest {whole} µs)");
        let id = format!("evt_sqlx_drop_{i}");
        let deadline = Duration::from_micros(fastrand::u64(0..whole.max(1)));
        let started = std::time::Instant::now();
        match tokio::time::timeout(deadline, send(&app, &id)).await {
            Err(_) => dropped += 1,
            Ok(_) => whole = whole.min(u64::try_from(started.elapsed().as_micros()).unwrap()),
        }
        // A delivery after it succeeds, on the same single connection.
        let after = format!("evt_sqlx_after_{i}");
        assert_eq!(send(&app, &after).await, StatusCode::OK, "{after} after dropping {id} at {deadline:?}");
        assert_eq!(db.effects_for(&after).await, 1);
        i += 1;
    }
    assert_eq!(db.idle_in_transaction().await, 0, "no backend left in a transaction");
    // A dropped delivery is either done with its effect, or left nothing.
    let c = db.pool.get().await.unwrap();
    let torn: i64 = c
        .query_one(
            "SELECT count(*) FROM webhook_idempotency.webhook_events e
              WHERE e.event_key LIKE 'evt\\_sqlx\\_drop\\_%' AND e.state = 'done'
                AND NOT EXISTS (SELECT FROM effects f WHERE f.event_key = e.event_key)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(torn, 0, "no event recorded done without its effect");
}

#[tokio::test]
async fn the_claim_store_and_the_inbox_run_on_an_sqlx_pool() {
    let db = TestDb::new().await;
    let store = ClaimStore::builder(sqlx_pool(&db, 4)).build().unwrap();
    let event = ScopedEvent::new("queue", "orders", "m-sqlx").event_type("order.paid");
    let Claim::Acquired(claimed) = store.claim(&event).await.unwrap() else { panic!("first claim") };
    {
        let mut tx = claimed.tx().sqlx().await.unwrap();
        let written = sqlx::query_scalar::<_, i64>(
            "WITH w AS (INSERT INTO effects (provider, scope, event_key) VALUES ($1, $2, $3) RETURNING 1)
             SELECT count(*) FROM w",
        )
        .bind("orders")
        .bind("queue")
        .bind("m-sqlx")
        .fetch_one(&mut tx)
        .await
        .unwrap();
        assert_eq!(written, 1);
    }
    claimed.commit(200).await.unwrap();
    assert_eq!(db.effects_for("m-sqlx").await, 1);
    assert!(matches!(store.claim(&event).await.unwrap(), Claim::Done { status: Some(200) }));
}
