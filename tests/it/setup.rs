//! Setup: migrations (safe twice and concurrently, beside another tool's
//! `schema_migrations`), errors that say why (SQLSTATE, server message,
//! host:port, never the password), the schema check, the layer's advice when
//! its schema was never migrated, and builder configurations refused.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;
use http::StatusCode;
use tokio_postgres::NoTls;
use tower::ServiceExt;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::SubscriberExt;
use webhook_idempotency::store::{self, MIGRATIONS};
use webhook_idempotency::StoreErrorKind;
use webhook_idempotency::{migrate, StoreConfig};

const PASSWORD: &str = "pw-that-must-never-show-9f3a";

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A fresh, empty (unmigrated) database on the test server.
async fn empty_database(tag: &str) -> tokio_postgres::Config {
    let admin = admin_config();
    let name = format!("fu_{tag}_{}", std::process::id());
    let (client, conn) = admin.connect(NoTls).await.unwrap();
    tokio::spawn(conn);
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    let mut config = admin;
    config.dbname(&name);
    config
}

#[tokio::test]
async fn migrate_errors_carry_kind_sqlstate_and_endpoint_but_no_password() {
    if tokio_postgres_only(
        "sqlx retries a refused connection until its acquire_timeout and reports PoolTimedOut (README, \"Using sqlx\")",
    ) {
        return;
    }
    let port = closed_port();
    let cases: Vec<(&str, tokio_postgres::Config, StoreErrorKind, &[&str])> = vec![
        (
            "database does not exist",
            {
                let mut c = admin_config();
                c.dbname("no_such_database_here").password(PASSWORD);
                c
            },
            StoreErrorKind::DatabaseMissing,
            &["3D000"],
        ),
        (
            "role does not exist",
            {
                let mut c = admin_config();
                c.user("no_such_role_here").password(PASSWORD);
                c
            },
            StoreErrorKind::Authentication,
            // 28000 under trust/peer authentication, 28P01 under password methods.
            &["28000", "28P01"],
        ),
        (
            "closed port",
            {
                // A new config: `host`/`port` on a copy would add a second host.
                let mut c = tokio_postgres::Config::new();
                c.host("127.0.0.1").port(port).user("postgres").dbname("postgres").password(PASSWORD);
                c
            },
            StoreErrorKind::Unavailable,
            &[],
        ),
    ];
    for (name, config, kind, sqlstates) in cases {
        let err = migrate(&StoreConfig::from(pool(config, 1))).await.expect_err(name);
        assert_eq!(err.kind(), kind, "{name}: {err}");
        match err.sqlstate() {
            Some(code) => assert!(sqlstates.contains(&code), "{name}: sqlstate {code}"),
            None => assert!(sqlstates.is_empty(), "{name}: no sqlstate in {err}"),
        }
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains(PASSWORD), "{name}: the password is shown: {shown}");
        if kind == StoreErrorKind::Unavailable {
            assert!(err.to_string().contains(&format!("127.0.0.1:{port}")), "{name}: no host:port in {err}");
        }
    }
}

