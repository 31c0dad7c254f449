//! Attacks on the synchronous claim protocol: the claim row written `done`
//! at once, the advisory lock that keeps copies of an in-flight event out,
//! the check pipelined with COMMIT, and the failure record that turns a
//! `done` row the handler committed itself back into `failed`.
//!
//! Every test drives the layer on the real PostgreSQL harness and asserts
//! exactly-once: how many effects, the stored row, and what the sender got.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;
use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{Request, StatusCode};
use tokio::sync::{oneshot, watch, Notify};
use tokio_postgres::NoTls;
use tower::ServiceExt;
use webhook_idempotency::{IsolationLevel, Rejection, RejectionKind, ReplayStatus, WebhookEvent, WebhookTx};

/// The first key of the claim's advisory lock (`statements::CLAIM_LOCK_CLASS`, "WHK1").
const CLAIM_LOCK_CLASS: i32 = 0x5748_4B31;

/// What the sender got for one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Answer {
    status: StatusCode,
    replayed: bool,
    rejection: Option<RejectionKind>,
}

impl Answer {
    /// A first run's answer: the handler's status, not replayed, not refused.
    fn fresh(status: StatusCode) -> Self {
        Self { status, replayed: false, rejection: None }
    }

    /// A duplicate answered from the stored row.
    fn replayed(status: StatusCode) -> Self {
        Self { status, replayed: true, rejection: None }
    }

    /// Refused by the layer with `kind`.
    fn refused(kind: RejectionKind) -> Self {
        Self { status: kind.status(), replayed: false, rejection: Some(kind) }
    }
}

async fn send(app: &Router, req: Request<Body>) -> Answer {
    let res = app.clone().oneshot(req).await.unwrap();
    Answer {
        status: res.status(),
        replayed: res.headers().get(webhook_idempotency::IDEMPOTENT_REPLAYED).is_some(),
        rejection: res.extensions().get::<Rejection>().map(|r| r.kind()),
    }
}

/// A signed Stripe delivery of event `key` through `app`.
async fn deliver(app: &Router, key: &str) -> Answer {
    send(app, stripe_request(stripe_body(key))).await
}

fn route<H, T>(handler: H, layer: webhook_idempotency::WebhookLayer) -> Router
where
    H: axum::handler::Handler<T, ()>,
    T: 'static,
{
    Router::new().route("/webhooks/stripe", post(handler).layer(layer))
}

/// `apply_effect` behind `layer`, with a count of the handler's runs.
fn counted_route(layer: webhook_idempotency::WebhookLayer) -> (Router, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let handler = move |tx: WebhookTx, event: WebhookEvent| {
        counter.fetch_add(1, Ordering::SeqCst);
        apply_effect(tx, event)
    };
    (route(handler, layer), runs)
}

/// A session of its own on the test database (not pooled).
async fn raw_session(db: &TestDb) -> tokio_postgres::Client {
    let (client, conn) = db.config.connect(NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

/// A one-shot sender a `Fn` handler can take once.
type Once<T> = Arc<Mutex<Option<oneshot::Sender<T>>>>;

fn once<T>() -> (Once<T>, oneshot::Receiver<T>) {
    let (tx, rx) = oneshot::channel();
    (Arc::new(Mutex::new(Some(tx))), rx)
}

/// Waits on `rx` for at most 10 s: a barrier that fails the test instead of
/// hanging it.
async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), f).await.unwrap_or_else(|_| panic!("{what}: not within 10 s"))
}

fn status16(s: StatusCode) -> Option<i16> {
    Some(i16::try_from(s.as_u16()).unwrap())
}

