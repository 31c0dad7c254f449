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
//!    [`ScopeResolver`]);
//! 4. the provider's verifier checks the raw bytes: 401 on failure;
//! 5. the provider's key extractor finds the event key: 400 when none;
//! 6. a pooled connection is taken (503 + `Retry-After` past
//!    [`pool_timeout`](WebhookLayerBuilder::pool_timeout)), a transaction
//!    begins at the configured [`IsolationLevel`]
//!    (READ COMMITTED by default) and `(provider, scope, key)` is claimed with one
//!    `INSERT ... ON CONFLICT DO NOTHING`;
//! 7. claimed: [`WebhookTx`](crate::WebhookTx) and
//!    [`WebhookEvent`](crate::WebhookEvent) go into the request extensions and
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

mod body;
mod buffer;
mod future;
mod rejection;
pub(crate) mod service;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use http::StatusCode;

pub use body::ResponseBody;
pub use future::ResponseFuture;
pub use rejection::{Rejection, RejectionKind};
pub use service::{WebhookService, IDEMPOTENT_REPLAYED};

use crate::provider::Provider;
use crate::scope::{Endpoint, ScopeResolver};
pub use crate::store::IsolationLevel;
use crate::store::{self, ClaimStore};
use crate::verify::{Clock, KeyMaterialError, SigningSecret, SystemClock};

/// Default body limit: 25 MiB (GitHub caps payloads at 25 MB).
pub const DEFAULT_BODY_LIMIT: usize = 25 * 1024 * 1024;
/// Default bound on reading the whole body: 30 seconds.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default wait for a delivery of the same event already in flight: 5 seconds.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(5);
/// Default wait for a pooled connection: 5 seconds.
pub const DEFAULT_POOL_TIMEOUT: Duration = Duration::from_secs(5);
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

type SuccessFn = dyn Fn(StatusCode) -> bool + Send + Sync;

pub(crate) struct Config {
    pub(crate) store: ClaimStore,
    /// Inbox mode: where accepted deliveries go, and the answer.
    pub(crate) inbox: Option<(crate::store::inbox::Inbox, StatusCode, bytes::Bytes, Vec<http::HeaderName>)>,
    pub(crate) provider: Provider,
    pub(crate) resolver: Arc<dyn ScopeResolver>,
    pub(crate) body_limit: usize,
    pub(crate) gzip_limit: Option<usize>,
    pub(crate) body_timeout: Duration,
    pub(crate) retry_after: http::HeaderValue,
    pub(crate) success: Arc<SuccessFn>,
    pub(crate) replay_status: ReplayStatus,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) operator_replay: Option<(http::HeaderName, SigningSecret)>,
    pub(crate) rejection_responder: Option<rejection::RejectionResponder>,
}

impl Config {
    /// True when the request carries the configured operator-replay header
    /// with the right token. The SHA-256 digests of the header value and the
    /// token are compared in constant time, so neither the token's content
    /// nor its length shows in the timing.
    pub(crate) fn is_operator_replay(&self, headers: &http::HeaderMap) -> bool {
        use sha2::{Digest as _, Sha256};
        use subtle::ConstantTimeEq as _;
        let Some((name, token)) = &self.operator_replay else { return false };
        let want = Sha256::digest(token.expose());
        let mut found = subtle::Choice::from(0);
        for value in headers.get_all(name) {
            found |= Sha256::digest(value.as_bytes()).ct_eq(&want);
        }
        found.into()
    }
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
/// use webhook_idempotency::deadpool_postgres::{Manager, Pool};
/// use webhook_idempotency::{tokio_postgres, Provider, WebhookEvent, WebhookLayer, WebhookTx};
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
/// # async fn run(request: Request<Full<Bytes>>) -> Result<(), Box<dyn std::error::Error>> {
/// let pool = Pool::builder(Manager::new("postgresql://app@localhost/app".parse()?, tokio_postgres::NoTls)).build()?;
/// let layer = WebhookLayer::builder(pool, Provider::github()).scope("org_main").secret("It's a Secret").build()?;
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

impl WebhookLayer {
    /// Starts a builder for deliveries from `provider`, claimed in `pool`'s
    /// database. Set a scope and secrets ([`scope`](WebhookLayerBuilder::scope)
    /// and [`secret`](WebhookLayerBuilder::secret)) or a
    /// [`resolver`](WebhookLayerBuilder::resolver), then
    /// [`build`](WebhookLayerBuilder::build).
    pub fn builder(pool: Pool, provider: Provider) -> WebhookLayerBuilder {
        WebhookLayerBuilder {
            pool,
            provider,
            scope: None,
            secrets: Vec::new(),
            resolver: None,
            body_limit: None,
            gzip_limit: None,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            isolation: IsolationLevel::ReadCommitted,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            pool_timeout: DEFAULT_POOL_TIMEOUT,
            retry_after: DEFAULT_RETRY_AFTER,
            success: Arc::new(|s: StatusCode| s.is_success()),
            replay_status: ReplayStatus::Ok,
            clock: Arc::new(SystemClock),
            operator_replay: None,
            rejection_responder: None,
            database_timeout: store::DEFAULT_DATABASE_TIMEOUT,
            transaction_pooler: false,
            lookup_first: true,
            mode: Mode::Sync,
            inbox_ack: (StatusCode::OK, bytes::Bytes::new()),
            inbox_drop: Vec::new(),
            schema: store::DEFAULT_SCHEMA.to_owned(),
        }
    }
}

impl<S> tower_layer::Layer<S> for WebhookLayer {
    type Service = WebhookService<S>;

