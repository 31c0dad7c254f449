//! The webhook layer: buffer, verify, claim, run the handler in the claim's
//! transaction, commit or roll back.
//!
//! Per delivery, in this order:
//! 1. a body over [`body_limit`](WebhookLayerBuilder::body_limit) bytes is
//!    answered 413 (from `Content-Length` before reading, while streaming
//!    otherwise);
//! 2. the body is buffered once as [`bytes::Bytes`]; the inner service gets
//!    exactly those bytes back;
//! 3. the scope and signing secrets are resolved (fixed, or by a
//!    [`ScopeResolver`](crate::scope::ScopeResolver));
//! 4. the provider's verifier checks the raw bytes: 401 on failure;
//! 5. the provider's key extractor finds the event key: 400 when none;
//! 6. a pooled connection is taken (503 + `Retry-After` past
//!    [`pool_timeout`](crate::StoreConfig::pool_timeout)), a transaction
//!    begins at the configured [`IsolationLevel`](crate::store::IsolationLevel)
//!    (READ COMMITTED by default) and `(provider, scope, key)` is claimed with one
//!    `INSERT ... ON CONFLICT DO NOTHING`;
//! 7. claimed: [`WebhookTx`](crate::WebhookTx) and
//!    [`WebhookEvent`](crate::event::WebhookEvent) go into the request extensions and
//!    the inner service runs. A success response (2xx by default) marks the
//!    event done and commits; only a confirmed COMMIT lets the response out,
//!    otherwise 503. Any other response rolls back, records the failed
//!    attempt, and passes through;
//! 8. already done: 200 with `Idempotent-Replayed: true`, the handler not
//!    called. Held by another delivery in flight (which holds the event's
//!    advisory lock): the claim inserts nothing, waits for no lock, and
//!    returns its connection to the pool, then
//!    checks again with backoff (10 ms doubling to 200 ms) for up to
//!    [`lock_timeout`](WebhookLayerBuilder::lock_timeout): replayed once the
//!    other delivery commits, claimed if it rolled back, else 409 +
//!    `Retry-After`. A waiting duplicate holds no pooled connection between
//!    checks.
//!
//! | situation | status |
//! |---|---|
//! | body over the limit | 413 |
//! | `Content-Encoding` other than identity (gzip unless enabled) | 415 |
//! | body unreadable (client aborted) | 400 |
//! | body not received within `body_timeout` (30 s) | 408 |
//! | no endpoint for the request (resolver) | 404 |
//! | signature missing/invalid, timestamp outside tolerance | 401 |
//! | event key missing, too long, or with NUL | 400 |
//! | first delivery, handler success | handler's response, committed |
//! | handler non-success | handler's response, rolled back |
//! | duplicate of a done event | 200 + `Idempotent-Replayed: true` |
//! | duplicate while the first is in flight | 409 + `Retry-After` |
//! | database down, pool timeout, deadlock, serialization failure, commit failure | 503 + `Retry-After` |
//! | handler still holding `WebhookTx` after answering | 500, rolled back |

//!
//! The module's parts, in the order a delivery meets them: `read` (method,
//! limits, buffering), `authenticate` (endpoint, signature, key), `accept`
//! (inbox mode) or `process` (the processing step: the claim, the
//! handler-end step the inbox worker and the `Idempotency-Key` layer share,
//! the claim's fenced commit), then the answer ([`Rejection`] for the
//! layer's own refusals).

mod abandoned;
mod accept;
mod answer;
mod authenticate;
mod body;
pub(crate) mod buffer;
mod builder;
mod config;
mod future;
pub(crate) mod process;
mod read;
mod rejection;
pub(crate) mod service;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use body::ResponseBody;
pub use builder::WebhookLayerBuilder;
pub use future::ResponseFuture;
pub use rejection::{Rejection, RejectionKind};
pub use service::{WebhookService, IDEMPOTENT_REPLAYED};

use config::Config;

/// Default body limit: 25 MiB (GitHub caps payloads at 25 MB).
pub const DEFAULT_BODY_LIMIT: usize = 25 * 1024 * 1024;
/// Default bound on reading the whole body: 30 seconds.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default wait for a delivery of the same event already in flight: 5 seconds.
pub const DEFAULT_LOCK_TIMEOUT: Duration = crate::store::claim::DEFAULT_IN_FLIGHT_WAIT;
/// Default `Retry-After` on 409 and 503: 5 seconds.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

/// What the layer does with a verified delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Mode {
    /// Claim it and run the handler inside the claim's transaction before
    /// answering (the default): the answer says the effects committed.
    #[default]
    Sync,
    /// Store it as a `pending` inbox row and answer 2xx once that insert
    /// committed; an [`InboxWorker`](crate::inbox::InboxWorker) runs the
    /// handler shortly after. See the [`inbox`](crate::inbox) module.
    Inbox,
}

/// How a duplicate of a done event is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReplayStatus {
    /// 200 OK (the default): every sender takes it as delivered.
    #[default]
    Ok,
    /// The status the handler answered the first time.
    Stored,
}

/// A [`tower_layer::Layer`] that makes a webhook route exactly-once. Build it
/// with [`WebhookLayer::builder`].
///
/// One layer per route (provider and scope); it is cheap to clone. It works
/// on any `tower` service whose request body is built from [`bytes::Bytes`]
/// (axum's `Body`, `http_body_util::Full<Bytes>`):
///
/// ```rust,no_run
/// use std::convert::Infallible;
///
/// use bytes::Bytes;
/// use http::{Request, Response, StatusCode};
/// use http_body_util::Full;
/// use tower::{Layer, ServiceExt};
/// use webhook_idempotency::{Provider, StoreConfig, WebhookEvent, WebhookLayer, WebhookTx};
///
/// async fn handler(req: Request<Full<Bytes>>) -> Result<Response<Full<Bytes>>, Infallible> {
///     let tx = req.extensions().get::<WebhookTx>().expect("inside WebhookLayer").clone();
///     let event = req.extensions().get::<WebhookEvent>().expect("inside WebhookLayer");
///     let status = match tx.client().await {
///         Ok(db) => match db.execute("INSERT INTO pushes (delivery) VALUES ($1)", &[&event.key()]).await {
///             Ok(_) => StatusCode::OK,
///             Err(_) => StatusCode::INTERNAL_SERVER_ERROR, // rolled back; GitHub may redeliver
///         },
///         Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
///     };
///     let mut res = Response::new(Full::default());
///     *res.status_mut() = status;
///     Ok(res)
/// }
///
/// # async fn run(store: StoreConfig, request: Request<Full<Bytes>>) -> Result<(), Box<dyn std::error::Error>> {
/// // `store`: your pool (`StoreConfig::new(pool)`), the tables' schema, the database timeouts.
/// let layer = WebhookLayer::builder(store, Provider::github()).scope("org_main").secret("It's a Secret").build()?;
/// let service = layer.layer(tower::service_fn(handler));
/// let response = service.oneshot(request).await?; // 2xx committed, 200 replayed, 401, 409, 503, ...
/// # drop(response);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct WebhookLayer {
    config: Arc<Config>,
}

impl fmt::Debug for WebhookLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookLayer").field("provider", &self.config.provider.name()).finish_non_exhaustive()
    }
}

impl<S> tower_layer::Layer<S> for WebhookLayer {
    type Service = WebhookService<S>;

    fn layer(&self, inner: S) -> WebhookService<S> {
        WebhookService::new(inner, Arc::clone(&self.config))
    }
}
