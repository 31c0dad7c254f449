//! Receive webhooks exactly once.
//!
//! Senders (Stripe, GitHub, ...) deliver at least once: after timeouts,
//! crashes, deploys and manual replays the same event arrives again,
//! sometimes concurrently. [`WebhookLayer`] is a `tower` layer that, per
//! delivery, buffers the raw body, verifies the provider's signature over
//! those exact bytes, extracts the event's idempotency key, claims
//! `(provider, scope, key)` in PostgreSQL and runs your handler inside the
//! claim's transaction ([`WebhookTx`]). A success response commits the claim
//! together with your business writes; anything else rolls both back, so the
//! sender's retry does the work. Duplicates are answered without running the
//! handler.
//!
//! See [`layer`] for the request flow and the response table, [`verify`]
//! for signature verification, [`providers`] for the presets, [`key`] for event keys, [`scope`] for tenants,
//! [`inbox`] and [`worker`] for inbox mode and the worker runtime, [`outbox`] for external effects,
//! [`idempotency_key`] for the `Idempotency-Key` request header on your own APIs (the same store and
//! claim, the stored response replayed), [`WebhookTx`] for what a handler can do in its transaction
//! (its writes, outbox effects, business keys, version guards), and [`store`] for the store
//! configuration, the SQL and migrations.
//!
//! # Example
//! A Stripe endpoint on axum whose handler inserts one row per event, in the
//! claim's transaction (default features; needs a PostgreSQL at
//! `DATABASE_URL`):
//!
//! ```rust,no_run
//! use axum::{http::StatusCode, routing::post, Router};
//! use webhook_idempotency::postgres::deadpool_postgres::{Manager, Pool};
//! use webhook_idempotency::postgres::tokio_postgres::NoTls;
//! use webhook_idempotency::{store, Provider, StoreConfig, WebhookEvent, WebhookLayer, WebhookTx};
//!
//! async fn stripe_webhook(tx: WebhookTx, event: WebhookEvent) -> StatusCode {
//!     let Ok(db) = tx.client().await else { return StatusCode::INTERNAL_SERVER_ERROR };
//!     // Commits with the claim when this handler answers 2xx; rolled back otherwise.
//!     let sql = "INSERT INTO payments (stripe_event_id, payload) VALUES ($1, $2)";
//!     match db.execute(sql, &[&event.key(), &event.body().as_ref()]).await {
//!         Ok(_) => StatusCode::OK,
//!         Err(_) => StatusCode::INTERNAL_SERVER_ERROR, // nothing kept; Stripe retries
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let url = std::env::var("DATABASE_URL")?;
//!     let pool = Pool::builder(Manager::new(url.parse()?, NoTls)).max_size(16).build()?;
//!     let store = StoreConfig::new(pool);
//!     // Creates or updates the tables; a failure names its SQLSTATE and server.
//!     if let Err(e) = webhook_idempotency::migrate(&store).await {
//!         eprintln!("{e} ({:?})", e.kind());
//!         return Err(e.into());
//!     }
//!     store::check_schema(&store).await?; // what the layer will need
//!     let layer = WebhookLayer::builder(store, Provider::stripe())
//!         .scope("acct_main")
//!         .secret(std::env::var("STRIPE_WEBHOOK_SECRET")?)
//!         .build()?;
//!     let app = Router::new().route("/webhooks/stripe", post(stripe_webhook).layer(layer));
//!     axum::serve(tokio::net::TcpListener::bind("0.0.0.0:3000").await?, app).await?;
//!     Ok(())
//! }
//! ```
//!
//! # Features
//! | feature | default | what |
//! |---|---|---|
//! | `axum` | yes | `FromRequestParts` for [`WebhookTx`] and [`WebhookEvent`] |
//! | `stripe`, `github` | yes | [`Provider::stripe`], [`Provider::github`] |
//! | every other preset's name (`slack`, `standard-webhooks` with `Provider::svix()`, `forgejo` enabling `gitea`, `box` for `Provider::box_com()`, ...: the list is [`providers::REGISTRY`] and the table in docs/providers.md) | no | one preset each: `Provider::<name>()` and `providers::<name>` |
//! | `tokio-postgres` | yes | the tokio-postgres driver: [`StoreConfig::new`] from its pool, [`WebhookTx::client`] (see [`postgres`]) |
//! | `cli` | no | the `webhook-verify` and `webhook-admin` commands (enables every preset) |
//! | `full` | no | every preset, `axum` and `tokio-postgres` |
//!
//! Without a preset: [`verify::generic::HmacVerifier`] for the common HMAC
//! shapes, [`key::DerivedKey`] for senders without an event id.
//!
//! # Errors
//! Every error follows one style (tower-http's): an opaque struct with a
//! `kind()` and a `#[non_exhaustive]` kind enum ([`ConfigError`], found when
//! something is built; [`StoreError`], from any step that talks to the
//! database; [`TxError`], [`Rejection`], [`verify::VerifyError`], ...), no
//! third-party error type in a public signature, and a message that never
//! contains a secret or a payload.
//!
//! Every error that has a cause (a driver error, the I/O error behind it,
//! the server's message) writes its own message followed by `": "` and each
//! cause in turn, so one line says why: `... failed (server
//! 127.0.0.1:5432): error connecting to server: Connection refused (os
//! error 111)`. A cause whose text the previous one already contains is
//! written once; a server error shows its severity, primary message and
//! SQLSTATE, never its detail (which may quote row values): each driver
//! says how its errors read. The causes are also the errors'
//! [`source`](std::error::Error::source) chain, so a reporter that walks it
//! (anyhow's `{:#}`, eyre) repeats them after the message.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]
// Without a driver feature every database value (a pool, a connection) is of
// an empty type: nothing can be built, the code past such a value is
// unreachable, and what only a driver reads or builds is unused. Those builds
// compile (features are additive) but reach no database.
#![cfg_attr(not(feature = "tokio-postgres"), allow(unreachable_code, unused_variables, dead_code))]