    fn layer(&self, inner: S) -> WebhookService<S> {
        WebhookService::new(inner, Arc::clone(&self.config))
    }
}

/// Builder for [`WebhookLayer`]. Every setter takes `self` by value.
///
/// ```rust,no_run
/// use std::time::Duration;
///
/// use webhook_idempotency::deadpool_postgres::{Manager, Pool};
/// use webhook_idempotency::{tokio_postgres, Provider, ReplayStatus, WebhookLayer};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = Pool::builder(Manager::new("postgresql://app@localhost/app".parse()?, tokio_postgres::NoTls)).build()?;
/// let layer = WebhookLayer::builder(pool, Provider::stripe())
///     .scope("acct_main")
///     .secret("whsec_new") // rotation: either secret passes
///     .secret("whsec_old")
///     .lock_timeout(Duration::from_secs(2)) // in-flight duplicate: 409 after 2 s
///     .replay_status(ReplayStatus::Stored)
///     .schema("webhooks") // migrated with store::migrate_schema(&pool, "webhooks")
///     .build()?; // ConfigError: no scope, an unusable secret, an invalid name, ...
/// # drop(layer);
/// # Ok(())
/// # }
/// ```
#[must_use]
pub struct WebhookLayerBuilder {
    pool: Pool,
    provider: Provider,
    scope: Option<String>,
    secrets: Vec<SigningSecret>,
    resolver: Option<Arc<dyn ScopeResolver>>,
    body_limit: Option<usize>,
    gzip_limit: Option<usize>,
    body_timeout: Duration,
    isolation: IsolationLevel,
    lock_timeout: Duration,
    pool_timeout: Duration,
    retry_after: Duration,
    success: Arc<SuccessFn>,
    replay_status: ReplayStatus,
    clock: Arc<dyn Clock>,
    operator_replay: Option<(http::HeaderName, SigningSecret)>,
    rejection_responder: Option<rejection::RejectionResponder>,
    database_timeout: Duration,
    transaction_pooler: bool,
    lookup_first: bool,
    mode: Mode,
    inbox_ack: (StatusCode, bytes::Bytes),
    inbox_drop: Vec<http::HeaderName>,
    schema: String,
}

impl fmt::Debug for WebhookLayerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookLayerBuilder")
            .field("provider", &self.provider.name())
            .field("scope", &self.scope)
            .field("secrets", &self.secrets.len())
            .finish_non_exhaustive()
    }
}

impl WebhookLayerBuilder {
    /// The fixed scope (tenant) of this route: 1 to 512 bytes, no NUL.
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// Adds a signing secret. Call it again for rotation: a delivery passes
    /// when any configured secret matches.
    pub fn secret(mut self, secret: impl Into<SigningSecret>) -> Self {
        self.secrets.push(secret.into());
        self
    }

    /// Resolves scope and secrets per request instead of fixing them, for
    /// multi-tenant routes. Excludes [`scope`](Self::scope) and
    /// [`secret`](Self::secret).
    pub fn resolver(mut self, resolver: impl ScopeResolver) -> Self {
        self.resolver = Some(Arc::new(resolver));
        self
    }

