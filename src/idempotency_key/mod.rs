//! The `Idempotency-Key` request header for your own APIs, on the same store
//! as the webhook layer and in the handler's own transaction.
//!
//! Webhooks carry the *sender's* event id; an API's clients (mobile apps,
//! partners, job runners) instead generate a key per operation and send it
//! in `Idempotency-Key`, and the server answers a retry with the response it
//! gave the first time (IETF httpapi, "The Idempotency-Key HTTP Header
//! Field", draft -07; Stripe, <https://docs.stripe.com/api/idempotent_requests>).
//! [`IdempotencyKeyLayer`] does that with the webhook layer's claim
//! protocol: the key is claimed in PostgreSQL, the handler runs inside the
//! claim's transaction ([`WebhookTx`](crate::WebhookTx) in its request
//! extensions, with [`IdempotentRequest`]), and its writes, the claim and
//! the stored response commit in one `COMMIT`. "The charge happened but the
//! key was not recorded" cannot occur, and two concurrent retries never
//! both run the handler.
//!
//! ```no_run
//! # async fn run(store: webhook_idempotency::StoreConfig) -> Result<(), Box<dyn std::error::Error>> {
//! use axum::{routing::post, Router};
//! use webhook_idempotency::idempotency_key::IdempotencyKeyLayer;
//! use webhook_idempotency::WebhookTx;
//!
//! async fn create_payment(tx: WebhookTx, body: String) -> (http::StatusCode, String) {
//!     let client = tx.client().await.unwrap();
//!     client.execute("INSERT INTO payments (body) VALUES ($1)", &[&body]).await.unwrap();
//!     (http::StatusCode::CREATED, "{\"id\":\"pay_1\"}".to_owned())
//! }
//!
//! let layer = IdempotencyKeyLayer::builder(store)
//!     // The authenticated caller: an id your auth middleware put in the extensions.
//!     .scope(|parts| parts.extensions.get::<ApiKeyId>().map(|id| id.0.clone()))
//!     .build()?;
//! let app: Router = Router::new().route("/payments", post(create_payment)).layer(layer);
//! # #[derive(Clone)] struct ApiKeyId(String);
//! # Ok(()) }
//! ```
//!
//! Per request with a method the layer covers (POST and PATCH by default,
//! the draft's scope; [`methods`](IdempotencyKeyLayerBuilder::methods)):
//!
//! | situation | answer |
//! |---|---|
//! | scope resolver finds no caller | 401 problem |
//! | no `Idempotency-Key` ([`required`](IdempotencyKeyLayerBuilder::required), the default) | 400 problem, handler not run |
//! | key malformed (see [`MAX_KEY_BYTES`] and the header rules below) | 400 problem |
//! | body over [`body_limit`](IdempotencyKeyLayerBuilder::body_limit) | 413 |
//! | body not received within [`body_timeout`](IdempotencyKeyLayerBuilder::body_timeout) (30 s) | 408, nothing claimed |
//! | first request | the handler's answer; stored and committed with its writes (2xx, 3xx), or see [`ErrorResponses`] |
//! | first request answered 4xx before [`IdempotentRequest::began`] (validation) | the answer, rolled back, nothing recorded; a corrected request with the key runs |
//! | first request answered 5xx or 429 (transient), not [marked final](IdempotentRequest::mark_final) | the answer as the handler made it (its `Retry-After` too), rolled back, failed attempt recorded; the retry runs |
//! | an error answer to store whose transaction a failed statement aborted | the handler's answer, not stored (nothing can commit), logged with the failed statement |
//! | same key, same fingerprint, after completion | the stored response (status, the [`replay_headers`](IdempotencyKeyLayerBuilder::replay_headers), body) with `Idempotent-Replayed: true`; handler not run |
//! | same key, other fingerprint | 422 problem, handler not run |
//! | same key while the first is in flight (after [`in_flight_wait`](IdempotencyKeyLayerBuilder::in_flight_wait)) | 409 problem + `Retry-After: 1` |
//! | database unavailable, retryable conflict, commit failed | 503 problem + `Retry-After` |
//! | response body over [`max_response_bytes`](IdempotencyKeyLayerBuilder::max_response_bytes) | 500 problem, rolled back (nothing stored, nothing committed) |
//!
//! **Stored and replayed**: the status, the
//! [`replay_headers`](IdempotencyKeyLayerBuilder::replay_headers) (credential
//! headers, [`CREDENTIAL_HEADERS`], only when allowed explicitly) and the
//! body, in plain text in `webhook_request_keys`; never the request body
//! (only its digest), never other response headers. SECURITY.md has the
//! per-key storage cost and why a per-caller rate limit belongs in front.
//!
//! Other methods pass through untouched, with no transaction. Problems are
//! `application/problem+json` bodies (RFC 9457) shaped as the draft's
//! examples (section 2.7); their `type` names a heading of
//! [Problem types](#problem-types) below.
//!
//! **Where it goes.** The layer needs the caller, so the authentication that
//! sets it must run first: in axum, add the authentication layer *after*
//! this one (`.layer(idempotency).layer(auth)`: the last added runs first),
//! and use `route_layer` so unknown paths still answer 404 and other methods
//! 405 instead of 400 for a missing key. The store needs the migrations
//! ([`migrate`](crate::migrate), version 9 or later); a database without them
//! answers 503 and logs once what to run.
//!
//! **The key** is read as the draft's RFC 8941 string (`"..."`) or, as most
//! clients send it, bare; 1 to 255 bytes of printable ASCII. **The scope**
//! comes from [`scope`](IdempotencyKeyLayerBuilder::scope), a resolver of
//! the authenticated caller (an API key id, a user, a tenant), never from
//! the request alone: two callers' equal keys are independent and no caller
//! can read another's stored response. **The fingerprint** is SHA-256 of
//! [`default_fingerprint`] (method, the host the request is for (the URI's
//! authority, else `Host`), the path and query of the [`request_target`] the
//! client sent, `Content-Type`, and the body's SHA-256) unless
//! [`fingerprint`](IdempotencyKeyLayerBuilder::fingerprint) chooses what
//! counts: one key sent to `acct-1.api.example` and then to
//! `acct-2.api.example` is two requests (422), never the first host's
//! replay. No other header is in it: a header that selects the account
//! (`X-Account-Id`) must go into the scope or a custom fingerprint. Inside
//! axum's `Router::nest` the layer's own URI has
//! lost the prefix (`/accounts/{acct}`): with the `axum` feature the
//! fingerprint reads axum's `OriginalUri` instead, so one key sent for two
//! accounts is two requests (422), never the first account's replay.
//! Without axum, put the layer where it sees the whole path. A fingerprint
//! is stored once a response or a recovery point is: a retry after a run
//! that stored neither (its answer was not stored: a validation 4xx, a
//! transient 5xx or 429) runs whatever its body.
//!
//! **Expiry.** Keys and their responses are kept for [`RETENTION`] (24 h)
//! and then purged by [`Retention`](crate::store::retention::Retention) and
//! `webhook-admin purge --older-than` (provider `idempotency-key`, every
//! scope; `webhook-admin list --state done --provider idempotency-key --scope
//! <caller>` shows one caller's keys); a retry after the purge runs again. Until the
//! purge runs, an older key is still replayed. Set another period with
//! `Retention::builder(..).window(PROVIDER, period)`.
//!
//! **Recovery points or the outbox.** A handler that calls an external
//! service (a card network, an email API) cannot take that call back when
//! its transaction rolls back. Two tools:
//! - the outbox ([`WebhookTx::enqueue`](crate::WebhookTx::enqueue)): the
//!   external call becomes a row committed with the handler's writes and
//!   made by a worker with a deterministic downstream key. Use it when the
//!   response does not need the external call's result. Each claim of a key
//!   has effects of its own: their event key is the client's key, `#` and a
//!   claim id (32 hex digits; [`EffectContext::event`](crate::outbox::EffectContext::event)
//!   shows it), so a key used again after it expired (24 hours; outbox rows
//!   are kept 30 days) enqueues new effects with new downstream keys, never
//!   the first request's duplicates. The client's key finds them:
//!   [`EffectFilter::key`](crate::store::admin::EffectFilter::key) and
//!   `webhook-admin outbox list --provider idempotency-key --key <key>`.
//! - recovery points ([`IdempotentRequest::record_recovery_point`]): when the
//!   response needs the external result, make the call, record the phase
//!   (committed on its own), and on a retry after a crash read
//!   [`IdempotentRequest::recovery_point`] and resume after it instead of
//!   calling again (brandur, "Implementing Stripe-like Idempotency Keys in
//!   Postgres").
//!
//! **A transient answer after an external call.** A 5xx or a 429 is not
//! stored (see [`ErrorResponses`]): its writes roll back and the retry runs
//! the handler again. A call made before it is then made again unless a
//! recovery point records it (the retry resumes after it) or the handler
//! [marks the answer final](IdempotentRequest::mark_final) (stored and
//! replayed; the client learns the outcome elsewhere).
//!
//! **Recovery points need a second connection.** Recording one takes a
//! pooled connection for one statement while the claim's transaction holds
//! another: size the pool above the number of handlers recording them at
//! once.
//!
//! **Cost.** A replay costs one round trip (the key's `SELECT`) and no
//! transaction, as a webhook duplicate does. A first request costs that
//! lookup, `BEGIN` and the claim in one flight, the handler's statements,
//! and one statement storing the response and checking the fence, sent with
//! `COMMIT`: four round trips with a one-statement handler.
//!
//! # Problem types
//!
//! The `type` of each problem answer is this page with one of these
//! fragments.
//!
//! ### unauthenticated
//! 401: the scope resolver found no caller.
//! ### key-missing
//! 400: a covered method without `Idempotency-Key` while it is required.
//! ### key-malformed
//! 400: not a string item or bare key of 1 to 255 printable ASCII bytes, or
//! sent twice; `detail` says which.
//! ### key-reused
//! 422: the key was used with another method, path (as the client sent it),
//! query, `Content-Type` or body.
//! ### key-used
//! 422: the key completed and its response is no longer stored; use a new key.
//! ### in-flight
//! 409 + `Retry-After`: a request with the key is still running.
//! ### body-too-large
//! 413: the body is over the layer's limit.
//! ### body-timeout
//! 408: the body did not arrive within the layer's body timeout; nothing was
//! processed.
//! ### body-unreadable
//! 400: the body could not be read (the client went away).
//! ### unavailable
//! 503 + `Retry-After`: the database did not answer, a retryable conflict
//! (deadlock, serialization failure) rolled the request back, or the commit
//! failed: nothing was kept; retry with the same key.
//! ### response-not-stored
//! 500: the response was over `max_response_bytes` or unreadable; rolled back.
//! ### handler-error
//! 500: the handler panicked (in its future, or in the response body the
//! layer reads to store it), answered while still holding the
//! transaction, or the inner service failed; rolled back.
//! ### misconfigured
//! 500: the scope resolver returned an invalid scope.

