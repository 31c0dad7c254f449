//! [`WebhookLayerBuilder`]: the layer's settings, checked once at build.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

use super::config::{Config, InboxMode};
use super::rejection::{self, Rejection};
use super::DEFAULT_RETRY_AFTER;
use super::{Mode, ReplayStatus, WebhookLayer, DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT};
use crate::error::{ConfigError, ConfigErrorKind};
use crate::handler::Success;
use crate::providers::Provider;
use crate::scope::{Endpoint, ScopeResolver};
use crate::store::claim::{ClaimOrder, ClaimStore, ClaimStoreBuilder};
use crate::store::inbox::{Inbox, IntegrityKey};
use crate::store::{IsolationLevel, StoreConfig};
use crate::verify::{Clock, SigningSecret, SystemClock};

impl WebhookLayer {
    /// Starts a builder for deliveries from `provider`, claimed in `store`'s
    /// database (a [`StoreConfig`], or a bare pool for the defaults). Set a scope and secrets ([`scope`](WebhookLayerBuilder::scope)
    /// and [`secret`](WebhookLayerBuilder::secret)) or a
    /// [`resolver`](WebhookLayerBuilder::resolver), then
    /// [`build`](WebhookLayerBuilder::build).
    pub fn builder(store: impl Into<StoreConfig>, provider: Provider) -> WebhookLayerBuilder {
        WebhookLayerBuilder {
            claim: ClaimStore::builder(store),
            provider,
            scope: None,
            secrets: Vec::new(),
            resolver: None,
            body_limit: None,
            gzip_limit: None,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            retry_after: DEFAULT_RETRY_AFTER,
            success: Success::default(),
            replay_status: ReplayStatus::Ok,
            clock: Arc::new(SystemClock),
            operator_replay: None,
            rejection_responder: None,
            mode: Mode::Sync,
            inbox_ack: (StatusCode::OK, bytes::Bytes::new()),
            inbox_drop: Vec::new(),
            inbox_keep: Vec::new(),
            inbox_integrity: None,
            body_digest_guard: false,
        }
    }
}

/// Builder for [`WebhookLayer`]. Every setter takes `self` by value.
///
/// ```rust,no_run
/// use std::time::Duration;
///
/// use webhook_idempotency::{Provider, ReplayStatus, StoreConfig, WebhookLayer};
///
/// # fn run(store: StoreConfig) -> Result<(), Box<dyn std::error::Error>> {
/// // Where the tables are and the database timeouts: one value for every part,
/// // built from your pool (`StoreConfig::new(pool)`: see `webhook_idempotency::postgres`).
/// let store = store.schema("webhooks"); // migrated with webhook_idempotency::migrate(&store)
/// let layer = WebhookLayer::builder(store, Provider::stripe())
///     .scope("acct_main")
///     .secret("whsec_new") // rotation: either secret passes
///     .secret("whsec_old")
///     .lock_timeout(Duration::from_secs(2)) // in-flight duplicate: 409 after 2 s
///     .replay_status(ReplayStatus::Stored)
///     .build()?; // ConfigError: no scope, an unusable secret, an invalid name, ...
/// # drop(layer);
/// # Ok(())
/// # }
/// ```
#[must_use]
pub struct WebhookLayerBuilder {
    /// The claim's settings, on the database inbox mode shares.
    claim: ClaimStoreBuilder,
    provider: Provider,
    scope: Option<String>,
    secrets: Vec<SigningSecret>,
    resolver: Option<Arc<dyn ScopeResolver>>,
    body_limit: Option<usize>,
    gzip_limit: Option<usize>,
    body_timeout: Duration,
    retry_after: Duration,
    success: Success,
    replay_status: ReplayStatus,
    clock: Arc<dyn Clock>,
    operator_replay: Option<(http::HeaderName, SigningSecret)>,
    rejection_responder: Option<rejection::RejectionResponder>,
    mode: Mode,
    inbox_ack: (StatusCode, bytes::Bytes),
    inbox_drop: Vec<http::HeaderName>,
    inbox_keep: Vec<http::HeaderName>,
    inbox_integrity: Option<IntegrityKey>,
    body_digest_guard: bool,
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
    setters! {
        /// The fixed scope (tenant) of this route: 1 to 512 bytes, no NUL.
        pub fn scope(scope: impl Into<String>) => scope = Some(scope.into());
    }

