//! The metrics after a fixed scenario equal its counts, read through a
//! recording `metrics` recorder.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::support::*;
use ::tower::ServiceExt;
use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{Request, StatusCode};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use std::time::Duration;
use webhook_idempotency::key::JsonPointerKey;
use webhook_idempotency::providers::stripe;

use webhook_idempotency::inbox::InboxWorker;
use webhook_idempotency::outbox::{Effect, EffectContext, EffectResult, Effects, OutboxWorker, Reconciled};
use webhook_idempotency::store::admin::Admin;
use webhook_idempotency::worker::RetryPolicy;
use webhook_idempotency::{Mode, Provider, WebhookEvent, WebhookLayer, WebhookTx};

/// The process-wide recorder (installed once for this test binary).
fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("the only recorder of this process");
        snapshotter
    })
}

type Snapshot = Vec<(metrics_util::CompositeKey, Option<metrics::Unit>, Option<metrics::SharedString>, DebugValue)>;

/// Values of `name` for the probe provider in `snapshot`, by the value of
/// `label`, summed over the other labels. (A snapshot drains counters and
/// histograms: take one, read it all.)
fn by_label(snapshot: &Snapshot, name: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (key, _, _, value) in snapshot {
        let key = key.key();
        if key.name() != name || !key.labels().any(|l| l.key() == "provider" && l.value() == "metrics_probe") {
            continue;
        }
        let Some(l) = key.labels().find(|l| l.key() == label) else { continue };
        let v = match value {
            DebugValue::Counter(n) => *n as f64,
            DebugValue::Gauge(g) => g.into_inner(),
            DebugValue::Histogram(h) => h.len() as f64,
        };
        *out.entry(l.value().to_owned()).or_default() += v;
    }
    out
}

