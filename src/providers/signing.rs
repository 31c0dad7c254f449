//! Signing a delivery as its sender does, with your own key material:
//! [`Signing`] and [`PresetInfo::sign`], which `webhook-dev send` and
//! [`dev`](crate::dev) build their requests with.
//!
//! Each preset signs through the code its verifier is tested against (the
//! module's `sign` function, checked with the provider's own vectors), so a
//! delivery signed here is one the preset accepts, and one the provider
//! would send.

use std::fmt;
use std::time::SystemTime;

use super::preset::{example_parts, ExampleOf, Source};
use super::{Example, KeyTextError, PresetInfo, UrlArg};

/// The signing secret of the test keys ([`PresetInfo::test_key`]) of the
/// presets that take a secret as text: the quickstart's default, and what
/// `webhook-dev` signs with when given none. For tests only. Letters,
/// digits and `-` only, as Telegram's `secret_token` must be.
pub const TEST_SECRET: &str = "dev-test-secret-0123456789abcdef";

/// The test key of a preset whose secret is Basic credentials
/// (`user:password`, Postmark): [`TEST_SECRET`]'s password for the user
/// `dev`.
const TEST_CREDENTIALS: &str = "dev:dev-test-secret-0123456789abcdef";

/// One delivery to sign with [`PresetInfo::sign`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Signing<'a> {
    /// The absolute URL the delivery is sent to
    /// (`http://127.0.0.1:3000/webhooks/stripe`). Its path and query are the
    /// request's target; the schemes that sign a URL sign it: as registered
    /// with the sender (Square, Trello, Mandrill), or with the request's path
    /// and query appended to the receiver's public base (Twilio, HubSpot).
    pub url: &'a str,
    /// The id the sender writes in a header of its own (a delivery id such
    /// as GitHub's `X-GitHub-Delivery`, a message id such as Standard
    /// Webhooks' `webhook-id`, Twilio's idempotency token). A scheme that
    /// reads its event key from the body ignores it.
    pub id: &'a str,
    /// When the sender signs, written in the scheme's unit (whole seconds,
    /// milliseconds or RFC 3339 text, truncated to what it carries).
    pub at: SystemTime,
    /// The body, sent byte for byte, except by the schemes that carry their
    /// signature inside the body (Mailgun's `signature` object, Adyen's
    /// `additionalData.hmacSignature` per item), which write it there and
    /// send the JSON re-serialised.
    pub body: &'a [u8],
}

impl<'a> Signing<'a> {
    /// A delivery of `body` to `url`, with the id `id`, signed at `at`.
    pub fn new(url: &'a str, id: &'a str, at: SystemTime, body: &'a [u8]) -> Self {
        Self { url, id, at, body }
    }

    /// The request target: the URL's path and query (`/` for none).
    ///
    /// # Errors
    /// [`SignErrorKind::Url`] when [`url`](Self::url) is not an absolute
    /// `http` or `https` URL.
    pub fn target(&self) -> Result<String, SignError> {
        Ok(self.uri()?.path_and_query().map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()))
    }

    /// The URL's `scheme://host[:port]`, the public base of Twilio and
    /// HubSpot.
    ///
    /// # Errors
    /// As [`target`](Self::target).
    pub fn origin(&self) -> Result<String, SignError> {
        let uri = self.uri()?;
        Ok(format!("{}://{}", uri.scheme_str().unwrap_or("https"), uri.authority().map_or("", |a| a.as_str())))
    }

    fn uri(&self) -> Result<http::Uri, SignError> {
        let uri: http::Uri = self.url.parse().map_err(|_| SignError::url(self.url))?;
        match (uri.scheme_str(), uri.authority()) {
            (Some("http" | "https"), Some(_)) => Ok(uri),
            _ => Err(SignError::url(self.url)),
        }
    }
}

/// How a preset whose example is made whole signs a delivery with the key
/// text given (its own format: [`PresetInfo::sign`]).
pub(super) type SendFn = fn(&str, &Signing<'_>) -> Result<Example, SignError>;

/// What kind of input [`PresetInfo::sign`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SignErrorKind {
    /// The key text is not in the preset's format.
    Key,
    /// The URL is not an absolute `http` or `https` URL.
    Url,
    /// The body is not what the scheme signs inside (Mailgun, Adyen: JSON of
    /// the provider's shape).
    Body,
    /// The preset's deliveries cannot be signed with given key material: its
    /// key is the sender's own, fetched or chained to a root the crate ships
    /// (AWS SNS, the App Store).
    Unsupported,
}

/// [`PresetInfo::sign`] could not sign. The message never contains key
/// material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignError {
    kind: SignErrorKind,
    message: String,
}

impl SignError {
    /// What was refused.
    pub fn kind(&self) -> SignErrorKind {
        self.kind
    }