#[tokio::test]
async fn check_schema_says_whether_the_schema_is_migrated() {
    let config = empty_database("check").await;
    let pool = pool(config, 2);
    let client = pool.get().await.unwrap();
    client
        .batch_execute(
            "CREATE SCHEMA bare;
             CREATE SCHEMA unrecorded;
             CREATE TABLE unrecorded.webhook_schema_migrations (version integer PRIMARY KEY);
             CREATE SCHEMA old;
             CREATE TABLE old.webhook_schema_migrations (version integer PRIMARY KEY);
             INSERT INTO old.webhook_schema_migrations VALUES (0);",
        )
        .await
        .unwrap();
    // The shipped SQL run by hand, as a migration tool would.
    let by_hand = MIGRATIONS.iter().map(|(_, sql)| sql.replace(store::DEFAULT_SCHEMA, "by_hand")).collect::<String>();
    client.batch_execute(&by_hand).await.unwrap();
    let in_schema = |schema: &str| StoreConfig::from(pool.clone()).schema(schema);
    migrate(&in_schema("migrated")).await.unwrap();
    let config = in_schema("checked_first");
    assert_eq!(store::check_schema(&config).await.map_err(|e| e.kind()), Err(StoreErrorKind::NotMigrated), "before");
    migrate(&config).await.unwrap();

    let cases: &[(&str, &str, Option<StoreErrorKind>)] = &[
        ("migrated with migrate", "migrated", None),
        ("migrated by running the SQL files", "by_hand", None),
        ("checked, then migrated", "checked_first", None),
        ("schema does not exist", "absent", Some(StoreErrorKind::NotMigrated)),
        ("schema without tables", "bare", Some(StoreErrorKind::NotMigrated)),
        ("version table records nothing", "unrecorded", Some(StoreErrorKind::NotMigrated)),
        ("older version recorded", "old", Some(StoreErrorKind::Outdated)),
        ("invalid name", "a;b", Some(StoreErrorKind::InvalidSchemaName)),
    ];
    for (name, schema, want) in cases {
        let got = store::check_schema(&in_schema(schema)).await.map_err(|e| e.kind());
        assert_eq!(got, want.map_or(Ok(()), Err), "{name}");
    }
}

/// One captured log event: level and fields (`message` included).
type Captured = Arc<Mutex<Vec<(tracing::Level, BTreeMap<String, String>)>>>;

struct Capture(Captured);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Fields(BTreeMap<String, String>);
        impl Visit for Fields {
            fn record_str(&mut self, field: &Field, value: &str) {
                self.0.insert(field.name().to_owned(), value.to_owned());
            }
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                self.0.insert(field.name().to_owned(), format!("{value:?}"));
            }
        }
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        self.0.lock().unwrap().push((*event.metadata().level(), fields.0));
    }
}

#[tokio::test]
async fn layer_on_an_unmigrated_schema_answers_503_and_says_to_migrate_once() {
    let db = TestDb::new().await;
    db.pool.get().await.unwrap().batch_execute("CREATE SCHEMA no_tables").await.unwrap();
    let cases = [
        // PostgreSQL reports a missing schema in a DML statement as a missing
        // relation: 42P01 both times.
        ("schema missing", "never_migrated", "42P01"),
        ("schema without tables", "no_tables", "42P01"),
    ];
    for (name, schema, sqlstate) in cases {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::registry().with(Capture(Arc::clone(&captured)));
        // Current-thread runtime: the layer's future runs on this thread.
        let _guard = set_default_subscriber(subscriber);
        let svc = tower::Layer::layer(
            &stripe_layer(StoreConfig::from(db.pool.clone()).schema(schema)).build().unwrap(),
            tower::service_fn(|_req: http::Request<axum::body::Body>| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(axum::body::Body::empty()))
            }),
        );
        for n in 0..2 {
            let res = svc.clone().oneshot(stripe_request(stripe_body(&format!("evt_unmigrated_{n}")))).await.unwrap();
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE, "{name}: delivery {n}");
        }
        let advice: Vec<_> = captured
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, f)| f.get("reason").map(String::as_str) == Some("schema_not_migrated"))
            .cloned()
            .collect();
        assert_eq!(advice.len(), 1, "{name}: logged once for two deliveries: {advice:?}");
        let (level, fields) = &advice[0];
        assert_eq!(*level, tracing::Level::ERROR, "{name}");
        assert_eq!(fields.get("schema").map(String::as_str), Some(schema), "{name}");
        assert_eq!(fields.get("sqlstate").map(String::as_str), Some(sqlstate), "{name}");
        let message = fields.get("message").map(String::as_str).unwrap_or("");
        assert!(message.contains(&format!("StoreConfig::schema(\"{schema}\")")), "{name}: {message}");
    }
    assert_eq!(db.events().await, 0);
}

