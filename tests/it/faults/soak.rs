//! Soak under random faults: a sender that retries every non-2xx and every
//! lost response (as real senders do) delivers events, with duplicates,
//! while a fault injector terminates backends, severs the TCP connections
//! between the app and PostgreSQL (an in-process proxy), silences them
//! without closing (a dead network: no FIN, no RST), and restarts
//! PostgreSQL. At the end every event's effect exists exactly once.
//!
//! Healing from a dead network takes what production needs too: the
//! layer's `database_timeout` (500 ms here) for its own steps; a bound on
//! the handler's own statements (here it gives up after 1 s and answers
//! 503; without it, a handler stuck on a silent connection holds its
//! request until the sender gives up and closes, and hyper drops it); and
//! the database's `idle_in_transaction_session_timeout` (2 s here), which
//! ends the server side of transactions whose client went silent and
//! releases their row locks (until then, copies of that event get 409).
//!
//! Short form in `cargo test`. Long form (at least 10,000 deliveries):
//! `SOAK_EVENTS=4000 cargo test --all-features --test it faults::soak -- --nocapture`
//! (`SOAK_LOG=1` adds the layer's DEBUG lines; it sets the process-wide
//! subscriber, so run the soak alone then, as here).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;
use axum::routing::post;
use axum::Router;
use webhook_idempotency::providers::stripe;
use webhook_idempotency::{SigningSecret, WebhookEvent, WebhookTx};

/// The handler's own bound on its database work: past it, 503 (the layer
/// rolls back; the sender retries).
const HANDLER_TIMEOUT: Duration = Duration::from_secs(1);

