//! [`WebhookEvent`]: what the layer learned about the delivery it claimed.

use std::fmt;

use bytes::Bytes;

/// The verified, claimed event, in the request extensions (and an axum
/// extractor with the `axum` feature).
#[derive(Clone)]
pub struct WebhookEvent {
    pub(crate) provider: String,
    pub(crate) scope: String,
    pub(crate) key: String,
    pub(crate) event_type: Option<String>,
    pub(crate) attempt: u32,
    pub(crate) body: Bytes,
}

impl WebhookEvent {
    /// The provider name (`stripe`, `github`, ...).
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The scope (tenant) from trusted configuration.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The idempotency key (Stripe's `evt_...`, GitHub's delivery GUID).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The event type, when the provider sends one.
    pub fn event_type(&self) -> Option<&str> {
        self.event_type.as_deref()
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
            .field("provider", &self.provider)
            .field("scope", &self.scope)
            .field("key", &self.key)
            .field("event_type", &self.event_type)
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
