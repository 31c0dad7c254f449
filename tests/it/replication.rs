//! Synchronous replication on a real primary and its streaming standby
//! (`TempPostgres::standby_of`, the primary with `synchronous_standby_names =
//! '*'`): the standby is stopped (a stalled standby: every commit on the
//! primary waits for its confirmation), and a COMMIT that waits is
//! cancelled (`pg_cancel_backend`), terminated (`pg_terminate_backend`) or
//! interrupted by a fast restart of the primary. PostgreSQL then makes it
//! visible on the primary alone ("canceling wait for synchronous
//! replication ... The transaction has already committed locally, but might
//! not have been replicated to the standby"). A redelivery must not be
//! answered 2xx from that row until the standby confirmed it: a failover at
//! that point would lose an acknowledged event. Once the standby is back,
//! the redelivery is an ordinary duplicate.
//!
//! One pair at a time (they would fight for the two cores otherwise).

use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use ::tower::ServiceExt;
use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{Request, StatusCode};
use webhook_idempotency::idempotency_key::IdempotencyKeyLayer;
use webhook_idempotency::{IdempotentRequest, Mode, WebhookTx};

/// One pair at a time in this process.
static ONE_PAIR: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Whether `log` holds the warning PostgreSQL logs when a commit's wait for
/// the standby is cancelled ("canceling wait for synchronous replication due
/// to user request") or ended with its backend ("canceling the wait for
/// synchronous replication and terminating connection", a terminate or a
/// fast shutdown): `SyncRepWaitForLSN`, `src/backend/replication/syncrep.c`.
fn cancelled_wait(log: &str) -> bool {
    log.contains("canceling wait for synchronous replication")
        || log.contains("canceling the wait for synchronous replication")
}

/// A primary, its synchronous standby, and a fresh database on the primary.
struct Pair {
    primary: Arc<TempPostgres>,
    standby: Arc<TempPostgres>,
    db: TestDb,
    _one: tokio::sync::MutexGuard<'static, ()>,
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

impl Pair {
    async fn start() -> Self {
        let one = ONE_PAIR.lock().await;
        let (primary, standby) = blocking(|| {
            let primary = TempPostgres::start().expect("start the primary");
            let standby = TempPostgres::standby_of(&primary).expect("start its standby");
            primary.synchronous_standby().expect("synchronous_standby_names");
            (Arc::new(primary), Arc::new(standby))
        })
        .await;
        let db = TestDb::on(primary.url("postgres").parse().unwrap()).await;
        let pair = Self { primary, standby, db, _one: one };
        pair.caught_up().await;
        pair
    }

    /// A new connection to the primary (never a pooled one: the primary
    /// restarts in one test).
    async fn client(&self) -> tokio_postgres::Client {
        let (client, conn) = self.db.config.connect(tokio_postgres::NoTls).await.expect("connect to the primary");
        tokio::spawn(conn);
        client
    }

    /// Waits until the synchronous standby confirmed (flushed) everything
    /// the primary wrote so far.
    async fn caught_up(&self) {
        let confirmed = eventually(Duration::from_secs(60), || async {
            let sql = "SELECT EXISTS (SELECT FROM pg_stat_replication WHERE sync_state = 'sync'
                                         AND flush_lsn >= pg_current_wal_lsn())";
            self.client().await.query_one(sql, &[]).await.is_ok_and(|r| r.get::<_, bool>(0))
        })
        .await;
        assert!(confirmed, "the synchronous standby confirmed everything the primary wrote");
    }

    /// The standby stopped: from now on every commit on the primary waits.
    async fn stall(&self) {
        let standby = Arc::clone(&self.standby);
        blocking(move || standby.stop_server()).await.expect("stop the standby");
    }

    /// The standby started again; once it confirmed everything.
    async fn resume(&self) {
        let standby = Arc::clone(&self.standby);
        blocking(move || standby.start_server()).await.expect("start the standby");
        self.caught_up().await;
    }

    /// Backends of the test's database waiting for the standby, with their
    /// last statement.
    async fn waiting(&self) -> Vec<(i32, String)> {
        let sql = "SELECT pid, query FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND datname = $1";
        let rows = self.client().await.query(sql, &[&self.db.name]).await.unwrap();
        rows.iter().map(|r| (r.get(0), r.get(1))).collect()
    }

    async fn scalar(&self, sql: &str, key: &str) -> i64 {
        self.client().await.query_one(sql, &[&key]).await.unwrap().get(0)
    }

    /// The primary's log.
    fn log(&self) -> String {
        self.primary.log().expect("read the primary's log")
    }
}

/// What happens to the COMMIT that waits for the stalled standby.
#[derive(Clone, Copy, Debug)]
enum Action {
    Cancel,
    Terminate,
    FastRestart,
}

