//! `dev::Delivery` and `webhook-dev` against the layer on a real
//! PostgreSQL, for every preset of the registry: a delivery is processed
//! once and its redelivery answered as a duplicate, 16 copies in flight give
//! one effect, a tampered copy is refused 401, a stale one is refused 401 by
//! the presets that sign a time and accepted by the others.
#![cfg(feature = "cli")]

use crate::support::*;
use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::StatusCode;
use std::time::{Duration, SystemTime};
use tower::ServiceExt;
use webhook_idempotency::dev::{self, Delivery};
use webhook_idempotency::providers::{self, PresetInfo};
use webhook_idempotency::WebhookLayer;

/// How far back a stale delivery is signed: past every preset's tolerance.
const STALE: Duration = Duration::from_secs(3 * 86_400);

/// The presets `dev` signs (all but those whose key is the sender's own).
fn presets() -> Vec<&'static PresetInfo> {
    providers::all().iter().filter(|p| dev::test_key(p.name).is_some()).collect()
}

/// The preset's first event to `url`, with its test key.
fn event(preset: &PresetInfo, url: &str) -> Delivery {
    Delivery::new(preset.name, dev::test_key(preset.name).unwrap()).unwrap().url(url)
}

/// Whether the preset's verifier refuses a delivery signed [`STALE`] ago
/// (it signs a time), checked offline on the delivery itself.
fn signs_time(event: &Delivery) -> bool {
    let stale = event.clone().at(SystemTime::now() - STALE).signed().unwrap();
    let delivery =
        webhook_idempotency::verify::Delivery::new(&stale.parts, &stale.body, &stale.secrets, SystemTime::now());
    stale.provider.verify(&delivery).is_err()
}

/// A router serving every preset on `/webhooks/<name>` with its test key,
/// each built as the receiver at `base` builds it.
fn router(db: &TestDb, base: &str) -> Router {
    let mut app = Router::new();
    for preset in presets() {
        let signed = event(preset, &format!("{base}/webhooks/{}", preset.name)).signed().unwrap();
        let layer = signed
            .secrets
            .into_iter()
            .fold(WebhookLayer::builder(db.pool.clone(), signed.provider).scope("dev"), |b, s| b.secret(s))
            .build()
            .unwrap_or_else(|e| panic!("{}: {e}", preset.name));
        app = app.route(&format!("/webhooks/{}", preset.name), post(apply_effect).layer(layer));
    }
    app
}

