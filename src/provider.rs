//! Providers: a name, a [`Verifier`], a [`KeyExtractor`] and optionally a
//! [`Challenge`] handshake, that go together.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::key::{EventIdentity, KeyError, KeyExtractor};
use crate::verify::{Delivery, Verifier, VerifyError};

/// Why [`Provider::check`] rejected a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckError {
    /// The signature did not verify (the layer answers 401).
    Verify(VerifyError),
    /// No usable event key (the layer answers 400).
    Key(KeyError),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Verify(e) => e.fmt(f),
            Self::Key(e) => e.fmt(f),
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
        Self { name: name.into(), verifier: Arc::new(verifier), extractor: Arc::new(extractor), challenge: None }
    }

    /// Stripe: `Stripe-Signature` with a 300 second tolerance; key = the
    /// Event `id`, type = `type`. See [`crate::verify::stripe`].
    #[cfg(feature = "stripe")]
    pub fn stripe() -> Self {
        Self::new(
            "stripe",
            crate::verify::stripe::StripeVerifier::new(),
            crate::key::JsonPointerKey::new("/id").event_type("/type"),
        )
    }

    /// GitHub: `X-Hub-Signature-256`; key = `X-GitHub-Delivery`, type =
    /// `X-GitHub-Event`. See [`crate::verify::github`].
    #[cfg(feature = "github")]
    pub fn github() -> Self {
        use crate::verify::github;
        Self::new(
            "github",
            github::GitHubVerifier::new(),
            crate::key::HeaderKey::new(http::HeaderName::from_static(github::DELIVERY_HEADER))
                .event_type(http::HeaderName::from_static(github::EVENT_HEADER)),
        )
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

    /// The provider's name as stored in claims.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Verifies a delivery and extracts its event identity, as the layer
    /// does, without a database: for offline checks (the `webhook-verify`
    /// command) and tests.
    ///
    /// # Errors
    /// [`CheckError::Verify`] when the signature does not verify,
    /// [`CheckError::Key`] when no usable event key is found.
    pub fn check(&self, delivery: &Delivery<'_>) -> Result<EventIdentity, CheckError> {
        self.verifier.verify(delivery).map_err(CheckError::Verify)?;
        let identity = self.extractor.extract(delivery.parts, delivery.body).map_err(CheckError::Key)?;
        crate::key::validate(&identity.key).map_err(|k| CheckError::Key(k.into()))?;
        Ok(identity)
    }

    pub(crate) fn verifier_ref(&self) -> &dyn Verifier {
        &*self.verifier
    }

    pub(crate) fn extractor_ref(&self) -> &dyn KeyExtractor {
        &*self.extractor
    }

    pub(crate) fn challenge_ref(&self) -> Option<&dyn Challenge> {
        self.challenge.as_deref()
    }
}