// ---------------------------------------------------------------------------
// The row is written `done` with 200 at claim time: other statuses, aborted
// transactions, and what the handler sees.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_success_status_other_than_200_is_stored_and_replayed_as_configured() {
    struct Case {
        name: &'static str,
        answer: StatusCode,
        replay: ReplayStatus,
        duplicate: StatusCode,
    }
    let cases = [
        Case {
            name: "created_stored",
            answer: StatusCode::CREATED,
            replay: ReplayStatus::Stored,
            duplicate: StatusCode::CREATED,
        },
        Case {
            name: "accepted_stored",
            answer: StatusCode::ACCEPTED,
            replay: ReplayStatus::Stored,
            duplicate: StatusCode::ACCEPTED,
        },
        Case {
            name: "no_content_stored",
            answer: StatusCode::NO_CONTENT,
            replay: ReplayStatus::Stored,
            duplicate: StatusCode::NO_CONTENT,
        },
        Case {
            name: "created_replayed_ok",
            answer: StatusCode::CREATED,
            replay: ReplayStatus::Ok,
            duplicate: StatusCode::OK,
        },
        Case { name: "ok_stored", answer: StatusCode::OK, replay: ReplayStatus::Stored, duplicate: StatusCode::OK },
        // A success predicate that commits a redirect: stored through the same UPDATE.
        Case {
            name: "found_by_predicate",
            answer: StatusCode::FOUND,
            replay: ReplayStatus::Stored,
            duplicate: StatusCode::FOUND,
        },
    ];
    let db = TestDb::new().await;
    for Case { name, answer, replay, duplicate } in cases {
        let key = format!("evt_status_{name}");
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let app = route(
            move |tx: WebhookTx, event: WebhookEvent| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    insert_effect(&tx, &event).await.unwrap();
                    answer
                }
            },
            stripe_layer(db.pool.clone())
                .replay_status(replay)
                .success(|s| s.is_success() || s.is_redirection())
                .build()
                .unwrap(),
        );
        assert_eq!(deliver(&app, &key).await, Answer::fresh(answer), "{name}");
        assert_eq!(db.event_row(&key).await, Some(("done".into(), 1, status16(answer))), "{name}");
        assert_eq!(deliver(&app, &key).await, Answer::replayed(duplicate), "{name}");
        assert_eq!((db.effects_for(&key).await, runs.load(Ordering::SeqCst)), (1, 1), "{name}");
    }
    assert_eq!(db.idle_in_transaction().await, 0);
}

#[tokio::test]
async fn a_2xx_the_success_predicate_refuses_is_answered_500_and_the_retry_runs_once() {
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let app = route(
        move |tx: WebhookTx, event: WebhookEvent| {
            let run = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                insert_effect(&tx, &event).await.unwrap();
                if run == 0 {
                    StatusCode::ACCEPTED
                } else {
                    StatusCode::OK
                }
            }
        },
        stripe_layer(db.pool.clone()).success(|s| s == StatusCode::OK).build().unwrap(),
    );
    // Passing the 202 on would tell the sender the event was processed.
    assert_eq!(deliver(&app, "evt_refused_2xx").await, Answer::refused(RejectionKind::HandlerError));
    assert_eq!(db.effects().await, 0, "rolled back");
    assert_eq!(db.event_row("evt_refused_2xx").await, Some(("failed".into(), 1, Some(202))));
    assert_eq!(deliver(&app, "evt_refused_2xx").await, Answer::fresh(StatusCode::OK), "the sender's retry");
    assert_eq!((db.effects().await, runs.load(Ordering::SeqCst)), (1, 2));
    assert_eq!(db.idle_in_transaction().await, 0);
}

#[tokio::test]
async fn a_success_over_a_swallowed_statement_error_is_never_2xx_and_the_next_delivery_runs_once() {
    // The handler's own statement fails, it ignores the error and answers a
    // success: the check pipelined with COMMIT fails 25P02, nothing commits.
    for answer in [StatusCode::OK, StatusCode::CREATED, StatusCode::NO_CONTENT] {
        let db = TestDb::new().await;
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let app = route(
            move |tx: WebhookTx, event: WebhookEvent| {
                let run = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    insert_effect(&tx, &event).await.unwrap();
                    if run == 0 {
                        let swallowed = TxDb::of(&tx).await.unwrap().execute("SELECT 1 / 0", &[]).await;
                        assert!(swallowed.is_err());
                    }
                    answer
                }
            },
            stripe_layer(db.pool.clone()).replay_status(ReplayStatus::Stored).build().unwrap(),
        );
        let first = deliver(&app, "evt_swallowed").await;
        assert_eq!(first, Answer::refused(RejectionKind::StoreUnavailable), "{answer}");
        assert_eq!(db.effects().await, 0, "{answer}: nothing committed");
        assert_eq!(db.event_row("evt_swallowed").await, Some(("failed".into(), 1, status16(answer))), "{answer}");

        assert_eq!(deliver(&app, "evt_swallowed").await, Answer::fresh(answer), "{answer}");
        assert_eq!(db.event_row("evt_swallowed").await, Some(("done".into(), 2, status16(answer))), "{answer}");
        assert_eq!(deliver(&app, "evt_swallowed").await, Answer::replayed(answer), "{answer}");
        assert_eq!((db.effects().await, runs.load(Ordering::SeqCst)), (1, 2), "{answer}");
        assert_eq!(db.idle_in_transaction().await, 0, "{answer}");
    }
}