    /// Adds a signing secret. Call it again for rotation: a delivery passes
    /// when any configured secret matches.
    pub fn secret(mut self, secret: impl Into<SigningSecret>) -> Self {
        self.secrets.push(secret.into());
        self
    }

    setters! {
        /// Resolves scope and secrets per request instead of fixing them, for
        /// multi-tenant routes. Excludes [`scope`](Self::scope) and
        /// [`secret`](Self::secret).
        pub fn resolver(resolver: impl ScopeResolver) => resolver = Some(Arc::new(resolver));

        /// Largest body accepted, in bytes. Larger: 413. Default: the preset's own
        /// limit where it has one ([`Provider::default_body_limit`]; Twilio: 64 KiB),
        /// else 25 MiB (GitHub sends up to 25 MB).
        pub fn body_limit(bytes: usize) => body_limit = Some(bytes);

        /// The isolation level of the claim's transaction, which the handler's
        /// writes share (default READ COMMITTED; see [`IsolationLevel`]).
        pub fn isolation_level(level: IsolationLevel) => claim.isolation_level(level);

        /// The longest a client may take to send the whole body (default 30 s);
        /// a slower one (a client trickling bytes) is answered 408 and nothing is
        /// stored. Bounds how long a connection and its buffer are held before
        /// the signature can even be checked.
        pub fn body_timeout(timeout: Duration) => body_timeout = timeout;

        /// Accepts `Content-Encoding: gzip` bodies: they are decoded (at most
        /// `inflated_limit` bytes, else 413; corrupt: 400) and the signature is
        /// verified over the decoded bytes, which the handler receives with the
        /// `Content-Encoding` header removed. Off by default: a body with any
        /// `Content-Encoding` other than `identity` is answered 415. Enable it
        /// only for senders that sign the uncompressed payload (none of the
        /// presets sends compressed deliveries).
        pub fn gzip(inflated_limit: usize) => gzip_limit = Some(inflated_limit);

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
        pub fn lock_timeout(timeout: Duration) => claim.in_flight_wait(timeout);

        /// The `Retry-After` sent with 409 and 503 (default 5 s); the header
        /// carries whole seconds, rounded down, at least 1.
        pub fn retry_after(after: Duration) => retry_after = after;
    }

    /// Which handler statuses commit (default: 2xx only; redirects roll back).
    /// A 2xx the predicate refuses rolls back and is answered 500
    /// ([`RejectionKind::HandlerError`](super::RejectionKind::HandlerError)):
    /// passing it on would tell the sender the event was processed, and it
    /// would never be retried.
    ///
    /// The rule applies in synchronous mode. In inbox mode the handler runs
    /// in the [`InboxWorker`](crate::inbox::InboxWorker), without the layer:
    /// give the worker the same predicate
    /// ([`InboxWorkerBuilder::success`](crate::inbox::InboxWorkerBuilder::success)),
    /// and the same handler commits under the same rule in both modes.
    /// Define it once, as a function or a closure you pass to both:
    ///
    /// ```rust,no_run
    /// use http::StatusCode;
    /// use webhook_idempotency::inbox::InboxWorker;
    /// use webhook_idempotency::layer::Mode;
    /// use webhook_idempotency::{Provider, WebhookLayer};
    ///
    /// /// 202 (accepted for later) and 409 (already applied) commit too.
    /// fn committed(status: StatusCode) -> bool {
    ///     status.is_success() || status == StatusCode::CONFLICT
    /// }
    ///
    /// # fn run(store: webhook_idempotency::StoreConfig, handlers: axum::Router) -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = WebhookLayer::builder(store.clone(), Provider::stripe())
    ///     .scope("acct_main")
    ///     .secret("whsec_main")
    ///     .mode(Mode::Inbox)
    ///     .success(committed)
    ///     .build()?;
    /// let worker = InboxWorker::builder(store, handlers).provider(Provider::stripe()).success(committed).build()?;
    /// # drop((layer, worker));
    /// # Ok(())
    /// # }
    /// ```
    pub fn success(mut self, predicate: impl Fn(StatusCode) -> bool + Send + Sync + 'static) -> Self {
        self.success = Success::new(predicate);
        self
    }