/// A server of [`router`] on a free loopback port: its base URL.
async fn serve_every_preset(db: &TestDb) -> String {
    // The router is built for the address it serves: bind first.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = router(db, &base);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// Sends `req` through `app`: (status, whether answered as a replay).
async fn send(app: &Router, req: http::Request<bytes::Bytes>) -> (StatusCode, bool) {
    let res = app.clone().oneshot(req.map(Body::from)).await.unwrap();
    (res.status(), res.headers().contains_key("idempotent-replayed"))
}

/// The event key the preset reads from `event`'s deliveries.
fn key_of(event: &Delivery) -> String {
    let signed = event.signed().unwrap();
    signed.provider.identify(&signed.parts, &signed.body).unwrap().key
}

#[tokio::test]
async fn every_preset_in_process_once_duplicate_concurrent_tampered_and_stale() {
    let db = TestDb::new().await;
    let base = "http://localhost";
    let app = router(&db, base);
    let (mut timed, mut checked) = (Vec::new(), 0);
    for preset in presets() {
        let name = preset.name;
        let first = event(preset, &format!("{base}/webhooks/{name}"));
        assert_eq!(send(&app, first.request().unwrap()).await, (StatusCode::OK, false), "{name}: first delivery");
        let again = send(&app, first.request().unwrap()).await;
        assert_eq!(again, (StatusCode::OK, preset.dedupes), "{name}: redelivery (a duplicate where it dedupes)");
        if preset.dedupes {
            assert_eq!(db.effects_for(&key_of(&first)).await, 1, "{name}: one effect");
            let burst = first.next_event();
            let copies = (0..16).map(|_| send(&app, burst.request().unwrap()));
            let answers = futures_util::future::join_all(copies).await;
            assert!(answers.iter().all(|(s, _)| s.is_success()), "{name}: 16 concurrent copies: {answers:?}");
            assert_eq!(answers.iter().filter(|(_, replayed)| !replayed).count(), 1, "{name}: one ran");
            assert_eq!(db.effects_for(&key_of(&burst)).await, 1, "{name}: one effect of 16 copies");
        }
        let forged = first.next_event().tampered();
        assert_eq!(send(&app, forged.request().unwrap()).await.0, StatusCode::UNAUTHORIZED, "{name}: tampered");
        let stale = first.next_event().at(SystemTime::now() - STALE);
        let want = if signs_time(&first) { StatusCode::UNAUTHORIZED } else { StatusCode::OK };
        assert_eq!(send(&app, stale.request().unwrap()).await.0, want, "{name}: signed 3 days ago");
        if want == StatusCode::UNAUTHORIZED {
            timed.push(name);
        }
        checked += 1;
    }
    assert_eq!(checked, presets().len());
    for name in ["stripe", "slack", "standard-webhooks", "svix", "discord", "linear", "hubspot"] {
        assert!(timed.contains(&name), "{name} signs a time: {timed:?}");
    }
    assert!(!timed.contains(&"github"), "github signs no time");
}

/// Runs `webhook-dev` with `args`: (exit code, standard output).
async fn webhook_dev(args: &[&str]) -> (i32, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_webhook-dev")).args(args).output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test]
async fn webhook_dev_send_against_a_server_for_every_preset() {
    let db = TestDb::new().await;
    let base = serve_every_preset(&db).await;
    for preset in presets() {
        let name = preset.name;
        let (to, key) = (format!("{base}/webhooks/{name}"), dev::test_key(name).unwrap());
        let before = db.effects().await;
        let common = ["send", name, "--to", &to, "--secret", key];
        let run = |extra: &[&str]| {
            let args: Vec<String> = common.iter().chain(extra).map(|s| (*s).to_owned()).collect();
            async move { webhook_dev(&args.iter().map(String::as_str).collect::<Vec<_>>()).await }
        };
        let (code, out) = run(&["--repeat", "2", "--expect", "2xx"]).await;
        assert_eq!(code, 0, "{name} --repeat 2: {out}");
        if preset.dedupes {
            assert!(out.contains("(replayed)"), "{name}: the second is a duplicate: {out}");
            assert_eq!(db.effects().await, before + 1, "{name}: one effect of two deliveries");
            let (code, out) = run(&["--concurrent", "16", "--expect", "2xx"]).await;
            assert_eq!(code, 0, "{name} --concurrent 16: {out}");
            assert_eq!(db.effects().await, before + 2, "{name}: one effect of 16 copies");
        }
        let (code, out) = run(&["--tamper", "--expect", "4xx"]).await;
        assert_eq!(code, 0, "{name} --tamper: {out}");
        // Three days stale: refused by the presets that sign a time, as the layer answers (401).
        let want = if signs_time(&event(preset, &to)) { "401" } else { "2xx" };
        let (code, out) = run(&["--stale", "259200", "--expect", want]).await;
        assert_eq!(code, 0, "{name} --stale 259200 --expect {want}: {out}");
        let (code, out) = run(&["--tamper", "--expect", "2xx"]).await;
        assert_eq!(code, 1, "{name} --tamper --expect 2xx is a mismatch: {out}");
    }
    let (code, out) = webhook_dev(&[
        "send",
        "stripe",
        "--to",
        &format!("{base}/webhooks/stripe"),
        "--stale",
        "3600",
        "--secret",
        dev::test_key("stripe").unwrap(),
        "--expect",
        "4xx",
    ])
    .await;
    assert_eq!(code, 0, "{out}");
}

#[tokio::test]
async fn webhook_dev_usage_errors_exit_2_and_never_echo_the_secret() {
    for args in [
        &["send", "no-such-preset", "--secret", "s3cr3t-value"][..],
        &["send", "stripe", "--secret", "s3cr3t-value", "--expect", "2yy"],
        &["send", "stripe", "--secret", "s3cr3t-value", "--fixture", "no.such.fixture"],
        &["send", "stripe", "--secret", "s3cr3t-value", "--to", "not a url"],
        &["send", "discord", "--secret", "s3cr3t-value"],
    ] {
        let (code, out) = webhook_dev(args).await;
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(!out.contains("s3cr3t-value"), "{args:?}: the secret echoed: {out}");
    }
}

/// A scenario file, one step of each kind, against a server: every step as
/// expected exits 0; a file with one step not as expected exits 1; a line
/// that does not parse is a usage error naming it, before anything is sent.
#[tokio::test]
async fn webhook_dev_scenario_runs_each_step_kind() {
    let db = TestDb::new().await;
    let base = serve_every_preset(&db).await;
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("captured.json");
    std::fs::write(&body, br#"{"id":"evt_captured_1","object":"event","type":"invoice.paid"}"#).unwrap();
    let (stripe, github) = (dev::test_key("stripe").unwrap(), dev::test_key("github").unwrap());
    let scenario = format!(
        "# every step kind\n\
         send stripe --secret {stripe} --fixture payment_intent.succeeded --repeat 2 --expect 2xx\n\
         send github --secret {github} --concurrent 8 --expect 2xx\n\
         send stripe --secret {stripe} --tamper --expect 401\n\
         send stripe --secret {stripe} --stale 3600 --expect 4xx\n\
         send stripe --secret {stripe} --future 3600 --expect 4xx\n\
         send github --secret {github} --fixture issues.opened --out-of-order --expect 2xx\n\
         send stripe --secret {stripe} --body '{}' --same-event seed-1 --expect 2xx\n\
         send stripe --secret {stripe} --to /webhooks/stripe --slow-body 1 --expect 2xx\n",
        body.display()
    );
    let file = dir.path().join("contract");
    std::fs::write(&file, &scenario).unwrap();
    let (code, out) = webhook_dev(&["scenario", file.to_str().unwrap(), "--base", &base, "--json"]).await;
    assert_eq!(code, 0, "{out}");
    let doc: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 8, "one report per step: {out}");
    let deliveries = |i: usize| steps[i]["report"]["deliveries"].as_array().unwrap().clone();
    let statuses = |i: usize| deliveries(i).iter().map(|d| d["status"].as_u64().unwrap()).collect::<Vec<_>>();
    let replayed = |i: usize| deliveries(i).iter().filter(|d| d["replayed"] == true).count();
    let events = |i: usize| {
        deliveries(i).iter().map(|d| d["event"].as_str().unwrap().to_owned()).collect::<std::collections::BTreeSet<_>>()
    };
    // --repeat 2: the event, then its duplicate.
    assert_eq!((statuses(0), replayed(0), events(0).len()), (vec![200, 200], 1, 1), "repeat: {out}");
    // --concurrent 8: eight copies of one event, one ran.
    assert_eq!((statuses(1).len(), replayed(1), events(1).len()), (8, 7, 1), "concurrent: {out}");
    assert_eq!(db.effects_for(events(1).first().unwrap()).await, 1, "concurrent: one effect");
    // --tamper, --stale, --future: refused.
    assert_eq!((statuses(2), statuses(3), statuses(4)), (vec![401], vec![401], vec![401]), "{out}");
    // --out-of-order: two events about one object, both processed.
    assert_eq!((statuses(5), replayed(5), events(5).len()), (vec![200, 200], 0, 2), "out of order: {out}");
    // --body: the captured bytes, keyed by their own id; --same-event does not change a raw body's key.
    assert_eq!(events(6).into_iter().collect::<Vec<_>>(), ["evt_captured_1"], "{out}");
    assert_eq!(db.effects_for("evt_captured_1").await, 1, "the captured body, byte for byte: {out}");
    // --slow-body: trickled, still processed; --to a path is joined to --base.
    assert_eq!((statuses(7), replayed(7)), (vec![200], 0), "slow body: {out}");
    std::fs::write(&file, format!("{scenario}send stripe --secret {stripe} --tamper --expect 2xx\n")).unwrap();
    assert_eq!(webhook_dev(&["scenario", file.to_str().unwrap(), "--base", &base]).await.0, 1);
    let effects = db.effects().await;
    std::fs::write(&file, format!("send stripe --secret {stripe} --expect 2xx\nsend stripe --bogus\n")).unwrap();
    let (code, out) = webhook_dev(&["scenario", file.to_str().unwrap(), "--base", &base]).await;
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("line 2"), "{out}");
    assert_eq!(db.effects().await, effects, "nothing sent before every line parsed");
}