    /// Largest body accepted, in bytes. Larger: 413. Default: the preset's own
    /// limit where it has one ([`Provider::default_body_limit`]; Twilio: 64 KiB),
    /// else 25 MiB (GitHub sends up to 25 MB).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = Some(bytes);
        self
    }

    /// The isolation level of the claim's transaction, which the handler's
    /// writes share (default READ COMMITTED; see [`IsolationLevel`]).
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.isolation = level;
        self
    }

    /// The longest a client may take to send the whole body (default 30 s);
    /// a slower one (a client trickling bytes) is answered 408 and nothing is
    /// stored. Bounds how long a connection and its buffer are held before
    /// the signature can even be checked.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// Accepts `Content-Encoding: gzip` bodies: they are decoded (at most
    /// `inflated_limit` bytes, else 413; corrupt: 400) and the signature is
    /// verified over the decoded bytes, which the handler receives with the
    /// `Content-Encoding` header removed. Off by default: a body with any
    /// `Content-Encoding` other than `identity` is answered 415. Enable it
    /// only for senders that sign the uncompressed payload (none of the
    /// presets sends compressed deliveries).
    pub fn gzip(mut self, inflated_limit: usize) -> Self {
        self.gzip_limit = Some(inflated_limit);
        self
    }

    /// How long a delivery waits for another delivery of the same event that
    /// is in flight (default 5 s) before answering 409 + `Retry-After`.
    ///
    /// The wait holds no pooled connection: each check is one claim attempt
    /// that gives up at once when the other delivery holds the event's
    /// advisory lock (`pg_try_advisory_xact_lock`, PostgreSQL docs "Advisory
    /// Locks"), after which the connection goes back to the pool; checks repeat
    /// with backoff (10 ms doubling to 200 ms) until this bound. So copies of
    /// an event whose handler is slow cannot exhaust the pool. Millisecond
    /// resolution; 1 ms to 2^31-1 ms.
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// How long to wait for a pooled connection (default 5 s) before
    /// answering 503.
    pub fn pool_timeout(mut self, timeout: Duration) -> Self {
        self.pool_timeout = timeout;
        self
    }

    /// The `Retry-After` sent with 409 and 503 (default 5 s); the header
    /// carries whole seconds, rounded down, at least 1.
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = after;
        self
    }

    /// Which handler statuses commit (default: 2xx only; redirects roll back).
    pub fn success(mut self, predicate: impl Fn(StatusCode) -> bool + Send + Sync + 'static) -> Self {
        self.success = Arc::new(predicate);
        self
    }

    /// How duplicates of a done event are answered (default 200).
    pub fn replay_status(mut self, replay: ReplayStatus) -> Self {
        self.replay_status = replay;
        self
    }

    /// The clock timestamp tolerances are checked against (default: the
    /// system clock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The client-side deadline of each database step on the request path
    /// (default 2 s): one claim attempt, the commit check with its COMMIT,
    /// the failure record. Past it the connection is discarded, never
    /// pooled, and the sender gets 503 + `Retry-After`; a COMMIT whose answer
    /// never came is an unknown outcome (the retry finds the event done, or
    /// claims it again). It bounds what PostgreSQL's own timeouts cannot: a
    /// network that stops answering without closing. See
    /// [`ClaimStoreBuilder::database_timeout`](crate::store::ClaimStoreBuilder::database_timeout).
    pub fn database_timeout(mut self, timeout: Duration) -> Self {
        self.database_timeout = timeout;
        self
    }

    /// Set when `DATABASE_URL` goes through a transaction-mode pooler
    /// (PgBouncer `pool_mode = transaction`, Supavisor, RDS Proxy). The layer
    /// then caches no named prepared statement on its connections (a pooler
    /// may run each transaction on another server session, where the cached
    /// statement does not exist: SQLSTATE 26000) and sends its statements
    /// unnamed, with their types, in one round trip each. The handler's own
    /// statements must do the same: `TxClient::execute(sql_text, ..)` and
    /// `query(..)` with text are fine (prepared and closed inside the
    /// transaction), [`TxClient::prepare_cached`](crate::TxClient::prepare_cached)
    /// prepares afresh in this mode. Default off.
    pub fn transaction_pooler(mut self, behind_pooler: bool) -> Self {
        self.transaction_pooler = behind_pooler;
        self
    }

    /// Whether a delivery first looks for a `done` row outside any
    /// transaction (default `true`: a duplicate of a done event is one
    /// autocommit `SELECT`, one round trip, no transaction). `false` claims
    /// a new event in the first flight, one statement and one round trip
    /// fewer, and costs a duplicate two round trips inside a transaction
    /// that writes nothing; choose it when duplicates are rare. See
    /// [`ClaimStoreBuilder::lookup_first`](crate::store::ClaimStoreBuilder::lookup_first)
    /// and BENCHMARKS.md.
    pub fn lookup_first(mut self, lookup_first: bool) -> Self {
        self.lookup_first = lookup_first;
        self
    }

    /// Synchronous (the default) or inbox mode; see [`Mode`].
    ///
    /// In inbox mode the body is stored (up to the body limit) with the
    /// request head, minus headers naming a signature, HMAC or credential
    /// (`*signature*`, `*hmac*`, `Authorization`, `Cookie`) and the
    /// operator-replay header: the signature was verified before the row was
    /// written. Rows stay until retention removes them (never `pending`,
    /// `running` or `dead` ones).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Inbox mode's answer to an accepted delivery and to a duplicate of one
    /// (the duplicate also gets `Idempotent-Replayed: true`): default `200`
    /// with an empty body. Handshakes (Slack's `url_verification`, Discord's
    /// PING, ...) are still answered by the layer inline.
    pub fn inbox_ack(mut self, status: StatusCode, body: impl Into<bytes::Bytes>) -> Self {
        self.inbox_ack = (status, body.into());
        self
    }

    /// A header inbox mode must not store, besides those it never stores
    /// (names containing `signature` or `hmac`, `Authorization`,
    /// `Proxy-Authorization`, `Cookie`): for example the header a custom
    /// verifier reads a shared token from (`X-Gitlab-Token`). Repeat for
    /// several. The URI is stored whole: do not put credentials in the
    /// webhook URL's query.
    pub fn inbox_drop_header(mut self, name: http::HeaderName) -> Self {
        self.inbox_drop.push(name);
        self
    }

    /// Shapes the body of the layer's own refusals (401, 413, 409, 503, ...;
    /// see [`RejectionKind`]), for example as RFC 9457 problem details. The
    /// layer keeps the status the kind gives, and adds `Retry-After`, `Allow`
    /// and the [`Rejection`] extension; headers the function sets are kept.
    /// The default body is one short line of text. Never put secrets, the
    /// payload or database errors in it: the client is unauthenticated.
    pub fn rejection_response(
        mut self,
        shape: impl Fn(&Rejection) -> http::Response<bytes::Bytes> + Send + Sync + 'static,
    ) -> Self {
        self.rejection_responder = Some(Arc::new(shape));
        self
    }

    /// Lets an operator replay an old delivery: a request whose header
    /// `header` equals `token` skips the timestamp tolerance check (the
    /// signature is still verified, and the claim still deduplicates).
    /// For re-sending deliveries captured before an outage, after their
    /// signed timestamp went stale. Keep the token out of senders' reach.
    pub fn operator_replay(mut self, header: http::HeaderName, token: impl Into<SigningSecret>) -> Self {
        self.operator_replay = Some((header, token.into()));
        self
    }

    /// The PostgreSQL schema holding the tables (default
    /// `webhook_idempotency`); migrate it with
    /// [`migrate_schema`](crate::store::migrate_schema).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Checks the configuration and builds the layer.
    ///
    /// # Errors
    /// [`ConfigError`] when neither a scope nor a resolver is set, both are,
    /// the fixed endpoint's key material cannot authenticate anything (no
    /// secret, an empty one, a bare `whsec_`, or what the provider's
    /// [`Verifier::check_secrets`](crate::verify::Verifier::check_secrets)
    /// refuses; the message names the provider), a name is invalid, or the
    /// body limit is 0.
    pub fn build(self) -> Result<WebhookLayer, ConfigError> {
        let resolver: Arc<dyn ScopeResolver> = match (self.resolver, self.scope) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::of(
                    ConfigErrorKind::Endpoint,
                    "set either a resolver or a fixed scope, not both",
                ))
            }
            (Some(_), None) if !self.secrets.is_empty() => {
                return Err(ConfigError::of(
                    ConfigErrorKind::SecretsWithResolver,
                    "with a resolver, secrets come from the resolver",
                ))
            }
            (Some(r), None) => r,
            (None, Some(scope)) => {
                crate::key::validate(&scope).map_err(|_| {
                    ConfigError::of(ConfigErrorKind::InvalidName, "the scope must be 1 to 512 bytes without NUL")
                })?;
                if let Err(e) = self.provider.verifier_ref().check_secrets(&self.secrets) {
                    let message = format!("{} layer: {e}", self.provider.name());
                    return Err(ConfigError { kind: ConfigErrorKind::KeyMaterial, message, key_material: Some(e) });
                }
                if let Some(i) = self.secrets.iter().position(SigningSecret::has_surrounding_whitespace) {
                    return Err(ConfigError::of(
                        ConfigErrorKind::SecretWhitespace,
                        format!(
                            "signing secret #{} has leading or trailing whitespace (a newline from a file or an \
                         environment variable?): trim it; a secret is used byte for byte",
                            i + 1
                        ),
                    ));
                }
                Arc::new(Endpoint::new(scope, self.secrets))
            }
            (None, None) => {
                return Err(ConfigError::of(ConfigErrorKind::Endpoint, "set a scope (and secrets) or a resolver"))
            }
        };
        crate::key::validate(self.provider.name()).map_err(|_| {
            ConfigError::of(ConfigErrorKind::InvalidName, "the provider name must be 1 to 512 bytes without NUL")
        })?;
        store::check_schema_name(&self.schema).map_err(|m| ConfigError::of(ConfigErrorKind::InvalidSchema, m))?;
        // PostgreSQL's lock_timeout is an int of milliseconds; 0 would mean no limit.
        if self.lock_timeout.as_millis() == 0 || self.lock_timeout.as_millis() > i32::MAX as u128 {
            return Err(ConfigError::of(
                ConfigErrorKind::InvalidLimit,
                "lock_timeout must be 1 ms to 2^31-1 ms (about 24.8 days)",
            ));
        }
        let body_limit = self.body_limit.or(self.provider.default_body_limit()).unwrap_or(DEFAULT_BODY_LIMIT);
        if body_limit == 0 {
            return Err(ConfigError::of(ConfigErrorKind::InvalidLimit, "the body limit must be at least 1 byte"));
        }
        if self.operator_replay.as_ref().is_some_and(|(_, t)| t.expose().len() < 16) {
            return Err(ConfigError::of(
                ConfigErrorKind::WeakReplayToken,
                "the operator replay token must be at least 16 bytes",
            ));
        }
        let retry_after = http::HeaderValue::from(self.retry_after.as_secs().max(1));
        Ok(WebhookLayer {
            config: Arc::new(Config {
                inbox: (self.mode == Mode::Inbox).then(|| {
                    let inbox = crate::store::inbox::Inbox::new(
                        self.pool.clone(),
                        &self.schema,
                        self.pool_timeout,
                        self.database_timeout,
                        self.transaction_pooler,
                    );
                    (inbox, self.inbox_ack.0, self.inbox_ack.1.clone(), self.inbox_drop.clone())
                }),
                store: ClaimStore::builder(self.pool)
                    .schema(self.schema)
                    .isolation_level(self.isolation)
                    .pool_timeout(self.pool_timeout)
                    .in_flight_wait(self.lock_timeout)
                    .database_timeout(self.database_timeout)
                    .transaction_pooler(self.transaction_pooler)
                    .lookup_first(self.lookup_first)
                    .build()?,
                provider: self.provider,
                resolver,
                body_limit,
                gzip_limit: self.gzip_limit,
                body_timeout: self.body_timeout,
                retry_after,
                success: self.success,
                replay_status: self.replay_status,
                clock: self.clock,
                operator_replay: self.operator_replay,
                rejection_responder: self.rejection_responder,
            }),
        })
    }
}