    setters! {
        /// How duplicates of a done event are answered (default 200).
        pub fn replay_status(replay: ReplayStatus) => replay_status = replay;

        /// The clock timestamp tolerances are checked against (default: the
        /// system clock).
        pub fn clock(clock: impl Clock) => clock = Arc::new(clock);

        /// Whether a delivery looks up a `done` row before the claim's
        /// transaction or claims first (default [`ClaimOrder::Adaptive`]: claim
        /// first while fewer than one recent delivery in three is a duplicate,
        /// lookup first above). See [`ClaimOrder`] for the cost of each and
        /// BENCHMARKS.md for the figures.
        pub fn claim_order(order: ClaimOrder) => claim.order(order);

        /// Pins the order: `true` looks up first (a duplicate is one autocommit
        /// `SELECT`), `false` claims first (a new event one round trip fewer).
        /// Same as [`claim_order`](Self::claim_order) with
        /// [`ClaimOrder::LookupFirst`] or [`ClaimOrder::ClaimFirst`].
        pub fn lookup_first(lookup_first: bool) => claim.lookup_first(lookup_first);

        /// Synchronous (the default) or inbox mode; see [`Mode`].
        ///
        /// In inbox mode the body is stored (up to the body limit) with the
        /// request's method, URI and a **keep-list** of its headers:
        /// `Content-Type`, `User-Agent`, the headers the provider declares
        /// ([`providers::read_headers`](crate::providers::read_headers): a preset's event id, type, timestamp and
        /// delivery headers) and those given to
        /// [`keep_headers`](Self::keep_headers). Every other header is left out
        /// (`X-Api-Key`, `X-Auth-Token`, `Cf-Access-Jwt-Assertion`, a proxy's
        /// `X-Forwarded-Client-Cert`, ...), and a header naming a signature, HMAC
        /// or credential (`*signature*`, `*hmac*`, `Authorization`, `Cookie`), the
        /// headers the provider reads a credential from
        /// ([`providers::credential_headers`](crate::providers::credential_headers):
        /// GitLab's `X-Gitlab-Token`, Telegram's secret token, whatever verifier
        /// the preset was given, and those of [`Provider::credentials_in`](crate::Provider::credentials_in)
        /// or the verifier's own declaration) or the
        /// operator-replay header is never stored, even when listed: the
        /// signature was verified before the row was written. Rows stay until
        /// retention removes them (never `pending`, `running` or `dead` ones).
        pub fn mode(mode: Mode) => mode = mode;

        /// Inbox mode's answer to an accepted delivery and to a duplicate of one
        /// (the duplicate also gets `Idempotent-Replayed: true`): default `200`
        /// with an empty body. Handshakes (Slack's `url_verification`, Discord's
        /// PING, ...) are still answered by the layer inline.
        pub fn inbox_ack(status: StatusCode, body: impl Into<bytes::Bytes>) => inbox_ack = (status, body.into());
    }

    /// Headers inbox mode stores besides the default keep-list (see
    /// [`mode`](Self::mode)): headers the handler reads that the provider
    /// does not declare (`X-Request-Id` from your proxy, say). Never list a
    /// credential: it would be stored in the database in clear. Names
    /// containing `signature` or `hmac`, `Authorization`, `Cookie` and
    /// `Proxy-Authorization` are dropped even when listed. Adds to earlier
    /// calls.
    pub fn keep_headers(mut self, names: impl IntoIterator<Item = http::HeaderName>) -> Self {
        self.inbox_keep.extend(names);
        self
    }

