//! Provider presets: one module per sender, each behind its Cargo feature,
//! and [`REGISTRY`], the table of every preset compiled in.
//!
//! A preset module holds the sender's verifier type (for example
//! [`stripe::StripeVerifier`], with `.tolerance()` where the scheme signs a
//! timestamp), its header names, a `NAME` constant (the `provider` column of
//! the claim and the `webhook-verify --provider` value) and a `sign` helper
//! for fixtures. The ready [`Provider`] (verifier + key extractor +
//! handshake) is [`Provider::stripe`], [`Provider::github`], ...: one
//! constructor per preset.
//!
//! [`REGISTRY`] lists the presets as data (name, feature, whether the
//! provider needs a URL, what key material it takes, the headers it reads,
//! how long the provider can send an event again, and a signed example
//! delivery), so the `webhook-verify` command, the
//! quickstart, the benches, the fuzz targets and the conformance tests
//! iterate one table instead of naming presets one by one:
//!
//! ```
//! use webhook_idempotency::providers::{self, UrlArg};
//!
//! for preset in providers::all() {
//!     let url = match preset.url {
//!         UrlArg::None => None,
//!         _ => Some("https://example.com/webhooks/x"),
//!     };
//!     let provider = preset.provider(url).unwrap();
//!     assert_eq!(provider.name(), preset.name);
//! }
//! ```
//!
//! # Adding a preset
//! 1. a Cargo feature (`acme = []`, and in `full`);
//! 2. `src/providers/acme.rs` with `NAME`, `REPLAY_WINDOW` (the provider's
//!    automatic retries and manual redelivery, citing the page that
//!    documents them), the verifier (for an HMAC scheme, `hmac_verifier!`
//!    over a specification of [`crate::verify::generic::HmacVerifier`]), the
//!    constructor `Provider::acme()` with its registry entry `PRESET`
//!    (`preset!` for an HMAC scheme, else an `impl Provider` block and
//!    `PresetInfo::other`), `sign`, and its tests;
//! 3. `pub mod acme;` below and `acme::PRESET` in [`REGISTRY`].
//!
//! CONTRIBUTING.md shows the two declarations of an HMAC preset.
//!
//! The CLI, the quickstart, the benches, the fuzz targets and the
//! conformance tests pick it up from the registry.

use crate::provider::Provider;
use std::fmt;
use std::time::Duration;

use crate::verify::SigningSecret;