/// What a handler reads of its own claim row, inside the claim's transaction.
#[derive(Debug, PartialEq, Eq)]
struct OwnRow {
    state: String,
    attempts: i32,
    response_status: Option<i16>,
    completed_now: bool,
    /// The same row read from another session meanwhile.
    outside: Option<String>,
}

#[tokio::test]
async fn the_handler_sees_its_own_claim_row_already_done_with_200_and_nobody_else_sees_it() {
    // Documented behaviour, not a failure: since the claim row is written in
    // its final state, a handler reading `webhook_events` for its own event
    // sees `done`, status 200 and `completed_at = now()` before it has done
    // anything (older releases showed `running`). Other sessions see no row
    // (first run) or the `failed` row (a retry) until the COMMIT. A handler
    // that skips work when its event reads `done` would skip every event.
    let db = TestDb::new().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let outside = db.pool.clone();
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let app = route(
        move |tx: WebhookTx, event: WebhookEvent| {
            let (log, outside) = (log.clone(), outside.clone());
            let run = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                let mut client = TxDb::of(&tx).await.unwrap();
                // One text column, whatever the driver: state|attempts|status|completed now.
                let row: String = client
                    .scalar(
                        "SELECT concat_ws('|', state, attempts, coalesce(response_status::text, ''),
                                          extract(epoch FROM completed_at))
                         FROM webhook_idempotency.webhook_events
                         WHERE scope = $1 AND provider = $2 AND event_key = $3",
                        &[event.scope().into(), event.provider().into(), event.key().into()],
                    )
                    .await
                    .unwrap();
                // The transaction's time, by a statement naming no table (on
                // Citus the coordinator's, whose `now()` the routed claim wrote).
                let now: String = client.scalar("SELECT extract(epoch FROM now())::text", &[]).await.unwrap();
                let row: Vec<&str> = row.split('|').collect();
                let other = outside.get().await.unwrap();
                let outside_state = other
                    .query_opt(
                        "SELECT state FROM webhook_idempotency.webhook_events WHERE event_key = $1",
                        &[&event.key()],
                    )
                    .await
                    .unwrap()
                    .map(|r| r.get::<_, String>(0));
                log.lock().unwrap().push(OwnRow {
                    state: row[0].to_owned(),
                    attempts: row[1].parse().unwrap(),
                    response_status: row[2].parse().ok(),
                    completed_now: row[3] == now,
                    outside: outside_state,
                });
                drop(client);
                insert_effect(&tx, &event).await.unwrap();
                if run == 0 {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::ACCEPTED
                }
            }
        },
        stripe_layer(db.pool.clone()).build().unwrap(),
    );
    assert_eq!(deliver(&app, "evt_reads_own").await, Answer::fresh(StatusCode::INTERNAL_SERVER_ERROR));
    assert_eq!(deliver(&app, "evt_reads_own").await, Answer::fresh(StatusCode::ACCEPTED));
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let own = |attempts, outside: Option<&str>| OwnRow {
        state: "done".into(),
        attempts,
        response_status: Some(200),
        completed_now: true,
        outside: outside.map(str::to_owned),
    };
    assert_eq!(seen, vec![own(1, None), own(2, Some("failed"))]);
    assert_eq!(db.event_row("evt_reads_own").await, Some(("done".into(), 2, Some(202))));
    assert_eq!(db.effects().await, 1);
}

