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
//!    documents them), the verifier (for an HMAC scheme, a specification of
//!    [`crate::verify::generic::HmacVerifier`]), the key extractor and
//!    `sign`, with its tests;
//! 3. `pub mod acme;` below, `Provider::acme()` in `src/provider.rs`, and
//!    one [`PresetInfo`] entry in [`REGISTRY`].
//!
//! The CLI, the quickstart, the benches, the fuzz targets and the
//! conformance tests pick it up from the registry.

use std::fmt;
use std::time::Duration;

use crate::verify::SigningSecret;
use crate::Provider;

#[cfg(feature = "calendly")]
pub mod calendly;
#[cfg(feature = "discord")]
pub mod discord;
#[cfg(feature = "github")]
pub mod github;
#[cfg(feature = "hubspot")]
pub mod hubspot;
#[cfg(feature = "intercom")]
pub mod intercom;
#[cfg(feature = "linear")]
pub mod linear;
#[cfg(feature = "mailgun")]
pub mod mailgun;
#[cfg(feature = "paddle")]
pub mod paddle;
#[cfg(feature = "pagerduty")]
pub mod pagerduty;
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
#[cfg(feature = "twilio")]
pub mod twilio;
#[cfg(feature = "twitch")]
pub mod twitch;
#[cfg(feature = "typeform")]
pub mod typeform;
#[cfg(feature = "zoom")]
pub mod zoom;

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
    build: fn(&str) -> Provider,
    secret: fn(&str) -> Result<SigningSecret, KeyTextError>,
    public_key: Option<fn(&str) -> Result<SigningSecret, KeyTextError>>,
    example: fn(&str, u64, &[u8]) -> Example,
}

impl fmt::Debug for PresetInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PresetInfo")
            .field("name", &self.name)
            .field("feature", &self.feature)
            .field("url", &self.url)
            .field("key", &self.key)
            .field("replay_window", &self.replay_window)
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
    pub fn example(&self, id: &str, timestamp: u64, body: &[u8]) -> Example {
        (self.example)(id, timestamp, body)
    }
}

/// Every preset compiled in (by feature), in a stable order.
pub fn all() -> &'static [PresetInfo] {
    REGISTRY
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