/// The verifier type of an HMAC preset: a named wrapper of the generic
/// [`HmacVerifier`](crate::verify::generic::HmacVerifier) that the builder
/// expression after `=` describes (the scheme as a specification of the
/// generic verifier), with [`Verifier`](crate::verify::Verifier) delegated
/// to it. `fn new() at DEFAULT_TOLERANCE; fn tolerance();` gives a scheme
/// that signs a timestamp its constructor at the module's
/// `DEFAULT_TOLERANCE` and a `tolerance` setter; `fn new();` a scheme
/// without one its constructor.
#[allow(unused_macros)] // unused without an HMAC preset
macro_rules! hmac_verifier {
    ($(#[$attr:meta])* pub struct $name:ident;) => {
        $(#[$attr])*
        #[derive(Debug, Clone)]
        #[must_use]
        pub struct $name {
            inner: $crate::verify::generic::HmacVerifier,
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl $crate::verify::Verifier for $name {
            fn precheck(&self, parts: &http::request::Parts) -> Result<(), $crate::verify::VerifyError> {
                self.inner.precheck(parts)
            }

            fn verify(&self, delivery: &$crate::verify::Delivery<'_>) -> Result<(), $crate::verify::VerifyError> {
                self.inner.verify(delivery)
            }
        }
    };
    ($(#[$attr:meta])* pub struct $name:ident = $spec:expr; $(#[$new:meta])* fn new();) => {
        hmac_verifier! { $(#[$attr])* pub struct $name; }

        impl $name {
            $(#[$new])*
            pub fn new() -> Self {
                Self { inner: $spec.build().expect("a valid fixed configuration") }
            }
        }
    };
    (
        $(#[$attr:meta])* pub struct $name:ident = $spec:expr;
        $(#[$new:meta])* fn new() at DEFAULT_TOLERANCE;
        $(#[$tolerance:meta])* fn tolerance();
    ) => {
        hmac_verifier! { $(#[$attr])* pub struct $name; }

        impl $name {
            $(#[$new])*
            pub fn new() -> Self {
                Self::with_tolerance(DEFAULT_TOLERANCE)
            }

            $(#[$tolerance])*
            pub fn tolerance(self, tolerance: std::time::Duration) -> Self {
                Self::with_tolerance(tolerance)
            }

            fn with_tolerance(tolerance: std::time::Duration) -> Self {
                Self { inner: $spec.tolerance(tolerance).build().expect("a valid fixed configuration") }
            }
        }
    };
}

/// A preset's constructor, `Provider::<name>()` (defined in the preset's
/// module, with its docs), and its registry entry, `PRESET`: an HMAC preset
/// named by the module's `NAME` (also its Cargo feature), kept for its
/// `REPLAY_WINDOW`, reading `headers`, whose example delivery carries the
/// headers `signed` makes.
#[allow(unused_macros)] // unused without an HMAC preset
macro_rules! preset {
    (
        $(#[$doc:meta])*
        fn $ctor:ident() = $provider:expr;
        headers: [$($header:expr),* $(,)?],
        signed: $signed:expr $(,)?
    ) => {
        impl $crate::provider::Provider {
            $(#[$doc])*
            pub fn $ctor() -> Self {
                $provider
            }
        }

        /// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
        pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::hmac(
            NAME,
            NAME,
            REPLAY_WINDOW,
            &[$($header),*],
            |_| $crate::provider::Provider::$ctor(),
            $signed,
        );
    };
}

/// The provider `name` verifying with `verifier`, whose event key is the
/// JSON body's value at the pointer `key` and event type the value at
/// `event_type`: how most presets identify an event.
#[allow(dead_code)] // unused without those presets
fn json_keyed(name: &'static str, verifier: impl crate::verify::Verifier, key: &str, event_type: &str) -> Provider {
    Provider::new(name, verifier, crate::key::JsonPointerKey::new(key).event_type(event_type))
}

#[cfg(feature = "bitbucket")]
pub mod bitbucket;
#[cfg(feature = "calendly")]
pub mod calendly;
#[cfg(feature = "checkout-com")]
pub mod checkout_com;
#[cfg(feature = "coinbase-commerce")]
pub mod coinbase_commerce;
#[cfg(feature = "discord")]
pub mod discord;
#[cfg(feature = "forgejo")]
pub mod forgejo;
#[cfg(feature = "gitea")]
pub mod gitea;
#[cfg(feature = "github")]
pub mod github;
#[cfg(feature = "gitlab")]
pub mod gitlab;
#[cfg(feature = "gocardless")]
pub mod gocardless;
#[cfg(feature = "hubspot")]
pub mod hubspot;
#[cfg(feature = "intercom")]
pub mod intercom;
#[cfg(feature = "lemon-squeezy")]
pub mod lemon_squeezy;
#[cfg(feature = "linear")]
pub mod linear;
#[cfg(feature = "mailgun")]
pub mod mailgun;
#[cfg(feature = "mux")]
pub mod mux;
#[cfg(feature = "paddle")]
pub mod paddle;
#[cfg(feature = "pagerduty")]
pub mod pagerduty;
#[cfg(feature = "razorpay")]
pub mod razorpay;
#[cfg(feature = "recurly")]
pub mod recurly;
#[cfg(feature = "sendgrid")]
pub mod sendgrid;
#[cfg(feature = "shopify")]
pub mod shopify;
#[cfg(feature = "slack")]
pub mod slack;
#[cfg(feature = "square")]
pub mod square;
#[cfg(feature = "standard-webhooks")]
pub mod standard_webhooks;
#[cfg(feature = "stripe")]
pub mod stripe;
#[cfg(feature = "telegram")]
pub mod telegram;
#[cfg(feature = "twilio")]
pub mod twilio;
#[cfg(feature = "twitch")]
pub mod twitch;
#[cfg(feature = "typeform")]
pub mod typeform;
#[cfg(feature = "zoom")]
pub mod zoom;

#[cfg(feature = "box")]
pub mod box_com;
#[cfg(feature = "buildkite")]
pub mod buildkite;
#[cfg(feature = "cal-com")]
pub mod cal_com;
#[cfg(feature = "circleci")]
pub mod circleci;
#[cfg(feature = "customer-io")]
pub mod customer_io;
#[cfg(feature = "front")]
pub mod front;
#[cfg(feature = "help-scout")]
pub mod help_scout;
#[cfg(feature = "heroku")]
pub mod heroku;
#[cfg(feature = "quickbooks")]
pub mod quickbooks;
#[cfg(any(feature = "box", feature = "zendesk"))]
mod rfc3339;
#[cfg(feature = "sentry")]
pub mod sentry;
#[cfg(feature = "vercel")]
pub mod vercel;
#[cfg(feature = "webflow")]
pub mod webflow;
#[cfg(feature = "xero")]
pub mod xero;
#[cfg(feature = "zendesk")]
pub mod zendesk;

#[cfg(all(
    test,
    any(
        feature = "slack",
        feature = "zoom",
        feature = "twitch",
        feature = "discord",
        feature = "sendgrid",
        feature = "standard-webhooks",
        feature = "intercom",
        feature = "typeform",
        feature = "pagerduty",
        feature = "calendly",
        feature = "paddle",
        feature = "linear",
        feature = "gitlab",
        feature = "telegram",
        feature = "mux",
        feature = "razorpay",
        feature = "coinbase-commerce",
        feature = "checkout-com",
        feature = "recurly",
        feature = "bitbucket",
        feature = "gitea",
        feature = "lemon-squeezy",
        feature = "gocardless",
        feature = "customer-io",
        feature = "box",
        feature = "zendesk",
        feature = "heroku",
        feature = "vercel",
        feature = "circleci",
        feature = "sentry",
        feature = "cal-com",
        feature = "help-scout",
        feature = "buildkite",
        feature = "front",
        feature = "webflow",
        feature = "xero",
        feature = "quickbooks"
    )
))]
mod testing;

#[cfg(all(
    test,
    feature = "stripe",
    feature = "paddle",
    feature = "calendly",
    feature = "slack",
    feature = "zoom",
    feature = "twitch",
    feature = "github",
    feature = "intercom",
    feature = "typeform",
    feature = "shopify",
    feature = "pagerduty",
    feature = "square"
))]
mod conformance;

/// The URL a preset's [`Provider`] is built with, for schemes that sign it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UrlArg {
    /// The scheme signs no URL.
    None,
    /// The notification URL exactly as registered with the sender, byte for
    /// byte (Square).
    NotificationUrl,
    /// The public `scheme://host[:port]` the sender calls; the request's
    /// path and query are appended to it (Twilio, HubSpot).
    PublicBaseUrl,
}

/// The key material a preset verifies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyKind {
    /// A shared HMAC secret, used byte for byte as the sender shows it.
    Secret,
    /// A Standard Webhooks `whsec_` secret (base64 key) or a `whpk_` Ed25519
    /// public key.
    Whsec,
    /// A public key only (Discord: Ed25519 hex; SendGrid: P-256 base64 DER).
    PublicKey,
}

/// Key material text a preset refuses (see [`PresetInfo::secret`] and
/// [`PresetInfo::public_key`]). Its message never contains the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTextError {
    message: String,
}

impl fmt::Display for KeyTextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for KeyTextError {}

/// [`PresetInfo::provider`] was called without the URL the preset signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlRequired {
    /// The preset's name.
    pub preset: &'static str,
}

impl fmt::Display for UrlRequired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} preset signs the URL: give it", self.preset)
    }
}

impl std::error::Error for UrlRequired {}

/// A delivery a preset accepts, signed with a fixed test key: for benches,
/// fuzzing and smoke tests, never for production keys.
#[derive(Debug)]
#[non_exhaustive]
pub struct Example {
    /// The preset's provider, built with the example's URL where it needs one.
    pub provider: Provider,
    /// The key material that verifies the example.
    pub secrets: Vec<SigningSecret>,
    /// The request head: method, URI and the signature headers.
    pub parts: http::request::Parts,
    /// The body as sent (Mailgun carries its signature in the body, so it
    /// differs from the body asked for).
    pub body: Vec<u8>,
}

/// One preset, as data. See [`REGISTRY`].
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct PresetInfo {
    /// The name: the `provider` column of the claim, the `--provider` value
    /// of `webhook-verify`, the route name in the quickstart.
    pub name: &'static str,
    /// The Cargo feature that compiles it.
    pub feature: &'static str,
    /// The URL its provider needs.
    pub url: UrlArg,
    /// The key material it verifies with.
    pub key: KeyKind,
    /// Every request header it reads (signature, timestamp, key, type), in
    /// lower case.
    pub headers: &'static [&'static str],
    /// How long the provider can send one event again, automatic retries and
    /// manual redelivery both: the module's `REPLAY_WINDOW`, which cites the
    /// provider's page. [`Retention`](crate::store::retention::Retention)
    /// keeps the preset's keys at least this long.
    pub replay_window: Duration,
    /// Whether the signature covers the body: false for a shared-token
    /// scheme (GitLab, Telegram), which authenticates the sender and signs
    /// nothing, so a changed body still verifies.
    pub signs_body: bool,
    build: fn(&str) -> Provider,
    secret: fn(&str) -> Result<SigningSecret, KeyTextError>,
    public_key: Option<fn(&str) -> Result<SigningSecret, KeyTextError>>,
    example: ExampleOf,
}

/// How a preset makes its [`Example`].
#[derive(Clone, Copy)]
#[allow(dead_code)] // a variant is unused without some presets
enum ExampleOf {
    /// The headers an HMAC preset sends with `body`, signed with the given
    /// secret (event key, Unix timestamp, body): the example is `POST /` with
    /// them and the test secret, to the provider built with the example URL.
    Signed(fn(&SigningSecret, &str, u64, &[u8]) -> Vec<(&'static str, String)>),
    /// The whole example (another key kind, URI or body).
    Whole(fn(&str, u64, &[u8]) -> Example),
}

/// The signed-example headers of an HMAC preset.
#[allow(dead_code)] // unused without an HMAC preset
type SignedHeaders = fn(&SigningSecret, &str, u64, &[u8]) -> Vec<(&'static str, String)>;
/// A key-text parser of a preset.
#[allow(dead_code)] // unused without a public-key preset
type KeyText = fn(&str) -> Result<SigningSecret, KeyTextError>;

#[allow(dead_code)] // the registry entries use what their presets need
impl PresetInfo {
    /// The entry of a preset verifying with a shared secret used byte for
    /// byte, signing no URL; `signed` gives the headers of its example.
    const fn hmac(
        name: &'static str,
        feature: &'static str,
        replay_window: Duration,
        headers: &'static [&'static str],
        build: fn(&str) -> Provider,
        signed: SignedHeaders,
    ) -> Self {
        Self {
            name,
            feature,
            url: UrlArg::None,
            key: KeyKind::Secret,
            headers,
            replay_window,
            signs_body: true,
            build,
            secret: raw_secret,
            public_key: None,
            example: ExampleOf::Signed(signed),
        }
    }

    /// The same entry for a scheme that signs a URL.
    const fn signing(self, url: UrlArg) -> Self {
        Self { url, ..self }
    }

    /// The same entry for a shared-token scheme, which signs no body.
    const fn shared_token(self) -> Self {
        Self { signs_body: false, ..self }
    }

    /// The same entry with other key material.
    const fn keys(self, key: KeyKind, secret: KeyText, public_key: Option<KeyText>) -> Self {
        Self { key, secret, public_key, ..self }
    }

    /// The entry of a preset whose example is not a plain HMAC delivery to
    /// `POST /` (another key kind, URI or body): `example` makes it whole.
    const fn other(
        name: &'static str,
        feature: &'static str,
        replay_window: Duration,
        headers: &'static [&'static str],
        build: fn(&str) -> Provider,
        example: fn(&str, u64, &[u8]) -> Example,
    ) -> Self {
        Self {
            example: ExampleOf::Whole(example),
            ..Self::hmac(name, feature, replay_window, headers, build, no_headers)
        }
    }
}

impl fmt::Debug for PresetInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PresetInfo")
            .field("name", &self.name)
            .field("feature", &self.feature)
            .field("url", &self.url)
            .field("key", &self.key)
            .field("replay_window", &self.replay_window)
            .field("signs_body", &self.signs_body)
            .finish_non_exhaustive()
    }
}

impl PresetInfo {
    /// The preset's [`Provider`], as `Provider::<name>()` builds it. `url`
    /// is used only when [`PresetInfo::url`] is not [`UrlArg::None`].
    ///
    /// # Errors
    /// [`UrlRequired`] when the preset signs a URL and `url` is `None`.
    pub fn provider(&self, url: Option<&str>) -> Result<Provider, UrlRequired> {
        match (self.url, url) {
            (UrlArg::None, _) => Ok((self.build)("")),
            (_, Some(url)) => Ok((self.build)(url)),
            (_, None) => Err(UrlRequired { preset: self.name }),
        }
    }

    /// A secret given as text, in the form the preset's verifier expects
    /// (Standard Webhooks: a `whsec_` secret decoded once; others: the text
    /// byte for byte).
    ///
    /// # Errors
    /// [`KeyTextError`] for text the preset's format refuses.
    pub fn secret(&self, text: &str) -> Result<SigningSecret, KeyTextError> {
        (self.secret)(text)
    }

    /// A public key given as text (Standard Webhooks `whpk_`, Discord hex,
    /// SendGrid base64).
    ///
    /// # Errors
    /// [`KeyTextError`] when the preset verifies with secrets only or the
    /// key does not parse.
    pub fn public_key(&self, text: &str) -> Result<SigningSecret, KeyTextError> {
        match self.public_key {
            Some(parse) => parse(text),
            None => Err(KeyTextError { message: format!("{} verifies with secrets, not public keys", self.name) }),
        }
    }

    /// A delivery the preset accepts: event key `id` where the scheme carries
    /// one in a header, signed at `timestamp` (Unix seconds) over `body`,
    /// with a fixed test key. Schemes that read the body check what it
    /// carries: Linear wants `webhookTimestamp` (Unix milliseconds) in it.
    /// An `id` that cannot be a header value leaves that header out.
    pub fn example(&self, id: &str, timestamp: u64, body: &[u8]) -> Example {
        match self.example {
            ExampleOf::Whole(example) => example(id, timestamp, body),
            ExampleOf::Signed(signed) => {
                let url = match self.url {
                    UrlArg::None => "",
                    UrlArg::NotificationUrl => EXAMPLE_SQUARE_URL,
                    UrlArg::PublicBaseUrl => EXAMPLE_BASE,
                };
                let secret = example_secret();
                let headers = signed(&secret, id, timestamp, body);
                Example {
                    provider: (self.build)(url),
                    secrets: vec![secret],
                    parts: example_parts("/", headers),
                    body: body.to_vec(),
                }
            }
        }
    }
}

/// Every preset compiled in (by feature), in a stable order.
pub fn all() -> &'static [PresetInfo] {
    REGISTRY
}