    setters! {
        /// Inbox mode tags every stored row with `key` (HMAC-SHA256 over the
        /// row's identity, type, head and payload; see [`IntegrityKey`]), for
        /// workers given the same key
        /// ([`InboxWorkerBuilder::integrity_key`](crate::inbox::InboxWorkerBuilder::integrity_key)),
        /// which then refuse rows written without it: database write access alone
        /// no longer makes a row run as if it had been signed. Default: no tag.
        pub fn inbox_integrity_key(key: IntegrityKey) => inbox_integrity = Some(key);

        /// Refuses a second event whose signed body is byte-identical to one
        /// already processed (synchronous mode) or stored (inbox mode) under
        /// another event key, within the provider's retention window: it is
        /// answered as a duplicate (200 with `Idempotent-Replayed: true`) and
        /// not run. Default: off.
        ///
        /// For presets whose event key comes from a header the signature does not
        /// cover (GitHub's `X-GitHub-Delivery`, Shopify's `X-Shopify-Event-Id`,
        /// Linear's `Linear-Delivery`, Twilio's `I-Twilio-Idempotency-Token`;
        /// SECURITY.md), someone who captured one delivery can replay it under
        /// fresh key headers, and each is a new event to the claim. With the
        /// guard the layer also claims the body's SHA-256 per (scope, provider)
        /// in the claim's transaction (one more statement per new event) or in
        /// the inbox's insert (the same statement): a replay runs nothing and, in
        /// inbox mode, stores nothing.
        ///
        /// The trade-off: two genuinely different events whose bodies are
        /// byte-identical are one event to the guard, and the second is
        /// dropped. Webhook bodies normally carry their own ids and times, so
        /// that is rare, but a sender that sends the same notification body for
        /// distinct occurrences must not use it. The alternative that changes
        /// the key itself is [`DerivedKey::canonical_body`](crate::key::DerivedKey::canonical_body)
        /// as the provider's key extractor (the event key is then the body's
        /// digest). Digests are purged with the provider's events by
        /// [`Retention`](crate::store::retention::Retention) (migration 8).
        pub fn body_digest_guard(on: bool) => body_digest_guard = on;
    }

    /// A header inbox mode must not store, besides those it never stores
    /// (names containing `signature` or `hmac`, `Authorization`,
    /// `Proxy-Authorization`, `Cookie`, and the provider's
    /// [`credential_headers`](crate::providers::credential_headers)). For
    /// the header a closure verifier reads a shared token from, prefer
    /// [`Provider::credentials_in`](crate::Provider::credentials_in), which
    /// also keeps it from the handler. Repeat for several. The URI is stored
    /// whole: do not put credentials in the webhook URL's query.
    pub fn inbox_drop_header(mut self, name: http::HeaderName) -> Self {
        self.inbox_drop.push(name);
        self
    }

    /// Shapes the body of the layer's own refusals (401, 413, 409, 503, ...;
    /// see [`RejectionKind`](super::RejectionKind)), for example as RFC 9457 problem details. The
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

    setters! {
        /// Lets an operator replay an old delivery: a request whose header
        /// `header` equals `token` skips the timestamp tolerance check (the
        /// signature is still verified, and the claim still deduplicates).
        /// For re-sending deliveries captured before an outage, after their
        /// signed timestamp went stale. Keep the token out of senders' reach.
        pub fn operator_replay(header: http::HeaderName, token: impl Into<SigningSecret>) =>
            operator_replay = Some((header, token.into()));
    }

