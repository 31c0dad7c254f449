//! The crate on a real Citus cluster (a coordinator and two workers, started
//! by the harness: `WEBHOOK_TEST_CITUS=1`, as `.ci/run`'s Citus step runs
//! this binary). What only Citus has: the tables `migrate` distributes, an
//! upgrade of a schema distributed by hand as the old docs said, and a
//! business table that is not colocated (a two-phase commit). The claim,
//! inbox, outbox, Idempotency-Key, retention and admin tests of the other
//! modules run on the same cluster in that step. Outside a Citus run these
//! tests have nothing to check and return at once.

use axum::routing::post;
use axum::Router;
use http::StatusCode;
use tokio_postgres::NoTls;
use tower::ServiceExt;
use webhook_idempotency::store::MIGRATIONS;
use webhook_idempotency::{migrate, StoreConfig};

use crate::support::*;

mod examples;

/// The crate's tables distributed by `scope`, and its reference tables.
const TENANT: [&str; 6] = [
    "webhook_events",
    "webhook_outbox",
    "webhook_actions",
    "webhook_versions",
    "webhook_body_digests",
    "webhook_request_keys",
];
const REFERENCE: [&str; 1] = ["webhook_schema_migrations"];

/// `(table, partition method, colocation id, worker ports holding its
/// shards)` of every table in Citus's metadata of the database `c` is on.
pub(super) async fn layout(c: &tokio_postgres::Client) -> Vec<(String, String, i32, Vec<i32>)> {
    c.query(
        "SELECT p.logicalrelid::regclass::text, p.partmethod::text, p.colocationid,
                array_agg(DISTINCT s.nodeport ORDER BY s.nodeport)
           FROM pg_dist_partition p JOIN pg_dist_shard_placement s
                ON s.shardid IN (SELECT shardid FROM pg_dist_shard WHERE logicalrelid = p.logicalrelid)
          GROUP BY 1, 2, 3 ORDER BY 1",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
    .collect()
}

/// Every tenant table hash-distributed (`h`) in one colocation group with
/// shards on both workers; the reference tables (`n`) on every node.
pub(super) fn assert_distributed(layout: &[(String, String, i32, Vec<i32>)]) {
    let workers: Vec<i32> = citus().workers.iter().map(|w| i32::from(w.port())).collect();
    let find = |t: &str| {
        layout
            .iter()
            .find(|(name, ..)| name == &format!("webhook_idempotency.{t}"))
            .unwrap_or_else(|| panic!("{t} is not in Citus's metadata: {layout:?}"))
    };
    let group = find(TENANT[0]).2;
    for t in TENANT {
        let (_, method, colocation, nodes) = find(t);
        assert_eq!((method.as_str(), *colocation), ("h", group), "{t}: hash-distributed, colocated");
        for w in &workers {
            assert!(nodes.contains(w), "{t} has shards on every worker: {nodes:?}");
        }
    }
    for t in REFERENCE {
        assert_eq!(find(t).1, "n", "{t} is a reference table");
    }
    // The audit trail records the login role by a trigger: one copy, on the
    // coordinator (`store::citus::REFERENCE_TABLES`).
    assert!(
        !layout.iter().any(|(name, ..)| name == "webhook_idempotency.webhook_audit"),
        "webhook_audit stays a plain table on the coordinator: {layout:?}"
    );
}

#[tokio::test]
async fn migrate_distributes_every_tenant_table_by_scope_colocated_and_runs_again_as_a_no_op() {
    if !on_citus() {
        return;
    }
    let db = TestDb::new().await; // migrated
    assert_distributed(&layout(&db.pool.get().await.unwrap()).await);
    let before = layout(&db.pool.get().await.unwrap()).await;
    migrate(&StoreConfig::from(db.pool.clone())).await.expect("migrate again");
    assert_eq!(layout(&db.pool.get().await.unwrap()).await, before, "a second run changes nothing");
    webhook_idempotency::store::check_schema(&StoreConfig::from(db.pool.clone())).await.unwrap();
}

#[tokio::test]
async fn a_schema_distributed_by_hand_at_version_12_is_upgraded_and_its_missing_tables_distributed() {
    if !on_citus() {
        return;
    }
    // As OPERATIONS.md said before: the SQL files applied, then four of the
    // tables distributed by hand (the body digests and the request keys were
    // missing from its list).
    let name = format!("t_upgrade_{}", std::process::id());
    let create = name.clone();
    tokio::task::spawn_blocking(move || citus().create_database(&create, Some(4))).await.unwrap().unwrap();
    let config: tokio_postgres::Config = citus().url(&name).parse().unwrap();
    let (client, conn) = config.connect(NoTls).await.unwrap();
    tokio::spawn(conn);
    let up_to_12: String = MIGRATIONS.iter().filter(|(v, _)| *v <= 12).map(|(_, sql)| *sql).collect();
    client.batch_execute(&up_to_12).await.unwrap();
    for t in ["webhook_events", "webhook_outbox", "webhook_actions", "webhook_versions"] {
        let colocate = if t == "webhook_events" { "default" } else { "webhook_idempotency.webhook_events" };
        client
            .execute(
                "SELECT create_distributed_table($1::text::regclass, 'scope', colocate_with => $2)",
                &[&format!("webhook_idempotency.{t}"), &colocate],
            )
            .await
            .unwrap();
    }
    let pool = pool(config.clone(), 4);
    migrate(&StoreConfig::from(pool.clone())).await.expect("migrate an already distributed schema");
    let newest: i32 = client
        .query_one("SELECT max(version) FROM webhook_idempotency.webhook_schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(newest, webhook_idempotency::store::SCHEMA_VERSION);
    let db = TestDb { name, config, pool };
    assert_distributed(&layout(&db.pool.get().await.unwrap()).await);
}

/// A test database with `ledger`, a business table Citus holds as a
/// reference table (a copy on every node): not colocated with the claims.
async fn with_ledger() -> TestDb {
    let db = TestDb::new().await;
    db.execute(
        "CREATE TABLE ledger (scope text NOT NULL, event_key text NOT NULL, PRIMARY KEY (scope, event_key));
                SELECT create_reference_table('ledger')",
    )
    .await;
    db
}

/// The two-phase commit records Citus keeps for `db` on its coordinator
/// (`pg_dist_transaction`: one row per node of each two-phase commit, until
/// its maintenance daemon's recovery deletes them).
async fn two_phase_records(db: &TestDb) -> i64 {
    db.scalar("SELECT count(*) FROM pg_dist_transaction").await
}

/// Input from the outbox chaos run on the cluster: every claim's
/// transaction was committed in two phases (the claim, an `INSERT ... SELECT`
/// without a distributed table in its `FROM`, ran through the coordinator and
/// came back as an intermediate result), and a coordinator backend killed
/// between `PREPARE TRANSACTION` and `COMMIT PREPARED` left the event's row
/// locked on the worker until Citus's recovery, a minute later: the sender's
/// retries got 409 for over 60 s. Now the claim is routed whole to the
/// event's shard: new events (claim first and lookup first, with a colocated
/// write, an outbox effect and the body-digest guard), duplicates and a failed run leave no
/// two-phase commit in `pg_dist_transaction` (Citus records one row there
/// per node of each two-phase commit, until its recovery deletes them; each
/// delivery is counted on its own, so a recovery in between cannot hide
/// one), and a non-colocated write still commits in two phases (the count
/// sees it).
#[tokio::test]
async fn the_claim_and_colocated_writes_commit_on_one_worker_without_a_two_phase_commit() {
    if !on_citus() {
        return;
    }
    let db = with_ledger().await;
    let handler = |tx: webhook_idempotency::WebhookTx, event: webhook_idempotency::WebhookEvent| async move {
        let effect = webhook_idempotency::outbox::Effect::json("notify", serde_json::json!({ "event": event.key() }));
        let mut written = insert_effect(&tx, &event).await.is_ok() && tx.enqueue(effect).await.is_ok();
        if event.key().starts_with("evt_ledger") {
            let mut db = TxDb::of(&tx).await.expect("transaction open during the handler");
            written &= db
                .execute(
                    "INSERT INTO ledger (scope, event_key) VALUES ($1, $2)",
                    &[event.scope().into(), event.key().into()],
                )
                .await
                .is_ok();
        }
        match (written, event.key().ends_with("_fails")) {
            (true, false) => StatusCode::OK,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    };
    // The body-digest guard on too: its claim runs in the claim's transaction.
    let app = |lookup_first: bool| {
        let layer = stripe_layer(db.pool.clone()).lookup_first(lookup_first).body_digest_guard(true).build().unwrap();
        Router::new().route("/webhooks/stripe", post(handler).layer(layer))
    };
    // (delivery, status, two-phase commit records it added)
    let mut seen = Vec::new();
    for (lookup_first, key, status) in [
        (false, "evt_new_1", StatusCode::OK),
        (false, "evt_new_2", StatusCode::OK),
        (false, "evt_new_1", StatusCode::OK), // a duplicate, claim first
        (false, "evt_new_3_fails", StatusCode::INTERNAL_SERVER_ERROR),
        (true, "evt_new_4", StatusCode::OK),
        (true, "evt_new_4", StatusCode::OK), // a duplicate, lookup first
        (true, "evt_new_3_fails", StatusCode::INTERNAL_SERVER_ERROR),
        (false, "evt_ledger", StatusCode::OK), // writes a reference table too
    ] {
        let before = two_phase_records(&db).await;
        let answer = app(lookup_first).oneshot(stripe_request(stripe_body(key))).await.unwrap().status();
        let added = two_phase_records(&db).await - before;
        seen.push((key, answer, added));
        assert_eq!(answer, status, "{key}: {seen:?}");
    }
    println!("two-phase commit records per delivery: {seen:?}");
    let (ledger, others) = seen.split_last().unwrap();
    assert!(others.iter().all(|(_, _, added)| *added == 0), "a claim committed in two phases: {seen:?}");
    assert!(ledger.2 > 0, "the count sees a two-phase commit (the reference table's): {seen:?}");
    for key in ["evt_new_1", "evt_new_2", "evt_new_4", "evt_ledger"] {
        assert_eq!(db.effects_for(key).await, 1, "{key}");
        assert_eq!(db.event_row(key).await.map(|r| r.0), Some("done".to_owned()), "{key}");
    }
    assert_eq!(db.effects_for("evt_new_3_fails").await, 0);
}

/// From the same run: the outbox worker's batched delivered mark matched
/// its rows to an array by identity, which Citus cannot prune: every mark
/// went to every shard and committed in two phases. Now the statement names
/// its batch's scope (one statement per scope on Citus). Effects of 6
/// scopes, delivered by one worker serving every scope with 8 runs at once,
/// leave no two-phase commit record (12 with the scope left unnamed, as
/// before).
#[tokio::test]
async fn an_outbox_worker_serving_every_scope_marks_its_batches_without_a_two_phase_commit() {
    use webhook_idempotency::outbox::{Effect, EffectContext, EffectResult, Effects, OutboxWorker};
    if !on_citus() {
        return;
    }
    let db = TestDb::new().await;
    const SCOPES: usize = 6;
    const PER_SCOPE: usize = 8;
    for scope in 0..SCOPES {
        let layer =
            webhook_idempotency::WebhookLayer::builder(db.pool.clone(), webhook_idempotency::Provider::stripe())
                .scope(format!("acct_{scope}"))
                .secret(STRIPE_SECRET)
                .build()
                .unwrap();
        let app = Router::new().route(
            "/webhooks/stripe",
            post(|tx: webhook_idempotency::WebhookTx| async move {
                match tx.enqueue(Effect::json("notify", serde_json::json!({}))).await {
                    Ok(_) => StatusCode::OK,
                    Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
                }
            })
            .layer(layer),
        );
        for i in 0..PER_SCOPE {
            let req = stripe_request(stripe_body(&format!("evt_{scope}_{i}")));
            assert_eq!(app.clone().oneshot(req).await.unwrap().status(), StatusCode::OK);
        }
    }
    let before = two_phase_records(&db).await;
    let effects = Effects::new().effect("notify", |_ctx: EffectContext| async { EffectResult::delivered() });
    let worker = OutboxWorker::builder(db.pool.clone(), effects).concurrency(8).build().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    let done = "SELECT count(*) FROM webhook_idempotency.webhook_outbox WHERE state = 'done'";
    assert!(
        eventually(std::time::Duration::from_secs(30), || async {
            db.scalar(done).await == (SCOPES * PER_SCOPE) as i64
        })
        .await
    );
    let _ = stop.send(());
    task.await.unwrap();
    let added = two_phase_records(&db).await - before;
    assert_eq!(added, 0, "two-phase commit records added while {} effects were delivered", SCOPES * PER_SCOPE);
}

#[tokio::test]
async fn a_business_table_not_colocated_commits_with_the_claim_or_not_at_all() {
    if !on_citus() {
        return;
    }
    // The handler's table as a reference table (on every node): the claim's
    // shard and the table's copies are written in one transaction, which
    // Citus commits on every node it wrote with a two-phase commit.
    let db = with_ledger().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(|tx: webhook_idempotency::WebhookTx, event: webhook_idempotency::WebhookEvent| async move {
            let written = TxDb::of(&tx)
                .await
                .expect("transaction open during the handler")
                .execute(
                    "INSERT INTO ledger (scope, event_key) VALUES ($1, $2)",
                    &[event.scope().into(), event.key().into()],
                )
                .await;
            // An event whose key says so fails after its write: nothing of it stays.
            match (written, event.key().ends_with("_fails")) {
                (Ok(_), false) => StatusCode::OK,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            }
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    let send = |id: &str| app.clone().oneshot(stripe_request(stripe_body(id)));
    assert_eq!(send("evt_ref").await.unwrap().status(), StatusCode::OK);
    assert_eq!(send("evt_ref").await.unwrap().status(), StatusCode::OK, "the duplicate");
    assert_eq!(send("evt_ref_fails").await.unwrap().status(), StatusCode::INTERNAL_SERVER_ERROR);
    let c = db.pool.get().await.unwrap();
    let ledger: Vec<String> =
        c.query("SELECT event_key FROM ledger ORDER BY 1", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(ledger, ["evt_ref"], "the committed event's row, once; nothing of the failed one");
    assert_eq!(db.event_row("evt_ref").await.map(|r| r.0), Some("done".to_owned()));
    assert_eq!(db.event_row("evt_ref_fails").await.map(|r| r.0), Some("failed".to_owned()));
    // Every worker holds a copy of the reference table with the row: the
    // two-phase commit reached them all.
    for worker in &citus().workers {
        let (w, conn) = worker.url(&db.name).parse::<tokio_postgres::Config>().unwrap().connect(NoTls).await.unwrap();
        tokio::spawn(conn);
        // Citus hides shards from other clients' catalog queries.
        w.batch_execute("SET citus.show_shards_for_app_name_prefixes = '*'").await.unwrap();
        let copy: String = w
            .query_one("SELECT relname::text FROM pg_class WHERE relname LIKE 'ledger\\_%' AND relkind = 'r'", &[])
            .await
            .unwrap()
            .get(0);
        let rows: Vec<String> =
            w.query(&format!("SELECT event_key FROM {copy}"), &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
        assert_eq!(rows, ["evt_ref"], "worker {}'s copy {copy}", worker.port());
    }
}

#[tokio::test]
async fn colocate_distributes_a_business_table_with_the_claims_once_and_refuses_one_citus_holds_otherwise() {
    let db = TestDb::new().await;
    let store = StoreConfig::from(db.pool.clone());
    db.execute(
        "CREATE TABLE orders (scope text NOT NULL, order_id text NOT NULL, PRIMARY KEY (scope, order_id));
         CREATE TABLE rates (currency text PRIMARY KEY, scope text NOT NULL);
         CREATE TABLE keyed_elsewhere (id text PRIMARY KEY, scope text NOT NULL)",
    )
    .await;
    let colocated = webhook_idempotency::store::colocate(&store, "orders", "scope").await.expect("colocate orders");
    if !on_citus() {
        assert!(!colocated, "on one PostgreSQL it does nothing and says so");
        return;
    }
    assert!(colocated);
    let c = db.pool.get().await.unwrap();
    let layout_now = layout(&c).await;
    let group_of = |t: &str| layout_now.iter().find(|(name, ..)| name == t).map(|(_, m, g, _)| (m.clone(), *g));
    let claims = group_of("webhook_idempotency.webhook_events").unwrap();
    assert_eq!(group_of("orders"), Some(claims.clone()), "hash-distributed in the claims' colocation group");
    // Again: nothing to do, still true.
    assert!(webhook_idempotency::store::colocate(&store, "orders", "scope").await.unwrap());
    assert_eq!(layout(&c).await, layout_now, "a second call changes nothing");

    // A reference table: refused, left as it is.
    c.batch_execute("SELECT create_reference_table('rates')").await.unwrap();
    let e = webhook_idempotency::store::colocate(&store, "rates", "scope").await.unwrap_err();
    assert_eq!(e.kind(), webhook_idempotency::StoreErrorKind::NotColocated, "{e}");
    assert!(e.to_string().contains("rates"), "{e}");
    assert_eq!(layout(&c).await.iter().find(|t| t.0 == "rates").map(|t| t.1.clone()), Some("n".to_owned()));

    // A primary key without the scope: Citus's own refusal, nothing distributed.
    let e = webhook_idempotency::store::colocate(&store, "keyed_elsewhere", "scope").await.unwrap_err();
    assert_eq!(e.kind(), webhook_idempotency::StoreErrorKind::Database, "{e}");
    assert!(e.sqlstate().is_some(), "the server's SQLSTATE: {e}");
    assert!(!layout(&c).await.iter().any(|t| t.0 == "keyed_elsewhere"), "left a plain table");
}