    pub(super) fn new(kind: SignErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    fn url(url: &str) -> Self {
        Self::new(SignErrorKind::Url, format!("`{url}` is not an absolute http or https URL"))
    }

    /// The body is not what the scheme signs inside.
    #[allow(dead_code)] // used by the presets that sign inside the body
    pub(super) fn body(why: impl fmt::Display) -> Self {
        Self::new(SignErrorKind::Body, why.to_string())
    }
}

impl From<KeyTextError> for SignError {
    fn from(e: KeyTextError) -> Self {
        Self::new(SignErrorKind::Key, e.to_string())
    }
}

impl fmt::Display for SignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SignError {}

/// A delivery a preset's own [`SendFn`] signed: `POST` to `signing`'s path
/// and query with `headers` and `body`, verified by `provider` with `key`.
///
/// # Errors
/// [`SignErrorKind::Url`] for a URL that is not absolute.
#[allow(dead_code)] // used by the presets whose example is made whole
pub(super) fn signed_delivery(
    provider: super::Provider,
    key: crate::verify::SigningSecret,
    signing: &Signing<'_>,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
) -> Result<Example, SignError> {
    Ok(Example { provider, secrets: vec![key], parts: example_parts(&signing.target()?, headers), body })
}

impl PresetInfo {
    /// The delivery the sender would send, signed with `key`: the request
    /// head (method `POST`, the URL's path and query, the headers the
    /// scheme writes), the body as sent, the provider as the receiver
    /// builds it for that URL, and the key material it verifies with.
    ///
    /// `key` is the text the sender's dashboard shows, in the form the
    /// receiver configures it ([`PresetInfo::secret`]): a signing secret (a
    /// `whsec_` secret for Standard Webhooks and Svix, base64 for Airtable,
    /// hexadecimal for Adyen, `user:password` for Postmark's Basic
    /// credentials, the token itself for GitLab and Telegram). A public-key
    /// scheme takes the private key (Discord: the 32-byte Ed25519 seed in
    /// hexadecimal; SendGrid: the P-256 private scalar in hexadecimal), and
    /// the example's [`secrets`](Example::secrets) hold the public key the
    /// receiver configures.
    ///
    /// ```
    /// use std::time::SystemTime;
    /// use webhook_idempotency::providers::{self, Signing};
    ///
    /// let stripe = providers::find("stripe").expect("the stripe feature");
    /// let body = br#"{"id":"evt_1","type":"charge.succeeded"}"#;
    /// let signing = Signing::new("http://127.0.0.1:3000/webhooks/stripe", "", SystemTime::now(), body);
    /// let delivery = stripe.sign("whsec_test_secret", &signing).unwrap();
    /// assert_eq!(delivery.parts.uri, "/webhooks/stripe");
    /// assert!(delivery.parts.headers.contains_key("stripe-signature"));
    /// assert_eq!(delivery.body, body);
    /// ```
    ///
    /// # Errors
    /// [`SignError`]: the key text is not in the preset's format, the URL is
    /// not absolute, the body is not what a scheme that signs inside it
    /// reads, or the preset's key is the sender's own
    /// ([`SignErrorKind::Unsupported`]).
    pub fn sign(&self, key: &str, signing: &Signing<'_>) -> Result<Example, SignError> {
        let target = signing.target()?;
        if let Some(send) = self.send {
            return send(key, signing);
        }
        let secret = (self.secret)(key)?;
        let headers = match self.source {
            Source::Hmac(facts) => facts.signed_headers(&secret, signing.id, signing.at, signing.body),
            Source::Code { example: ExampleOf::Signed(signed), .. } => signed(&secret, signing),
            Source::Code { example: ExampleOf::Whole(_), .. } => {
                return Err(SignError::new(
                    SignErrorKind::Unsupported,
                    format!("{} deliveries are signed with the sender's own key", self.name),
                ))
            }
        };
        Ok(Example {
            provider: self.provider_for(signing)?,
            secrets: vec![secret],
            parts: example_parts(&target, headers),
            body: signing.body.to_vec(),
        })
    }

    /// A key of the kind this preset takes, for tests only: what the
    /// quickstart configures when no `$<PRESET>_WEBHOOK_SECRET` is set and
    /// what `webhook-dev` and [`dev::Delivery`](crate::dev) sign with when
    /// given none. [`TEST_SECRET`] for a secret given as text; a `whsec_`
    /// secret for Standard Webhooks and Svix; base64 for Airtable;
    /// hexadecimal for Adyen; for Discord and SendGrid a fixed 32-byte
    /// private key in hexadecimal (the receiver's public key is the signed
    /// delivery's [`secrets`](Example::secrets)). `None` when the key is the
    /// sender's own (AWS SNS, the App Store).
    pub fn test_key(&self) -> Option<&'static str> {
        Some(match self.key {
            super::KeyKind::Whsec => "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            super::KeyKind::Base64Secret => "ZGV2LXRlc3Qtc2VjcmV0LTAxMjM0NTY3ODlhYmNkZWY=",
            super::KeyKind::HexSecret => "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
            super::KeyKind::PublicKey => "0707070707070707070707070707070707070707070707070707070707070707",
            super::KeyKind::Fetched | super::KeyKind::ShippedRoot => return None,
            _ if self.takes(TEST_SECRET) => TEST_SECRET,
            _ => TEST_CREDENTIALS,
        })
    }

    /// Whether the preset's verifier takes `text` as its key (its key
    /// material check, as the layer's build runs it).
    fn takes(&self, text: &str) -> bool {
        let Ok(provider) = self.provider(Some("https://example.com/")) else { return false };
        let secret = [crate::verify::SigningSecret::from(text)];
        let parts = http::Request::post("/").body(()).expect("a request").into_parts().0;
        let delivery = crate::verify::Delivery::new(&parts, b"", &secret, SystemTime::now());
        provider.check(&delivery).err().and_then(|e| e.key_material().cloned()).is_none()
    }

    /// The preset's provider as a receiver at `signing`'s URL builds it.
    pub(super) fn provider_for(&self, signing: &Signing<'_>) -> Result<super::Provider, SignError> {
        let url = match self.url {
            UrlArg::None => String::new(),
            UrlArg::NotificationUrl => signing.url.to_owned(),
            UrlArg::PublicBaseUrl => signing.origin()?,
        };
        Ok(self.provider(Some(&url)).expect("a URL is given"))
    }
}