async fn bounded_effect(tx: WebhookTx, event: WebhookEvent) -> http::StatusCode {
    tokio::time::timeout(HANDLER_TIMEOUT, apply_effect(tx, event))
        .await
        .unwrap_or(http::StatusCode::SERVICE_UNAVAILABLE)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soak_with_random_faults_applies_every_effect_exactly_once() {
    if std::env::var("SOAK_LOG").is_ok() {
        let _ = tracing_subscriber::fmt().with_env_filter("webhook_idempotency=debug").with_test_writer().try_init();
    }
    let events: usize = std::env::var("SOAK_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500);
    let server = Arc::new(TempPostgres::start().unwrap());
    let admin: tokio_postgres::Config = server.url("postgres").parse().unwrap();
    let db = TestDb::on(admin.clone()).await;
    // Sessions opened from now on (the app's, through the proxy) end a
    // transaction left idle for 2 s, as we recommend in production.
    db.pool
        .get()
        .await
        .unwrap()
        .batch_execute(&format!("ALTER DATABASE {} SET idle_in_transaction_session_timeout = '2s'", db.name))
        .await
        .unwrap();
    let proxy = Proxy::start(server.port()).await;
    let via_proxy = format!("postgresql://postgres@127.0.0.1:{}/{}", proxy.port, db.name);
    let app_pool = pool(via_proxy.parse().unwrap(), 16);
    let app = Router::new().route(
        "/webhooks/stripe",
        post(bounded_effect).layer(
            stripe_layer(
                StoreConfig::from(app_pool.clone())
                    .database_timeout(Duration::from_millis(500))
                    .pool_timeout(Duration::from_secs(1)),
            )
            .lock_timeout(Duration::from_secs(1))
            .retry_after(Duration::from_secs(1))
            .build()
            .unwrap(),
        ),
    );
    let addr = serve(app).await;

    // The sender: every event is delivered 1 to 3 times (duplicates), each
    // delivery retried until it gets a 2xx; a timeout counts as a lost response.
    let deliveries = Arc::new(AtomicUsize::new(0));
    let answers: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let queue: Arc<Mutex<Vec<usize>>> =
        Arc::new(Mutex::new((0..events).flat_map(|e| std::iter::repeat_n(e, 1 + e % 3)).rev().collect()));
    let ts = unix_now();
    let senders: Vec<_> = (0..32)
        .map(|_| {
            let (queue, deliveries, answers) = (queue.clone(), deliveries.clone(), answers.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
                let secret = SigningSecret::from(STRIPE_SECRET);
                loop {
                    let Some(e) = queue.lock().unwrap().pop() else { break };
                    let body = stripe_body(&format!("evt_soak_{e:05}"));
                    let mut last = String::new();
                    for attempt in 0.. {
                        assert!(attempt < 200, "event {e} never acknowledged; last answer {last}");
                        deliveries.fetch_add(1, Ordering::Relaxed);
                        let sent = client
                            .post(format!("http://{addr}/webhooks/stripe"))
                            .header("stripe-signature", stripe::FACTS.sign(&secret, ts, &body))
                            .body(body.clone())
                            .send()
                            .await;
                        let label = match &sent {
                            Ok(res) => res.status().as_u16().to_string(),
                            Err(_) => "lost".to_owned(),
                        };
                        last.clone_from(&label);
                        *answers.lock().unwrap().entry(label).or_default() += 1;
                        if sent.is_ok_and(|r| r.status().is_success()) {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await; // the sender's retry backoff
                    }
                }
            })
        })
        .collect();

    // The fault injector, until the sender is done.
    let done = Arc::new(AtomicBool::new(false));
    let injector = {
        let (done, server, db_name) = (done.clone(), server.clone(), db.name.clone());
        let admin = admin.clone();
        tokio::spawn(async move {
            let mut faults: BTreeMap<&'static str, usize> = BTreeMap::new();
            let mut round = 0u64;
            while !done.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(75)).await; // fault pacing, not synchronisation
                round += 1;
                match round % 10 {
                    0 if round.is_multiple_of(40) => {
                        let s = server.clone();
                        tokio::task::spawn_blocking(move || {
                            s.stop_server().unwrap();
                            s.start_server().unwrap();
                        })
                        .await
                        .unwrap();
                        *faults.entry("postgres restarted").or_default() += 1;
                    }
                    1 | 4 | 7 => {
                        if proxy.sever() > 0 {
                            *faults.entry("tcp connections severed").or_default() += 1;
                        }
                    }
                    5 if round % 20 == 15 => {
                        if proxy.blackhole() > 0 {
                            *faults.entry("tcp connections silenced").or_default() += 1;
                        }
                    }
                    _ => {
                        if let Ok((client, conn)) = admin.connect(tokio_postgres::NoTls).await {
                            tokio::spawn(conn);
                            let killed = client
                                .query(
                                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                                     WHERE datname = $1 AND pid <> pg_backend_pid() ORDER BY random() LIMIT 1",
                                    &[&db_name],
                                )
                                .await
                                .map(|rows| rows.len())
                                .unwrap_or(0);
                            if killed > 0 {
                                *faults.entry("backend terminated").or_default() += 1;
                            }
                        }
                    }
                }
            }
            (faults, proxy)
        })
    };
    for s in senders {
        s.await.unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let (faults, proxy) = injector.await.unwrap();

    // Every event exactly once, none lost.
    let c = db.pool.get().await.unwrap();
    let per_event: Vec<i64> = c
        .query("SELECT count(*) FROM effects GROUP BY event_key", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let duplicated = per_event.iter().filter(|n| **n > 1).count();
    let lost = events - per_event.len();
    let done_rows = db.scalar("SELECT count(*) FROM webhook_idempotency.webhook_events WHERE state = 'done'").await;
    println!(
        "soak: {} deliveries of {events} events; answers {:?}; faults {faults:?}; effects {}; lost {lost}; duplicated {duplicated}",
        deliveries.load(Ordering::Relaxed),
        answers.lock().unwrap(),
        per_event.iter().sum::<i64>(),
    );
    assert_eq!(lost, 0, "every event applied");
    assert_eq!(duplicated, 0, "no event applied twice");
    assert_eq!(done_rows, events as i64);
    assert!(faults.values().sum::<usize>() > 0, "faults were injected: {faults:?}");
    // Stuck server-side transactions ended (idle_in_transaction_session_timeout).
    assert!(eventually(Duration::from_secs(10), || async { db.idle_in_transaction().await == 0 }).await);
    // The layer heals once the faults stop: 32 new events, one after the
    // other (the pool hands out its idle connections first in, first out,
    // so every pooled one is tried); each silent pooled connection costs at
    // most one 503 and is discarded, and nothing else fails.
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let mut refused = 0;
    for e in 0..32 {
        let body = stripe_body(&format!("evt_after_{e:02}"));
        loop {
            let sent = client
                .post(format!("http://{addr}/webhooks/stripe"))
                .header("stripe-signature", stripe::FACTS.sign(&SigningSecret::from(STRIPE_SECRET), ts, &body))
                .body(body.clone())
                .send()
                .await;
            if sent.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            refused += 1;
            assert!(refused <= 16, "more refusals than silent pooled connections after the faults");
        }
    }
    assert_eq!(db.scalar("SELECT count(*) FROM effects WHERE event_key LIKE 'evt_after_%'").await, 32);
    // The app's pool is fully usable after the faults.
    let held: Vec<_> = futures_util::future::join_all((0..16).map(|_| app_pool.get())).await;
    for conn in held {
        let conn = conn.expect("pool usable");
        let answered = tokio::time::timeout(Duration::from_secs(2), conn.execute("SELECT 1", &[])).await;
        answered.expect("connection answers").expect("connection usable");
    }
    drop(proxy);
}