mod header;
mod request;
mod service;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self as h, HeaderName};
use http::request::Parts;
use http::{Method, Uri};
use sha2::{Digest, Sha256};
use tower_layer::Layer;

pub use header::MAX_KEY_BYTES;
pub use request::IdempotentRequest;
pub use service::IdempotencyKeyService;

use crate::error::{ConfigError, ConfigErrorKind};
use crate::store::claim::{ClaimStore, ClaimStoreBuilder};
use crate::store::idempotency_key::RequestKeys;
pub use crate::store::idempotency_key::{PROVIDER, RETENTION};
use crate::store::StoreConfig;

/// The default request body limit: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// The default limit of a stored response body: 1 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// The default in-flight wait: 2 seconds.
pub const DEFAULT_IN_FLIGHT_WAIT: Duration = Duration::from_secs(2);
/// The default body timeout: 30 seconds, the webhook layer's
/// ([`DEFAULT_BODY_TIMEOUT`](crate::layer::DEFAULT_BODY_TIMEOUT)).
pub const DEFAULT_BODY_TIMEOUT: Duration = crate::layer::DEFAULT_BODY_TIMEOUT;

/// Response headers that carry credentials or a session: refused among the
/// [`replay_headers`](IdempotencyKeyLayerBuilder::replay_headers) unless
/// [`allow_credential_replay_headers`](IdempotencyKeyLayerBuilder::allow_credential_replay_headers)
/// names them. `set-cookie` (RFC 6265), `authorization` and
/// `proxy-authorization` (RFC 9110 section 11.6.2 and 11.7.2), and the
/// challenges `www-authenticate` and `proxy-authenticate` (sections 11.6.1
/// and 11.7.1).
pub const CREDENTIAL_HEADERS: [HeaderName; 5] =
    [h::SET_COOKIE, h::AUTHORIZATION, h::PROXY_AUTHORIZATION, h::WWW_AUTHENTICATE, h::PROXY_AUTHENTICATE];