#[macro_use]
mod macros;

// The commands' shared code (the `cli` feature): public for the two binaries only.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
#[cfg(feature = "dev")]
pub mod dev;
mod drivers;
mod error;
pub mod event;
#[cfg(feature = "axum")]
pub mod extract;
mod handler;
pub mod idempotency_key;
pub mod inbox;
pub mod key;
pub mod layer;
pub mod metrics;
pub mod outbox;
pub mod providers;
pub mod scope;
pub mod store;
mod tx;
pub mod verify;
pub mod worker;

#[cfg(test)]
#[allow(dead_code)] // each feature set's tests use what they need
pub(crate) mod test_support;

#[cfg(feature = "tokio-postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-postgres")))]
pub use drivers::postgres;
#[cfg(feature = "sqlx")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
pub use drivers::sqlx;
pub use error::{ConfigError, ConfigErrorKind, StoreError, StoreErrorKind};
pub use event::{ScopedEvent, WebhookEvent};
pub use idempotency_key::{IdempotencyKeyLayer, IdempotentRequest};
pub use layer::IDEMPOTENT_REPLAYED;
pub use layer::{Mode, Rejection, RejectionKind, ReplayStatus, WebhookLayer, WebhookLayerBuilder, WebhookService};
pub use providers::provider::Provider;
pub use scope::Endpoint;
pub use store::config::StoreConfig;
pub use store::migrate::migrate;
pub use store::IsolationLevel;
pub use tx::{TxError, TxErrorKind, WebhookTx};
pub use verify::SigningSecret;

// The README's and OPERATIONS.md's Rust examples compile as doctests, as displayed (the README's with the
// `dev` feature, which its "Testing your route" uses: `cargo test --all-features`, the README's test command).
#[doc = include_str!("../README.md")]
#[cfg(all(doctest, feature = "dev"))]
pub struct ReadmeDoctests;

#[doc = include_str!("../OPERATIONS.md")]
#[cfg(doctest)]
pub struct OperationsDoctests;