// ---------------------------------------------------------------------------
// Failures and retries.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_failed_delivery_then_a_retry_counts_two_attempts_and_applies_one_effect() {
    for (name, second) in [("ok", StatusCode::OK), ("created", StatusCode::CREATED)] {
        let db = TestDb::new().await;
        let attempts_seen = Arc::new(Mutex::new(Vec::new()));
        let log = attempts_seen.clone();
        let app = route(
            move |tx: WebhookTx, event: WebhookEvent| {
                let log = log.clone();
                async move {
                    insert_effect(&tx, &event).await.unwrap();
                    log.lock().unwrap().push(event.attempt());
                    if event.attempt() == 1 {
                        StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        second
                    }
                }
            },
            stripe_layer(db.pool.clone()).build().unwrap(),
        );
        assert_eq!(deliver(&app, "evt_retry").await, Answer::fresh(StatusCode::INTERNAL_SERVER_ERROR), "{name}");
        assert_eq!(db.event_row("evt_retry").await, Some(("failed".into(), 1, Some(500))), "{name}");
        assert_eq!(db.effects().await, 0, "{name}");
        assert_eq!(deliver(&app, "evt_retry").await, Answer::fresh(second), "{name}");
        assert_eq!(db.event_row("evt_retry").await, Some(("done".into(), 2, status16(second))), "{name}");
        assert_eq!(deliver(&app, "evt_retry").await, Answer::replayed(StatusCode::OK), "{name}");
        assert_eq!(db.effects().await, 1, "{name}");
        assert_eq!(*attempts_seen.lock().unwrap(), vec![1, 2], "{name}");
    }
}

#[tokio::test]
async fn a_handler_that_ends_the_claim_transaction_itself_is_never_2xx_and_the_next_delivery_runs() {
    // The handler breaks the contract: it ends the claim's transaction with
    // its own statements (and may open another), then answers. Whatever it
    // did, the sender never gets a 2xx, the row is `failed` after one
    // attempt, and the next delivery runs the handler (attempt 2).
    // `committed`: whether the effect written before the statements stays
    // committed (the handler's own COMMIT) or not.
    struct Case {
        name: &'static str,
        statements: &'static str,
        answer: StatusCode,
        committed: i64,
    }
    let cases = [
        Case { name: "commit_begin_200", statements: "COMMIT; BEGIN", answer: StatusCode::OK, committed: 1 },
        Case { name: "commit_begin_201", statements: "COMMIT; BEGIN", answer: StatusCode::CREATED, committed: 1 },
        Case {
            name: "commit_begin_500",
            statements: "COMMIT; BEGIN",
            answer: StatusCode::INTERNAL_SERVER_ERROR,
            committed: 1,
        },
        Case { name: "commit_and_chain_200", statements: "COMMIT AND CHAIN", answer: StatusCode::OK, committed: 1 },
        Case {
            name: "commit_and_chain_204",
            statements: "COMMIT AND CHAIN",
            answer: StatusCode::NO_CONTENT,
            committed: 1,
        },
        Case { name: "commit_204", statements: "COMMIT", answer: StatusCode::NO_CONTENT, committed: 1 },
        Case { name: "rollback_200", statements: "ROLLBACK", answer: StatusCode::OK, committed: 0 },
        Case { name: "rollback_begin_200", statements: "ROLLBACK; BEGIN", answer: StatusCode::OK, committed: 0 },
        Case { name: "rollback_begin_202", statements: "ROLLBACK; BEGIN", answer: StatusCode::ACCEPTED, committed: 0 },
        Case { name: "rollback_and_chain_200", statements: "ROLLBACK AND CHAIN", answer: StatusCode::OK, committed: 0 },
    ];
    let db = TestDb::new().await;
    for Case { name, statements, answer, committed } in cases {
        let key = format!("evt_ends_{name}");
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let app = route(
            move |tx: WebhookTx, event: WebhookEvent| {
                let run = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    insert_effect(&tx, &event).await.unwrap();
                    if run > 0 {
                        return StatusCode::OK;
                    }
                    let mut client = TxDb::of(&tx).await.unwrap();
                    client.batch(statements).await.unwrap();
                    // Work after the transaction was replaced: must not commit.
                    client
                        .execute("INSERT INTO effects (scope, event_key) VALUES ('after', $1)", &[event.key().into()])
                        .await
                        .unwrap();
                    answer
                }
            },
            stripe_layer(db.pool.clone()).build().unwrap(),
        );
        let first = deliver(&app, &key).await;
        assert!(!first.status.is_success(), "{name}: {first:?}");
        let row = db.event_row(&key).await;
        assert!(matches!(row, Some((ref state, 1, _)) if state == "failed"), "{name}: {row:?}");
        let after: i64 = db
            .pool
            .get()
            .await
            .unwrap()
            .query_one("SELECT count(*) FROM effects WHERE event_key = $1 AND scope = 'after'", &[&key])
            .await
            .unwrap()
            .get(0);
        // Autocommit work after a bare COMMIT/ROLLBACK commits by itself (the
        // handler's own doing); work in a transaction the handler opened does not.
        let autocommit = !statements.contains("BEGIN") && !statements.contains("CHAIN");
        assert_eq!(after, i64::from(autocommit), "{name}: effect written after the handler's own end");
        assert_eq!(db.effects_for(&key).await - after, committed, "{name}: effect before the handler's own end");

        assert_eq!(deliver(&app, &key).await, Answer::fresh(StatusCode::OK), "{name}");
        assert_eq!(db.event_row(&key).await, Some(("done".into(), 2, Some(200))), "{name}");
        assert_eq!(db.effects_for(&key).await - after, committed + 1, "{name}");
        assert_eq!(runs.load(Ordering::SeqCst), 2, "{name}");
    }
    assert!(
        eventually(Duration::from_secs(10), || async { db.idle_in_transaction().await == 0 }).await,
        "no transaction the handlers opened is left open"
    );
}

