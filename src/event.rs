//! The event two ways: [`ScopedEvent`], its identity as the store knows it,
//! and [`WebhookEvent`], what the handler is handed with it (the attempt and
//! the verified body).

use std::fmt;

use bytes::Bytes;

/// An event as the store knows it: `(provider, scope, key)` is its identity,
/// the event type is stored beside it. Each part is 1 to 512 bytes without
/// NUL (checked by the layer; the database refuses NUL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopedEvent {
    provider: String,
    scope: String,
    key: String,
    event_type: Option<String>,
    /// The event key of the outbox effects this claim enqueues, when it is
    /// not [`key`](Self::key): the `Idempotency-Key` layer's key with the
    /// claim's id (see [`with_effects_key`](Self::with_effects_key)).
    effects_key: Option<String>,
}

impl ScopedEvent {
    /// The event `key` from `provider` in `scope`.
    pub fn new(provider: impl Into<String>, scope: impl Into<String>, key: impl Into<String>) -> Self {
        Self { provider: provider.into(), scope: scope.into(), key: key.into(), event_type: None, effects_key: None }
    }

    setters! {
        /// With its event type (`payment_intent.succeeded`, `push`).
        #[must_use]
        pub fn event_type(event_type: impl Into<String>) => event_type = Some(event_type.into());
    }

    /// The provider name.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The scope (tenant).
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The idempotency key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The event type, if known.
    pub fn get_event_type(&self) -> Option<&str> {
        self.event_type.as_deref()
    }

    setters! {
        pub(crate) fn with_type(event_type: Option<String>) => event_type = event_type;

        /// With another event key for the outbox effects its claim enqueues
        /// (their identity and downstream key): a key that is claimed anew
        /// after it expired (the `Idempotency-Key` layer's) gives each claim
        /// effects of its own, where an event's redeliveries share them.
        pub(crate) fn with_effects_key(key: String) => effects_key = Some(key);
    }

    /// The event key of the outbox effects its claim enqueues: [`key`](Self::key)
    /// unless [`with_effects_key`](Self::with_effects_key) set another.
    pub(crate) fn effects_key(&self) -> &str {
        self.effects_key.as_deref().unwrap_or(&self.key)
    }
}

/// The verified, claimed event, in the request extensions (and an axum
/// extractor with the `axum` feature).
#[derive(Clone)]
pub struct WebhookEvent {
    event: ScopedEvent,
    attempt: u32,
    body: Bytes,
}

impl WebhookEvent {
    pub(crate) fn new(event: ScopedEvent, attempt: u32, body: Bytes) -> Self {
        Self { event, attempt, body }
    }

    /// The event's identity as the store keeps it.
    pub fn scoped(&self) -> &ScopedEvent {
        &self.event
    }

    /// The provider name (`stripe`, `github`, ...).
    pub fn provider(&self) -> &str {
        self.event.provider()
    }

    /// The scope (tenant) from trusted configuration.
    pub fn scope(&self) -> &str {
        self.event.scope()
    }

    /// The idempotency key (Stripe's `evt_...`, GitHub's delivery GUID).
    pub fn key(&self) -> &str {
        self.event.key()
    }

    /// The event type, when the provider sends one.
    pub fn event_type(&self) -> Option<&str> {
        self.event.get_event_type()
    }

    /// Which run of the handler this is for the event: 1 the first time,
    /// higher after failed deliveries.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The raw body, byte for byte as received and verified.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The body parsed as JSON into `T`.
    ///
    /// # Errors
    /// [`JsonError`] when the body is not valid JSON for `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, JsonError> {
        serde_json::from_slice(&self.body).map_err(|e| JsonError {
            // Not `e.to_string()`: serde's messages quote values from the payload.
            detail: format!("{:?} error at line {} column {}", e.classify(), e.line(), e.column()),
        })
    }
}

impl fmt::Debug for WebhookEvent {
    /// Never prints the payload, only its length in bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookEvent")
            .field("provider", &self.provider())
            .field("scope", &self.scope())
            .field("key", &self.key())
            .field("event_type", &self.event_type())
            .field("attempt", &self.attempt)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// The body did not parse as the requested JSON type. The message names the
/// line and column, not the content.
#[derive(Debug, Clone)]
pub struct JsonError {
    detail: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "webhook body is not the expected JSON: {}", self.detail)
    }
}

impl std::error::Error for JsonError {}
