//! Scope (tenant) and signing secrets per endpoint.
//!
//! The scope is part of every claim's identity `(provider, scope, key)`: the
//! same event id under two scopes is two events. It comes from trusted
//! configuration: fixed on the layer ([`Endpoint`]), or resolved from the
//! request head (path, host, headers) by a [`ScopeResolver`] for
//! multi-tenant routes. The payload never chooses the scope.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use crate::verify::SigningSecret;

/// A boxed, sendable future, as returned by [`ScopeResolver::resolve`].
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What an endpoint is configured with: its scope and its signing secrets
/// (several during rotation; any one that matches passes).
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The tenant, account or endpoint identity (1 to 512 bytes, no NUL).
    pub scope: String,
    /// The secrets to verify deliveries with.
    pub secrets: Vec<SigningSecret>,
}

impl Endpoint {
    /// An endpoint with `scope` and `secrets`.
    pub fn new(scope: impl Into<String>, secrets: impl IntoIterator<Item = SigningSecret>) -> Self {
        Self { scope: scope.into(), secrets: secrets.into_iter().collect() }
    }
}

/// Finds the [`Endpoint`] a delivery is addressed to, from the request head.
///
/// Called once per delivery, before verification. A blanket implementation
/// covers closures `Fn(&http::request::Parts) -> impl Future<Output =
/// Result<Endpoint, ResolveError>> + Send + 'static`: copy what you need out
/// of `parts` before the `async move` block.
///
/// ```
/// use webhook_idempotency::scope::{Endpoint, ResolveError};
/// use webhook_idempotency::verify::SigningSecret;
///
/// let resolver = |parts: &http::request::Parts| {
///     // `/webhooks/{tenant}/stripe`: the route, not the payload, names the tenant.
///     let tenant = parts.uri.path().split('/').nth(2).map(str::to_owned);
///     async move {
///         let tenant = tenant.ok_or_else(ResolveError::not_found)?;
///         let secret = SigningSecret::from(format!("whsec_for_{tenant}"));
///         Ok(Endpoint::new(tenant, [secret]))
///     }
/// };
/// # fn is_resolver(_: &impl webhook_idempotency::scope::ScopeResolver) {}
/// # is_resolver(&resolver);
/// ```
pub trait ScopeResolver: Send + Sync + 'static {
    /// Resolves the endpoint for a delivery.
    ///
    /// # Errors
    /// [`ResolveError::not_found`] answers 404; [`ResolveError::unavailable`]
    /// answers 503 with `Retry-After`. Nothing is stored either way.
    fn resolve(&self, parts: &http::request::Parts) -> BoxFuture<Result<Endpoint, ResolveError>>;
}

impl ScopeResolver for Endpoint {
    fn resolve(&self, _parts: &http::request::Parts) -> BoxFuture<Result<Endpoint, ResolveError>> {
        let endpoint = self.clone();
        Box::pin(async move { Ok(endpoint) })
    }
}

impl<F, Fut> ScopeResolver for F
where
    F: Fn(&http::request::Parts) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Endpoint, ResolveError>> + Send + 'static,
{
    fn resolve(&self, parts: &http::request::Parts) -> BoxFuture<Result<Endpoint, ResolveError>> {
        Box::pin(self(parts))
    }
}

/// Why no endpoint could be resolved: [`kind`](Self::kind), and a detail
/// that is logged, never sent to the client.
#[derive(Debug)]
pub struct ResolveError {
    kind: ResolveErrorKind,
    detail: String,
}

/// What a [`ResolveError`] means for the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResolveErrorKind {
    /// No endpoint is configured for this request: 404, nothing stored.
    NotFound,
    /// The configuration could not be read (its store is down): 503 +
    /// `Retry-After`, nothing stored.
    Unavailable,
}

impl ResolveError {
    /// No endpoint is configured for this request: 404.
    pub fn not_found() -> Self {
        Self { kind: ResolveErrorKind::NotFound, detail: "no endpoint configured for this request".into() }
    }

    /// The configuration could not be read (its store is down): 503. The
    /// detail is logged, never sent to the client.
    pub fn unavailable(detail: impl fmt::Display) -> Self {
        Self { kind: ResolveErrorKind::Unavailable, detail: detail.to_string() }
    }

    /// What the error means.
    pub fn kind(&self) -> ResolveErrorKind {
        self.kind
    }
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

impl std::error::Error for ResolveError {}