type ScopeFn = dyn Fn(&Parts) -> Option<String> + Send + Sync;
type FingerprintFn = dyn Fn(&Parts, &Bytes) -> Vec<u8> + Send + Sync;

/// Which error answers are stored and replayed (2xx and 3xx answers always
/// are).
///
/// Stripe "saves the resulting status code and body of the first request
/// made for any given idempotency key, regardless of whether it succeeds or
/// fails", but only "if an API endpoint started executing": requests that
/// failed validation are not saved
/// (<https://docs.stripe.com/api/idempotent_requests>). A 5xx or a 429 is
/// not a result but a failure to produce one: the client is told to retry,
/// and a stored one would answer every retry with that failure until the key
/// expires. Stripe's API v1 replays even its 500s, whose work may be half
/// done (its API v2 retries failed work to completion instead); here an
/// answer that is not stored rolls back the handler's writes, so running
/// the request again is safe, except for a call the handler made outside
/// the transaction: record a recovery point before answering, or mark the
/// answer final. A stored answer commits with the writes the handler made
/// before it; an answer that is not stored rolls them back, and the next
/// request with the key runs again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ErrorResponses {
    /// Stripe's rule without its transient failures (the default): an error
    /// answer is stored when the handler marked execution as begun
    /// ([`IdempotentRequest::began`]), except a 5xx or a 429, which is stored only when the handler marked it
    /// final ([`IdempotentRequest::mark_final`]). Not stored: answers before
    /// `began` (a 4xx then leaves nothing behind, a 5xx is recorded as a
    /// failed attempt), transient ones (5xx, 429) not marked final, and
    /// errors after a recovery point without `began` (the retry resumes
    /// instead). An answer not stored rolls back and goes out as the handler
    /// made it (with its own `Retry-After`).
    #[default]
    AfterExecution,
    /// No error answer is stored: every non-2xx rolls back and a retry runs
    /// again.
    Never,
    /// Every answer is stored, whatever its status, a 5xx or a 429 too: a
    /// retry is then answered that failure until the key expires (without
    /// `Retry-After`, unless it is among the replay headers).
    Always,
}