/// An invalid configuration (of a [`WebhookLayerBuilder`], a verifier, a
/// secret), found when it is built rather than on the first delivery.
///
/// [`kind`](Self::kind) says what is wrong; unusable key material also
/// carries the [`KeyMaterialError`] ([`key_material`](Self::key_material),
/// and as the [`source`](std::error::Error::source)). The message names the
/// provider where it matters and never contains a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    kind: ConfigErrorKind,
    message: String,
    key_material: Option<KeyMaterialError>,
}

/// What a [`ConfigError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// Neither a fixed scope nor a resolver, or both.
    Endpoint,
    /// Secrets set beside a resolver (the resolver supplies them).
    SecretsWithResolver,
    /// A scope or provider name that is not 1 to 512 bytes without NUL.
    InvalidName,
    /// Key material that authenticates nothing (see [`ConfigError::key_material`]).
    KeyMaterial,
    /// A fixed secret with leading or trailing whitespace.
    SecretWhitespace,
    /// A schema name that is not a plain lower-case identifier.
    InvalidSchema,
    /// A limit or timeout out of its range (body limit 0, `lock_timeout`).
    InvalidLimit,
    /// The operator-replay token is shorter than 16 bytes.
    WeakReplayToken,
    /// A verifier's own configuration is inconsistent (the generic HMAC builder).
    InvalidVerifier,
}

impl ConfigError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self::of(ConfigErrorKind::InvalidVerifier, message)
    }

    pub(crate) fn of(kind: ConfigErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), key_material: None }
    }

    /// What is wrong.
    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }

    /// The key-material problem behind this error, if that is what it is.
    pub fn key_material(&self) -> Option<&KeyMaterialError> {
        self.key_material.as_ref()
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid webhook layer configuration: {}", self.message)
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.key_material.as_ref().map(|e| e as _)
    }
}
