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

#[tokio::test]
async fn a_business_table_not_colocated_commits_with_the_claim_or_not_at_all() {
    if !on_citus() {
        return;
    }
    // The handler's table as a reference table (on every node): the claim's
    // shard and the table's copies are written in one transaction, which
    // Citus commits on every node it wrote with a two-phase commit.
    let db = TestDb::new().await;
    db.execute(
        "CREATE TABLE ledger (scope text NOT NULL, event_key text NOT NULL, PRIMARY KEY (scope, event_key));
                SELECT create_reference_table('ledger')",
    )
    .await;
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