impl ErrorResponses {
    /// Whether an answer of `status` is stored, for a handler that did or did
    /// not call [`began`](IdempotentRequest::began) and
    /// [`mark_final`](IdempotentRequest::mark_final). 2xx and 3xx always are
    /// (a 303 after a write is POST/redirect/GET).
    fn stores(self, status: http::StatusCode, began: bool, marked_final: bool) -> bool {
        if status.is_success() || status.is_redirection() {
            return true;
        }
        let transient = status.is_server_error() || status == http::StatusCode::TOO_MANY_REQUESTS;
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::AfterExecution => marked_final || (began && !transient),
        }
    }
}

/// The fingerprint input [`IdempotencyKeyLayerBuilder::fingerprint`] starts
/// from: the method, the authority (the host and port the request is for:
/// the [`request_target`]'s, which an HTTP/2 request's `:authority` or an
/// absolute URI gives, else the `Host` header, in lower case: RFC 9110
/// section 4.2.3 makes the host case-insensitive; empty when neither), the
/// path and the query of the [`request_target`], each `Content-Type` value
/// (each part followed by a NUL byte) and the SHA-256 of the body (32
/// bytes). The layer hashes whatever the fingerprint function returns with
/// SHA-256.
///
/// The host and the path are the ones the client sent: an API that tells
/// accounts apart by host (`acct-1.api.example`, `acct-2.api.example`) or
/// by a path prefix gets a 422 for one key sent for two accounts, never the
/// first account's replay; inside axum's `Router::nest`, the path this layer
/// sees has lost the prefix (`/accounts/{acct}`), and with it which account
/// the request is for. The `Content-Type` says how the body is read: the
/// same bytes as a form and as JSON are two requests. Any other header is
/// left out: a header that selects the account (`X-Account-Id`,
/// `Stripe-Account`) must be part of the
/// [`scope`](IdempotencyKeyLayerBuilder::scope) or of a custom
/// [`fingerprint`](IdempotencyKeyLayerBuilder::fingerprint), or one key sent
/// for a second account is answered with the first one's response.
pub fn default_fingerprint(parts: &Parts, body: &Bytes) -> Vec<u8> {
    let target = request_target(parts);
    let mut input = Vec::with_capacity(128 + target.path().len());
    input.extend_from_slice(parts.method.as_str().as_bytes());
    input.push(0);
    let host = parts.headers.get(h::HOST).map(http::HeaderValue::as_bytes);
    let authority = target.authority().or(parts.uri.authority()).map(|a| a.as_str().as_bytes()).or(host);
    input.extend(authority.unwrap_or_default().iter().map(u8::to_ascii_lowercase));
    input.push(0);
    for part in [target.path(), target.query().unwrap_or("")] {
        input.extend_from_slice(part.as_bytes());
        input.push(0);
    }
    for content_type in parts.headers.get_all(h::CONTENT_TYPE) {
        input.extend_from_slice(content_type.as_bytes());
        input.push(0);
    }
    input.extend_from_slice(&Sha256::digest(body));
    input
}

