//! axum extractors for [`WebhookTx`] and [`WebhookEvent`] (feature `axum`);
//! [`IdempotentRequest`](crate::idempotency_key::IdempotentRequest)'s is beside it.

use axum_core::extract::FromRequestParts;
use axum_core::response::{IntoResponse, Response};
use http::request::Parts;
use http::StatusCode;

use crate::event::WebhookEvent;
use crate::tx::WebhookTx;

/// Rejection of the [`WebhookTx`] and [`WebhookEvent`] extractors: the route
/// is not behind [`WebhookLayer`](crate::layer::WebhookLayer). Answered with a bare
/// 500; the explanation ([`body_text`](Self::body_text), which layer to add)
/// is logged at ERROR, never sent, since the client is unauthenticated.
#[derive(Debug, Clone, Copy)]
pub struct MissingWebhookLayer {
    extractor: &'static str,
}

impl MissingWebhookLayer {
    pub(crate) fn new(extractor: &'static str) -> Self {
        Self { extractor }
    }

    /// 500 Internal Server Error.
    pub fn status(&self) -> StatusCode {
        StatusCode::INTERNAL_SERVER_ERROR
    }

    /// The explanation for the log (the response body is a generic text).
    pub fn body_text(&self) -> String {
        if self.extractor == "IdempotentRequest" {
            return "IdempotentRequest extractor used on a route without IdempotencyKeyLayer (or on a method it \
                    passes through): add `.layer(IdempotencyKeyLayer::builder(pool).scope(...).build()?)` to this route"
                .to_owned();
        }
        format!(
            "{} extractor used on a route without WebhookLayer: add `.layer(WebhookLayer::builder(pool, provider)...build()?)` to this route",
            self.extractor
        )
    }
}

impl std::fmt::Display for MissingWebhookLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.body_text())
    }
}

impl std::error::Error for MissingWebhookLayer {}

impl IntoResponse for MissingWebhookLayer {
    fn into_response(self) -> Response {
        tracing::error!("{}", self.body_text());
        (self.status(), "internal server error\n").into_response()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for WebhookTx {
    type Rejection = MissingWebhookLayer;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<WebhookTx>().cloned().ok_or(MissingWebhookLayer { extractor: "WebhookTx" })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for WebhookEvent {
    type Rejection = MissingWebhookLayer;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<WebhookEvent>().cloned().ok_or(MissingWebhookLayer { extractor: "WebhookEvent" })
    }
}
