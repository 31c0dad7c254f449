//! A signed delivery of a preset ([`Example`]) and what signing one takes
//! ([`Signing`], [`SignError`]): the types [`PresetInfo::sign`](super::PresetInfo::sign)
//! and the presets' own signing functions share.

use std::fmt;
use std::time::SystemTime;

use crate::providers::Provider;
use crate::verify::SigningSecret;

/// A delivery a preset accepts, signed with a fixed test key: for benches,
/// fuzzing and smoke tests, never for production keys. Made by
/// [`PresetInfo::example`](super::PresetInfo::example).
///
/// ```
/// use std::time::SystemTime;
/// use webhook_idempotency::providers;
///
/// let stripe = providers::find("stripe").expect("the stripe feature");
/// let ex = stripe.example("evt_1", SystemTime::now(), br#"{"id":"evt_1","type":"charge.succeeded"}"#);
/// // The request: send it through your router (`tower::ServiceExt::oneshot`)
/// // at the path you route, twice for the duplicate.
/// let mut req = http::Request::from_parts(ex.parts, ex.body);
/// *req.uri_mut() = "/webhooks/stripe".parse().unwrap();
/// // The layer verifies it with the example's key material:
/// // `WebhookLayer::builder(pool, ex.provider)` then `.secret(s)` for each of `ex.secrets`.
/// assert!(req.headers().contains_key("stripe-signature"));
/// assert_eq!(ex.secrets.len(), 1);
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Example {
    /// The preset's provider, built with the example's URL where it needs one.
    pub provider: Provider,
    /// The key material that verifies the example.
    pub secrets: Vec<SigningSecret>,
    /// The request head: method (`POST`), URI and the signature headers.
    /// The URI is `/` unless the scheme signs it (Twilio's `/hook?bodySHA256=..`,
    /// HubSpot's `/hook`): set your route's path on a scheme that does not.
    pub parts: http::request::Parts,
    /// The body as sent (Mailgun carries its signature in the body, so it
    /// differs from the body asked for).
    pub body: Vec<u8>,
}

/// One delivery to sign with [`PresetInfo::sign`](super::PresetInfo::sign).
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
/// text given (its own format: [`PresetInfo::sign`](super::PresetInfo::sign)).
pub(super) type SendFn = fn(&str, &Signing<'_>) -> Result<Example, SignError>;

/// What kind of input [`PresetInfo::sign`](super::PresetInfo::sign) refused.
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

/// [`PresetInfo::sign`](super::PresetInfo::sign) could not sign. The message never contains key
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

impl fmt::Display for SignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SignError {}

/// An example request: `POST uri` with `headers`; a value that cannot be a
/// header value (an event id with a control character) is left out, so the
/// example lacks that header instead of failing.
#[allow(dead_code)]
pub(super) fn example_parts(uri: &str, headers: Vec<(&'static str, String)>) -> http::request::Parts {
    let mut parts = http::Request::post(uri).body(()).expect("a POST to a valid URI").into_parts().0;
    for (name, value) in headers {
        if let Ok(value) = http::HeaderValue::from_str(&value) {
            parts.headers.append(name, value);
        }
    }
    parts
}

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
