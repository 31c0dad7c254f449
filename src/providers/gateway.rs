//! Inbound gateways in front of the endpoint: Hookdeck, Convoy, Svix Ingest
//! or one of your own, which receive the provider's webhooks, queue them,
//! retry on their own schedule and forward each to your endpoint signed with
//! the gateway's own secret.
//!
//! Two ways to receive through one:
//!
//! - **The gateway alone**: the gateway's preset ([`Provider::hookdeck`],
//!   [`Provider::convoy`]), or any gateway through [`Provider::new`] with its
//!   signature scheme ([`HmacVerifier`](crate::verify::generic::HmacVerifier))
//!   and [`GatewayEventId`] on the header carrying the gateway's event id
//!   (the one that stays the same across the gateway's retries and replays,
//!   for example `X-Webhooker-Event-Id`). The claim is then the gateway's
//!   event: a delivery of the same provider event that reaches the endpoint
//!   another way (directly, or through a second gateway connection) is
//!   another event.
//! - **The provider, behind the gateway** ([`Provider::behind`]): where the
//!   gateway forwards the provider's request unchanged (its body byte for byte
//!   and the provider's signature headers; Hookdeck does, and so do Convoy's
//!   incoming projects), the delivery must pass **both** signatures, the
//!   gateway's (with the gateway's secrets, held by the [`Gateway`]) and the
//!   provider's (with the endpoint's secrets), and it is claimed as the
//!   **provider's** event: same provider name, same event key. A delivery of
//!   the same event sent directly and another through the gateway are then
//!   one event, and the second is answered as a duplicate.
//!
//! **Which key to choose.** The provider's event id whenever the gateway
//! forwards the provider's signed body and the provider sends one (Stripe's
//! `id`, GitHub's `X-GitHub-Delivery`): it is what identifies the event
//! wherever it comes from, and in the body it is covered by the provider's
//! signature. The gateway's event id only for a provider without an id of its
//! own, or when the gateway transforms the body (then the provider's
//! signature cannot pass anyway): it stays the same across the gateway's
//! retries and manual replays, but a copy of the event that reaches the
//! endpoint another way has another one, and it is a header the gateway does
//! not sign (Hookdeck and Convoy sign the body only), so a captured delivery
//! sent again under a fresh id is a new event (the same limit as GitHub's
//! `X-GitHub-Delivery`).
//!
//! **The provider's timestamp behind a gateway** is not held to the
//! provider's tolerance: a gateway retries hours or days after the provider
//! sent the request, with the provider's original signature and timestamp
//! (Hookdeck notes it: "timestamp-based signatures may fail on retries if the
//! retry happens outside the provider's tolerance window"). The provider's
//! signature is checked, its timestamp's age is not, as for an operator
//! replay ([`Delivery::without_timestamp_check`]); the gateway's own timestamp, where its
//! scheme signs one (Convoy's advanced signatures), is. A captured request
//! sent again is answered from the claim as a duplicate within the provider's
//! replay window, and only then: behind a gateway that signs no time
//! (Hookdeck), a captured request with both signatures verifies at any age.
//! **Keep the provider's retention at least as long as the gateway can replay
//! an event** (`Retention::builder(..).window("stripe", <the gateway's
//! replay window>)`; Hookdeck's manual retries reach back as far as the
//! project keeps events, up to 30 days): a row purged earlier lets a replay,
//! the gateway's or anyone's, run the handler again.
//!
//! Set the gateway last: [`Provider::verifier`] after
//! [`Provider::behind`] replaces both checks with the one given.

use std::sync::Arc;

use crate::key::{header_str, EventIdentity, KeyError, KeyErrorKind, KeyExtractor};
use crate::providers::Provider;
use crate::verify::fetch::BoxPrepare;
use crate::verify::{Delivery, KeyMaterialError, SigningSecret, Verifier, VerifyError};

/// An inbound gateway in front of the endpoint: its name (for logs), its
/// signature verifier and its signing secrets (the gateway's, not the
/// provider's). Used with [`Provider::behind`].
#[derive(Clone)]
#[must_use]
pub struct Gateway {
    name: &'static str,
    verifier: Arc<dyn Verifier>,
    secrets: Arc<[SigningSecret]>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("name", &self.name).field("secrets", &self.secrets.len()).finish()
    }
}