/// `migrate` and `check_schema` take the store configuration and run by its
/// rules: with the pool's only connection held elsewhere, each fails with
/// `PoolTimeout` after the store's pool timeout (200 ms here). Before, the
/// migrations took the bare pool (`StoreConfig::migrate` and `check` too)
/// and waited a fixed 5 s whatever the store said.
#[tokio::test]
async fn migrate_and_check_schema_follow_the_store_configuration() {
    let db = TestDb::new().await;
    let pool = db.pool(1);
    let held = pool.hold().await;
    let store = StoreConfig::from(pool.clone()).pool_timeout(Duration::from_millis(200));
    let started = std::time::Instant::now();
    let migrated = migrate(&store).await.map_err(|e| e.kind());
    let migrate_took = started.elapsed();
    let started = std::time::Instant::now();
    let checked = store::check_schema(&store).await.map_err(|e| e.kind());
    let check_took = started.elapsed();
    assert_eq!((migrated, checked), (Err(StoreErrorKind::PoolTimeout), Err(StoreErrorKind::PoolTimeout)));
    assert!(migrate_took < Duration::from_secs(2), "migrate waited {migrate_took:?}, not the store's 200 ms");
    assert!(check_took < Duration::from_secs(2), "check_schema waited {check_took:?}, not the store's 200 ms");
    drop(held);
    store::check_schema(&store).await.expect("migrated by TestDb, the connection free again");
}

#[tokio::test]
async fn migrate_is_safe_twice_and_concurrently() {
    let db = TestDb::new().await; // already migrated once
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let store = StoreConfig::from(db.pool.clone());
            tokio::spawn(async move { webhook_idempotency::migrate(&store).await })
        })
        .collect();
    for r in runs {
        r.await.unwrap().expect("concurrent migrate");
    }
    let versions = webhook_idempotency::store::MIGRATIONS.len() as i64;
    assert_eq!(db.scalar("SELECT count(*) FROM webhook_idempotency.webhook_schema_migrations").await, versions);
}

#[tokio::test]
async fn migrate_into_public_ignores_another_tools_schema_migrations() {
    let db = TestDb::new().await;
    let c = db.pool.get().await.unwrap();
    // golang-migrate's bookkeeping table, already at version 1.
    c.batch_execute(
        "CREATE TABLE public.schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL);
         INSERT INTO public.schema_migrations VALUES (1, false);",
    )
    .await
    .unwrap();
    let public = StoreConfig::from(db.pool.clone()).schema("public");
    webhook_idempotency::migrate(&public).await.expect("migrate into public");
    let n: i64 = c.query_one("SELECT count(*) FROM public.webhook_events", &[]).await.unwrap().get(0);
    assert_eq!(n, 0, "the table exists");
    let theirs: i64 = c.query_one("SELECT count(*) FROM public.schema_migrations", &[]).await.unwrap().get(0);
    assert_eq!(theirs, 1, "their bookkeeping untouched");
}

#[test]
fn builder_rejects_incomplete_configurations() {
    let pool = crate::support::pool("host=127.0.0.1 user=nobody".parse().unwrap(), 1);
    let on =
        |store: StoreConfig| webhook_idempotency::WebhookLayer::builder(store, webhook_idempotency::Provider::stripe());
    let stripe = || on(StoreConfig::from(pool.clone()));
    use webhook_idempotency::ConfigErrorKind as K;
    let cases = [
        ("no scope", stripe().secret("s").build().err(), K::Endpoint),
        ("no secret", stripe().scope("a").build().err(), K::KeyMaterial),
        ("empty scope", stripe().scope("").secret("s").build().err(), K::InvalidName),
        (
            "bad schema",
            on(StoreConfig::from(pool.clone()).schema("x;drop")).scope("a").secret("s").build().err(),
            K::InvalidSchema,
        ),
        ("zero limit", stripe().scope("a").secret("s").body_limit(0).build().err(), K::InvalidLimit),
        ("lock_timeout 0", stripe().scope("a").secret("s").lock_timeout(Duration::ZERO).build().err(), K::InvalidLimit),
        (
            "lock_timeout > i32 ms",
            stripe().scope("a").secret("s").lock_timeout(Duration::from_secs(30 * 86400)).build().err(),
            K::InvalidLimit,
        ),
        (
            "resolver and scope",
            stripe().scope("a").resolver(webhook_idempotency::Endpoint::new("b", [])).build().err(),
            K::Endpoint,
        ),
        (
            "secrets with a resolver",
            stripe().secret("s").resolver(webhook_idempotency::Endpoint::new("b", [])).build().err(),
            K::SecretsWithResolver,
        ),
        (
            "short replay token",
            stripe()
                .scope("a")
                .secret("s")
                .operator_replay(http::HeaderName::from_static("x-r"), "short")
                .build()
                .err(),
            K::WeakReplayToken,
        ),
    ];
    for (name, err, want) in cases {
        assert_eq!(err.map(|e| e.kind()), Some(want), "{name}");
    }
    assert!(stripe().scope("a").secret("s").build().is_ok());
}

