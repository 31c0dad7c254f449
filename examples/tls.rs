//! TLS to PostgreSQL: the layer's pool over rustls, trusting the CA (or
//! self-signed server certificate) in a PEM file.
//!
//! ```text
//! DATABASE_URL='postgresql://app@db.example.internal/app?sslmode=require' \
//! PGSSLROOTCERT=/etc/ssl/db-ca.pem \
//! cargo run --example tls                  # serve POST /webhooks/stripe on $BIND (default 127.0.0.1:3000)
//! cargo run --example tls -- --check       # connect once, print whether the session is encrypted, exit
//! ```
//!
//! The crate takes any `deadpool_postgres::Pool`, so TLS is the pool's
//! business: build the `Manager` with a `MakeTlsConnect` instead of `NoTls`.
//! Here that is `tokio-postgres-rustls` with rustls' `ring` provider (no
//! aws-lc, so no cmake at build time), given explicitly rather than as a
//! process-wide default.
//!
//! What this gives, in libpq's terms (<https://www.postgresql.org/docs/current/libpq-ssl.html>):
//! with `sslmode=require` in the URL, a server that does not offer TLS is
//! refused; and rustls always verifies the certificate chain against the
//! roots given (only `PGSSLROOTCERT`'s certificates, not the system's) and
//! the host name (or IP address) of the URL against the certificate, which
//! is libpq's `verify-full`. A certificate the file does not vouch for fails
//! the connection: the layer then answers 503 + `Retry-After`, never 2xx.
//! Without `sslmode=require` (tokio-postgres' default is `prefer`) a server
//! without TLS would get a plaintext session: always put it in the URL.
//!
//! A self-signed server certificate must not be marked as a CA: rustls
//! (webpki) refuses a CA certificate as the server's own
//! (`InvalidCertificate(... CaUsedAsEndEntity)`), and `openssl req -x509`
//! marks it so by default, as in the PostgreSQL docs' recipe. Either sign
//! the server's certificate with a CA and trust the CA (the docs' second
//! recipe), or add `-addext basicConstraints=critical,CA:FALSE`
//! (and `-addext subjectAltName=DNS:db.example.internal`: the name checked
//! is the URL's host, against the subject alternative names).
//!
//! Environment: `DATABASE_URL` (required), `PGSSLROOTCERT` (a PEM file of
//! one or more certificates, required), `STRIPE_WEBHOOK_SECRET` (test
//! default), `BIND`.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use tokio_postgres_rustls::MakeRustlsConnect;
use webhook_idempotency::{Provider, WebhookEvent, WebhookLayer, WebhookTx};

/// A TLS connector trusting exactly the certificates in the PEM file at
/// `root_cert` (a CA, or the server's self-signed certificate).
fn tls_connector(root_cert: &std::path::Path) -> Result<MakeRustlsConnect, Box<dyn std::error::Error>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(root_cert)? {
        roots.add(cert?)?;
    }
    if roots.is_empty() {
        return Err(format!("no certificate in {}", root_cert.display()).into());
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// The pool over TLS. `database_url` should carry `sslmode=require`.
fn tls_pool(database_url: &str, root_cert: &std::path::Path) -> Result<Pool, Box<dyn std::error::Error>> {
    let config: tokio_postgres::Config = database_url.parse()?;
    if config.get_ssl_mode() != tokio_postgres::config::SslMode::Require {
        eprintln!("warning: DATABASE_URL has no sslmode=require; a server without TLS would get a plaintext session");
    }
    let manager = Manager::from_config(
        config,
        tls_connector(root_cert)?,
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    Ok(Pool::builder(manager).max_size(16).build()?)
}

async fn handle(tx: WebhookTx, event: WebhookEvent) -> StatusCode {
    // The business write, in the claim's transaction.
    let Ok(client) = tx.client().await else { return StatusCode::INTERNAL_SERVER_ERROR };
    match client.execute("SELECT $1::text", &[&event.key()]).await {
        Ok(_) => StatusCode::OK,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL (with sslmode=require)")?;
    let root_cert = std::env::var_os("PGSSLROOTCERT").ok_or("set PGSSLROOTCERT to the CA's PEM file")?;
    let pool = tls_pool(&url, root_cert.as_ref())?;

    let client = pool.get().await?;
    let row = client.query_one("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).await?;
    let (ssl, version): (bool, Option<String>) = (row.get(0), row.get(1));
    println!("connected; encrypted: {ssl} ({})", version.as_deref().unwrap_or("no TLS"));
    drop(client);
    if std::env::args().any(|a| a == "--check") {
        return Ok(());
    }

    // The same connector for cancel requests: a request the layer abandons
    // (a dropped connection, a step past its deadline) cancels its statement.
    let store = webhook_idempotency::StoreConfig::new(pool).cancel_tls(tls_connector(root_cert.as_ref())?);
    webhook_idempotency::migrate(&store).await?;
    let secret = std::env::var("STRIPE_WEBHOOK_SECRET").unwrap_or_else(|_| "whsec_tls_example_secret".to_owned());
    let layer = WebhookLayer::builder(store, Provider::stripe()).scope("acct_example").secret(secret).build()?;
    let app = Router::new().route("/webhooks/stripe", post(handle).layer(layer));
    let bind = std::env::var("BIND").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&bind).await?;
    println!("serving POST http://{bind}/webhooks/stripe");
    axum::serve(listener, app).await?;
    Ok(())
}
