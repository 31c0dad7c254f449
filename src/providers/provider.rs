//! [`Provider`] (public at the crate root, `webhook_idempotency::Provider`):
//! a name, a [`Verifier`], a [`KeyExtractor`] and optionally a [`Challenge`]
//! handshake, that go together; and [`CheckError`], why a delivery failed
//! [`Provider::check`]. The presets beside this file each add a constructor
//! (`Provider::stripe()`, ...).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::key::{EventIdentity, KeyError, KeyExtractor};
use crate::verify::{Delivery, KeyMaterialError, Verifier, VerifyError};

/// Why [`Provider::check`] rejected a delivery: [`kind`](Self::kind) says
/// which step, and the step's own error is its accessor's (and the
/// [`source`](std::error::Error::source)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckError {
    failed: Failed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Failed {
    Verify(VerifyError),
    Key(KeyError),
    KeyMaterial(KeyMaterialError),
}

/// Which step of [`Provider::check`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CheckErrorKind {
    /// The signature did not verify (the layer answers 401):
    /// [`CheckError::verify_error`].
    Verify,
    /// No usable event key (the layer answers 400): [`CheckError::key_error`].
    Key,
    /// The configured key material authenticates nothing (an empty secret, a
    /// bare `whsec_`): the layer refuses to build with it;
    /// [`CheckError::key_material`].
    KeyMaterial,
}

impl CheckError {
    /// Which step failed.
    pub fn kind(&self) -> CheckErrorKind {
        match self.failed {
            Failed::Verify(_) => CheckErrorKind::Verify,
            Failed::Key(_) => CheckErrorKind::Key,
            Failed::KeyMaterial(_) => CheckErrorKind::KeyMaterial,
        }
    }

    /// The verification error, when the signature did not verify.
    pub fn verify_error(&self) -> Option<&VerifyError> {
        match &self.failed {
            Failed::Verify(e) => Some(e),
            _ => None,
        }
    }

    /// The key error, when no usable event key was found.
    pub fn key_error(&self) -> Option<&KeyError> {
        match &self.failed {
            Failed::Key(e) => Some(e),
            _ => None,
        }
    }

    /// The key-material error, when the secrets authenticate nothing.
    pub fn key_material(&self) -> Option<&KeyMaterialError> {
        match &self.failed {
            Failed::KeyMaterial(e) => Some(e),
            _ => None,
        }
    }

    fn error(&self) -> &(dyn std::error::Error + 'static) {
        match &self.failed {
            Failed::Verify(e) => e,
            Failed::Key(e) => e,
            Failed::KeyMaterial(e) => e,
        }
    }
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.error(), f)
    }
}