#[tokio::test]
async fn counters_and_gauges_equal_a_fixed_scenario() {
    snapshotter();
    let db = TestDb::new().await;
    // A provider of its own, so other tests' deliveries do not count here.
    let provider = Provider::new("metrics_probe", stripe::FACTS.verifier(), JsonPointerKey::new("/id"));
    let layer =
        WebhookLayer::builder(db.pool.clone(), provider).scope("acct_test").secret(STRIPE_SECRET).build().unwrap();
    let app = Router::new().route("/webhooks/stripe", post(apply_effect).layer(layer));
    let send = |req: Request<Body>| app.clone().oneshot(req);
    for i in 0..3 {
        assert_eq!(send(stripe_request(stripe_body(&format!("evt_m{i}")))).await.unwrap().status(), StatusCode::OK);
    }
    for i in 0..2 {
        let res = send(stripe_request(stripe_body(&format!("evt_m{i}")))).await.unwrap();
        assert!(res.headers().contains_key("idempotent-replayed"));
    }
    for _ in 0..2 {
        let unsigned = Request::post("/webhooks/stripe").body(Body::from("{}")).unwrap();
        assert_eq!(send(unsigned).await.unwrap().status(), StatusCode::UNAUTHORIZED);
    }
    let get = Request::get("/webhooks/stripe").body(Body::empty()).unwrap();
    assert_eq!(send(get).await.unwrap().status(), StatusCode::METHOD_NOT_ALLOWED);

    let snapshot: Snapshot = snapshotter().snapshot().into_vec();
    let outcomes = by_label(&snapshot, "webhook_deliveries_total", "outcome");
    assert_eq!(
        outcomes,
        BTreeMap::from([("committed".into(), 3.0), ("duplicate".into(), 2.0), ("rejected".into(), 3.0)])
    );
    let kinds = by_label(&snapshot, "webhook_rejections_total", "kind");
    assert_eq!(kinds, BTreeMap::from([("invalid_signature".into(), 2.0), ("method_not_allowed".into(), 1.0)]));
    let durations = by_label(&snapshot, "webhook_delivery_duration_seconds", "outcome");
    assert_eq!(durations.get("committed"), Some(&3.0), "one duration per delivery");

    let admin = Admin::new(db.pool.clone()).unwrap();
    admin.sample_gauges().await.unwrap();
    let states = by_label(&snapshotter().snapshot().into_vec(), "webhook_events", "state");
    assert_eq!(states.get("done"), Some(&3.0));
    assert_eq!(states.get("pending"), Some(&0.0));

    // Inbox mode: three accepted events; the worker completes one at once,
    // one on its second run, and buries the third after its two attempts.
    let provider = || Provider::new("metrics_probe", stripe::FACTS.verifier(), JsonPointerKey::new("/id"));
    let inbox_layer = WebhookLayer::builder(db.pool.clone(), provider())
        .scope("acct_inbox")
        .secret(STRIPE_SECRET)
        .mode(Mode::Inbox)
        .build()
        .unwrap();
    let accepting = Router::new().route("/webhooks/stripe", post(apply_effect).layer(inbox_layer));
    for key in ["evt_i_ok", "evt_i_flaky", "evt_i_poison"] {
        assert_eq!(accepting.clone().oneshot(stripe_request(stripe_body(key))).await.unwrap().status(), StatusCode::OK);
    }
    let handlers = Router::new().route(
        "/webhooks/stripe",
        post(|tx: WebhookTx, event: WebhookEvent| async move {
            let fails = event.key() == "evt_i_poison" || (event.key() == "evt_i_flaky" && event.attempt() == 1);
            if fails {
                return StatusCode::INTERNAL_SERVER_ERROR;
            }
            apply_effect(tx, event).await
        }),
    );
    let policy = RetryPolicy::attempts(Duration::from_millis(10), Duration::from_millis(10), 2);
    let worker = InboxWorker::builder(db.pool(4), handlers)
        .scope("acct_inbox")
        .poll_interval(Duration::from_millis(20))
        .retry(policy)
        .build()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    let open = "SELECT count(*) FROM webhook_idempotency.webhook_events
                 WHERE scope = 'acct_inbox' AND state NOT IN ('done', 'dead')";
    assert!(eventually(Duration::from_secs(20), || async { db.scalar(open).await == 0 }).await, "the inbox drained");
    let _ = stop.send(());
    task.await.unwrap();
    let snapshot: Snapshot = snapshotter().snapshot().into_vec();
    // The first snapshot drained the synchronous part's counters to 0.
    let mut accepted = by_label(&snapshot, "webhook_deliveries_total", "outcome");
    accepted.retain(|_, n| *n > 0.0);
    assert_eq!(accepted, BTreeMap::from([("accepted".into(), 3.0)]));
    let runs = by_label(&snapshot, "webhook_worker_runs_total", "outcome");
    assert_eq!(runs, BTreeMap::from([("dead".into(), 1.0), ("done".into(), 2.0), ("retried".into(), 2.0)]));
    let timed = by_label(&snapshot, "webhook_worker_run_duration_seconds", "outcome");
    assert_eq!(timed, runs, "one duration per run");
    let kinds = by_label(&snapshot, "webhook_worker_runs_total", "kind");
    assert_eq!(kinds.keys().collect::<Vec<_>>(), ["inbox"]);

    // The outbox: a handler enqueues two effects per event; `notify` is
    // delivered, `charge` is uncertain the first time and reconciled as
    // not delivered, then delivered.
    let outbox_layer =
        WebhookLayer::builder(db.pool.clone(), provider()).scope("acct_outbox").secret(STRIPE_SECRET).build().unwrap();
    let enqueuing = Router::new().route(
        "/webhooks/stripe",
        post(|tx: WebhookTx| async move {
            for name in ["notify", "charge"] {
                let _ = tx.enqueue(Effect::json(name, serde_json::json!({}))).await.unwrap();
            }
            StatusCode::OK
        })
        .layer(outbox_layer),
    );
    assert_eq!(enqueuing.oneshot(stripe_request(stripe_body("evt_o1"))).await.unwrap().status(), StatusCode::OK);
    let effects = Effects::new()
        .effect("notify", |_ctx: EffectContext| async { EffectResult::delivered() })
        .effect("charge", |ctx: EffectContext| async move {
            if ctx.attempt() == 1 {
                EffectResult::uncertain("reset")
            } else {
                EffectResult::delivered()
            }
        })
        .reconcile("charge", |_ctx: EffectContext| async { Reconciled::NotDelivered });
    let worker = OutboxWorker::builder(db.pool(4), effects)
        .poll_interval(Duration::from_millis(20))
        .retry(RetryPolicy::attempts(Duration::from_millis(10), Duration::from_millis(10), 5))
        .build()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    let open = "SELECT count(*) FROM webhook_idempotency.webhook_outbox WHERE state <> 'done'";
    assert!(eventually(Duration::from_secs(20), || async { db.scalar(open).await == 0 }).await, "the outbox drained");
    let _ = stop.send(());
    task.await.unwrap();
    admin.sample_gauges().await.unwrap();
    let snapshot: Snapshot = snapshotter().snapshot().into_vec();
    let outcomes = by_label(&snapshot, "webhook_outbox_effects_total", "outcome");
    assert_eq!(
        outcomes,
        BTreeMap::from([("delivered".into(), 2.0), ("resent".into(), 1.0), ("uncertain".into(), 1.0)])
    );
    let mut kinds = by_label(&snapshot, "webhook_worker_runs_total", "kind");
    kinds.retain(|_, n| *n > 0.0);
    assert_eq!(kinds, BTreeMap::from([("outbox".into(), 4.0)]));
    let gauge = |name: &str| {
        snapshot.iter().find(|(k, ..)| k.key().name() == name).map(|(.., v)| match v {
            DebugValue::Gauge(g) => g.into_inner(),
            _ => f64::NAN,
        })
    };
    assert_eq!(gauge("webhook_outbox_oldest_due_age_seconds"), Some(0.0), "nothing due");
    let done_gauge = snapshot.iter().any(|(k, .., v)| {
        k.key().name() == "webhook_outbox_effects"
            && k.key().labels().any(|l| l.key() == "state" && l.value() == "done")
            && matches!(v, DebugValue::Gauge(g) if g.into_inner() >= 1.0)
    });
    assert!(done_gauge, "the outbox state gauge");

    // Input from the third reliability review: a synchronous delivery whose
    // client goes away while the handler runs (GitHub stops waiting at 10 s
    // and does not retry by itself) left no row and no metric. It is counted
    // `abandoned` and recorded as a failed attempt; a redelivery runs it again.
    let entered = std::sync::Arc::new(tokio::sync::Notify::new());
    let layer =
        WebhookLayer::builder(db.pool.clone(), provider()).scope("acct_gone").secret(STRIPE_SECRET).build().unwrap();
    let slow = Router::new().route(
        "/webhooks/stripe",
        post({
            let entered = std::sync::Arc::clone(&entered);
            move |tx: WebhookTx, event: WebhookEvent| async move {
                if event.attempt() == 1 {
                    entered.notify_one();
                    std::future::pending::<()>().await;
                }
                apply_effect(tx, event).await
            }
        })
        .layer(layer),
    );
    tokio::select! {
        res = slow.clone().oneshot(stripe_request(stripe_body("evt_gone"))) => panic!("answered: {res:?}"),
        () = entered.notified() => {} // the client goes away: the response future is dropped
    }
    let failed = "SELECT count(*) FROM webhook_idempotency.webhook_events
                   WHERE scope = 'acct_gone' AND event_key = 'evt_gone' AND state = 'failed'
                     AND last_error LIKE '%client went away%'";
    assert!(eventually(Duration::from_secs(10), || async { db.scalar(failed).await == 1 }).await, "recorded");
    let snapshot: Snapshot = snapshotter().snapshot().into_vec();
    let outcomes = by_label(&snapshot, "webhook_deliveries_total", "outcome");
    assert_eq!(outcomes.get("abandoned"), Some(&1.0), "{outcomes:?}");
    let res = slow.oneshot(stripe_request(stripe_body("evt_gone"))).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK, "the redelivery runs it (attempt 2)");
    assert_eq!(db.effects_for("evt_gone").await, 1);
}