/// The request target as the client sent it: with the `axum` feature,
/// axum's [`OriginalUri`](https://docs.rs/axum/0.8/axum/extract/struct.OriginalUri.html)
/// when an axum `Router` set it (it does before routing, so inside
/// `Router::nest` it still holds the prefix the nested router stripped from
/// the URI), else the URI this layer sees. A custom
/// [`fingerprint`](IdempotencyKeyLayerBuilder::fingerprint) should read the
/// path from here, not from `parts.uri`.
pub fn request_target(parts: &Parts) -> &Uri {
    original_uri(&parts.uri, &parts.extensions)
}

/// [`request_target`] of a request's URI and extensions.
pub(crate) fn original_uri<'a>(uri: &'a Uri, extensions: &'a http::Extensions) -> &'a Uri {
    #[cfg(feature = "axum")]
    if let Some(axum::extract::OriginalUri(original)) = extensions.get() {
        return original;
    }
    let _ = extensions;
    uri
}

/// Builds an [`IdempotencyKeyLayer`]; see the [module docs](self).
#[must_use]
pub struct IdempotencyKeyLayerBuilder {
    /// The claim's settings, on the database the request keys share.
    claim: ClaimStoreBuilder,
    scope: Option<Arc<ScopeFn>>,
    fingerprint: Arc<FingerprintFn>,
    methods: Vec<Method>,
    required: bool,
    replay_headers: Vec<HeaderName>,
    /// Credential headers allowed among `replay_headers`.
    credential_replay: Vec<HeaderName>,
    max_response_bytes: usize,
    body_limit: usize,
    body_timeout: Duration,
    errors: ErrorResponses,
}

impl std::fmt::Debug for IdempotencyKeyLayerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyKeyLayerBuilder")
            .field("methods", &self.methods)
            .field("required", &self.required)
            .field("errors", &self.errors)
            .finish_non_exhaustive()
    }
}

impl IdempotencyKeyLayerBuilder {
    /// The caller's scope (required): the authenticated identity the key
    /// belongs to, 1 to 512 bytes, read from the request's parts (typically
    /// an extension an authentication middleware in front set). `None`
    /// answers 401: no key is claimed for an unauthenticated caller.
    pub fn scope(mut self, resolver: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static) -> Self {
        self.scope = Some(Arc::new(resolver));
        self
    }