#[tokio::test]
async fn the_claiming_backend_terminated_mid_handler_is_never_2xx_and_the_retry_runs_once() {
    for (name, swallow) in [("answers_500", false), ("swallows_and_answers_200", true)] {
        let db = TestDb::new().await;
        let (pid_tx, pid_rx) = once::<i32>();
        let (go_tx, go_rx) = once::<()>();
        let go_rx = Arc::new(Mutex::new(Some(go_rx)));
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let app = route(
            move |tx: WebhookTx, event: WebhookEvent| {
                let run = counter.fetch_add(1, Ordering::SeqCst);
                let (pid_tx, go_rx) = (pid_tx.lock().unwrap().take(), go_rx.lock().unwrap().take());
                async move {
                    if insert_effect(&tx, &event).await.is_err() {
                        return StatusCode::INTERNAL_SERVER_ERROR;
                    }
                    if run == 0 {
                        let pid: i32 =
                            TxDb::of(&tx).await.unwrap().scalar("SELECT pg_backend_pid()", &[]).await.unwrap();
                        pid_tx.unwrap().send(pid).unwrap();
                        go_rx.unwrap().await.unwrap();
                        let alive = match TxDb::of(&tx).await {
                            Ok(mut client) => client.execute("SELECT 1", &[]).await.is_ok(),
                            Err(_) => false,
                        };
                        if !alive && !swallow {
                            return StatusCode::INTERNAL_SERVER_ERROR;
                        }
                    }
                    StatusCode::OK
                }
            },
            stripe_layer(db.pool(4)).build().unwrap(),
        );
        let first = tokio::spawn({
            let app = app.clone();
            async move { deliver(&app, "evt_terminated").await }
        });
        let pid = within("handler running", pid_rx).await.unwrap();
        let admin = raw_session(&db).await;
        assert!(admin.query_one("SELECT pg_terminate_backend($1::int)", &[&pid]).await.unwrap().get::<_, bool>(0));
        assert!(
            eventually(Duration::from_secs(10), || async {
                admin.query_opt("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&pid]).await.unwrap().is_none()
            })
            .await,
            "{name}: backend gone"
        );
        go_tx.lock().unwrap().take().unwrap().send(()).unwrap();
        let first = within("first answer", first).await.unwrap();
        assert!(first.status.is_server_error(), "{name}: {first:?}");
        assert_eq!(db.effects().await, 0, "{name}");
        let row = db.event_row("evt_terminated").await;
        assert!(row.is_none() || matches!(&row, Some((state, 1, _)) if state == "failed"), "{name}: {row:?}");
        assert_eq!(deliver(&app, "evt_terminated").await, Answer::fresh(StatusCode::OK), "{name}");
        assert_eq!(deliver(&app, "evt_terminated").await, Answer::replayed(StatusCode::OK), "{name}");
        assert_eq!((db.effects().await, runs.load(Ordering::SeqCst)), (1, 2), "{name}");
        assert_eq!(db.event_row("evt_terminated").await.map(|r| r.0), Some("done".into()), "{name}");
    }
}

#[tokio::test]
async fn rows_in_every_state_met_by_a_synchronous_claim() {
    // An inbox row (a route switched from inbox to synchronous mode, or both
    // modes on one table) or a row left by a failure: `pending` and `failed`
    // are taken over (attempts + 1), `running` (a worker holds it) and `dead`
    // (left for people) are never run, `done` is replayed.
    struct Case {
        state: &'static str,
        answer: Answer,
        runs: usize,
        row_after: (&'static str, i32),
    }
    let conflict = Answer::refused(RejectionKind::InFlight);
    let cases = [
        Case { state: "pending", answer: Answer::fresh(StatusCode::OK), runs: 1, row_after: ("done", 2) },
        Case { state: "failed", answer: Answer::fresh(StatusCode::OK), runs: 1, row_after: ("done", 2) },
        Case { state: "running", answer: conflict, runs: 0, row_after: ("running", 1) },
        Case { state: "dead", answer: conflict, runs: 0, row_after: ("dead", 1) },
        Case { state: "done", answer: Answer::replayed(StatusCode::OK), runs: 0, row_after: ("done", 1) },
    ];
    let db = TestDb::new().await;
    for Case { state, answer, runs: expected_runs, row_after } in cases {
        let key = format!("evt_state_{state}");
        db.pool
            .get()
            .await
            .unwrap()
            .execute(
                "INSERT INTO webhook_idempotency.webhook_events
                     (scope, provider, event_key, state, attempts, payload, run_at, locked_until, lease_token,
                      completed_at, response_status)
                 VALUES ('acct_test', 'stripe', $1, $2, 1, ''::bytea,
                         CASE WHEN $2 = 'pending' THEN now() END,
                         CASE WHEN $2 = 'running' THEN now() + interval '1 hour' END,
                         CASE WHEN $2 = 'running' THEN gen_random_uuid() END,
                         CASE WHEN $2 = 'done' THEN now() END,
                         CASE WHEN $2 = 'done' THEN 202::int2 END)",
                &[&key, &state],
            )
            .await
            .unwrap();
        let (app, runs) =
            counted_route(stripe_layer(db.pool.clone()).lock_timeout(Duration::from_millis(200)).build().unwrap());
        assert_eq!(deliver(&app, &key).await, answer, "{state}");
        assert_eq!(runs.load(Ordering::SeqCst), expected_runs, "{state}");
        assert_eq!(db.effects_for(&key).await, expected_runs as i64, "{state}");
        let row = db.event_row(&key).await.map(|(s, a, _)| (s, a));
        assert_eq!(row, Some((row_after.0.to_owned(), row_after.1)), "{state}");
    }
}

// ---------------------------------------------------------------------------
// The advisory lock: copies of an in-flight event, a pool of four, a lock
// held elsewhere, two events sharing a lock key.
// ---------------------------------------------------------------------------

/// A handler for `gated` that signals `entered` and waits for `gate`, and
/// applies the effect for every other event at once.
fn gated_handler(
    gated: &'static str,
    entered: Arc<Notify>,
    gate: watch::Receiver<bool>,
    runs: Arc<AtomicUsize>,
) -> impl Fn(WebhookTx, WebhookEvent) -> std::pin::Pin<Box<dyn std::future::Future<Output = StatusCode> + Send>> + Clone
{
    move |tx, event| {
        let (entered, mut gate, runs) = (entered.clone(), gate.clone(), runs.clone());
        Box::pin(async move {
            if event.key() == gated {
                runs.fetch_add(1, Ordering::SeqCst);
                if insert_effect(&tx, &event).await.is_err() {
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                entered.notify_one();
                let _ = gate.wait_for(|open| *open).await;
                // Still the claim's transaction after the wait.
                match TxDb::of(&tx).await.unwrap().execute("SELECT 1", &[]).await {
                    Ok(_) => StatusCode::OK,
                    Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
                }
            } else {
                apply_effect(tx, event).await
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_copies_of_a_slow_new_event_on_a_pool_of_four_apply_one_effect_and_never_starve_another_event() {
    for isolation in [IsolationLevel::ReadCommitted, IsolationLevel::RepeatableRead, IsolationLevel::Serializable] {
        fifty_copies_at(isolation).await;
    }
}

/// At REPEATABLE READ and SERIALIZABLE a copy whose snapshot predates the
/// first delivery's COMMIT meets its row as a serialization failure (40001),
/// which the claim checks again.
async fn fifty_copies_at(isolation: IsolationLevel) {
    const COPIES: usize = 50;
    let db = TestDb::new().await;
    let entered = Arc::new(Notify::new());
    let (open, gate) = watch::channel(false);
    let runs = Arc::new(AtomicUsize::new(0));
    let app = route(
        gated_handler("evt_gated", entered.clone(), gate, runs.clone()),
        stripe_layer(StoreConfig::from(db.pool(4)).pool_timeout(Duration::from_secs(10)))
            .isolation_level(isolation)
            .lock_timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
    );
    let answered = Arc::new(AtomicUsize::new(0));
    let copies: Vec<_> = (0..COPIES)
        .map(|_| {
            let (app, answered) = (app.clone(), answered.clone());
            tokio::spawn(async move {
                let answer = deliver(&app, "evt_gated").await;
                answered.fetch_add(1, Ordering::SeqCst);
                answer
            })
        })
        .collect();
    within("one copy in the handler", entered.notified()).await;
    // 49 copies keep checking on the 3 free connections meanwhile; an
    // unrelated event still gets one and is processed.
    let other = within("an unrelated event", deliver(&app, "evt_unrelated")).await;
    assert_eq!(other, Answer::fresh(StatusCode::OK), "{isolation:?}");
    assert_eq!(db.effects_for("evt_unrelated").await, 1, "{isolation:?}");
    assert_eq!(answered.load(Ordering::SeqCst), 0, "no copy answered while the first is in flight at {isolation:?}");

    open.send(true).unwrap();
    let mut answers = Vec::new();
    for copy in copies {
        answers.push(within("a copy's answer", copy).await.unwrap());
    }
    let fresh = answers.iter().filter(|a| **a == Answer::fresh(StatusCode::OK)).count();
    let replayed = answers.iter().filter(|a| **a == Answer::replayed(StatusCode::OK)).count();
    let conflicts = answers.iter().filter(|a| **a == Answer::refused(RejectionKind::InFlight)).count();
    assert_eq!((fresh, replayed + conflicts), (1, COPIES - 1), "{answers:?} at {isolation:?}");
    assert!(answers.iter().all(|a| !a.status.is_server_error()), "{answers:?} at {isolation:?}");
    assert_eq!((db.effects_for("evt_gated").await, runs.load(Ordering::SeqCst)), (1, 1), "{isolation:?}");
    assert_eq!(db.event_row("evt_gated").await, Some(("done".into(), 1, Some(200))), "{isolation:?}");
    assert_eq!(db.idle_in_transaction().await, 0, "{isolation:?}");
}

#[tokio::test]
async fn an_advisory_lock_held_elsewhere_on_the_event_delays_its_delivery_which_then_runs_once() {
    // Another session holds the lock a claim of `evt_locked` takes (as a
    // colliding event's claim would): a delivery never runs meanwhile (409
    // after the in-flight wait), and runs once the lock is released, also
    // when that happens during its wait.
    // On Citus the claim's lock is taken on the coordinator, as a statement
    // naming no table (OPERATIONS.md, "Distributed PostgreSQL (Citus)"):
    // the holder's session is there too.
    let db = TestDb::new().await;
    let holder = db.pool.get().await.unwrap();
    let take_lock =
        format!("BEGIN; SELECT pg_advisory_xact_lock({CLAIM_LOCK_CLASS}, hashtext('9:acct_test/6:stripe/evt_locked'))");
    holder.batch_execute(&take_lock).await.unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = {
        let runs = runs.clone();
        move |tx: WebhookTx, event: WebhookEvent| {
            runs.fetch_add(1, Ordering::SeqCst);
            apply_effect(tx, event)
        }
    };
    let short =
        route(handler.clone(), stripe_layer(db.pool.clone()).lock_timeout(Duration::from_millis(300)).build().unwrap());
    let long = route(handler, stripe_layer(db.pool.clone()).lock_timeout(Duration::from_secs(30)).build().unwrap());

    assert_eq!(deliver(&short, "evt_locked").await, Answer::refused(RejectionKind::InFlight));
    assert_eq!((runs.load(Ordering::SeqCst), db.event_row("evt_locked").await), (0, None));
    // Other events are not held up.
    assert_eq!(deliver(&short, "evt_free").await, Answer::fresh(StatusCode::OK));

    // A delivery waiting on the lock when it is released: it runs, once.
    let (logs, _guard) = Logs::capture();
    let waiting = tokio::spawn({
        let long = long.clone();
        async move { deliver(&long, "evt_locked").await }
    });
    assert!(
        eventually(Duration::from_secs(10), || {
            let logs = logs.clone();
            async move { !logs.lines_with(&["outcome=\"waiting\""]).is_empty() }
        })
        .await,
        "the delivery is waiting on the held lock"
    );
    assert!(!waiting.is_finished());
    holder.batch_execute("COMMIT").await.unwrap();
    assert_eq!(within("the waiting delivery", waiting).await.unwrap(), Answer::fresh(StatusCode::OK));
    assert_eq!(deliver(&long, "evt_locked").await, Answer::replayed(StatusCode::OK));
    assert_eq!((db.effects_for("evt_locked").await, runs.load(Ordering::SeqCst)), (1, 2));
    assert_eq!(db.event_row("evt_locked").await, Some(("done".into(), 1, Some(200))));
}

#[tokio::test]
async fn two_events_whose_scope_and_key_join_alike_do_not_hold_each_other_up() {
    // Were the lock key hashtext(scope || '/' || provider || '/' || key),
    // the event `z` of scope `s/stripe/k` and the event `k/stripe/z` of
    // scope `s` would join to the same text "s/stripe/k/stripe/z" and share
    // a lock without any hash collision: B answered 409 while A ran. Scopes
    // and keys may contain '/' (event ids are sender-chosen strings, scopes
    // tenant names).
    let db = TestDb::new().await;
    let entered = Arc::new(Notify::new());
    let (open, gate) = watch::channel(false);
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = gated_handler("k/stripe/z", entered.clone(), gate, runs.clone());
    let layer = |scope: &str| {
        stripe_layer(db.pool.clone()).scope(scope).lock_timeout(Duration::from_millis(500)).build().unwrap()
    };
    let a = route(handler.clone(), layer("s"));
    let b = route(handler, layer("s/stripe/k"));

    let first = tokio::spawn({
        let a = a.clone();
        async move { deliver(&a, "k/stripe/z").await }
    });
    within("event A in its handler", entered.notified()).await;
    // Event B is another event: it must not wait for A.
    let other = deliver(&b, "z").await;
    open.send(true).unwrap();
    assert_eq!(within("event A", first).await.unwrap(), Answer::fresh(StatusCode::OK));
    assert_eq!(other, Answer::fresh(StatusCode::OK), "an unrelated event was held up by A");
    assert_eq!(db.effects().await, 2);
}

#[tokio::test]
async fn a_row_lock_held_without_the_advisory_lock_never_lets_a_copy_run() {
    // A writer that does not take the advisory lock holds the event's row:
    // an older release's claim (an uncommitted `running` row) during a
    // rolling deploy, or an operator's transaction. The delivery must not
    // run (whatever it answers: 409 or 503), and runs once the row is free.
    let db = TestDb::new().await;
    let other = raw_session(&db).await;
    other
        .batch_execute(
            "BEGIN; INSERT INTO webhook_idempotency.webhook_events (scope, provider, event_key, state)
                    VALUES ('acct_test', 'stripe', 'evt_row_locked', 'running')",
        )
        .await
        .unwrap();
    let (app, runs) = counted_route(
        stripe_layer(StoreConfig::from(db.pool(4)).database_timeout(Duration::from_millis(800)))
            .lock_timeout(Duration::from_millis(300))
            .build()
            .unwrap(),
    );
    let started = std::time::Instant::now();
    let held = deliver(&app, "evt_row_locked").await;
    let waited = started.elapsed();
    assert!(
        held == Answer::refused(RejectionKind::InFlight) || held == Answer::refused(RejectionKind::StoreUnavailable),
        "{held:?} after {waited:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    other.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(deliver(&app, "evt_row_locked").await, Answer::fresh(StatusCode::OK));
    assert_eq!((db.effects().await, runs.load(Ordering::SeqCst)), (1, 1));
    assert!(
        eventually(Duration::from_secs(10), || async { db.idle_in_transaction().await == 0 }).await,
        "the timed-out claim's session was closed"
    );
}
