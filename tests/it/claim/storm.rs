//! Storm: 1,000 deliveries of 100 distinct events in shuffled order from 64
//! concurrent HTTP clients against one server, then against four server
//! processes sharing one database: exactly 100 effects, no 5xx.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use axum::routing::post;
use axum::Router;
use tokio::sync::Mutex;
use webhook_idempotency::providers::stripe;
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
                        .header("stripe-signature", stripe::FACTS.sign(&secret, ts, &body))
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

/// Kills the child process on drop, so a failing test leaves no server behind.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Set for [`storm_server_process`] when this test binary runs as one of the
/// storm's server processes: `DATABASE_URL BIND` (space-separated).
const SERVER_ENV: &str = "WEBHOOK_IT_STORM_SERVER";

/// Not a test: the entry point of one server process of
/// [`storm_split_over_four_server_processes_sharing_one_postgres`], which
/// starts this same test binary filtered to this function with
/// [`SERVER_ENV`] set. Serves the suite's Stripe layer ([`stripe_layer`],
/// the suite's own secret) and [`apply_effect`] on `BIND` over the shared
/// database, plus `GET /ready`, until killed or until its standard input
/// closes (the test process is gone). Without [`SERVER_ENV`] it returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a server process started by storm_split_over_four_server_processes_sharing_one_postgres"]
async fn storm_server_process() {
    let Ok(setting) = std::env::var(SERVER_ENV) else { return };
    let (url, bind) = setting.split_once(' ').expect("DATABASE_URL BIND");
    let app = Router::new()
        .route(
            "/webhooks/stripe",
            post(apply_effect).layer(stripe_layer(pool(url.parse().unwrap(), 16)).build().unwrap()),
        )
        .route("/ready", axum::routing::get(|| async { "ready" }));
    let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
    let orphaned = tokio::task::spawn_blocking(|| {
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    });
    tokio::select! {
        served = axum::serve(listener, app) => served.unwrap(),
        _ = orphaned => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn storm_split_over_four_server_processes_sharing_one_postgres() {
    const EVENTS: usize = 100;
    const COPIES: usize = 10;
    const SERVERS: usize = 4;
    let db = TestDb::new().await;
    let url = {
        let host = match db.config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            _ => "127.0.0.1".into(),
        };
        let port = db.config.get_ports().first().copied().unwrap_or(5432);
        let user = db.config.get_user().unwrap_or("postgres");
        format!("postgresql://{user}@{host}:{port}/{}", db.name)
    };
    // Each server is this test binary again, running only `storm_server_process`.
    let mut servers = Vec::new();
    let mut addrs = Vec::new();
    let http = reqwest::Client::new();
    for _ in 0..SERVERS {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["claim::storm::storm_server_process", "--exact", "--ignored", "--nocapture"])
            .env(SERVER_ENV, format!("{url} 127.0.0.1:{port}"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        servers.push(Child(child));
        let up = eventually(Duration::from_secs(30), || {
            let http = http.clone();
            async move { http.get(format!("http://127.0.0.1:{port}/ready")).send().await.is_ok() }
        })
        .await;
        assert!(up, "server on {port} came up");
        addrs.push(port);
    }
    let total = EVENTS * COPIES;
    let order: Vec<usize> = (0..total).map(|i| (i * 7919) % total).collect();
    let queue = Arc::new(Mutex::new(order.into_iter()));
    let ts = unix_now();
    let secret = SigningSecret::from(STRIPE_SECRET);
    let clients: Vec<_> = (0..64)
        .map(|_| {
            let (queue, secret, addrs) = (queue.clone(), secret.clone(), addrs.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut seen: BTreeMap<u16, usize> = BTreeMap::new();
                loop {
                    let Some(slot) = queue.lock().await.next() else { break };
                    // Copy k of an event goes to server k % SERVERS: every event hits every process.
                    let (event, server) = (slot % EVENTS, addrs[(slot / EVENTS) % SERVERS]);
                    let body = stripe_body(&format!("evt_procs_{event:03}"));
                    let res = client
                        .post(format!("http://127.0.0.1:{server}/webhooks/stripe"))
                        .header("stripe-signature", stripe::FACTS.sign(&secret, ts, &body))
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    *seen.entry(res.status().as_u16()).or_default() += 1;
                }
                seen
            })
        })
        .collect();
    let mut answers: BTreeMap<u16, usize> = BTreeMap::new();
    for c in clients {
        for (k, n) in c.await.unwrap() {
            *answers.entry(k).or_default() += n;
        }
    }
    assert!(answers.keys().all(|s| *s < 500), "no 5xx: {answers:?}");
    let effects = db.effects().await;
    let distinct = db.scalar("SELECT count(DISTINCT event_key) FROM effects").await;
    assert_eq!((effects, distinct), (EVENTS as i64, EVENTS as i64), "answers {answers:?}");
    drop(servers);
}
