//! TLS to PostgreSQL, built as `examples/tls.rs` shows: a pool over rustls
//! (`tokio-postgres-rustls`, `ring`) trusting one self-signed certificate,
//! `sslmode=require`. A server certificate the client does not trust fails
//! the connection, and the layer answers 503, never 2xx.

use std::sync::Arc;

use crate::support::*;
use ::tower::ServiceExt;
use axum::routing::post;
use axum::Router;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use http::StatusCode;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use tokio_postgres_rustls::MakeRustlsConnect;

/// A self-signed certificate for `localhost` and `127.0.0.1`: (certificate
/// PEM, private key PEM).
pub(super) fn self_signed() -> (String, String) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    (certified.cert.pem(), certified.signing_key.serialize_pem())
}

/// A pool over TLS (`sslmode=require`) to `url`, trusting exactly the
/// certificates in the PEM file `root_cert`, as `examples/tls.rs` builds it.
fn tls_pool(url: &str, root_cert: &std::path::Path) -> Pool {
    let config_pg: tokio_postgres::Config = format!("{url}?sslmode=require").parse().unwrap();
    let manager = Manager::from_config(
        config_pg,
        tls_connector(root_cert),
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    Pool::builder(manager).max_size(4).build().unwrap()
}

/// The rustls connector trusting exactly the certificates in `root_cert`.
pub(super) fn tls_connector(root_cert: &std::path::Path) -> MakeRustlsConnect {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(root_cert).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    MakeRustlsConnect::new(config)
}

#[tokio::test]
async fn a_layer_over_a_tls_pool_serves_and_an_untrusted_certificate_is_refused() {
    // Its own server: TLS is a server-wide setting.
    let server = TempPostgres::start().unwrap();
    let (cert, key) = self_signed();
    server.enable_tls(&cert, &key).unwrap();
    let db = TestDb::on(server.url("postgres").parse().unwrap()).await;
    let dir = tempfile::tempdir().unwrap();
    let (trusted, untrusted) = (dir.path().join("server.pem"), dir.path().join("other-ca.pem"));
    std::fs::write(&trusted, &cert).unwrap();
    std::fs::write(&untrusted, self_signed().0).unwrap();

    let cases = [
        // (name, root certificate file, expected status, committed effects after)
        ("trusted certificate", &trusted, StatusCode::OK, 1),
        ("untrusted certificate", &untrusted, StatusCode::SERVICE_UNAVAILABLE, 0),
    ];
    for (name, root_cert, want, effects) in cases {
        let tls = tls_pool(&server.url(&db.name), root_cert);
        let app = Router::new()
            .route("/webhooks/stripe", post(apply_effect).layer(stripe_layer(tls.clone()).build().unwrap()));
        let key = format!("evt_tls_{}", name.replace(' ', "_"));
        let res = app.oneshot(stripe_request(stripe_body(&key))).await.unwrap();
        assert_eq!(res.status(), want, "{name}");
        assert_eq!(db.effects_for(&key).await, effects, "{name}");
        match tls.get().await {
            Ok(client) => {
                let row = client.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).await;
                assert!(row.unwrap().get::<_, bool>(0), "{name}: the pool's session is encrypted");
            }
            Err(e) => {
                assert_eq!(want, StatusCode::SERVICE_UNAVAILABLE, "{name}: {e}");
                // The handshake failed on the certificate, not elsewhere.
                let source = std::error::Error::source(&e).and_then(|s| s.source());
                let rustls_error = source
                    .and_then(|s| s.downcast_ref::<std::io::Error>())
                    .and_then(|io| io.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()));
                assert!(matches!(rustls_error, Some(rustls::Error::InvalidCertificate(_))), "{name}: {e:?}");
            }
        }
    }
    assert_eq!(db.event_row("evt_tls_trusted_certificate").await, Some(("done".into(), 1, Some(200))));
    assert_eq!(db.events().await, 1, "the refused delivery stored nothing");
}

/// A request dropped while its handler's statement runs on a TLS pool
/// (`sslmode=require`): the discarded connection's statement is cancelled
/// through `StoreConfig::cancel_tls` (tokio-postgres cannot send the cancel
/// request in plain TCP under `require`), so it stops holding the event and
/// the redelivery runs.
#[tokio::test]
async fn a_dropped_request_s_statement_is_cancelled_over_tls() {
    if tokio_postgres_only("sqlx sends no cancel request (README, \"Using sqlx\")") {
        return;
    }
    let server = TempPostgres::start().unwrap();
    let (cert, key) = self_signed();
    server.enable_tls(&cert, &key).unwrap();
    let db = TestDb::on(server.url("postgres").parse().unwrap()).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("server.pem");
    std::fs::write(&root, &cert).unwrap();
    let pool = tls_pool(&server.url(&db.name), &root);
    let store = StoreConfig::from(pool).cancel_tls(tls_connector(&root));
    let first_run = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: webhook_idempotency::WebhookTx, event: webhook_idempotency::WebhookEvent| {
            // The first run only (a rolled-back claim records no attempt).
            let first = first_run.swap(false, std::sync::atomic::Ordering::SeqCst);
            async move {
                if first {
                    let c = tx.client().await.unwrap();
                    let _ = c.execute("SELECT pg_sleep(60) /* tls_cancel_probe */", &[]).await;
                }
                apply_effect(tx, event).await
            }
        })
        .layer(stripe_layer(store).build().unwrap()),
    );
    let request = || app.clone().oneshot(stripe_request(stripe_body("evt_tls_cancel")));
    let running = "SELECT count(*) FROM pg_stat_activity
                    WHERE state = 'active' AND query LIKE '%tls_cancel_probe%' AND pid <> pg_backend_pid()";
    // The sender goes away once the statement runs.
    let first = tokio::select! {
        res = request() => Some(res.unwrap().status()),
        _ = async { assert!(eventually(std::time::Duration::from_secs(10), || async { db.scalar(running).await == 1 }).await) } => None,
    };
    assert_eq!(first, None, "the handler's statement was still running");
    assert!(
        eventually(std::time::Duration::from_secs(5), || async { db.scalar(running).await == 0 }).await,
        "the discarded connection's statement was cancelled"
    );
    assert_eq!(request().await.unwrap().status(), StatusCode::OK, "the redelivery claims the event at once");
    assert_eq!(db.effects_for("evt_tls_cancel").await, 1);
}