    /// What identifies a request for the 422 check: a function of the parts
    /// and the body whose output is hashed (SHA-256). Start from
    /// [`default_fingerprint`] to add to it, or leave out what varies
    /// between honest retries (a timestamp field, a tracing header).
    pub fn fingerprint(mut self, f: impl Fn(&Parts, &Bytes) -> Vec<u8> + Send + Sync + 'static) -> Self {
        self.fingerprint = Arc::new(f);
        self
    }

    setters! {
        /// The methods the layer covers (default POST and PATCH); requests with
        /// others pass through untouched.
        pub fn methods(methods: impl IntoIterator<Item = Method>) => methods = methods.into_iter().collect();

        /// Whether a covered request without `Idempotency-Key` is refused with
        /// 400 (default `true`, the draft's "required" case) or passes through
        /// untouched (no claim, no transaction).
        pub fn required(required: bool) => required = required;

        /// The response headers stored and replayed (default `content-type`,
        /// `content-language`, `location`, `etag`). Others (a date, a request
        /// id, cookies) are not kept. The [`CREDENTIAL_HEADERS`] (`set-cookie`,
        /// `authorization`, `proxy-authorization`, `www-authenticate`,
        /// `proxy-authenticate`) are refused at [`build`](Self::build) unless
        /// [`allow_credential_replay_headers`](Self::allow_credential_replay_headers)
        /// names them too.
        pub fn replay_headers(names: impl IntoIterator<Item = HeaderName>) =>
            replay_headers = names.into_iter().collect();

        /// Allows `names`, among the [`CREDENTIAL_HEADERS`], in the
        /// [`replay_headers`](Self::replay_headers) (default: none). A replayed
        /// header is stored in plain text in `webhook_request_keys` (and so in
        /// backups and replicas) for the key's 24 hours, and handed to every
        /// request of the caller's scope that sends the key again: a session
        /// cookie or a token there is a credential anyone who can read the
        /// table, or who learns the key, can use. Allow one only for a value
        /// meant to be handed out again (a cookie that carries no session,
        /// say). Names outside the credential headers need no allowing.
        pub fn allow_credential_replay_headers(names: impl IntoIterator<Item = HeaderName>) =>
            credential_replay = names.into_iter().collect();

        /// The largest response body stored, in bytes (default 1 MiB). A larger
        /// one is refused: rolled back and answered 500, since it could not be
        /// replayed; raise the limit or answer less.
        pub fn max_response_bytes(bytes: usize) => max_response_bytes = bytes;

        /// The largest request body, in bytes (default 1 MiB; 413 past it). The
        /// body is buffered once, into one buffer of about its size whatever
        /// its framing (the webhook layer's), fingerprinted and handed on
        /// unchanged.
        pub fn body_limit(bytes: usize) => body_limit = bytes;

        /// The longest a client may take to send the whole body (default 30 s,
        /// [`DEFAULT_BODY_TIMEOUT`]); a slower one (a client trickling bytes)
        /// is answered 408 before anything is claimed. Bounds how long a
        /// connection and its buffer are held per request.
        pub fn body_timeout(timeout: Duration) => body_timeout = timeout;

        /// How long a request whose key another request holds waits for it
        /// (default 2 s) before 409: replayed (or 422) if that one completes in
        /// time, run if it failed.
        pub fn in_flight_wait(wait: Duration) => claim.in_flight_wait(wait);

        /// Which error answers are stored (default
        /// [`ErrorResponses::AfterExecution`], Stripe's rule).
        pub fn error_responses(errors: ErrorResponses) => errors = errors;
    }

