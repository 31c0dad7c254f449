//! The statement, round-trip and WAL budget of a delivery, as a regression
//! guard: counted on the wire by a proxy between the pool and PostgreSQL.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use ::tower::ServiceExt;
use axum::routing::post;
use axum::Router;
use http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use webhook_idempotency::{WebhookEvent, WebhookTx};

/// The database a budget is measured on, the server it stays alive with
/// and the port to proxy: a server of its own (WAL positions are
/// server-wide, and other tests write), or in a Citus run a database on the
/// cluster through its coordinator (the coordinator's WAL; what the client
/// sends is the same protocol, and the round trips are the client's).
async fn own_database() -> (Option<TempPostgres>, TestDb, u16) {
    if on_citus() {
        return (None, TestDb::new().await, citus().coordinator.port());
    }
    let server = TempPostgres::start().unwrap();
    let db = TestDb::on(server.url("postgres").parse().unwrap()).await;
    let port = server.port();
    (Some(server), db, port)
}

/// Counts round trips: each time the client sends after the server has
/// answered (or first) is one flight out; pipelined requests sent before any
/// answer count once.
#[derive(Default)]
struct Turns {
    round_trips: AtomicU64,
    /// Statements the client asked to run: each extended-protocol Execute
    /// message, and each statement of a simple Query message.
    statements: AtomicU64,
    /// 0: nothing yet, 1: the client spoke last, 2: the server did.
    last: AtomicU8,
}

/// Reads the client's side of the protocol (PostgreSQL docs, "Message
/// Formats"): an untyped startup message, then typed messages (one type byte,
/// a 4-byte big-endian length that counts itself).
#[derive(Default)]
struct Frontend {
    pending: Vec<u8>,
    started: bool,
}

impl Frontend {
    /// Statements in the messages completed by `bytes`.
    fn feed(&mut self, bytes: &[u8]) -> u64 {
        self.pending.extend_from_slice(bytes);
        let mut statements = 0;
        loop {
            let typed = usize::from(self.started);
            let Some(len) = self.pending.get(typed..typed + 4) else { break };
            let end = typed + u32::from_be_bytes(len.try_into().unwrap()) as usize;
            if self.pending.len() < end {
                break;
            }
            if self.started {
                statements += match self.pending[0] {
                    b'E' => 1,
                    b'Q' => {
                        let text = String::from_utf8_lossy(&self.pending[5..end - 1]).into_owned();
                        text.split(';').filter(|s| !s.trim().is_empty()).count() as u64
                    }
                    _ => 0,
                };
            }
            self.started = true;
            self.pending.drain(..end);
        }
        statements
    }
}

async fn counting_proxy(target: u16, turns: Arc<Turns>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let turns = Arc::clone(&turns);
            tokio::spawn(async move {
                let outbound = tokio::net::TcpStream::connect(("127.0.0.1", target)).await.unwrap();
                let (mut ci, mut co) = inbound.into_split();
                let (mut si, mut so) = outbound.into_split();
                let up = {
                    let turns = Arc::clone(&turns);
                    async move {
                        let mut buf = vec![0u8; 64 * 1024];
                        let mut frontend = Frontend::default();
                        while let Ok(n @ 1..) = ci.read(&mut buf).await {
                            turns.statements.fetch_add(frontend.feed(&buf[..n]), Ordering::SeqCst);
                            if turns.last.swap(1, Ordering::SeqCst) != 1 {
                                turns.round_trips.fetch_add(1, Ordering::SeqCst);
                            }
                            if so.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                        let _ = so.shutdown().await;
                    }
                };
                let down = async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n @ 1..) = si.read(&mut buf).await {
                        if co.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                        turns.last.store(2, Ordering::SeqCst);
                    }
                    let _ = co.shutdown().await;
                };
                tokio::join!(up, down);
            });
        }
    });
    port
}