impl Action {
    async fn on(self, pair: &Pair, pid: i32) {
        let signal = match self {
            Action::Cancel => "SELECT pg_cancel_backend($1)",
            Action::Terminate => "SELECT pg_terminate_backend($1::int)",
            Action::FastRestart => {
                let primary = Arc::clone(&pair.primary);
                blocking(move || primary.stop_server().and_then(|()| primary.start_server()))
                    .await
                    .expect("fast restart of the primary");
                return;
            }
        };
        let signalled: bool = pair.client().await.query_one(signal, &[&pid]).await.unwrap().get(0);
        assert!(signalled, "{self:?}: backend {pid} signalled");
    }
}

/// The layer's client-side deadline in these tests (the default): longer
/// than the failure record's server-side `lock_timeout` (1 s), so that
/// record gives up on the waiting row by itself and only the handler's
/// COMMIT waits for the standby.
const TIMEOUT: Duration = Duration::from_secs(2);

fn store(db: &TestDb) -> StoreConfig {
    StoreConfig::from(db.pool(4)).database_timeout(TIMEOUT)
}

async fn deliver(app: &Router, req: Request<Body>) -> (StatusCode, bool) {
    let res = app.clone().oneshot(req).await.unwrap();
    (res.status(), res.headers().get("idempotent-replayed").is_some_and(|v| v == "true"))
}

/// Waits until the backends waiting for the standby are exactly `n`.
async fn waiting_for_the_standby(pair: &Pair, n: usize) -> Vec<(i32, String)> {
    let reached = eventually(Duration::from_secs(10), || async { pair.waiting().await.len() == n }).await;
    let waiting = pair.waiting().await;
    assert!(reached && waiting.len() == n, "{n} backends wait for the standby: {waiting:?}");
    waiting
}