/// The request headers `provider` reads, which inbox mode keeps with a stored
/// delivery: those declared with [`Provider::reads_headers`], else those of
/// the compiled preset of its name ([`REGISTRY`], [`PresetInfo::headers`]),
/// else none.
pub fn read_headers(provider: &Provider) -> Vec<http::HeaderName> {
    if let Some(declared) = provider.declared_headers() {
        return declared.to_vec();
    }
    REGISTRY
        .iter()
        .filter(|p| p.name == provider.name())
        .flat_map(|p| p.headers.iter().filter_map(|h| http::HeaderName::from_bytes(h.as_bytes()).ok()))
        .collect()
}

/// The preset named `name`, if compiled in.
pub fn find(name: &str) -> Option<&'static PresetInfo> {
    REGISTRY.iter().find(|p| p.name == name)
}

/// The window of a provider that states none: 30 days, as long as Stripe's
/// manual resend, the longest of the presets apart from Paddle's 90 days.
/// The presets whose provider publishes no retry span (Intercom, Twitch,
/// Typeform, Standard Webhooks and Svix) use it too. A generic provider
/// (built with [`crate::verify::generic::HmacVerifier`] or
/// [`Provider::new`]) gets it unless you state its own with
/// [`RetentionBuilder::window`](crate::store::retention::RetentionBuilder::window).
pub const DEFAULT_REPLAY_WINDOW: Duration = days(30);

