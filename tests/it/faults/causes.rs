//! Every refusal says why: for each cause a database connection fails with
//! (refused, timed out, a read-only server, a failed login, TLS), a
//! delivery is answered 503, the layer's `claim failed` log line names the
//! cause, and so does the `Display` of the `StoreError` the claim returns;
//! neither contains the password. Issue 19, item 6: before, each of them
//! logged `error connecting to server` or a bare SQLSTATE.

use std::time::Duration;

use crate::support::*;
use ::tower::ServiceExt;
use axum::routing::post;
use axum::Router;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use http::StatusCode;
use webhook_idempotency::store::claim::ClaimStore;
use webhook_idempotency::{ScopedEvent, StoreErrorKind};

/// What one refused delivery left: the `claim failed` log line and the
/// `Display` of the error a direct claim of the same event returns.
struct Refusal {
    line: String,
    display: String,
    kind: StoreErrorKind,
    logs: String,
}

/// One delivery of `key` through a Stripe layer over `store` (answered
/// 503), then a direct claim of the same event.
async fn refuse(store: impl Into<StoreConfig>, key: &str) -> Refusal {
    refuse_with(store, key, None).await
}

/// [`refuse`], with a connection of `pool` (the store's, of size 1) through
/// `proxy` opened and then silenced before each attempt.
async fn refuse_with(store: impl Into<StoreConfig>, key: &str, silenced: Option<(&TestPool, &Proxy)>) -> Refusal {
    let silence = || async {
        if let Some((pool, proxy)) = silenced {
            pool.hold().await.batch("SELECT 1").await;
            // Back in the pool (sqlx pings it on the way).
            pool.settled().await;
            // The pooled connection's flow, and the cancel request of a
            // connection discarded before, if it is still on its way.
            assert!(proxy.blackhole() >= 1);
        }
    };
    let store: StoreConfig = store.into();
    let (logs, _guard) = Logs::capture();
    let app =
        Router::new().route("/webhooks/stripe", post(apply_effect).layer(stripe_layer(store.clone()).build().unwrap()));
    silence().await;
    let res = app.oneshot(stripe_request(stripe_body(key))).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE, "{key}");
    let lines = logs.lines_with(&["claim failed"]);
    assert_eq!(lines.len(), 1, "one `claim failed` line: {}", logs.text());
    let claims = ClaimStore::builder(store).build().unwrap();
    silence().await;
    let Err(e) = claims.claim(&ScopedEvent::new("stripe", "acct_test", key)).await else {
        panic!("{key}: the claim succeeded")
    };
    // The causes are also the source chain.
    let sources = std::iter::successors(std::error::Error::source(&e), |s| s.source()).count();
    assert!(sources > 0 || e.kind() == StoreErrorKind::PoolTimeout || e.kind() == StoreErrorKind::Timeout, "{e}");
    println!("{key}:\n  log:     {}\n  display: {e}", lines[0]);
    Refusal { line: lines[0].clone(), display: e.to_string(), kind: e.kind(), logs: logs.text() }
}

/// A pool of `max_size` over `url` without TLS.
fn plain_pool(url: &str, max_size: usize) -> TestPool {
    pool(url.parse().unwrap(), max_size)
}

/// A port on 127.0.0.1 nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn a_refused_connection_is_named_in_the_log_and_the_error() {
    if tokio_postgres_only("sqlx retries a refused connection until its acquire_timeout and reports PoolTimedOut, without the cause (README, \"Using sqlx\")") {
        return;
    }
    let port = closed_port();
    let store = StoreConfig::from(plain_pool(&format!("postgresql://postgres@127.0.0.1:{port}/postgres"), 2));
    let r = refuse(store, "evt_cause_refused").await;
    assert_eq!(r.kind, StoreErrorKind::Unavailable);
    for text in [&r.line, &r.display] {
        assert!(text.contains(&format!("(server 127.0.0.1:{port})")), "{text}");
        assert!(text.contains("error connecting to server: Connection refused"), "{text}");
    }
}