    /// Checks the configuration and builds the layer.
    ///
    /// # Errors
    /// [`ConfigError`] when neither a scope nor a resolver is set, both are,
    /// the fixed endpoint's key material cannot authenticate anything (no
    /// secret, an empty one, a bare `whsec_`, a shared token or Basic password
    /// under 16 bytes, or what else the provider's
    /// [`Verifier::check_secrets`](crate::verify::Verifier::check_secrets)
    /// refuses; the message names the provider), a name is invalid (the
    /// schema of the [`StoreConfig`] included; the provider name
    /// `idempotency-key`, the Idempotency-Key layer's, is reserved), `lock_timeout` is out of
    /// range, the body limit is 0 or the operator-replay token is short.
    pub fn build(self) -> Result<WebhookLayer, ConfigError> {
        let resolver = resolver(&self.provider, self.resolver, self.scope, self.secrets)?;
        crate::key::validate(self.provider.name()).map_err(|_| {
            ConfigError::of(ConfigErrorKind::InvalidName, "the provider name must be 1 to 512 bytes without NUL")
        })?;
        if self.provider.name().eq_ignore_ascii_case(crate::store::idempotency_key::PROVIDER) {
            // Its claims would share rows with the Idempotency-Key layer's keys of the same scope.
            return Err(ConfigError::of(
                ConfigErrorKind::InvalidName,
                "the provider name idempotency-key is reserved for the Idempotency-Key layer's rows: name the \
                 provider otherwise",
            ));
        }
        // PostgreSQL's lock_timeout is an int of milliseconds; 0 would mean no limit.
        let lock_timeout = self.claim.current_in_flight_wait();
        if lock_timeout.as_millis() == 0 || lock_timeout.as_millis() > i32::MAX as u128 {
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
        let credential_headers = crate::providers::credential_headers(&self.provider);
        let inbox = match self.mode {
            Mode::Inbox => Some(InboxMode {
                inbox: match self.inbox_integrity {
                    Some(key) => Inbox::new(self.claim.store_config().clone())?.with_integrity_key(key),
                    None => Inbox::new(self.claim.store_config().clone())?,
                },
                status: self.inbox_ack.0,
                body: self.inbox_ack.1,
                drop_headers: self.inbox_drop.into_iter().chain(credential_headers.iter().cloned()).collect(),
                keep_headers: crate::providers::read_headers(&self.provider)
                    .into_iter()
                    .chain(self.inbox_keep)
                    .collect(),
            }),
            Mode::Sync => None,
        };
        let store = self.claim.build()?;
        Ok(WebhookLayer {
            config: Arc::new(Config {
                store,
                inbox,
                provider: self.provider,
                credential_headers,
                resolver,
                body_limit,
                gzip_limit: self.gzip_limit,
                body_timeout: self.body_timeout,
                retry_after: http::HeaderValue::from(self.retry_after.as_secs().max(1)),
                success: self.success,
                replay_status: self.replay_status,
                clock: self.clock,
                operator_replay: self.operator_replay,
                rejection_responder: self.rejection_responder,
                body_digest_guard: self.body_digest_guard,
            }),
        })
    }
}

/// The endpoint resolver: the configured one, or the fixed scope with its
/// secrets, checked.
fn resolver(
    provider: &Provider,
    resolver: Option<Arc<dyn ScopeResolver>>,
    scope: Option<String>,
    secrets: Vec<SigningSecret>,
) -> Result<Arc<dyn ScopeResolver>, ConfigError> {
    match (resolver, scope) {
        (Some(_), Some(_)) => {
            Err(ConfigError::of(ConfigErrorKind::Endpoint, "set either a resolver or a fixed scope, not both"))
        }
        (Some(_), None) if !secrets.is_empty() => Err(ConfigError::of(
            ConfigErrorKind::SecretsWithResolver,
            "with a resolver, secrets come from the resolver",
        )),
        (Some(r), None) => Ok(r),
        (None, Some(scope)) => {
            crate::key::validate(&scope).map_err(|_| {
                ConfigError::of(ConfigErrorKind::InvalidName, "the scope must be 1 to 512 bytes without NUL")
            })?;
            if let Err(e) = provider.verifier_ref().check_secrets(&secrets) {
                return Err(ConfigError::key_material_of(format!("{} layer: {e}", provider.name()), e));
            }
            if let Some(i) = secrets.iter().position(SigningSecret::has_surrounding_whitespace) {
                return Err(ConfigError::of(
                    ConfigErrorKind::SecretWhitespace,
                    format!(
                        "signing secret #{} has leading or trailing whitespace (a newline from a file or an \
                         environment variable?): trim it; a secret is used byte for byte",
                        i + 1
                    ),
                ));
            }
            Ok(Arc::new(Endpoint::new(scope, secrets)))
        }
        (None, None) => Err(ConfigError::of(ConfigErrorKind::Endpoint, "set a scope (and secrets) or a resolver")),
    }
}
