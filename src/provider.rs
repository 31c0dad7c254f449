//! Providers: a name, a [`Verifier`], a [`KeyExtractor`] and optionally a
//! [`Challenge`] handshake, that go together.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::key::{EventIdentity, KeyError, KeyExtractor};
use crate::verify::{Delivery, KeyMaterialError, Verifier, VerifyError};

/// Why [`Provider::check`] rejected a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckError {
    /// The signature did not verify (the layer answers 401).
    Verify(VerifyError),
    /// No usable event key (the layer answers 400).
    Key(KeyError),
    /// The configured key material authenticates nothing (an empty secret, a
    /// bare `whsec_`): the layer refuses to build with it.
    KeyMaterial(KeyMaterialError),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Verify(e) => e.fmt(f),
            Self::Key(e) => e.fmt(f),
            Self::KeyMaterial(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for CheckError {}

/// A provider's endpoint-verification handshake (Slack's `url_verification`,
/// Zoom's `endpoint.url_validation`, Twitch's
/// `webhook_callback_verification`), answered by the layer after the
/// signature is verified and before any claim: nothing is stored.
///
/// `respond` returns `None` for ordinary deliveries. A blanket
/// implementation covers closures `Fn(&Delivery<'_>) ->
/// Option<http::Response<Bytes>>`.
pub trait Challenge: Send + Sync + 'static {
    /// The answer to a verified handshake request, or `None`.
    fn respond(&self, delivery: &Delivery<'_>) -> Option<http::Response<Bytes>>;
}

impl<F> Challenge for F
where
    F: Fn(&Delivery<'_>) -> Option<http::Response<Bytes>> + Send + Sync + 'static,
{
    fn respond(&self, delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
        self(delivery)
    }
}

/// A webhook sender: its name (the `provider` column of the claim), how its
/// deliveries are verified and where their event key lives.
///
/// Presets: [`Provider::stripe`], [`Provider::github`]. Anything else:
/// [`Provider::new`] with any verifier and key extractor.
#[derive(Clone)]
#[must_use]
pub struct Provider {
    name: Cow<'static, str>,
    verifier: Arc<dyn Verifier>,
    extractor: Arc<dyn KeyExtractor>,
    challenge: Option<Arc<dyn Challenge>>,
    methods: Cow<'static, [http::Method]>,
    default_body_limit: Option<usize>,
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Provider {
    /// A provider named `name` (stored in the claim; 1 to 512 bytes) with its
    /// verifier and key extractor.
    pub fn new(name: impl Into<Cow<'static, str>>, verifier: impl Verifier, extractor: impl KeyExtractor) -> Self {
        Self {
            name: name.into(),
            verifier: Arc::new(verifier),
            extractor: Arc::new(extractor),
            challenge: None,
            methods: Cow::Borrowed(&[http::Method::POST]),
            default_body_limit: None,
        }
    }

    /// The HTTP methods the provider sends deliveries with (default `POST`
    /// only; the Twilio preset also allows `GET`, which Twilio uses when a
    /// webhook is configured for it). The layer answers any other method 405
    /// with `Allow` before reading the body or verifying anything, which also
    /// makes a layer applied to a whole router instead of the webhook route
    /// obvious (`GET /health` answers 405, not 401).
    pub fn methods(mut self, methods: impl Into<Vec<http::Method>>) -> Self {
        self.methods = Cow::Owned(methods.into());
        self
    }

    /// The methods set by [`Provider::methods`].
    pub fn allowed_methods(&self) -> &[http::Method] {
        &self.methods
    }

    /// Stripe (`Stripe-Signature`, 300 s tolerance; key = the Event `id`). See [`crate::providers::stripe`].
    #[cfg(feature = "stripe")]
    pub fn stripe() -> Self {
        crate::providers::stripe::provider()
    }

    /// GitHub (`X-Hub-Signature-256`; key = `X-GitHub-Delivery`). See [`crate::providers::github`].
    #[cfg(feature = "github")]
    pub fn github() -> Self {
        crate::providers::github::provider()
    }

    /// Slack (`X-Slack-Signature` `v0=`, 300 s; key = `event_id`; answers `url_verification`). See [`crate::providers::slack`].
    #[cfg(feature = "slack")]
    pub fn slack() -> Self {
        crate::providers::slack::provider()
    }

    /// Standard Webhooks (`webhook-id`/`-timestamp`/`-signature`, `v1` and `v1a`; key = `webhook-id`). See [`crate::providers::standard_webhooks`].
    #[cfg(feature = "standard-webhooks")]
    pub fn standard_webhooks() -> Self {
        crate::providers::standard_webhooks::provider()
    }

    /// Svix (the Standard Webhooks scheme under `svix-*` headers). See [`crate::providers::standard_webhooks`].
    #[cfg(feature = "standard-webhooks")]
    pub fn svix() -> Self {
        crate::providers::standard_webhooks::svix_provider()
    }

    /// Discord interactions (Ed25519; key = the interaction `id`; answers PING). See [`crate::providers::discord`].
    #[cfg(feature = "discord")]
    pub fn discord() -> Self {
        crate::providers::discord::provider()
    }

    /// Paddle Billing (`Paddle-Signature` `ts=;h1=`, 5 s; key = `event_id`). See [`crate::providers::paddle`].
    #[cfg(feature = "paddle")]
    pub fn paddle() -> Self {
        crate::providers::paddle::provider()
    }

    /// Linear (`Linear-Signature`, `webhookTimestamp` within 60 s; key = `Linear-Delivery`). See [`crate::providers::linear`].
    #[cfg(feature = "linear")]
    pub fn linear() -> Self {
        crate::providers::linear::provider()
    }

    /// PagerDuty v3 (`X-PagerDuty-Signature` `v1=`; key = `event.id`). See [`crate::providers::pagerduty`].
    #[cfg(feature = "pagerduty")]
    pub fn pagerduty() -> Self {
        crate::providers::pagerduty::provider()
    }

    /// Calendly (`Calendly-Webhook-Signature` `t=,v1=`, 180 s; derived key). See [`crate::providers::calendly`].
    #[cfg(feature = "calendly")]
    pub fn calendly() -> Self {
        crate::providers::calendly::provider()
    }

    /// Typeform (`Typeform-Signature` `sha256=` base64; key = `event_id`). See [`crate::providers::typeform`].
    #[cfg(feature = "typeform")]
    pub fn typeform() -> Self {
        crate::providers::typeform::provider()
    }

    /// Intercom (`X-Hub-Signature` `sha1=`; key = the notification `id`). See [`crate::providers::intercom`].
    #[cfg(feature = "intercom")]
    pub fn intercom() -> Self {
        crate::providers::intercom::provider()
    }

    /// Zoom (`x-zm-signature` `v0=`, 300 s; derived key; answers `endpoint.url_validation`). See [`crate::providers::zoom`].
    #[cfg(feature = "zoom")]
    pub fn zoom() -> Self {
        crate::providers::zoom::provider()
    }

    /// Twitch EventSub (`Twitch-Eventsub-Message-Signature`, 600 s; key = the message id; answers the callback verification). See [`crate::providers::twitch`].
    #[cfg(feature = "twitch")]
    pub fn twitch() -> Self {
        crate::providers::twitch::provider()
    }

    /// Mailgun (signature in the body, 900 s; key = `event-data.id`). See [`crate::providers::mailgun`].
    #[cfg(feature = "mailgun")]
    pub fn mailgun() -> Self {
        crate::providers::mailgun::provider()
    }

    /// SendGrid Event Webhook (ECDSA P-256; derived key over the batch's `sg_event_id`s). See [`crate::providers::sendgrid`].
    #[cfg(feature = "sendgrid")]
    pub fn sendgrid() -> Self {
        crate::providers::sendgrid::provider()
    }

    /// Shopify (`X-Shopify-Hmac-Sha256` base64; key = `X-Shopify-Event-Id`, else
    /// `X-Shopify-Webhook-Id`). See [`crate::providers::shopify`].
    #[cfg(feature = "shopify")]
    pub fn shopify() -> Self {
        crate::providers::shopify::provider()
    }

    /// Square (`x-square-hmacsha256-signature` over the notification URL +
    /// body; key = `event_id`). `notification_url` is the URL exactly as
    /// registered in Square. See [`crate::providers::square`].
    #[cfg(feature = "square")]
    pub fn square(notification_url: impl Into<String>) -> Self {
        crate::providers::square::provider(notification_url)
    }

    /// Twilio (`X-Twilio-Signature`, HMAC-SHA1 over the URL + sorted POST
    /// parameters or `bodySHA256`; key = `I-Twilio-Idempotency-Token`).
    /// `public_base_url` is the scheme and host Twilio calls. See
    /// [`crate::providers::twilio`].
    #[cfg(feature = "twilio")]
    pub fn twilio(public_base_url: impl Into<String>) -> Self {
        // Twilio sends GET when a webhook is configured for it; the signature
        // then covers the URL with its query.
        crate::providers::twilio::provider(public_base_url).methods([http::Method::POST, http::Method::GET])
    }

    /// HubSpot signature v3 (`X-HubSpot-Signature-v3` over method + URI + body +
    /// timestamp, 300 s; derived batch key). `public_base_url` is the scheme
    /// and host HubSpot calls. See [`crate::providers::hubspot`].
    #[cfg(feature = "hubspot")]
    pub fn hubspot(public_base_url: impl Into<String>) -> Self {
        crate::providers::hubspot::provider(public_base_url)
    }

    /// Replaces the verifier, for example a preset with another tolerance:
    /// `Provider::stripe().verifier(StripeVerifier::new().tolerance(d))`.
    pub fn verifier(mut self, verifier: impl Verifier) -> Self {
        self.verifier = Arc::new(verifier);
        self
    }

    /// Replaces the key extractor.
    pub fn key_extractor(mut self, extractor: impl KeyExtractor) -> Self {
        self.extractor = Arc::new(extractor);
        self
    }

    /// Answers the provider's endpoint-verification handshake in the layer.
    pub fn challenge(mut self, challenge: impl Challenge) -> Self {
        self.challenge = Some(Arc::new(challenge));
        self
    }

    /// Sets the body limit, in bytes, this provider's deliveries need at most:
    /// the layer uses it when the application sets no `body_limit` of its
    /// own. Presets whose verifier must parse the body set one (Twilio:
    /// [`crate::providers::twilio::DEFAULT_BODY_LIMIT`], 64 KiB).
    pub fn with_body_limit(mut self, bytes: usize) -> Self {
        self.default_body_limit = Some(bytes);
        self
    }

    /// The body limit, in bytes, set by [`Provider::with_body_limit`];
    /// `None` when the provider asks for none (the layer's default applies).
    pub fn default_body_limit(&self) -> Option<usize> {
        self.default_body_limit
    }

    /// The provider's name as stored in claims.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Verifies a delivery and extracts its event identity, as the layer
    /// does, without a database: for offline checks (the `webhook-verify`
    /// command) and tests.
    ///
    /// # Errors
    /// [`CheckError::KeyMaterial`] when the secrets authenticate nothing,
    /// [`CheckError::Verify`] when the signature does not verify,
    /// [`CheckError::Key`] when no usable event key is found.
    pub fn check(&self, delivery: &Delivery<'_>) -> Result<EventIdentity, CheckError> {
        self.verifier.check_secrets(delivery.secrets).map_err(CheckError::KeyMaterial)?;
        self.verifier.verify(delivery).map_err(CheckError::Verify)?;
        self.identify(delivery.parts, delivery.body).map_err(CheckError::Key)
    }

    /// The identity the layer claims a verified delivery under: the key
    /// extractor's answer, with the key (1 to 512 bytes, no NUL) and the event
    /// type when present (the same bounds) checked. The layer and
    /// [`Provider::check`] (so `webhook-verify`) decide with this one function.
    ///
    /// # Errors
    /// The extractor's [`KeyError`]; [`KeyErrorKind::TooLong`](crate::key::KeyErrorKind)
    /// and the like for an unusable key; `InvalidEventType` for an unusable type.
    pub fn identify(&self, parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let identity = self.extractor.extract(parts, body)?;
        crate::key::validate(&identity.key)?;
        if let Some(t) = &identity.event_type {
            crate::key::validate(t).map_err(|_| crate::key::KeyErrorKind::InvalidEventType)?;
        }
        Ok(identity)
    }

    /// Verifies a delivery and, when it is the provider's endpoint-verification
    /// handshake, returns the answer the layer would send (nothing claimed).
    /// `Ok(None)` for ordinary deliveries and providers without a handshake.
    ///
    /// # Errors
    /// The [`VerifyError`] when the signature does not verify.
    pub fn handshake(&self, delivery: &Delivery<'_>) -> Result<Option<http::Response<Bytes>>, VerifyError> {
        self.verifier.verify(delivery)?;
        Ok(self.challenge.as_ref().and_then(|c| c.respond(delivery)))
    }

    /// Verifies the delivery's signature (and signed timestamp) only, as the
    /// layer does before reading the event key: no handshake, no key.
    ///
    /// # Errors
    /// The [`VerifyError`] when the delivery is not authentic.
    pub fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        self.verifier.verify(delivery)
    }

    pub(crate) fn verifier_ref(&self) -> &dyn Verifier {
        &*self.verifier
    }

    #[cfg(test)]
    pub(crate) fn extractor_ref(&self) -> &dyn KeyExtractor {
        &*self.extractor
    }

    pub(crate) fn challenge_ref(&self) -> Option<&dyn Challenge> {
        self.challenge.as_deref()
    }
}