/// An example request: `POST uri` with `headers`.
#[allow(dead_code)]
fn example_parts(uri: &str, headers: Vec<(&'static str, String)>) -> http::request::Parts {
    let mut req = http::Request::post(uri);
    for (name, value) in headers {
        req = req.header(name, value);
    }
    req.body(()).expect("example headers are valid").into_parts().0
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
    PresetInfo {
        name: stripe::NAME,
        feature: "stripe",
        replay_window: stripe::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[stripe::SIGNATURE_HEADER],
        build: |_| Provider::stripe(),
        secret: raw_secret,
        public_key: None,
        example: |_, ts, body| {
            let sig = stripe::sign(&example_secret(), ts, body);
            hmac_example(Provider::stripe(), body, vec![(stripe::SIGNATURE_HEADER, sig)])
        },
    },
    #[cfg(feature = "github")]
    PresetInfo {
        name: github::NAME,
        feature: "github",
        replay_window: github::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[github::SIGNATURE_HEADER, github::DELIVERY_HEADER, github::EVENT_HEADER],
        build: |_| Provider::github(),
        secret: raw_secret,
        public_key: None,
        example: |id, _, body| {
            let sig = github::sign(&example_secret(), body);
            let headers = vec![(github::SIGNATURE_HEADER, sig), (github::DELIVERY_HEADER, id.to_owned())];
            hmac_example(Provider::github(), body, headers)
        },
    },
    #[cfg(feature = "slack")]
    PresetInfo {
        name: slack::NAME,
        feature: "slack",
        replay_window: slack::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[
            slack::SIGNATURE_HEADER,
            slack::TIMESTAMP_HEADER,
            slack::RETRY_NUM_HEADER,
            slack::RETRY_REASON_HEADER,
        ],
        build: |_| Provider::slack(),
        secret: raw_secret,
        public_key: None,
        example: |_, ts, body| {
            let sig = slack::sign(&example_secret(), ts, body);
            let headers = vec![(slack::SIGNATURE_HEADER, sig), (slack::TIMESTAMP_HEADER, ts.to_string())];
            hmac_example(Provider::slack(), body, headers)
        },
    },
    #[cfg(feature = "standard-webhooks")]
    PresetInfo {
        name: standard_webhooks::NAME,
        feature: "standard-webhooks",
        replay_window: standard_webhooks::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Whsec,
        headers: &[
            standard_webhooks::ID_HEADER,
            standard_webhooks::TIMESTAMP_HEADER,
            standard_webhooks::SIGNATURE_HEADER,
        ],
        build: |_| Provider::standard_webhooks(),
        secret: |text| standard_webhooks::secret(text).map_err(key_error),
        public_key: Some(|text| standard_webhooks::public_key(text).map_err(key_error)),
        example: |id, ts, body| standard_webhooks::example(Provider::standard_webhooks(), false, id, ts, body),
    },
    #[cfg(feature = "standard-webhooks")]
    PresetInfo {
        name: standard_webhooks::SVIX_NAME,
        feature: "standard-webhooks",
        replay_window: standard_webhooks::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Whsec,
        headers: &[
            standard_webhooks::SVIX_ID_HEADER,
            standard_webhooks::SVIX_TIMESTAMP_HEADER,
            standard_webhooks::SVIX_SIGNATURE_HEADER,
            standard_webhooks::ID_HEADER,
            standard_webhooks::TIMESTAMP_HEADER,
            standard_webhooks::SIGNATURE_HEADER,
        ],
        build: |_| Provider::svix(),
        secret: |text| standard_webhooks::secret(text).map_err(key_error),
        public_key: Some(|text| standard_webhooks::public_key(text).map_err(key_error)),
        example: |id, ts, body| standard_webhooks::example(Provider::svix(), true, id, ts, body),
    },
    #[cfg(feature = "shopify")]
    PresetInfo {
        name: shopify::NAME,
        feature: "shopify",
        replay_window: shopify::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[
            shopify::SIGNATURE_HEADER,
            shopify::EVENT_ID_HEADER,
            shopify::WEBHOOK_ID_HEADER,
            shopify::TOPIC_HEADER,
            shopify::EVENTS_SIGNATURE_HEADER,
            shopify::EVENTS_EVENT_ID_HEADER,
            shopify::EVENTS_WEBHOOK_ID_HEADER,
            shopify::EVENTS_TOPIC_HEADER,
        ],
        build: |_| Provider::shopify(),
        secret: raw_secret,
        public_key: None,
        example: |id, _, body| {
            let sig = shopify::sign(&example_secret(), body);
            let headers = vec![(shopify::SIGNATURE_HEADER, sig), (shopify::EVENT_ID_HEADER, id.to_owned())];
            hmac_example(Provider::shopify(), body, headers)
        },
    },
    #[cfg(feature = "square")]
    PresetInfo {
        name: square::NAME,
        feature: "square",
        replay_window: square::REPLAY_WINDOW,
        url: UrlArg::NotificationUrl,
        key: KeyKind::Secret,
        headers: &[square::SIGNATURE_HEADER],
        build: |url| Provider::square(url),
        secret: raw_secret,
        public_key: None,
        example: |_, _, body| {
            let sig = square::sign(&example_secret(), EXAMPLE_SQUARE_URL, body);
            hmac_example(Provider::square(EXAMPLE_SQUARE_URL), body, vec![(square::SIGNATURE_HEADER, sig)])
        },
    },
    #[cfg(feature = "twilio")]
    PresetInfo {
        name: twilio::NAME,
        feature: "twilio",
        replay_window: twilio::REPLAY_WINDOW,
        url: UrlArg::PublicBaseUrl,
        key: KeyKind::Secret,
        headers: &[
            twilio::SIGNATURE_HEADER,
            twilio::SIGNATURE_SETTINGS_HEADER,
            twilio::IDEMPOTENCY_HEADER,
            "content-type",
        ],
        build: |url| Provider::twilio(url),
        secret: raw_secret,
        public_key: None,
        example: |id, _, body| {
            let uri = format!("/hook?bodySHA256={}", twilio::body_sha256(body));
            let sig = twilio::sign(&example_secret(), &format!("{EXAMPLE_BASE}{uri}"), &[]);
            let headers = vec![
                (twilio::SIGNATURE_HEADER, sig),
                ("content-type", "application/json".to_owned()),
                (twilio::IDEMPOTENCY_HEADER, id.to_owned()),
            ];
            Example {
                provider: Provider::twilio(EXAMPLE_BASE),
                secrets: vec![example_secret()],
                parts: example_parts(&uri, headers),
                body: body.to_vec(),
            }
        },
    },
    #[cfg(feature = "paddle")]
    PresetInfo {
        name: paddle::NAME,
        feature: "paddle",
        replay_window: paddle::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[paddle::SIGNATURE_HEADER],
        build: |_| Provider::paddle(),
        secret: raw_secret,
        public_key: None,
        example: |_, ts, body| {
            let sig = paddle::sign(&example_secret(), ts, body);
            hmac_example(Provider::paddle(), body, vec![(paddle::SIGNATURE_HEADER, sig)])
        },
    },
    #[cfg(feature = "linear")]
    PresetInfo {
        name: linear::NAME,
        feature: "linear",
        replay_window: linear::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[linear::SIGNATURE_HEADER, linear::DELIVERY_HEADER, linear::EVENT_HEADER],
        build: |_| Provider::linear(),
        secret: raw_secret,
        public_key: None,
        example: |id, _, body| {
            let sig = linear::sign(&example_secret(), body);
            let headers = vec![(linear::SIGNATURE_HEADER, sig), (linear::DELIVERY_HEADER, id.to_owned())];
            hmac_example(Provider::linear(), body, headers)
        },
    },
    #[cfg(feature = "hubspot")]
    PresetInfo {
        name: hubspot::NAME,
        feature: "hubspot",
        replay_window: hubspot::REPLAY_WINDOW,
        url: UrlArg::PublicBaseUrl,
        key: KeyKind::Secret,
        headers: &[hubspot::SIGNATURE_HEADER, hubspot::TIMESTAMP_HEADER],
        build: |url| Provider::hubspot(url),
        secret: raw_secret,
        public_key: None,
        example: |_, ts, body| {
            let millis = ts.saturating_mul(1000);
            let url = format!("{EXAMPLE_BASE}/hook");
            let sig = hubspot::sign(&example_secret(), "POST", &url, body, millis);
            let headers = vec![(hubspot::SIGNATURE_HEADER, sig), (hubspot::TIMESTAMP_HEADER, millis.to_string())];
            Example {
                provider: Provider::hubspot(EXAMPLE_BASE),
                secrets: vec![example_secret()],
                parts: example_parts("/hook", headers),
                body: body.to_vec(),
            }
        },
    },
    #[cfg(feature = "pagerduty")]
    PresetInfo {
        name: pagerduty::NAME,
        feature: "pagerduty",
        replay_window: pagerduty::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[pagerduty::SIGNATURE_HEADER],
        build: |_| Provider::pagerduty(),
        secret: raw_secret,
        public_key: None,
        example: |_, _, body| {
            let sig = pagerduty::sign(&[example_secret()], body);
            hmac_example(Provider::pagerduty(), body, vec![(pagerduty::SIGNATURE_HEADER, sig)])
        },
    },
    #[cfg(feature = "zoom")]
    PresetInfo {
        name: zoom::NAME,
        feature: "zoom",
        replay_window: zoom::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[zoom::SIGNATURE_HEADER, zoom::TIMESTAMP_HEADER],
        build: |_| Provider::zoom(),
        secret: raw_secret,
        public_key: None,
        example: |_, ts, body| {
            let sig = zoom::sign(&example_secret(), ts, body);
            let headers = vec![(zoom::SIGNATURE_HEADER, sig), (zoom::TIMESTAMP_HEADER, ts.to_string())];
            hmac_example(Provider::zoom(), body, headers)
        },
    },
    #[cfg(feature = "twitch")]
    PresetInfo {
        name: twitch::NAME,
        feature: "twitch",
        replay_window: twitch::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[
            twitch::SIGNATURE_HEADER,
            twitch::MESSAGE_ID_HEADER,
            twitch::TIMESTAMP_HEADER,
            twitch::MESSAGE_TYPE_HEADER,
            twitch::SUBSCRIPTION_TYPE_HEADER,
        ],
        build: |_| Provider::twitch(),
        secret: raw_secret,
        public_key: None,
        example: |id, ts, body| {
            let stamp = twitch::format_timestamp(ts);
            let headers = vec![
                (twitch::SIGNATURE_HEADER, twitch::sign(&example_secret(), id, &stamp, body)),
                (twitch::MESSAGE_ID_HEADER, id.to_owned()),
                (twitch::TIMESTAMP_HEADER, stamp),
                (twitch::MESSAGE_TYPE_HEADER, "notification".to_owned()),
            ];
            hmac_example(Provider::twitch(), body, headers)
        },
    },
    #[cfg(feature = "intercom")]
    PresetInfo {
        name: intercom::NAME,
        feature: "intercom",
        replay_window: intercom::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[intercom::SIGNATURE_HEADER],
        build: |_| Provider::intercom(),
        secret: raw_secret,
        public_key: None,
        example: |_, _, body| {
            let sig = intercom::sign(&example_secret(), body);
            hmac_example(Provider::intercom(), body, vec![(intercom::SIGNATURE_HEADER, sig)])
        },
    },
    #[cfg(feature = "mailgun")]
    PresetInfo {
        name: mailgun::NAME,
        feature: "mailgun",
        replay_window: mailgun::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[],
        build: |_| Provider::mailgun(),
        secret: raw_secret,
        public_key: None,
        example: |id, ts, body| {
            let event = serde_json::json!({ "id": id, "pad": String::from_utf8_lossy(body) });
            let signed = mailgun::signed_body(&example_secret(), ts, "token-0123456789", &event);
            hmac_example(Provider::mailgun(), signed.as_bytes(), vec![("content-type", "application/json".to_owned())])
        },
    },
    #[cfg(feature = "calendly")]
    PresetInfo {
        name: calendly::NAME,
        feature: "calendly",
        replay_window: calendly::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[calendly::SIGNATURE_HEADER],
        build: |_| Provider::calendly(),
        secret: raw_secret,
        public_key: None,
        example: |_, ts, body| {
            let sig = calendly::sign(&example_secret(), ts, body);
            hmac_example(Provider::calendly(), body, vec![(calendly::SIGNATURE_HEADER, sig)])
        },
    },
    #[cfg(feature = "typeform")]
    PresetInfo {
        name: typeform::NAME,
        feature: "typeform",
        replay_window: typeform::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::Secret,
        headers: &[typeform::SIGNATURE_HEADER],
        build: |_| Provider::typeform(),
        secret: raw_secret,
        public_key: None,
        example: |_, _, body| {
            let sig = typeform::sign(&example_secret(), body);
            hmac_example(Provider::typeform(), body, vec![(typeform::SIGNATURE_HEADER, sig)])
        },
    },
    #[cfg(feature = "discord")]
    PresetInfo {
        name: discord::NAME,
        feature: "discord",
        replay_window: discord::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::PublicKey,
        headers: &[discord::SIGNATURE_HEADER, discord::TIMESTAMP_HEADER],
        build: |_| Provider::discord(),
        secret: raw_secret,
        public_key: Some(|text| discord::public_key(text).map_err(key_error)),
        example: |_, ts, body| {
            const SEED: [u8; 32] = [7; 32];
            let headers = vec![
                (discord::SIGNATURE_HEADER, discord::sign(&SEED, ts, body)),
                (discord::TIMESTAMP_HEADER, ts.to_string()),
            ];
            Example {
                provider: Provider::discord(),
                secrets: vec![SigningSecret::from(discord::public_key_of(&SEED))],
                parts: example_parts("/", headers),
                body: body.to_vec(),
            }
        },
    },
    #[cfg(feature = "sendgrid")]
    PresetInfo {
        name: sendgrid::NAME,
        feature: "sendgrid",
        replay_window: sendgrid::REPLAY_WINDOW,
        url: UrlArg::None,
        key: KeyKind::PublicKey,
        headers: &[sendgrid::SIGNATURE_HEADER, sendgrid::TIMESTAMP_HEADER],
        build: |_| Provider::sendgrid(),
        secret: raw_secret,
        public_key: Some(raw_secret),
        example: |_, ts, body| {
            let key = p256::ecdsa::SigningKey::from_slice(&[9; 32]).expect("a valid P-256 scalar");
            let headers = vec![
                (sendgrid::SIGNATURE_HEADER, sendgrid::sign(&key, ts, body)),
                (sendgrid::TIMESTAMP_HEADER, ts.to_string()),
            ];
            Example {
                provider: Provider::sendgrid(),
                secrets: vec![SigningSecret::from(sendgrid::public_key_base64(key.verifying_key()))],
                parts: example_parts("/", headers),
                body: body.to_vec(),
            }
        },
    },
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
            assert!(verifier.verify(&d).is_err(), "{}", preset.name);
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
