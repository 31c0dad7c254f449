//! Concurrent deliveries of one event over real HTTP connections.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use axum::routing::post;
use axum::Router;
use http::StatusCode;
use tokio::sync::Barrier;
use webhook_idempotency::{providers::stripe, SigningSecret, WebhookEvent, WebhookTx};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_deliveries_of_one_event_apply_one_effect() {
    // With the duplicate lookup first (the default) and without it.
    for lookup_first in [true, false] {
        fifty_copies(lookup_first).await;
    }
}

async fn fifty_copies(lookup_first: bool) {
    const CLIENTS: usize = 50;
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx, event: WebhookEvent| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move {
                let mut client = TxDb::of(&tx).await.unwrap();
                client
                    .execute(
                        "INSERT INTO effects (scope, event_key) VALUES ($1, $2)",
                        &[event.scope().into(), event.key().into()],
                    )
                    .await
                    .unwrap();
                // Hold the claim a little so the others pile up on it.
                client.execute("SELECT pg_sleep(0.2)", &[]).await.unwrap();
                StatusCode::OK
            }
        })
        .layer(
            stripe_layer(db.pool(60)).lock_timeout(Duration::from_secs(10)).lookup_first(lookup_first).build().unwrap(),
        ),
    );
    let addr = serve(app).await;
    let body = stripe_body("evt_storm");
    let header = stripe::FACTS.sign(&SigningSecret::from(STRIPE_SECRET), unix_now(), &body);
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (barrier, body, header) = (barrier.clone(), body.clone(), header.clone());
            tokio::spawn(async move {
                // One client (and connection) per delivery, as separate senders would.
                let client = reqwest::Client::new();
                barrier.wait().await;
                let res = client
                    .post(format!("http://{addr}/webhooks/stripe"))
                    .header("stripe-signature", header)
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                (res.status().as_u16(), res.headers().get("idempotent-replayed").is_some())
            })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    let fresh = answers.iter().filter(|(s, replayed)| *s == 200 && !replayed).count();
    let replayed = answers.iter().filter(|(s, replayed)| *s == 200 && *replayed).count();
    let conflicts = answers.iter().filter(|(s, _)| *s == 409).count();
    assert_eq!(fresh, 1, "lookup_first {lookup_first}: {answers:?}");
    assert_eq!(fresh + replayed + conflicts, CLIENTS, "only 200, replayed 200 or 409: {answers:?}");
    assert!(answers.iter().all(|(s, _)| *s < 500), "lookup_first {lookup_first}: {answers:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "lookup_first {lookup_first}");
    assert_eq!(db.effects_for("evt_storm").await, 1, "lookup_first {lookup_first}");
}
