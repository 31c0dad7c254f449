//! A signing secret the sender hands over in an unsigned handshake: Asana's
//! `X-Hook-Secret` request, Notion's `{"verification_token": ...}` request.
//! The handshake cannot be authenticated (it comes before any secret), so
//! the verifier lets exactly its shape through unsigned, the challenge hands
//! the secret to the application's closure (which stores it, and accepts
//! only a handshake it expects: `200`, else `403`), and nothing is ever
//! claimed for it. Every other request must carry a valid body HMAC.

use std::sync::Arc;

use bytes::Bytes;

use crate::providers::Challenge;
use crate::verify::generic::HmacVerifier;
use crate::verify::{Delivery, KeyMaterialError, SigningSecret, Verifier, VerifyError};

/// What the application is called with for a handshake: the request head
/// and the secret handed over; `true` to accept (it has stored the secret).
pub(super) type OnHandover = Arc<dyn Fn(&http::request::Parts, SigningSecret) -> bool + Send + Sync>;

/// One sender's handshake shape.
pub(super) trait Handshake: Send + Sync + 'static {
    /// Whether the head alone may be the handshake (the precheck lets it
    /// through; `secret` decides with the body).
    fn may_be(&self, parts: &http::request::Parts) -> bool;

    /// The secret handed over, when `parts` and `body` are the handshake.
    fn secret(&self, parts: &http::request::Parts, body: &[u8]) -> Option<String>;

    /// The answer to an accepted handshake (the default: `200`, empty).
    fn accepted(&self, _secret: &str) -> http::Response<Bytes> {
        http::Response::new(Bytes::new())
    }
}

/// A body HMAC, or exactly the sender's unsigned handshake; an endpoint
/// with no secret yet is accepted (its secret arrives with the handshake),
/// any configured one must not be empty or a bare prefix.
pub(super) struct HandoverVerifier<H> {
    pub(super) hmac: HmacVerifier,
    pub(super) handshake: H,
}

impl<H: Handshake> Verifier for HandoverVerifier<H> {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        if self.handshake.may_be(parts) {
            return Ok(());
        }
        self.hmac.precheck(parts)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        if self.handshake.secret(delivery.parts, delivery.body).is_some() {
            // Unsigned by design: the challenge answers it, nothing is claimed.
            return Ok(());
        }
        self.hmac.verify(delivery)
    }

    /// [`check_key_material`](crate::verify::check_key_material)'s, but an
    /// empty list passes.
    fn check_secrets(&self, secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        if secrets.is_empty() {
            return Ok(());
        }
        crate::verify::check_key_material(secrets)
    }
}

/// Answers the handshake through the application's closure: its
/// [`Handshake::accepted`] answer, or `403`; `None` for any other delivery.
pub(super) struct HandoverAnswer<H> {
    pub(super) handshake: H,
    pub(super) on: OnHandover,
}

impl<H: Handshake> Challenge for HandoverAnswer<H> {
    fn respond(&self, delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
        let secret = self.handshake.secret(delivery.parts, delivery.body)?;
        if (self.on)(delivery.parts, SigningSecret::from(secret.as_str())) {
            return Some(self.handshake.accepted(&secret));
        }
        let mut refused = http::Response::new(Bytes::new());
        *refused.status_mut() = http::StatusCode::FORBIDDEN;
        Some(refused)
    }
}