    /// Builds the layer.
    ///
    /// # Errors
    /// [`ConfigError`]: no [`scope`](Self::scope) resolver
    /// ([`ConfigErrorKind::Endpoint`]), a zero limit or body timeout
    /// ([`ConfigErrorKind::InvalidLimit`]), a credential header among the
    /// replay headers that
    /// [`allow_credential_replay_headers`](Self::allow_credential_replay_headers)
    /// does not name ([`ConfigErrorKind::CredentialReplayHeader`]), or the
    /// store's schema name invalid.
    pub fn build(self) -> Result<IdempotencyKeyLayer, ConfigError> {
        let scope = self.scope.ok_or_else(|| {
            ConfigError::of(
                ConfigErrorKind::Endpoint,
                "IdempotencyKeyLayer needs a scope resolver: .scope(|parts| ...) naming the authenticated caller",
            )
        })?;
        if self.body_limit == 0 || self.max_response_bytes == 0 || self.body_timeout.is_zero() {
            return Err(ConfigError::of(
                ConfigErrorKind::InvalidLimit,
                "IdempotencyKeyLayer: body_limit and max_response_bytes must be at least 1 byte, body_timeout above 0",
            ));
        }
        let credential =
            |name: &&HeaderName| CREDENTIAL_HEADERS.contains(name) && !self.credential_replay.contains(name);
        if let Some(name) = self.replay_headers.iter().find(credential) {
            return Err(ConfigError::of(
                ConfigErrorKind::CredentialReplayHeader,
                format!(
                    "IdempotencyKeyLayer: replay_headers names `{name}`, a credential header: its value would be \
                     stored in plain text and handed to every retry with the key. Leave it out, or allow it \
                     explicitly with allow_credential_replay_headers"
                ),
            ));
        }
        let keys = RequestKeys::new(self.claim.store_config())?;
        let store = self.claim.build()?;
        Ok(IdempotencyKeyLayer {
            config: Arc::new(service::Config {
                store,
                keys,
                scope,
                fingerprint: self.fingerprint,
                methods: self.methods,
                required: self.required,
                replay_headers: self.replay_headers,
                max_response_bytes: self.max_response_bytes,
                body_limit: self.body_limit,
                body_timeout: self.body_timeout,
                errors: self.errors,
            }),
        })
    }
}

/// A [`tower::Layer`](tower_layer::Layer) for `Idempotency-Key` on your own
/// API routes; see the [module docs](self). Clones share one configuration.
#[derive(Clone)]
pub struct IdempotencyKeyLayer {
    config: Arc<service::Config>,
}

impl std::fmt::Debug for IdempotencyKeyLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyKeyLayer").field("methods", &self.config.methods).finish_non_exhaustive()
    }
}

impl IdempotencyKeyLayer {
    /// A builder on `store` (a [`StoreConfig`], or a driver's bare pool;
    /// migrated with [`migrate`](crate::migrate), version 9 or later).
    pub fn builder(store: impl Into<StoreConfig>) -> IdempotencyKeyLayerBuilder {
        IdempotencyKeyLayerBuilder {
            // Claim first: the key's lookup already answered completed keys.
            claim: ClaimStore::builder(store).lookup_first(false).in_flight_wait(DEFAULT_IN_FLIGHT_WAIT),
            scope: None,
            fingerprint: Arc::new(default_fingerprint),
            methods: vec![Method::POST, Method::PATCH],
            required: true,
            replay_headers: vec![
                http::header::CONTENT_TYPE,
                http::header::CONTENT_LANGUAGE,
                http::header::LOCATION,
                http::header::ETAG,
            ],
            credential_replay: Vec::new(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            body_limit: DEFAULT_BODY_LIMIT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            errors: ErrorResponses::default(),
        }
    }
}

impl<S> Layer<S> for IdempotencyKeyLayer {
    type Service = IdempotencyKeyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyKeyService::new(inner, Arc::clone(&self.config))
    }
}

#[cfg(test)]
mod tests {
    use http::{Request, StatusCode};

    use super::*;

