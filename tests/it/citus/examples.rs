//! The examples on the cluster, as a user points them at it: each `--demo`
//! with `DATABASE_URL` on a fresh database of the coordinator (32 shards, the
//! Citus default), the crate's tables and each demo's business table
//! distributed afterwards, and the quickstart as a server taking 500 signed
//! Stripe events sent 3 times each by 16 senders.

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio_postgres::NoTls;
use webhook_idempotency::providers::stripe;
use webhook_idempotency::SigningSecret;

use super::{assert_distributed, layout};
use crate::support::*;

/// The quickstart's test secret when `STRIPE_WEBHOOK_SECRET` is unset.
const QUICKSTART_STRIPE_SECRET: &str = webhook_idempotency::providers::TEST_SECRET;
/// The scope the quickstart's Stripe route claims in.
const QUICKSTART_SCOPE: &str = "quickstart";

/// Builds the examples (`cargo build --all-features --example ...`, cached
/// when the suite's build made them) and returns each one's executable.
async fn build(names: &[&str]) -> Vec<std::path::PathBuf> {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR")).args(["build", "--all-features", "--message-format=json"]);
    for name in names {
        cmd.args(["--example", name]);
    }
    let out = cmd.stderr(Stdio::inherit()).output().await.expect("run cargo build");
    assert!(out.status.success(), "cargo build of the examples failed");
    let artifacts: Vec<(String, std::path::PathBuf)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["kind"][0] == "example")
        .filter_map(|m| Some((m["target"]["name"].as_str()?.to_owned(), m["executable"].as_str()?.into())))
        .collect();
    names
        .iter()
        .map(|n| {
            artifacts.iter().find(|(name, _)| name == n).unwrap_or_else(|| panic!("no executable for {n}")).1.clone()
        })
        .collect()
}

/// A fresh database on the cluster with Citus's default shard count, and a
/// client on it.
async fn fresh_database(name: &str) -> (String, tokio_postgres::Client) {
    let create = name.to_owned();
    tokio::task::spawn_blocking(move || citus().create_database(&create, None)).await.unwrap().unwrap();
    let url = citus().url(name);
    let (client, conn) = url.parse::<tokio_postgres::Config>().unwrap().connect(NoTls).await.unwrap();
    tokio::spawn(conn);
    (url, client)
}

/// The demo's business table is hash-distributed in the claims' colocation
/// group, with shards on every worker, beside the crate's own tables.
async fn assert_colocated(c: &tokio_postgres::Client, table: &str) {
    let layout = layout(c).await;
    assert_distributed(&layout);
    let group = |t: &str| {
        layout.iter().find(|(name, ..)| name == t).map(|(_, method, g, nodes)| (method.clone(), *g, nodes.len()))
    };
    let (_, claims, workers) = group("webhook_idempotency.webhook_events").unwrap();
    assert_eq!(group(table), Some(("h".to_owned(), claims, workers)), "{table} colocated with the claims: {layout:?}");
}

#[tokio::test]
async fn the_four_demos_pass_on_the_cluster_and_the_quickstart_takes_500_events_sent_3_times_by_16_senders() {
    if !on_citus() {
        return;
    }
    let demos = [
        ("quickstart", &[][..], "demo_effects"),
        ("inbox", &[][..], "demo_effects"),
        ("outbox", &["--fail-rate", "0.3"][..], "demo_orders"),
        ("payments_api", &[][..], "demo_payments"),
    ];
    let bins = build(&demos.map(|d| d.0)).await;
    for ((name, args, table), bin) in demos.iter().zip(&bins) {
        let (url, client) = fresh_database(&format!("t_demo_{name}_{}", std::process::id())).await;
        let run = Command::new(bin)
            .arg("--demo")
            .args(*args)
            .env("DATABASE_URL", &url)
            .env_remove("BIND")
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(300), run).await.expect("the demo ends").unwrap();
        assert!(
            out.status.success(),
            "{name} --demo on Citus failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_colocated(&client, table).await;
    }

    // The quickstart as a server on a fresh database.
    let (url, client) = fresh_database(&format!("t_demo_server_{}", std::process::id())).await;
    let mut server = Command::new(&bins[0])
        .env("DATABASE_URL", &url)
        .env("BIND", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next_line().await.unwrap().expect("the quickstart printed its address");
        if let Some(rest) = line.strip_prefix("listening on http://") {
            break rest.split(':').take(2).collect::<Vec<_>>().join(":");
        }
    };
    // Its warnings, kept for the failure message; stdout drained.
    let log = Arc::new(Mutex::new(String::new()));
    let mut errors = BufReader::new(server.stderr.take().unwrap()).lines();
    let kept = log.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = errors.next_line().await {
            kept.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    // 500 events, each sent 3 times (a fresh signature each time, as Stripe
    // re-signs a retry), the copies of one event next to each other in the
    // queue so that they are often in flight at once.
    const EVENTS: usize = 500;
    let run = std::process::id();
    let deliveries: Vec<String> = (0..EVENTS * 3).map(|i| format!("evt_citus_{run}_{:04}", i / 3)).collect();
    let next = Arc::new(AtomicUsize::new(0));
    let http = reqwest::Client::new();
    let senders: Vec<_> = (0..16)
        .map(|_| {
            let (deliveries, next, http, addr) = (deliveries.clone(), next.clone(), http.clone(), addr.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                while let Some(id) = deliveries.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let body = stripe_body(id);
                    let signature =
                        stripe::FACTS.sign(&SigningSecret::from(QUICKSTART_STRIPE_SECRET), unix_now(), &body);
                    let answer = http
                        .post(format!("http://{addr}/webhooks/stripe"))
                        .header("content-type", "application/json; charset=utf-8")
                        .header("stripe-signature", signature)
                        .body(body)
                        .send()
                        .await
                        .map(|r| r.status().as_u16())
                        .map_err(|e| e.to_string());
                    answers.push((id.clone(), answer));
                }
                answers
            })
        })
        .collect();
    let mut not_acknowledged = Vec::new();
    for sender in senders {
        not_acknowledged.extend(sender.await.unwrap().into_iter().filter(|(_, a)| a != &Ok(200)));
    }
    assert!(
        not_acknowledged.is_empty(),
        "every delivery answered 200; not: {:?} (of {}), server log:\n{}",
        &not_acknowledged[..not_acknowledged.len().min(10)],
        not_acknowledged.len(),
        log.lock().unwrap()
    );
    let effects = client
        .query_one(
            "SELECT count(*), count(DISTINCT event_key), count(*) FILTER (WHERE scope <> $1)
               FROM demo_effects WHERE event_key LIKE 'evt\\_citus\\_%'",
            &[&QUICKSTART_SCOPE],
        )
        .await
        .unwrap();
    let (rows, events, elsewhere): (i64, i64, i64) = (effects.get(0), effects.get(1), effects.get(2));
    assert_eq!((rows, events, elsewhere), (EVENTS as i64, EVENTS as i64, 0), "exactly one effect per event");
    let done: i64 = client
        .query_one(
            "SELECT count(*) FROM webhook_idempotency.webhook_events WHERE scope = $1 AND state = 'done'",
            &[&QUICKSTART_SCOPE],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(done, EVENTS as i64, "every event's claim committed");
    assert_colocated(&client, "demo_effects").await;
    server.start_kill().unwrap();
    server.wait().await.unwrap();
}