/// Migration 10 sets the TOAST target of both queue tables (a catalog
/// change): a database at version 9 with pending work migrates in place, its
/// rows intact, and the work then runs.
#[tokio::test]
async fn migration_10_sets_the_toast_target_in_place_and_pending_rows_run_after_it() {
    let config = empty_database("toast").await;
    let pool = pool(config, 4);
    let client = pool.get().await.unwrap();
    // Version 9, as a database migrated by the previous release.
    let v9: String = MIGRATIONS.iter().filter(|(v, _)| *v <= 9).map(|(_, sql)| *sql).collect();
    client.batch_execute(&v9).await.unwrap();
    client.batch_execute(EFFECTS_TABLE).await.unwrap();
    let app = crate::inbox::accepting_app(pool.clone());
    for key in ["evt_before_10a", "evt_before_10b"] {
        assert_eq!(crate::inbox::accept(&app, key).await.0, StatusCode::OK);
    }
    let target = |table: &'static str| {
        let pool = pool.clone();
        async move {
            let c = pool.get().await.unwrap();
            let sql = format!(
                "SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class
                  WHERE oid = 'webhook_idempotency.{table}'::regclass"
            );
            c.query_one(&sql, &[]).await.unwrap().get::<_, String>(0)
        }
    };
    assert!(!target("webhook_events").await.contains("toast_tuple_target"), "not set at version 9");
    let bodies = "SELECT string_agg(md5(payload), ',' ORDER BY event_key) FROM webhook_idempotency.webhook_events";
    let before: String = client.query_one(bodies, &[]).await.unwrap().get(0);
    migrate(&StoreConfig::from(pool.clone())).await.unwrap();
    for table in ["webhook_events", "webhook_outbox"] {
        assert!(target(table).await.split(',').any(|o| o == "toast_tuple_target=512"), "{table}");
        let storage: String = client
            .query_one(
                &format!(
                    "SELECT attstorage::text FROM pg_attribute
                      WHERE attrelid = 'webhook_idempotency.{table}'::regclass AND attname = 'payload'"
                ),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(storage, "x", "{table}.payload: compressed, then out of line (EXTENDED)");
    }
    let after: String = client.query_one(bodies, &[]).await.unwrap().get(0);
    assert_eq!(after, before, "the stored deliveries are untouched");
    let pending = "SELECT count(*) FROM webhook_idempotency.webhook_events WHERE state = 'pending'";
    assert_eq!(client.query_one(pending, &[]).await.unwrap().get::<_, i64>(0), 2);
    // The pending rows run after the migration.
    let handlers = axum::Router::new().route("/webhooks/stripe", axum::routing::post(apply_effect));
    let worker = webhook_idempotency::inbox::InboxWorker::builder(pool.clone(), handlers)
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let (stop, task) = crate::inbox::spawn_worker(worker);
    let done = "SELECT count(*) FROM effects";
    let ran = eventually(Duration::from_secs(10), || async {
        pool.get().await.unwrap().query_one(done, &[]).await.unwrap().get::<_, i64>(0) == 2
    })
    .await;
    assert!(ran, "both pending rows processed once");
    let _ = stop.send(());
    task.await.unwrap();
}