#[tokio::test]
async fn a_timed_out_step_and_a_timed_out_checkout_are_named_in_the_log_and_the_error() {
    // The step deadline: pooled connections through a proxy that goes silent.
    let db = TestDb::new().await;
    let proxy = Proxy::start(admin_config().get_ports()[0]).await;
    let via_proxy = plain_pool(&format!("postgresql://postgres@127.0.0.1:{}/{}", proxy.port, db.name), 1);
    let store = StoreConfig::from(via_proxy.clone())
        .database_timeout(Duration::from_millis(500))
        .pool_timeout(Duration::from_secs(5));
    let r = refuse_with(store, "evt_cause_step_deadline", Some((&via_proxy, &proxy))).await;
    assert_eq!(r.kind, StoreErrorKind::Timeout);
    for text in [&r.line, &r.display] {
        assert!(text.contains(&format!("(server 127.0.0.1:{})", proxy.port)), "{text}");
        assert!(text.contains("timed out: the database did not answer within the step deadline (500ms)"), "{text}");
    }

    // The pool timeout: a server that accepts the TCP connection and never answers the startup.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let store = StoreConfig::from(plain_pool(&format!("postgresql://postgres@127.0.0.1:{port}/postgres"), 1))
        .pool_timeout(Duration::from_millis(300));
    let r = refuse(store, "evt_cause_pool_timeout").await;
    assert_eq!(r.kind, StoreErrorKind::PoolTimeout);
    for text in [&r.line, &r.display] {
        assert!(text.contains(&format!("(server 127.0.0.1:{port})")), "{text}");
        assert!(text.contains("timed out: no database connection within the pool timeout (300ms)"), "{text}");
    }
    drop(silent);
}

#[tokio::test]
async fn a_read_only_server_is_named_in_the_log_and_the_error() {
    let db = TestDb::new().await;
    // Every new session of this database is read-only, as on a demoted primary.
    db.execute(&format!("ALTER DATABASE {} SET default_transaction_read_only = on", db.name)).await;
    let r = refuse(db.pool(2), "evt_cause_read_only").await;
    assert_eq!(r.kind, StoreErrorKind::Database);
    for text in [&r.line, &r.display] {
        assert!(text.contains("ERROR: cannot execute INSERT in a read-only transaction (SQLSTATE 25006)"), "{text}");
    }
    // The claim's retry on a fresh connection says why it discarded the first.
    let retry = r.logs.lines().find(|l| l.contains("pooled connection cannot serve the claim")).unwrap();
    assert!(retry.contains("read-only transaction (SQLSTATE 25006)"), "{retry}");
}

#[tokio::test]
async fn a_failed_login_is_named_in_the_log_and_the_error_without_the_password() {
    // Its own server: pg_hba.conf is server-wide.
    let server = TempPostgres::start().unwrap();
    let admin: tokio_postgres::Config = server.url("postgres").parse().unwrap();
    let db = TestDb::on(admin).await;
    db.execute("CREATE ROLE cause_login LOGIN PASSWORD 'right-horse-battery-staple'").await;
    db.execute(&format!("GRANT ALL ON DATABASE {} TO cause_login", db.name)).await;
    server.prepend_hba("host all cause_login 127.0.0.1/32 scram-sha-256").unwrap();
    let wrong = "wrong-s3cret-password";
    let url = format!("postgresql://cause_login:{wrong}@127.0.0.1:{}/{}", server.port(), db.name);
    let r = refuse(plain_pool(&url, 2), "evt_cause_login").await;
    assert_eq!(r.kind, StoreErrorKind::Authentication);
    for text in [&r.line, &r.display] {
        assert!(
            text.contains(r#"FATAL: password authentication failed for user "cause_login" (SQLSTATE 28P01)"#),
            "{text}"
        );
    }
    for secret in [wrong, "right-horse-battery-staple"] {
        assert!(!r.logs.contains(secret), "the log shows a password: {}", r.logs);
        assert!(!r.display.contains(secret), "the error shows a password: {}", r.display);
    }
}

#[tokio::test]
async fn tls_failures_are_named_in_the_log_and_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let untrusted = dir.path().join("other-ca.pem");
    std::fs::write(&untrusted, super::tls::self_signed().0).unwrap();
    let tls_pool = |url: String| {
        let config: tokio_postgres::Config = format!("{url}?sslmode=require").parse().unwrap();
        let manager = Manager::from_config(
            config,
            super::tls::tls_connector(&untrusted),
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        Pool::builder(manager).max_size(2).build().unwrap()
    };

    // sslmode=require against a server without TLS (the suite's).
    let plain = admin_config();
    let r = refuse(
        tls_pool(format!("postgresql://postgres@127.0.0.1:{}/postgres", plain.get_ports()[0])),
        "evt_cause_no_tls",
    )
    .await;
    assert_eq!(r.kind, StoreErrorKind::Unavailable);
    for text in [&r.line, &r.display] {
        assert!(text.contains("error performing TLS handshake: server does not support TLS"), "{text}");
    }

    // A TLS server whose certificate the client does not trust.
    let server = TempPostgres::start().unwrap();
    let (cert, key) = super::tls::self_signed();
    server.enable_tls(&cert, &key).unwrap();
    let r = refuse(tls_pool(server.url("postgres")), "evt_cause_untrusted").await;
    assert_eq!(r.kind, StoreErrorKind::Unavailable);
    for text in [&r.line, &r.display] {
        assert!(text.contains("error performing TLS handshake: invalid peer certificate: "), "{text}");
    }
}