    #[test]
    fn transient_errors_are_stored_only_when_marked_final_by_default() {
        use ErrorResponses::{AfterExecution, Always, Never};
        let (ok, see_other) = (StatusCode::CREATED, StatusCode::SEE_OTHER);
        let (declined, throttled, down) =
            (StatusCode::PAYMENT_REQUIRED, StatusCode::TOO_MANY_REQUESTS, StatusCode::SERVICE_UNAVAILABLE);
        // (policy, status, began, marked final, stored)
        let cases = [
            (AfterExecution, ok, false, false, true),
            (AfterExecution, see_other, false, false, true),
            (AfterExecution, declined, false, false, false),
            (AfterExecution, declined, true, false, true),
            (AfterExecution, throttled, true, false, false),
            (AfterExecution, down, true, false, false),
            (AfterExecution, StatusCode::INTERNAL_SERVER_ERROR, true, false, false),
            (AfterExecution, down, true, true, true),
            (AfterExecution, throttled, true, true, true),
            (Never, ok, true, true, true),
            (Never, declined, true, true, false),
            (Never, down, true, true, false),
            (Always, down, false, false, true),
            (Always, declined, false, false, true),
        ];
        for (policy, status, began, marked_final, want) in cases {
            assert_eq!(policy.stores(status, began, marked_final), want, "{policy:?} {status} {began} {marked_final}");
        }
    }

    #[cfg(feature = "axum")]
    /// A `POST` to `uri` for host `a.example`, with axum's `OriginalUri`
    /// `original` and the `Content-Type` given.
    fn parts(uri: &str, original: Option<&str>, content_type: Option<&str>) -> Parts {
        let mut req = Request::post(uri).header("host", "a.example");
        if let Some(content_type) = content_type {
            req = req.header("content-type", content_type);
        }
        let (mut parts, ()) = req.body(()).unwrap().into_parts();
        if let Some(original) = original {
            parts.extensions.insert(axum::extract::OriginalUri(original.parse().unwrap()));
        }
        parts
    }

    #[cfg(feature = "axum")]
    #[test]
    fn the_default_fingerprint_reads_the_host_the_original_target_and_the_content_type() {
        let body = Bytes::from_static(b"{}");
        let print = |p: &Parts| default_fingerprint(p, &body);
        let json = Some("application/json");
        let with_host = |mut p: Parts, host: &'static str| {
            p.headers.insert(h::HOST, http::HeaderValue::from_static(host));
            p
        };
        let without_host = |mut p: Parts| {
            p.headers.remove(h::HOST);
            p
        };
        let base = print(&parts("/payments", Some("/accounts/a1/payments"), json));
        // The host is case-insensitive, and a target's authority is the host
        // it names, whatever `Host` says.
        let same_host = [
            with_host(parts("/payments", Some("/accounts/a1/payments"), json), "A.Example"),
            parts("/payments", Some("http://a.example/accounts/a1/payments"), json),
            with_host(parts("/payments", Some("http://a.example/accounts/a1/payments"), json), "b.example"),
            without_host(parts("http://a.example/accounts/a1/payments", None, json)),
        ];
        for p in same_host {
            assert_eq!(print(&p), base, "{:?} {:?}", p.headers, p.extensions.get::<axum::extract::OriginalUri>());
        }
        let cases = [
            (
                "another account under nest",
                parts("/payments", Some("/accounts/a2/payments"), Some("application/json")),
                false,
            ),
            ("the same account", parts("/payments", Some("/accounts/a1/payments"), Some("application/json")), true),
            ("no OriginalUri: the URI seen", parts("/accounts/a1/payments", None, Some("application/json")), true),
            ("another query", parts("/payments", Some("/accounts/a1/payments?x=1"), Some("application/json")), false),
            ("another content type", parts("/payments", Some("/accounts/a1/payments"), Some("text/plain")), false),
            ("no content type", parts("/payments", Some("/accounts/a1/payments"), None), false),
            ("another host", with_host(parts("/payments", Some("/accounts/a1/payments"), json), "b.example"), false),
            (
                "another authority in the target",
                parts("/payments", Some("http://b.example/accounts/a1/payments"), json),
                false,
            ),
            ("no host at all", without_host(parts("/payments", Some("/accounts/a1/payments"), json)), false),
        ];
        for (name, p, same) in cases {
            assert_eq!(print(&p) == base, same, "{name}");
        }
        assert_eq!(request_target(&parts("/payments", Some("/accounts/a1/payments"), None)), "/accounts/a1/payments");
    }
}