/// The webhook layer's duplicate: the first delivery's COMMIT waits for the
/// stalled standby (503 after the deadline; the connection closed without a
/// cancel request), then `action` makes it visible on the primary alone.
/// Every redelivery is answered 503 while the standby is stopped; once it
/// is back and has confirmed, 200 with `Idempotent-Replayed`; the handler
/// ran once.
async fn redelivery_waits_for_the_standby(action: Action) {
    let pair = Pair::start().await;
    let app = Router::new()
        .route("/webhooks/stripe", post(apply_effect).layer(stripe_layer(store(&pair.db)).build().unwrap()));
    let key = "evt_unconfirmed";
    pair.stall().await;
    assert_eq!(deliver(&app, stripe_request(stripe_body(key))).await.0, StatusCode::SERVICE_UNAVAILABLE);
    let waiting = waiting_for_the_standby(&pair, 1).await;
    action.on(&pair, waiting[0].0).await;
    let done = "SELECT count(*) FROM webhook_idempotency.webhook_events WHERE event_key = $1 AND state = 'done'";
    let visible = eventually(Duration::from_secs(10), || async { pair.scalar(done, key).await == 1 }).await;
    assert!(visible, "{action:?}: the event is done on the primary alone");
    assert!(cancelled_wait(&pair.log()), "{action:?}: PostgreSQL committed it locally");

    for attempt in 1..=2 {
        let (status, _) = deliver(&app, stripe_request(stripe_body(key))).await;
        assert_eq!(
            status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{action:?}: redelivery {attempt} answered while the standby confirmed nothing"
        );
    }
    pair.resume().await;
    assert_eq!(deliver(&app, stripe_request(stripe_body(key))).await, (StatusCode::OK, true), "{action:?}");
    assert_eq!(pair.scalar("SELECT count(*) FROM effects WHERE event_key = $1", key).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_commit_is_not_acknowledged_to_a_redelivery_before_the_standby_confirms_it() {
    redelivery_waits_for_the_standby(Action::Cancel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_commit_is_not_acknowledged_to_a_redelivery_before_the_standby_confirms_it() {
    redelivery_waits_for_the_standby(Action::Terminate).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_interrupted_by_a_fast_restart_is_not_acknowledged_to_a_redelivery_before_the_standby_confirms_it() {
    redelivery_waits_for_the_standby(Action::FastRestart).await;
}

/// The other answers from a stored row, after one cancelled wait each: the
/// inbox's accept of an event already stored, the body-digest guard's
/// replay (the same GitHub body under another delivery id) and the
/// `Idempotency-Key` layer's stored response. 503 while the standby is
/// stopped, the replay once it confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_the_body_digest_guard_and_the_idempotency_key_layer_replay_nothing_the_standby_did_not_confirm() {
    let pair = Pair::start().await;
    let db = &pair.db;
    let inbox = Router::new().route(
        "/webhooks/stripe",
        post(|| async { StatusCode::IM_A_TEAPOT }).layer(stripe_layer(store(db)).mode(Mode::Inbox).build().unwrap()),
    );
    let guarded = Router::new().route(
        "/webhooks/github",
        post(apply_effect).layer(github_layer(store(db)).body_digest_guard(true).build().unwrap()),
    );
    let payments = Router::new()
        .route(
            "/payments",
            post(|tx: WebhookTx, req: IdempotentRequest| async move {
                let insert = "INSERT INTO effects (provider, scope, event_key) VALUES ('api', $1, $2)";
                TxDb::of(&tx).await.unwrap().execute(insert, &[req.scope().into(), req.key().into()]).await.unwrap();
                (StatusCode::CREATED, "{\"id\":\"pay_1\"}")
            }),
        )
        .layer(IdempotencyKeyLayer::builder(store(db)).scope(|_| Some("caller_1".to_owned())).build().unwrap());
    let push = br#"{"ref":"refs/heads/main","after":"1f2e3d"}"#.to_vec();
    let payment = || {
        Request::post("/payments")
            .header("content-type", "application/json")
            .header("idempotency-key", "key_unconfirmed")
            .body(Body::from(r#"{"amount":1000}"#))
            .unwrap()
    };

    pair.stall().await;
    let firsts = tokio::join!(
        deliver(&inbox, stripe_request(stripe_body("evt_inbox_unconfirmed"))),
        deliver(&guarded, github_request("delivery-1", push.clone())),
        deliver(&payments, payment()),
    );
    let unavailable = (StatusCode::SERVICE_UNAVAILABLE, false);
    assert_eq!(firsts, (unavailable, unavailable, unavailable), "no first delivery acknowledged");
    for (pid, _) in pair.waiting().await {
        Action::Cancel.on(&pair, pid).await;
    }
    let stored = "SELECT (SELECT count(*) FROM webhook_idempotency.webhook_events WHERE event_key = $1)
                      + (SELECT count(*) FROM webhook_idempotency.webhook_events
                          WHERE event_key = 'delivery-1' AND state = 'done')
                      + (SELECT count(*) FROM webhook_idempotency.webhook_request_keys
                          WHERE idempotency_key = 'key_unconfirmed' AND response_status IS NOT NULL)";
    let visible =
        eventually(Duration::from_secs(10), || async { pair.scalar(stored, "evt_inbox_unconfirmed").await == 3 }).await;
    assert!(visible, "the three rows are visible on the primary alone");

    let redeliveries = tokio::join!(
        deliver(&inbox, stripe_request(stripe_body("evt_inbox_unconfirmed"))),
        deliver(&guarded, github_request("delivery-2", push.clone())),
        deliver(&payments, payment()),
    );
    assert_eq!(
        redeliveries,
        (unavailable, unavailable, unavailable),
        "(inbox accept, body-digest replay, Idempotency-Key replay) while the standby confirmed nothing"
    );
    pair.resume().await;
    let replayed = tokio::join!(
        deliver(&inbox, stripe_request(stripe_body("evt_inbox_unconfirmed"))),
        deliver(&guarded, github_request("delivery-3", push.clone())),
        deliver(&payments, payment()),
    );
    assert_eq!(replayed, ((StatusCode::OK, true), (StatusCode::OK, true), (StatusCode::CREATED, true)));
    assert_eq!(pair.scalar("SELECT count(*) FROM effects WHERE event_key <> $1", "").await, 2, "each ran once");
}

/// An inbox accept whose commit waits for the stalled standby past the
/// database timeout: answered 503, and no cancel request reaches the server
/// (the accept is an autocommit INSERT: a cancelled wait would commit it on
/// the primary alone). Its backend keeps waiting; once the standby is back
/// it commits, and PostgreSQL never logged a cancelled wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_accept_past_the_database_timeout_is_answered_503_and_its_waiting_commit_never_cancelled() {
    let pair = Pair::start().await;
    let inbox = Router::new().route(
        "/webhooks/stripe",
        post(|| async { StatusCode::IM_A_TEAPOT })
            .layer(stripe_layer(store(&pair.db)).mode(Mode::Inbox).build().unwrap()),
    );
    let key = "evt_accept_waits";
    pair.stall().await;
    assert_eq!(deliver(&inbox, stripe_request(stripe_body(key))).await, (StatusCode::SERVICE_UNAVAILABLE, false));
    let waiting = pair.waiting().await;
    assert!(
        waiting.len() == 1 && waiting[0].1.contains("INSERT INTO webhook_idempotency.webhook_events"),
        "the accept's backend still waits for the standby after the 503: {waiting:?}"
    );
    let row = "SELECT count(*) FROM webhook_idempotency.webhook_events WHERE event_key = $1";
    assert_eq!(pair.scalar(row, key).await, 0, "not visible before the standby confirms it");
    pair.resume().await;
    let committed = eventually(Duration::from_secs(10), || async { pair.scalar(row, key).await == 1 }).await;
    assert!(committed, "the accept committed once the standby confirmed it");
    assert!(pair.waiting().await.is_empty());
    assert!(!cancelled_wait(&pair.log()), "a cancel request reached the waiting commit:\n{}", pair.log());
    assert_eq!(deliver(&inbox, stripe_request(stripe_body(key))).await, (StatusCode::OK, true));
}