impl std::error::Error for CheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.error())
    }
}

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
/// Presets: one constructor per preset, defined in the preset's module under
/// [`providers`](crate::providers) and compiled with its feature
/// ([`Provider::stripe`] and `Provider::github` by default, `Provider::slack`,
/// `Provider::svix`, ...; [`providers::REGISTRY`](crate::providers::REGISTRY)
/// lists them). Anything else: [`Provider::new`] with any verifier and key
/// extractor.
#[derive(Clone)]
#[must_use]
pub struct Provider {
    name: Cow<'static, str>,
    verifier: Arc<dyn Verifier>,
    extractor: Arc<dyn KeyExtractor>,
    challenge: Option<Arc<dyn Challenge>>,
    methods: Cow<'static, [http::Method]>,
    default_body_limit: Option<usize>,
    headers: Option<Arc<[http::HeaderName]>>,
    credentials: Arc<[http::HeaderName]>,
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Provider {
    /// A provider named `name` (stored in the claim; 1 to 512 bytes, not
    /// `idempotency-key`, which the Idempotency-Key layer's rows use: a
    /// [`WebhookLayer`](crate::WebhookLayer) refuses to build with it) with
    /// its verifier and key extractor.
    pub fn new(name: impl Into<Cow<'static, str>>, verifier: impl Verifier, extractor: impl KeyExtractor) -> Self {
        Self {
            name: name.into(),
            verifier: Arc::new(verifier),
            extractor: Arc::new(extractor),
            challenge: None,
            methods: Cow::Borrowed(&[http::Method::POST]),
            default_body_limit: None,
            headers: None,
            credentials: Arc::from([]),
        }
    }

    setters! {
        /// The HTTP methods the provider sends deliveries with (default `POST`
        /// only; the Twilio preset also allows `GET`, which Twilio uses when a
        /// webhook is configured for it). The layer answers any other method 405
        /// with `Allow` before reading the body or verifying anything, which also
        /// makes a layer applied to a whole router instead of the webhook route
        /// obvious (`GET /health` answers 405, not 401).
        pub fn methods(methods: impl Into<Vec<http::Method>>) => methods = Cow::Owned(methods.into());
    }

    /// The methods set by [`Provider::methods`].
    pub fn allowed_methods(&self) -> &[http::Method] {
        &self.methods
    }

    setters! {
        /// Replaces the verifier, for example a preset with another tolerance:
        /// `Provider::stripe().verifier(stripe::FACTS.verifier().tolerance(d))`.
        pub fn verifier(verifier: impl Verifier) => verifier = Arc::new(verifier);

        /// Replaces the key extractor.
        pub fn key_extractor(extractor: impl KeyExtractor) => extractor = Arc::new(extractor);

        /// Answers the provider's endpoint-verification handshake in the layer.
        /// Replaces the preset's: a preset whose verifier lets an unsigned
        /// handshake through (Asana, Notion, Dropbox, Trello, Mandrill,
        /// `Provider::meta_with_verify_token`) relies on its own challenge to
        /// answer every such request, so keep it there (an unanswered one
        /// would be claimed as an event).
        pub fn challenge(challenge: impl Challenge) => challenge = Some(Arc::new(challenge));

        /// Sets the body limit, in bytes, this provider's deliveries need at most:
        /// the layer uses it when the application sets no `body_limit` of its
        /// own. Presets whose verifier must parse the body set one (Twilio:
        /// [`crate::providers::twilio::DEFAULT_BODY_LIMIT`], 64 KiB).
        pub fn with_body_limit(bytes: usize) => default_body_limit = Some(bytes);
    }

    /// The body limit, in bytes, set by [`Provider::with_body_limit`];
    /// `None` when the provider asks for none (the layer's default applies).
    pub fn default_body_limit(&self) -> Option<usize> {
        self.default_body_limit
    }

    setters! {
        /// Declares the request headers the provider's deliveries carry that a
        /// handler may read (event id, type, timestamp, delivery attempt): inbox
        /// mode stores these with the row (besides `Content-Type` and
        /// `User-Agent`), and no other header unless the layer is told to
        /// ([`WebhookLayerBuilder::keep_headers`](crate::layer::WebhookLayerBuilder::keep_headers)).
        /// Presets need not call it: their headers are those of their
        /// [`PresetInfo::headers`](crate::providers::PresetInfo::headers). A
        /// name containing `signature` or `hmac`, credentials (`Authorization`,
        /// `Cookie`, ...) and the provider's
        /// [`credential_headers`](crate::providers::credential_headers) (declared
        /// with [`Provider::credentials_in`] or by its verifier) are never stored
        /// whatever is declared.
        pub fn reads_headers(names: impl IntoIterator<Item = http::HeaderName>) =>
            headers = Some(names.into_iter().collect());
    }

    /// The headers declared with [`Provider::reads_headers`], if any. The
    /// layer falls back on the compiled preset of this name
    /// ([`providers::read_headers`](crate::providers::read_headers)).
    pub fn declared_headers(&self) -> Option<&[http::HeaderName]> {
        self.headers.as_deref()
    }

    /// Declares the request headers whose value alone authenticates any
    /// delivery (a shared token, HTTP Basic credentials), unlike a signature,
    /// which authenticates one body. Once a delivery is verified and its
    /// event key read, the layer removes them from the request: the handler
    /// never sees them (synchronous mode) and inbox mode never stores them.
    ///
    /// This is a fact of the provider, not of its verifier: it holds
    /// whatever verifier [`Provider::verifier`] sets, a closure or a wrapper
    /// around the preset's (which declare no
    /// [`credential_headers`](crate::verify::Verifier::credential_headers)).
    /// The presets whose scheme is a shared token declare theirs (GitLab's
    /// `X-Gitlab-Token`, Telegram's `X-Telegram-Bot-Api-Secret-Token`; their
    /// [`PresetInfo::credential_headers`](crate::providers::PresetInfo::credential_headers)).
    /// Declare yours on a provider whose verifier reads a token or a password
    /// from a header. Adds to the names declared before; the layer strips
    /// [`providers::credential_headers`](crate::providers::credential_headers).
    pub fn credentials_in(mut self, names: impl IntoIterator<Item = http::HeaderName>) -> Self {
        let mut all = self.credentials.to_vec();
        for name in names {
            if !all.contains(&name) {
                all.push(name);
            }
        }
        self.credentials = all.into();
        self
    }

    /// The headers declared with [`Provider::credentials_in`] (a preset's
    /// included), without the verifier's.
    pub fn declared_credentials(&self) -> &[http::HeaderName] {
        &self.credentials
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
    /// [`CheckError`] of kind [`CheckErrorKind::KeyMaterial`] when the
    /// secrets authenticate nothing, [`CheckErrorKind::Verify`] when the
    /// signature does not verify, [`CheckErrorKind::Key`] when no usable event
    /// key is found.
    pub fn check(&self, delivery: &Delivery<'_>) -> Result<EventIdentity, CheckError> {
        let failed = |failed| CheckError { failed };
        self.verifier.check_secrets(delivery.secrets).map_err(|e| failed(Failed::KeyMaterial(e)))?;
        self.verifier.verify(delivery).map_err(|e| failed(Failed::Verify(e)))?;
        self.identify(delivery.parts, delivery.body).map_err(|e| failed(Failed::Key(e)))
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

    /// What the layer awaits before verifying: the verifier's
    /// [`prepare`](Verifier::prepare) (a key the delivery names, fetched
    /// through its [`KeyFetcher`](crate::verify::fetch::KeyFetcher)), or
    /// `None` when it has nothing to fetch. For an offline check
    /// ([`Provider::check`]) of such a provider, await it first.
    pub fn prepare<'a>(
        &'a self,
        parts: &'a http::request::Parts,
        body: &'a [u8],
    ) -> Option<crate::verify::fetch::BoxPrepare<'a>> {
        self.verifier.prepare(parts, body)
    }

    pub(crate) fn verifier_ref(&self) -> &dyn Verifier {
        &*self.verifier
    }

    pub(crate) fn verifier_shared(&self) -> Arc<dyn Verifier> {
        Arc::clone(&self.verifier)
    }

    #[cfg(test)]
    pub(crate) fn extractor_ref(&self) -> &dyn KeyExtractor {
        &*self.extractor
    }

    pub(crate) fn challenge_ref(&self) -> Option<&dyn Challenge> {
        self.challenge.as_deref()
    }
}
