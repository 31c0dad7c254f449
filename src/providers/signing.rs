//! Signing a delivery as its sender does, with your own key material:
//! [`Signing`] and [`PresetInfo::sign`], which `webhook-dev send` and
//! [`dev`](crate::dev) build their requests with.
//!
//! Each preset signs through the code its verifier is tested against (the
//! module's `sign` function, checked with the provider's own vectors), so a
//! delivery signed here is one the preset accepts, and one the provider
//! would send.

use std::time::SystemTime;

use super::delivery::{example_parts, Example, SignError, SignErrorKind, Signing};
use super::preset::{ExampleOf, Source};
use super::{KeyTextError, PresetInfo, UrlArg};

/// The signing secret of the test keys ([`PresetInfo::test_key`]) of the
/// presets that take a secret as text: the quickstart's default, and what
/// `webhook-dev` signs with when given none. For tests only. Letters,
/// digits and `-` only, as Telegram's `secret_token` must be.
pub const TEST_SECRET: &str = "dev-test-secret-0123456789abcdef";

/// The test key of a preset whose secret is Basic credentials
/// (`user:password`, Postmark): [`TEST_SECRET`]'s password for the user
/// `dev`.
const TEST_CREDENTIALS: &str = "dev:dev-test-secret-0123456789abcdef";

impl From<KeyTextError> for SignError {
    fn from(e: KeyTextError) -> Self {
        Self::new(SignErrorKind::Key, e.to_string())
    }
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