/// `n` days, for the presets' `REPLAY_WINDOW`s.
const fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}

/// The example's HMAC secret.
#[allow(dead_code)] // unused without an HMAC preset
const EXAMPLE_SECRET: &str = "example-secret-0123456789abcdef";
/// The example's URLs, for presets that sign one.
#[allow(dead_code)]
const EXAMPLE_BASE: &str = "https://example.com";
#[allow(dead_code)]
const EXAMPLE_SQUARE_URL: &str = "https://example.com/webhooks/square";

#[allow(dead_code)]
fn raw_secret(text: &str) -> Result<SigningSecret, KeyTextError> {
    Ok(SigningSecret::from(text))
}

#[allow(dead_code)]
fn key_error(e: impl fmt::Display) -> KeyTextError {
    KeyTextError { message: e.to_string() }
}

/// An example request: `POST uri` with `headers`; a value that cannot be a
/// header value (an event id with a control character) is left out, so the
/// example lacks that header instead of failing.
#[allow(dead_code)]
fn example_parts(uri: &str, headers: Vec<(&'static str, String)>) -> http::request::Parts {
    let mut parts = http::Request::post(uri).body(()).expect("a POST to a valid URI").into_parts().0;
    for (name, value) in headers {
        if let Ok(value) = http::HeaderValue::from_str(&value) {
            parts.headers.append(name, value);
        }
    }
    parts
}

/// The signed headers of a preset whose example is made whole.
#[allow(dead_code)] // unused without such a preset
fn no_headers(_: &SigningSecret, _: &str, _: u64, _: &[u8]) -> Vec<(&'static str, String)> {
    Vec::new()
}

/// A public-key preset's example: `POST /` with `headers`, verified by
/// `public_key` (its text, as the sender shows it).
#[allow(dead_code)] // unused without a public-key preset
fn asymmetric_example(
    provider: Provider,
    public_key: String,
    headers: Vec<(&'static str, String)>,
    body: &[u8],
) -> Example {
    Example {
        provider,
        secrets: vec![SigningSecret::from(public_key)],
        parts: example_parts("/", headers),
        body: body.to_vec(),
    }
}

/// An HMAC preset's example: the test secret, `POST /`, `headers`.
#[allow(dead_code)]
fn hmac_example(provider: Provider, body: &[u8], headers: Vec<(&'static str, String)>) -> Example {
    Example {
        provider,
        secrets: vec![SigningSecret::from(EXAMPLE_SECRET)],
        parts: example_parts("/", headers),
        body: body.to_vec(),
    }
}

#[allow(dead_code)]
fn example_secret() -> SigningSecret {
    SigningSecret::from(EXAMPLE_SECRET)
}

/// Every preset compiled in: one entry per preset, in a stable order. A new
/// preset is one entry here plus its module (and its Cargo feature).
pub const REGISTRY: &[PresetInfo] = &[
    #[cfg(feature = "stripe")]
    stripe::PRESET,
    #[cfg(feature = "github")]
    github::PRESET,
    #[cfg(feature = "slack")]
    slack::PRESET,
    #[cfg(feature = "standard-webhooks")]
    standard_webhooks::PRESET,
    #[cfg(feature = "standard-webhooks")]
    standard_webhooks::SVIX_PRESET,
    #[cfg(feature = "shopify")]
    shopify::PRESET,
    #[cfg(feature = "square")]
    square::PRESET,
    #[cfg(feature = "twilio")]
    twilio::PRESET,
    #[cfg(feature = "paddle")]
    paddle::PRESET,
    #[cfg(feature = "linear")]
    linear::PRESET,
    #[cfg(feature = "hubspot")]
    hubspot::PRESET,
    #[cfg(feature = "pagerduty")]
    pagerduty::PRESET,
    #[cfg(feature = "zoom")]
    zoom::PRESET,
    #[cfg(feature = "twitch")]
    twitch::PRESET,
    #[cfg(feature = "intercom")]
    intercom::PRESET,
    #[cfg(feature = "mailgun")]
    mailgun::PRESET,
    #[cfg(feature = "calendly")]
    calendly::PRESET,
    #[cfg(feature = "typeform")]
    typeform::PRESET,
    #[cfg(feature = "discord")]
    discord::PRESET,
    #[cfg(feature = "sendgrid")]
    sendgrid::PRESET,
    #[cfg(feature = "gitlab")]
    gitlab::PRESET,
    #[cfg(feature = "telegram")]
    telegram::PRESET,
    #[cfg(feature = "mux")]
    mux::PRESET,
    #[cfg(feature = "razorpay")]
    razorpay::PRESET,
    #[cfg(feature = "coinbase-commerce")]
    coinbase_commerce::PRESET,
    #[cfg(feature = "checkout-com")]
    checkout_com::PRESET,
    #[cfg(feature = "recurly")]
    recurly::PRESET,
    #[cfg(feature = "bitbucket")]
    bitbucket::PRESET,
    #[cfg(feature = "gitea")]
    gitea::PRESET,
    #[cfg(feature = "forgejo")]
    forgejo::PRESET,
    #[cfg(feature = "lemon-squeezy")]
    lemon_squeezy::PRESET,
    #[cfg(feature = "gocardless")]
    gocardless::PRESET,
    #[cfg(feature = "customer-io")]
    customer_io::PRESET,
    #[cfg(feature = "box")]
    box_com::PRESET,
    #[cfg(feature = "zendesk")]
    zendesk::PRESET,
    #[cfg(feature = "heroku")]
    heroku::PRESET,
    #[cfg(feature = "vercel")]
    vercel::PRESET,
    #[cfg(feature = "circleci")]
    circleci::PRESET,
    #[cfg(feature = "sentry")]
    sentry::PRESET,
    #[cfg(feature = "cal-com")]
    cal_com::PRESET,
    #[cfg(feature = "help-scout")]
    help_scout::PRESET,
    #[cfg(feature = "buildkite")]
    buildkite::PRESET,
    #[cfg(feature = "front")]
    front::PRESET,
    #[cfg(feature = "webflow")]
    webflow::PRESET,
    #[cfg(feature = "xero")]
    xero::PRESET,
    #[cfg(feature = "quickbooks")]
    quickbooks::PRESET,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{at, NOW};
    use crate::verify::{Delivery, VerifyErrorKind};

    #[test]
    fn names_are_unique_and_match_the_providers() {
        let mut names: Vec<_> = REGISTRY.iter().map(|p| p.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len());
        for preset in REGISTRY {
            let provider = preset.provider(Some("https://example.com/x")).unwrap();
            assert_eq!(provider.name(), preset.name);
            assert_eq!(find(preset.name).map(|p| p.name), Some(preset.name));
            let needs_url = preset.url != UrlArg::None;
            assert_eq!(preset.provider(None).is_err(), needs_url, "{}", preset.name);
            if preset.key == KeyKind::Secret {
                assert!(preset.public_key("x").is_err(), "{}: an HMAC preset takes no public key", preset.name);
            }
        }
        assert!(find("nope").is_none());
    }

    /// Each preset's module docs say which field orders its objects' changes
    /// (the `version` of `WebhookTx::apply_if_newer`).
    #[test]
    fn every_preset_documents_its_ordering_field() {
        let sources: &[(&str, &str)] = &[
            ("calendly", include_str!("calendly.rs")),
            ("discord", include_str!("discord.rs")),
            ("github", include_str!("github.rs")),
            ("hubspot", include_str!("hubspot.rs")),
            ("intercom", include_str!("intercom.rs")),
            ("linear", include_str!("linear.rs")),
            ("mailgun", include_str!("mailgun.rs")),
            ("paddle", include_str!("paddle.rs")),
            ("pagerduty", include_str!("pagerduty.rs")),
            ("sendgrid", include_str!("sendgrid.rs")),
            ("shopify", include_str!("shopify.rs")),
            ("slack", include_str!("slack.rs")),
            ("square", include_str!("square.rs")),
            ("standard-webhooks", include_str!("standard_webhooks/mod.rs")),
            ("stripe", include_str!("stripe.rs")),
            ("twilio", include_str!("twilio.rs")),
            ("twitch", include_str!("twitch.rs")),
            ("typeform", include_str!("typeform.rs")),
            ("zoom", include_str!("zoom.rs")),
            ("gitlab", include_str!("gitlab.rs")),
            ("telegram", include_str!("telegram.rs")),
            ("mux", include_str!("mux.rs")),
            ("razorpay", include_str!("razorpay.rs")),
            ("coinbase-commerce", include_str!("coinbase_commerce.rs")),
            ("checkout-com", include_str!("checkout_com.rs")),
            ("recurly", include_str!("recurly.rs")),
            ("bitbucket", include_str!("bitbucket.rs")),
            ("gitea", include_str!("gitea.rs")),
            ("forgejo", include_str!("forgejo.rs")),
            ("lemon-squeezy", include_str!("lemon_squeezy.rs")),
            ("gocardless", include_str!("gocardless.rs")),
            ("box", include_str!("box_com.rs")),
            ("circleci", include_str!("circleci.rs")),
            ("customer-io", include_str!("customer_io.rs")),
            ("heroku", include_str!("heroku.rs")),
            ("vercel", include_str!("vercel.rs")),
            ("zendesk", include_str!("zendesk.rs")),
            ("sentry", include_str!("sentry.rs")),
            ("cal-com", include_str!("cal_com.rs")),
            ("help-scout", include_str!("help_scout.rs")),
            ("buildkite", include_str!("buildkite.rs")),
            ("front", include_str!("front.rs")),
            ("webflow", include_str!("webflow.rs")),
            ("xero", include_str!("xero.rs")),
            ("quickbooks", include_str!("quickbooks.rs")),
        ];
        for preset in REGISTRY {
            // Svix sends the Standard Webhooks scheme; its preset lives there.
            let module = if preset.name == "svix" { "standard-webhooks" } else { preset.name };
            let source = sources.iter().find(|(name, _)| *name == module).map(|(_, s)| *s);
            let docs: String = source
                .unwrap_or_else(|| panic!("{}: no module source listed", preset.name))
                .lines()
                .take_while(|l| l.starts_with("//!") || l.is_empty())
                .collect();
            assert!(docs.contains("**Ordering**"), "{}: no ordering paragraph in its module docs", preset.name);
        }
    }

    #[test]
    fn every_example_verifies_and_tampering_fails() {
        let body = format!(r#"{{"id":"evt_1","type":"t","webhookTimestamp":{}}}"#, NOW * 1000);
        let body = body.as_bytes();
        for preset in REGISTRY {
            let ex = preset.example("delivery-1", NOW, body);
            assert_eq!(ex.provider.name(), preset.name);
            let verifier = ex.provider.verifier_ref();
            let d = Delivery::new(&ex.parts, &ex.body, &ex.secrets, at(NOW));
            assert_eq!(verifier.check_secrets(&ex.secrets), Ok(()), "{}", preset.name);
            assert_eq!(verifier.precheck(&ex.parts), Ok(()), "{}", preset.name);
            assert_eq!(verifier.verify(&d), Ok(()), "{}", preset.name);
            let mut tampered = ex.body.clone();
            let last = tampered.len() - 2;
            tampered[last] ^= 1;
            let d = Delivery::new(&ex.parts, &tampered, &ex.secrets, at(NOW));
            // A shared-token scheme signs no body: the limit its module documents.
            assert_eq!(verifier.verify(&d).is_err(), preset.signs_body, "{}", preset.name);
            // Every header the example sends is one the preset declares.
            for name in ex.parts.headers.keys() {
                assert!(
                    preset.headers.contains(&name.as_str()) || name == "content-type",
                    "{}: {name} not in headers",
                    preset.name
                );
            }
            let d = Delivery::new(&ex.parts, &ex.body, &[], at(NOW));
            assert_eq!(verifier.verify(&d).map_err(|e| e.kind()), Err(VerifyErrorKind::NoSecret), "{}", preset.name);
        }
    }
}
