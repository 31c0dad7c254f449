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
fn self_signed() -> (String, String) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    (certified.cert.pem(), certified.signing_key.serialize_pem())
}

/// A pool over TLS (`sslmode=require`) to `url`, trusting exactly the
/// certificates in the PEM file `root_cert`, as `examples/tls.rs` builds it.
fn tls_pool(url: &str, root_cert: &std::path::Path) -> Pool {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(root_cert).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let config_pg: tokio_postgres::Config = format!("{url}?sslmode=require").parse().unwrap();
    let manager = Manager::from_config(
        config_pg,
        MakeRustlsConnect::new(config),
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    Pool::builder(manager).max_size(4).build().unwrap()
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
