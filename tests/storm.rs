//! Storm: 1,000 deliveries of 100 distinct events in shuffled order from 64
//! concurrent HTTP clients against one server: exactly 100 effects, no 5xx.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::post;
use axum::Router;
use support::*;
use tokio::sync::Mutex;
use webhook_idempotency::verify::stripe;
use webhook_idempotency::SigningSecret;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn storm_of_1000_deliveries_of_100_events_from_64_clients() {
    const EVENTS: usize = 100;
    const COPIES: usize = 10;
    const CLIENTS: usize = 64;
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect)
            .layer(stripe_layer(db.pool(CLIENTS + 8)).lock_timeout(Duration::from_secs(10)).build().unwrap()),
    );
    let addr = serve(app).await;
    // Every event COPIES times, in a fixed pseudo-random order (a full-cycle
    // stride over the 1,000 slots), so copies of one event interleave.
    let total = EVENTS * COPIES;
    let order: Vec<usize> = (0..total).map(|i| (i * 7919) % total % EVENTS).collect();
    let queue = Arc::new(Mutex::new(order.into_iter()));
    let ts = unix_now();
    let secret = SigningSecret::from(STRIPE_SECRET);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (queue, secret) = (queue.clone(), secret.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut seen: BTreeMap<(u16, bool), usize> = BTreeMap::new();
                loop {
                    let Some(n) = queue.lock().await.next() else { break };
                    let body = stripe_body(&format!("evt_storm_{n:03}"));
                    let res = client
                        .post(format!("http://{addr}/webhooks/stripe"))
                        .header("stripe-signature", stripe::sign(&secret, ts, &body))
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    *seen
                        .entry((res.status().as_u16(), res.headers().contains_key("idempotent-replayed")))
                        .or_default() += 1;
                }
                seen
            })
        })
        .collect();
    let mut answers: BTreeMap<(u16, bool), usize> = BTreeMap::new();
    for c in clients {
        for (k, n) in c.await.unwrap() {
            *answers.entry(k).or_default() += n;
        }
    }
    assert_eq!(answers.values().sum::<usize>(), total);
    assert!(answers.keys().all(|(status, _)| *status < 500), "no 5xx: {answers:?}");
    assert_eq!(answers.get(&(200, false)).copied().unwrap_or(0), EVENTS, "one fresh 200 per event: {answers:?}");
    assert_eq!(db.effects().await, EVENTS as i64);
    assert_eq!(db.scalar("SELECT count(DISTINCT event_key) FROM effects").await, EVENTS as i64);
}