/// A handler with one business insert, prepared once per connection (one
/// round trip, like a hand-written handler's): tokio-postgres's
/// `prepare_cached`, or sqlx's statement cache (`query` is persistent).
async fn one_insert(tx: WebhookTx, event: WebhookEvent) -> StatusCode {
    const INSERT: &str = "INSERT INTO effects (scope, event_key, body) VALUES ($1, $2, $3)";
    let done = if on_sqlx() {
        let mut db = TxDb::of(&tx).await.unwrap();
        db.execute(INSERT, &[event.scope().into(), event.key().into(), event.body().as_ref().into()]).await.map(drop)
    } else {
        let client = tx.client().await.unwrap();
        let stmt = client.prepare_cached(INSERT).await.unwrap();
        client
            .execute(&stmt, &[&event.scope(), &event.key(), &event.body().as_ref()])
            .await
            .map(drop)
            .map_err(Into::into)
    };
    match done {
        Ok(()) => StatusCode::OK,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The round trips of a delivery on this run's driver: `pipelined` on
/// tokio-postgres, which pipelines a flight's statements (one round trip
/// for `BEGIN`, the fence's `SET LOCAL` and the claim; one for the fence
/// check and `COMMIT`); `sqlx` on sqlx, which sends each extended-protocol
/// statement after the previous answer (sqlx#408) and only consecutive
/// simple-query statements in one message (`BEGIN` with `SET LOCAL`), plus
/// the ping sqlx's pool sends when the connection goes back to it (sqlx
/// 0.9.1, always; the suite's pools turn the ping before each checkout off,
/// as README's "Using sqlx" recommends).
fn trips(pipelined: u64, sqlx: u64) -> u64 {
    if on_sqlx() {
        sqlx + 1
    } else {
        pipelined
    }
}

/// The statements of a claim whose transaction counted `n` off Citus: on
/// Citus the event's advisory lock is a statement of its own, sent before
/// the claim Citus routes whole to the event's shard (in the claim's flight:
/// no round trip on tokio-postgres, one on sqlx).
fn lock(n: u64) -> u64 {
    n + u64::from(on_citus())
}

/// [`trips`] of a delivery that claims (takes the lock on Citus).
fn claim_trips(pipelined: u64, sqlx: u64) -> u64 {
    trips(pipelined, lock(sqlx))
}

/// A delivery's cost on the wire: (round trips, statements) of a new event
/// (the handler's insert included) and of a duplicate, and whether the
/// duplicate wrote WAL.
struct Cost {
    new: (u64, u64),
    duplicate: (u64, u64),
    duplicate_wrote_wal: bool,
}

#[tokio::test]
async fn round_trips_and_wal_per_delivery_stay_within_budget() {
    // The hand-written handler's budget for a new event: BEGIN, claim,
    // insert, COMMIT = 4 round trips and 4 statements.
    // Lookup first (default): the lookup, BEGIN (with the fence's SET LOCAL)
    // + the claim, the insert, the fence check + COMMIT; a duplicate is the
    // lookup alone.
    // On sqlx: the lookup, BEGIN + SET LOCAL, the claim, the insert, the
    // check, COMMIT.
    let cost = measure(true).await;
    assert_eq!(cost.new, (claim_trips(4, 6), lock(7)), "new event (round trips, statements), lookup first");
    assert_eq!(cost.duplicate, (trips(1, 1), 1), "duplicate (round trips, statements), lookup first");
    // On Citus WAL is per node, and the coordinator's moves with Citus's
    // own background work: the round trips are what is compared there.
    assert!(on_citus() || !cost.duplicate_wrote_wal, "a duplicate writes no WAL");
    // Claim first: BEGIN + the claim, the insert, the check + COMMIT; a
    // duplicate is BEGIN + the claim, then the lookup + ROLLBACK.
    // On sqlx: BEGIN + SET LOCAL, the claim, the insert, the check, COMMIT;
    // a duplicate: BEGIN + SET LOCAL, the claim, the lookup, ROLLBACK.
    let cost = measure(false).await;
    assert_eq!(cost.new, (claim_trips(3, 5), lock(6)), "new event (round trips, statements), claim first");
    assert_eq!(cost.duplicate, (claim_trips(2, 4), lock(5)), "duplicate (round trips, statements), claim first");
    // On Citus WAL is per node, and the coordinator's moves with Citus's
    // own background work: the round trips are what is compared there.
    assert!(on_citus() || !cost.duplicate_wrote_wal, "a duplicate writes no WAL");
}

async fn measure(lookup_first: bool) -> Cost {
    let (_server, db, target) = own_database().await;
    let turns = Arc::new(Turns::default());
    let port = counting_proxy(target, Arc::clone(&turns)).await;
    let via_proxy = format!("postgresql://postgres@127.0.0.1:{port}/{}", db.name);
    let store = pool(via_proxy.parse().unwrap(), 1);
    let app = Router::new().route(
        "/webhooks/stripe",
        post(one_insert).layer(stripe_layer(store.clone()).lookup_first(lookup_first).build().unwrap()),
    );
    // Each answer counted once its connection is back in the pool.
    let send = |id: &str| {
        let (app, store, request) = (app.clone(), store.clone(), stripe_request(stripe_body(id)));
        async move {
            let answer = app.oneshot(request).await;
            store.settled().await;
            answer
        }
    };
    // Warm the one pooled connection: its statements get prepared once.
    assert_eq!(send("evt_warm").await.unwrap().status(), StatusCode::OK);
    assert_eq!(send("evt_warm").await.unwrap().status(), StatusCode::OK);

    let counts = || (turns.round_trips.load(Ordering::SeqCst), turns.statements.load(Ordering::SeqCst));
    let measure = |(trips, statements): (u64, u64)| {
        let (t, s) = counts();
        (t - trips, s - statements)
    };
    let before = counts();
    assert_eq!(send("evt_new").await.unwrap().status(), StatusCode::OK);
    let (new_event, new_statements) = measure(before);

    let wal = |db: &TestDb| {
        let db = db.pool.clone();
        async move {
            let c = db.get().await.unwrap();
            c.query_one("SELECT pg_current_wal_insert_lsn()::text", &[]).await.unwrap().get::<_, String>(0)
        }
    };
    let wal_before = wal(&db).await;
    let before = counts();
    let res = send("evt_new").await.unwrap();
    assert_eq!((res.status(), res.headers().contains_key("idempotent-replayed")), (StatusCode::OK, true));
    let (duplicate, duplicate_statements) = measure(before);
    let wal_after = wal(&db).await;
    println!(
        "lookup first {lookup_first}: new event {new_event} round trips, {new_statements} statements (the \
         handler's insert included); duplicate {duplicate} round trips, {duplicate_statements} statements; \
         WAL by the duplicate: {wal_before} -> {wal_after}"
    );
    assert_eq!(db.effects_for("evt_new").await, 1);
    Cost {
        new: (new_event, new_statements),
        duplicate: (duplicate, duplicate_statements),
        duplicate_wrote_wal: wal_before != wal_after,
    }
}

/// The outbox worker's statements and round trips per delivered effect, on
/// one warm pooled connection, one effect at a time (concurrency 1, no
/// LISTEN, a poll interval longer than the run): each effect's lease (which
/// carries a payload up to 64 KiB) and its delivered mark; a larger payload
/// costs one read of its own.
#[tokio::test]
async fn outbox_round_trips_per_effect_stay_within_budget() {
    use webhook_idempotency::outbox::{Effect, EffectContext, EffectResult, Effects, OutboxWorker};
    let (_server, db, target) = own_database().await;
    let turns = Arc::new(Turns::default());
    let port = counting_proxy(target, Arc::clone(&turns)).await;
    let via_proxy = pool(format!("postgresql://postgres@127.0.0.1:{port}/{}", db.name).parse().unwrap(), 1);
    let app = Router::new().route(
        "/webhooks/stripe",
        post(|tx: WebhookTx, event: WebhookEvent| async move {
            match tx.enqueue(Effect::json("send_receipt", serde_json::json!({ "event": event.key() }))).await {
                Ok(_) => StatusCode::OK,
                Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
            }
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    let enqueue = |id: String| app.clone().oneshot(stripe_request(stripe_body(&id)));
    let done = "SELECT count(*) FROM webhook_idempotency.webhook_outbox WHERE state = 'done'";
    // Runs a worker on the proxied pool until `n` effects are done and the
    // proxy has seen at least `trips` round trips. The worker's lease after
    // the last effect runs after that effect's mark commits: a stop sent as
    // soon as the count of done rows is `n` could win the worker's `select!`
    // before that lease, so the stop waits for the round trip it expects.
    let drain = |n: i64, trips: u64| {
        let (via_proxy, db, turns) = (via_proxy.clone(), &db, Arc::clone(&turns));
        async move {
            let effects =
                Effects::new().effect("send_receipt", |_ctx: EffectContext| async { EffectResult::delivered() });
            let worker =
                OutboxWorker::builder(via_proxy, effects).concurrency(1).poll_interval(Duration::from_secs(60)).build();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(worker.unwrap().run(async move {
                let _ = stopped.await;
            }));
            assert!(eventually(Duration::from_secs(20), || async { db.scalar(done).await == n }).await);
            let seen = || turns.round_trips.load(Ordering::SeqCst);
            assert!(
                eventually(Duration::from_secs(20), || async { seen() >= trips }).await,
                "the worker's lease after the last effect never came: {} round trips, {trips} expected",
                seen()
            );
            let _ = stop.send(());
            task.await.unwrap();
        }
    };
    // Warm the one pooled connection: the worker's statements get prepared once.
    assert_eq!(enqueue("evt_warm".into()).await.unwrap().status(), StatusCode::OK);
    drain(1, 0).await;
    const EFFECTS: u64 = 10;
    for i in 0..EFFECTS {
        assert_eq!(enqueue(format!("evt_{i}")).await.unwrap().status(), StatusCode::OK);
    }
    let before = (turns.round_trips.load(Ordering::SeqCst), turns.statements.load(Ordering::SeqCst));
    // Per effect: lease (with its small payload) and delivered mark; and the
    // last lease, which finds nothing due. On Citus this worker, which
    // serves every scope, reads the scopes with due rows before each lease
    // (and leases nothing when none has any). The look-up of the `citus`
    // extension is once per pool (the warm-up's worker made it), except on
    // sqlx, where each `StoreConfig` built from a `PgPool` is a pool of its
    // own to the crate (sqlx's pool exposes no identity): one more there.
    let per_effect = if on_citus() { 3 } else { 2 };
    let expected_statements = per_effect * EFFECTS + 1 + u64::from(on_sqlx());
    // Each statement a checkout of its own: on sqlx, one ping more when the
    // connection goes back to the pool (see `trips`).
    let expected = if on_sqlx() { 2 * expected_statements } else { expected_statements };
    drain(1 + EFFECTS as i64, before.0 + expected).await;
    let trips = turns.round_trips.load(Ordering::SeqCst) - before.0;
    let statements = turns.statements.load(Ordering::SeqCst) - before.1;
    println!("outbox: {EFFECTS} effects one at a time: {trips} round trips, {statements} statements");
    assert_eq!((trips, statements), (expected, expected_statements), "(round trips, statements)");
}

/// The `Idempotency-Key` layer on the wire: a replay is the key's lookup
/// alone (one round trip, one statement, no transaction, no WAL), as a
/// webhook duplicate; a first request is the lookup, BEGIN + the claim + the
/// key's row read again, the handler's insert, and the stored response with
/// the fence + COMMIT (the round trips of a webhook's new event with lookup
/// first).
#[tokio::test]
async fn idempotency_key_round_trips_stay_within_budget() {
    use webhook_idempotency::idempotency_key::{IdempotencyKeyLayer, IdempotentRequest};
    let (_server, db, target) = own_database().await;
    let turns = Arc::new(Turns::default());
    let port = counting_proxy(target, Arc::clone(&turns)).await;
    let via_proxy = pool(format!("postgresql://postgres@127.0.0.1:{port}/{}", db.name).parse().unwrap(), 1);
    let layer = IdempotencyKeyLayer::builder(via_proxy.clone()).scope(|_| Some("caller_1".to_owned())).build().unwrap();
    let app = Router::new().route(
        "/payments",
        post(|tx: WebhookTx, req: IdempotentRequest| async move {
            const INSERT: &str = "INSERT INTO effects (scope, event_key) VALUES ($1, $2)";
            if on_sqlx() {
                TxDb::of(&tx).await.unwrap().execute(INSERT, &[req.scope().into(), req.key().into()]).await.unwrap();
            } else {
                let client = tx.client().await.unwrap();
                let stmt = client.prepare_cached(INSERT).await.unwrap();
                client.execute(&stmt, &[&req.scope(), &req.key()]).await.unwrap();
            }
            (StatusCode::CREATED, "{\"id\":\"pay_1\"}")
        })
        .layer(layer),
    );
    let send = |key: &str| {
        let req = http::Request::post("/payments").header("idempotency-key", key).body(axum::body::Body::from("{}"));
        let (app, store) = (app.clone(), via_proxy.clone());
        async move {
            let answer = app.oneshot(req.unwrap()).await;
            store.settled().await;
            answer
        }
    };
    // Warm the one pooled connection.
    assert_eq!(send("warm").await.unwrap().status(), StatusCode::CREATED);
    assert_eq!(send("warm").await.unwrap().status(), StatusCode::CREATED);
    let counts = || (turns.round_trips.load(Ordering::SeqCst), turns.statements.load(Ordering::SeqCst));
    let before = counts();
    assert_eq!(send("k-new").await.unwrap().status(), StatusCode::CREATED);
    let new = (counts().0 - before.0, counts().1 - before.1);
    let wal = || {
        let db = db.pool.clone();
        async move {
            let c = db.get().await.unwrap();
            c.query_one("SELECT pg_current_wal_insert_lsn()::text", &[]).await.unwrap().get::<_, String>(0)
        }
    };
    let wal_before = wal().await;
    let before = counts();
    let res = send("k-new").await.unwrap();
    assert!(res.headers().contains_key("idempotent-replayed"));
    let replay = (counts().0 - before.0, counts().1 - before.1);
    let wal_after = wal().await;
    println!("idempotency key: first request {new:?}, replay {replay:?} (round trips, statements)");
    // The claim's flight also re-reads the key's row (a recovery point
    // recorded while this request waited): a statement, no round trip; and
    // BEGIN's batch sets the fence the commit's statement checks.
    // On sqlx: the lookup, BEGIN + SET LOCAL, the claim, the re-read, the
    // insert, the stored response (fenced), COMMIT.
    assert_eq!(new, (claim_trips(4, 7), lock(8)), "first request (round trips, statements)");
    assert_eq!(replay, (trips(1, 1), 1), "replay (round trips, statements)");
    assert!(on_citus() || wal_before == wal_after, "a replay writes no WAL: {wal_before} -> {wal_after}");
    assert_eq!(db.effects_for("k-new").await, 1);
}

/// The default order adapts: with new events only, a new event costs what
/// claim first costs (3 round trips, 6 statements); once duplicates are most
/// of the recent traffic, a duplicate costs what lookup first costs (1, 1).
#[tokio::test]
async fn the_adaptive_order_claims_first_for_new_events_and_looks_up_first_under_duplicates() {
    let (_server, db, target) = own_database().await;
    let turns = Arc::new(Turns::default());
    let port = counting_proxy(target, Arc::clone(&turns)).await;
    let via_proxy = format!("postgresql://postgres@127.0.0.1:{port}/{}", db.name);
    let store = pool(via_proxy.parse().unwrap(), 1);
    let app =
        Router::new().route("/webhooks/stripe", post(one_insert).layer(stripe_layer(store.clone()).build().unwrap()));
    let send = |id: String| {
        let (app, store) = (app.clone(), store.clone());
        async move {
            let answer = app.oneshot(stripe_request(stripe_body(&id))).await;
            store.settled().await;
            answer
        }
    };
    let counts = || (turns.round_trips.load(Ordering::SeqCst), turns.statements.load(Ordering::SeqCst));
    for i in 0..4 {
        assert_eq!(send(format!("evt_warm_{i}")).await.unwrap().status(), StatusCode::OK);
    }
    let before = counts();
    assert_eq!(send("evt_new".into()).await.unwrap().status(), StatusCode::OK);
    let new = (counts().0 - before.0, counts().1 - before.1);
    assert_eq!(new, (claim_trips(3, 5), lock(6)), "a new event among new events: claim first");
    // Duplicates only: the recent share passes one in three within a few.
    for _ in 0..16 {
        let res = send("evt_new".into()).await.unwrap();
        assert!(res.headers().contains_key("idempotent-replayed"));
    }
    let before = counts();
    assert!(send("evt_new".into()).await.unwrap().headers().contains_key("idempotent-replayed"));
    let duplicate = (counts().0 - before.0, counts().1 - before.1);
    assert_eq!(duplicate, (trips(1, 1), 1), "a duplicate among duplicates: lookup first");
    // New events again: back to claim first.
    for i in 0..32 {
        assert_eq!(send(format!("evt_again_{i}")).await.unwrap().status(), StatusCode::OK);
    }
    let before = counts();
    assert_eq!(send("evt_last".into()).await.unwrap().status(), StatusCode::OK);
    assert_eq!((counts().0 - before.0, counts().1 - before.1), (claim_trips(3, 5), lock(6)), "back to claim first");
    assert_eq!(db.effects().await, 4 + 1 + 32 + 1);
}