impl Gateway {
    /// A gateway named `name` whose deliveries `verifier` authenticates with
    /// `secrets` (any one matching passes, for rotation).
    ///
    /// # Errors
    /// The verifier's [`KeyMaterialError`] when the secrets authenticate
    /// nothing (none, an empty one, a bare prefix, or not of the scheme's
    /// format).
    pub fn new(
        name: &'static str,
        verifier: impl Verifier,
        secrets: impl IntoIterator<Item = SigningSecret>,
    ) -> Result<Self, KeyMaterialError> {
        let secrets: Arc<[SigningSecret]> = secrets.into_iter().collect();
        verifier.check_secrets(&secrets)?;
        Ok(Self { name, verifier: Arc::new(verifier), secrets })
    }

    /// The gateway's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl Provider {
    /// This provider receiving through `gateway`, which forwards the
    /// provider's request unchanged: a delivery must pass the gateway's
    /// signature (with the gateway's secrets) **and** the provider's (with the
    /// endpoint's secrets, the provider's timestamp not held to its tolerance:
    /// see the [module docs](crate::providers::gateway)). The name, the event
    /// key, the handshake and the headers stay the provider's, so a delivery
    /// through the gateway and one sent directly are one event.
    ///
    /// ```
    /// # #[cfg(feature = "hookdeck")] {
    /// use webhook_idempotency::providers::gateway::Gateway;
    /// use webhook_idempotency::Provider;
    ///
    /// let hookdeck = Gateway::hookdeck(["hookdeck_destination_secret".into()]).unwrap();
    /// let stripe = Provider::stripe().behind(hookdeck);
    /// assert_eq!(stripe.name(), "stripe");
    /// # }
    /// ```
    pub fn behind(self, gateway: Gateway) -> Self {
        let verifier = BehindGateway::new(gateway, self.verifier_shared());
        self.verifier(verifier)
    }
}

/// Both signatures: the gateway's, then the provider's.
struct BehindGateway {
    gateway: Gateway,
    provider: Arc<dyn Verifier>,
    credentials: Vec<http::HeaderName>,
}

impl BehindGateway {
    fn new(gateway: Gateway, provider: Arc<dyn Verifier>) -> Self {
        let mut credentials = gateway.verifier.credential_headers().to_vec();
        for name in provider.credential_headers() {
            if !credentials.contains(name) {
                credentials.push(name.clone());
            }
        }
        Self { gateway, provider, credentials }
    }
}

impl Verifier for BehindGateway {
    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let through = Delivery { secrets: &self.gateway.secrets, ..*delivery };
        self.gateway.verifier.verify(&through).inspect_err(|e| {
            tracing::debug!(gateway = self.gateway.name, kind = ?e.kind(), "the gateway's signature does not verify");
        })?;
        self.provider.verify(&Delivery { check_timestamp: false, ..*delivery })
    }

    fn prepare<'a>(&'a self, parts: &'a http::request::Parts, body: &'a [u8]) -> Option<BoxPrepare<'a>> {
        match (self.gateway.verifier.prepare(parts, body), self.provider.prepare(parts, body)) {
            (None, None) => None,
            (gateway, provider) => Some(Box::pin(async move {
                if let Some(fetch) = gateway {
                    fetch.await?;
                }
                if let Some(fetch) = provider {
                    fetch.await?;
                }
                Ok(())
            })),
        }
    }

    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        self.gateway.verifier.precheck(parts)?;
        self.provider.precheck(parts)
    }

    fn costly(&self, parts: &http::request::Parts) -> bool {
        self.gateway.verifier.costly(parts) || self.provider.costly(parts)
    }

    fn check_secrets(&self, secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        self.provider.check_secrets(secrets)
    }

    fn credential_headers(&self) -> &[http::HeaderName] {
        &self.credentials
    }
}

/// The event key from a gateway's event-id header (Hookdeck's
/// `x-hookdeck-eventid`, Convoy's `x-convoy-idempotency-key`, another
/// gateway's `x-webhooker-event-id`): the id the gateway keeps across its
/// retries and replays of one event. No event type. The header's one value,
/// trimmed; a missing or blank one is [`KeyErrorKind::Missing`], two
/// different values or one that is not visible ASCII
/// [`KeyErrorKind::Invalid`]. The gateway does not sign it: see the
/// [module docs](crate::providers::gateway) on which key to choose.
#[derive(Debug, Clone, Copy)]
pub struct GatewayEventId(pub &'static str);

impl KeyExtractor for GatewayEventId {
    fn extract(&self, parts: &http::request::Parts, _body: &[u8]) -> Result<EventIdentity, KeyError> {
        let key = header_str(parts, self.0)?.ok_or(KeyErrorKind::Missing)?;
        Ok(EventIdentity { key, event_type: None })
    }
}
