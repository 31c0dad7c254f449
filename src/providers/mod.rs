//! Provider presets: one module per sender, each behind its Cargo feature,
//! and [`REGISTRY`], the table of every preset compiled in.
//!
//! An HMAC-family preset (Stripe, GitHub, Shopify, ... 33 of them) is one
//! constant of facts, its module's `FACTS` ([`HmacPreset`]: the name, the
//! [`HmacScheme`](crate::verify::generic::HmacScheme) with its tolerance and
//! the tolerance's source, where the event key lives, the headers it reads,
//! the replay window and its source), read by the one generic
//! [`HmacVerifier`](crate::verify::generic::HmacVerifier). A scheme that is
//! code (Twilio, Standard Webhooks, HubSpot, Square, Telegram, GitLab, Box,
//! Mailgun, Linear, Recurly, Gitea, Forgejo, Adyen, Mandrill, Postmark, Vonage,
//! Dropbox, Asana, Notion, and the public-key Discord and SendGrid) is a
//! module with its own [`Verifier`](crate::verify::Verifier).
//! The ready [`Provider`] (verifier + key extractor + handshake) is
//! [`Provider::stripe`], [`Provider::github`], ...: one constructor per
//! preset. A preset verifier at another tolerance:
//! `Provider::stripe().verifier(stripe::FACTS.verifier().tolerance(d))`.
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
//! CONTRIBUTING.md ("Adding a preset") shows an HMAC preset from its facts:
//! its module (docs, `FACTS`, `Provider::<name>()`, tests), its fixture,
//! its row in [`REGISTRY`] (and in the pinned names beside it), and its
//! Cargo feature.
//! The CLI, the quickstart, the benches, the fuzz targets, retention, the
//! fixture check and the registry-wide tests pick it up from the registry.

/// The shell of the code-written presets that sign a time (`timed_verifier!`).
#[macro_use]
mod macros;

mod delivery;
mod hmac;
mod preset;
pub(crate) mod provider;
mod signing;

#[allow(unused_imports)] // the presets use what they need
use delivery::{example_parts, signed_delivery};
pub use delivery::{Example, SignError, SignErrorKind, Signing};
pub use hmac::{EventKey, HmacPreset, KeyField};
#[allow(unused_imports)] // the presets use what they need
use preset::{
    asymmetric_example, days, example_secret, hmac_example, key_error, raw_secret, signature_and_time, unix_millis,
    unix_seconds, ExampleOf, Fixture, FixtureKind, KeyText, EXAMPLE_BASE, EXAMPLE_SECRET, EXAMPLE_SQUARE_URL,
};
pub use preset::{KeyKind, KeyTextError, PresetInfo, UrlArg, UrlRequired, DEFAULT_REPLAY_WINDOW};
pub use signing::TEST_SECRET;
// `Provider` itself is public at the crate root only (`webhook_idempotency::Provider`).
pub(crate) use provider::Provider;
pub use provider::{Challenge, CheckError, CheckErrorKind};

/// The scheme of the header form Stripe made common and Buildkite, Calendly,
/// Mux and Paddle copied: one header of `<timestamp>=<Unix seconds>` and
/// `<signature>=<hex>` entries separated by `list` (an entry under another key
/// is skipped, a signature that is not one tag too), over the timestamp's
/// text, `content`, then the body. The preset adds its tolerance.
#[allow(dead_code)] // unused without those presets
const fn timestamped_entries(
    header: &'static str,
    [timestamp, signature]: [&'static str; 2],
    list: char,
    content: &'static str,
) -> crate::verify::generic::HmacScheme {
    crate::verify::generic::HmacScheme {
        key_value: Some(signature),
        timestamp_key: Some(timestamp),
        separator: Some(list),
        signed: crate::verify::generic::Signed::TimestampBody { separator: content },
        ..crate::verify::generic::HmacScheme::new(header)
    }
}

/// Answers a verified body whose `events` is an empty array with `200` and
/// an empty body, and nothing else (`None`): the endpoint checks of the
/// senders that batch events, Xero's "Intent to receive" and LINE's
/// communication check.
#[allow(dead_code)] // unused without those presets
#[derive(Debug, Clone, Copy, Default)]
struct EmptyEventsAnswered;

impl Challenge for EmptyEventsAnswered {
    fn respond(&self, delivery: &crate::verify::Delivery<'_>) -> Option<http::Response<bytes::Bytes>> {
        let doc: serde_json::Value = serde_json::from_slice(delivery.body).ok()?;
        let empty = doc.get("events").and_then(serde_json::Value::as_array).is_some_and(Vec::is_empty);
        empty.then(|| http::Response::new(bytes::Bytes::new()))
    }
}

/// A secret given in standard base64 (RFC 4648 section 4), padding optional as
/// the senders' libraries accept it, decoded in constant time with `base64ct`
/// (the timing does not depend on the secret's characters): Standard
/// Webhooks' `whsec_` keys, Airtable's `macSecretBase64`. `None` for other
/// text.
#[cfg(any(feature = "standard-webhooks", feature = "airtable"))]
pub(crate) fn decode_secret_base64(text: &[u8]) -> Option<Vec<u8>> {
    use base64ct::{Base64, Base64Unpadded, Encoding as _};
    // Padded input is a multiple of four characters; unpadded input of such a
    // length needs no padding, so the padded decoder takes it too.
    let mut buf = vec![0u8; text.len() / 4 * 3 + 3];
    let n = if text.len().is_multiple_of(4) {
        Base64::decode(text, &mut buf).ok()?.len()
    } else {
        Base64Unpadded::decode(text, &mut buf).ok()?.len()
    };
    buf.truncate(n);
    Some(buf)
}

/// The provider `name` verifying with `verifier`, whose event key is the
/// JSON body's value at the pointer `key` and event type the value at
/// `event_type`.
#[allow(dead_code)] // unused without those presets
fn json_keyed(name: &'static str, verifier: impl crate::verify::Verifier, key: &str, event_type: &str) -> Provider {
    Provider::new(name, verifier, crate::key::JsonPointerKey::new(key).event_type(event_type))
}

/// The provider `name` verifying with `verifier`, whose event key is the
/// header `key`'s value and event type the header `event_type`'s: the
/// delivery-id headers of the Git forges.
#[allow(dead_code)] // unused without those presets
fn header_keyed(
    name: &'static str,
    verifier: impl crate::verify::Verifier,
    key: &'static str,
    event_type: &'static str,
) -> Provider {
    let key = crate::key::HeaderKey::new(http::HeaderName::from_static(key));
    Provider::new(name, verifier, key.event_type(http::HeaderName::from_static(event_type)))
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
#[cfg(feature = "dropbox")]
pub mod dropbox;
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
#[cfg(feature = "mandrill")]
pub mod mandrill;
#[cfg(feature = "mux")]
pub mod mux;
#[cfg(feature = "notion")]
pub mod notion;
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
#[cfg(feature = "vonage")]
pub mod vonage;
#[cfg(feature = "zoom")]
pub mod zoom;

#[cfg(feature = "adyen")]
pub mod adyen;
#[cfg(feature = "asana")]
pub mod asana;
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
#[cfg(feature = "paystack")]
pub mod paystack;
#[cfg(feature = "postmark")]
pub mod postmark;
#[cfg(any(feature = "discord", feature = "sendgrid"))]
mod public_key;
#[cfg(feature = "quickbooks")]
pub mod quickbooks;
#[cfg(any(feature = "box", feature = "twitch", feature = "zendesk", feature = "aws-sns"))]
mod rfc3339;
#[cfg(feature = "sanity")]
pub mod sanity;
#[cfg(feature = "sentry")]
pub mod sentry;
#[cfg(feature = "vercel")]
pub mod vercel;
#[cfg(feature = "webflow")]
pub mod webflow;
#[cfg(feature = "woocommerce")]
pub mod woocommerce;

#[cfg(feature = "clickup")]
pub mod clickup;
#[cfg(feature = "line")]
pub mod line;
#[cfg(feature = "meta")]
pub mod meta;
#[cfg(feature = "workos")]
pub mod workos;
#[cfg(feature = "xero")]
pub mod xero;
#[cfg(feature = "zendesk")]
pub mod zendesk;

#[cfg(feature = "airtable")]
pub mod airtable;
#[cfg(feature = "apple-app-store")]
pub mod apple_app_store;
#[cfg(feature = "aws-sns")]
pub mod aws_sns;
#[cfg(feature = "docusign")]
pub mod docusign;
#[cfg(any(feature = "asana", feature = "notion"))]
mod handover;
#[cfg(feature = "trello")]
pub mod trello;

#[cfg(feature = "convoy")]
pub mod convoy;
pub mod gateway;
#[cfg(feature = "hookdeck")]
pub mod hookdeck;

/// The registry-wide tests, and the test cases, fixture checks and
/// conformance table the presets share.
#[cfg(test)]
pub(crate) mod tests;

/// Every preset compiled in (by feature), in a stable order.
pub fn all() -> &'static [PresetInfo] {
    REGISTRY
}

/// The request headers `provider` reads, which inbox mode keeps with a stored
/// delivery: those declared with [`Provider::reads_headers`], else those of
/// the compiled preset of its name ([`REGISTRY`], [`PresetInfo::headers`]),
/// else none; never one of its [`credential_headers`].
pub fn read_headers(provider: &Provider) -> Vec<http::HeaderName> {
    let read = match provider.declared_headers() {
        Some(declared) => declared.to_vec(),
        None => REGISTRY
            .iter()
            .filter(|p| p.name == provider.name())
            .flat_map(|p| p.headers().into_iter().filter_map(|h| http::HeaderName::from_bytes(h.as_bytes()).ok()))
            .collect(),
    };
    let credentials = credential_headers(provider);
    read.into_iter().filter(|name| !credentials.contains(name)).collect()
}

/// The request headers `provider` reads a credential from (a header whose
/// value alone authenticates any delivery: a shared token, HTTP Basic
/// credentials), which the layer removes from the request once the delivery
/// is verified (the handler never sees them, inbox mode never stores them):
/// those declared with [`Provider::credentials_in`] (a preset's constructor
/// declares its own), those of the compiled preset of its name
/// ([`PresetInfo::credential_headers`]), and its verifier's
/// [`credential_headers`](crate::verify::Verifier::credential_headers). The
/// first two do not depend on the verifier: a preset whose verifier was
/// replaced or wrapped ([`Provider::verifier`] with a closure) keeps them.
pub fn credential_headers(provider: &Provider) -> Vec<http::HeaderName> {
    let preset = REGISTRY.iter().filter(|p| p.name == provider.name()).flat_map(|p| header_names(p.credential_headers));
    let verifier = provider.verifier_ref().credential_headers().iter().cloned();
    let mut names: Vec<http::HeaderName> = Vec::new();
    for name in provider.declared_credentials().iter().cloned().chain(preset).chain(verifier) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Header names written in lower case (a preset's lists), as `HeaderName`s.
fn header_names(names: &'static [&'static str]) -> impl Iterator<Item = http::HeaderName> {
    names.iter().filter_map(|h| http::HeaderName::from_bytes(h.as_bytes()).ok())
}

/// The preset named `name`, if compiled in.
pub fn find(name: &str) -> Option<&'static PresetInfo> {
    REGISTRY.iter().find(|p| p.name == name)
}

/// Every preset compiled in: one entry per preset, in a stable order: an
/// HMAC preset's read from its facts, `PresetInfo::hmac(&<name>::FACTS)`;
/// another's its module's `PRESET`. A new preset is one entry here (and in
/// `NAMES`), its module, its fixture and its Cargo feature.
pub const REGISTRY: &[PresetInfo] = &[
    #[cfg(feature = "stripe")]
    PresetInfo::hmac(&stripe::FACTS),
    #[cfg(feature = "github")]
    PresetInfo::hmac(&github::FACTS),
    #[cfg(feature = "slack")]
    PresetInfo::hmac(&slack::FACTS),
    #[cfg(feature = "standard-webhooks")]
    standard_webhooks::PRESET,
    #[cfg(feature = "standard-webhooks")]
    standard_webhooks::SVIX_PRESET,
    #[cfg(feature = "shopify")]
    PresetInfo::hmac(&shopify::FACTS),
    #[cfg(feature = "square")]
    square::PRESET,
    #[cfg(feature = "twilio")]
    twilio::PRESET,
    #[cfg(feature = "paddle")]
    PresetInfo::hmac(&paddle::FACTS),
    #[cfg(feature = "linear")]
    linear::PRESET,
    #[cfg(feature = "hubspot")]
    hubspot::PRESET,
    #[cfg(feature = "pagerduty")]
    PresetInfo::hmac(&pagerduty::FACTS),
    #[cfg(feature = "zoom")]
    PresetInfo::hmac(&zoom::FACTS),
    #[cfg(feature = "twitch")]
    PresetInfo::hmac(&twitch::FACTS),
    #[cfg(feature = "intercom")]
    PresetInfo::hmac(&intercom::FACTS),
    #[cfg(feature = "mailgun")]
    mailgun::PRESET,
    #[cfg(feature = "calendly")]
    PresetInfo::hmac(&calendly::FACTS),
    #[cfg(feature = "typeform")]
    PresetInfo::hmac(&typeform::FACTS),
    #[cfg(feature = "discord")]
    discord::PRESET,
    #[cfg(feature = "sendgrid")]
    sendgrid::PRESET,
    #[cfg(feature = "gitlab")]
    gitlab::PRESET,
    #[cfg(feature = "telegram")]
    telegram::PRESET,
    #[cfg(feature = "mux")]
    PresetInfo::hmac(&mux::FACTS),
    #[cfg(feature = "razorpay")]
    PresetInfo::hmac(&razorpay::FACTS),
    #[cfg(feature = "coinbase-commerce")]
    PresetInfo::hmac(&coinbase_commerce::FACTS),
    #[cfg(feature = "checkout-com")]
    PresetInfo::hmac(&checkout_com::FACTS),
    #[cfg(feature = "recurly")]
    recurly::PRESET,
    #[cfg(feature = "bitbucket")]
    PresetInfo::hmac(&bitbucket::FACTS),
    #[cfg(feature = "gitea")]
    gitea::PRESET,
    #[cfg(feature = "forgejo")]
    forgejo::PRESET,
    #[cfg(feature = "lemon-squeezy")]
    PresetInfo::hmac(&lemon_squeezy::FACTS),
    #[cfg(feature = "gocardless")]
    PresetInfo::hmac(&gocardless::FACTS),
    #[cfg(feature = "customer-io")]
    PresetInfo::hmac(&customer_io::FACTS),
    #[cfg(feature = "box")]
    box_com::PRESET,
    #[cfg(feature = "zendesk")]
    PresetInfo::hmac(&zendesk::FACTS),
    #[cfg(feature = "heroku")]
    PresetInfo::hmac(&heroku::FACTS),
    #[cfg(feature = "vercel")]
    PresetInfo::hmac(&vercel::FACTS),
    #[cfg(feature = "circleci")]
    PresetInfo::hmac(&circleci::FACTS),
    #[cfg(feature = "sentry")]
    PresetInfo::hmac(&sentry::FACTS),
    #[cfg(feature = "cal-com")]
    PresetInfo::hmac(&cal_com::FACTS),
    #[cfg(feature = "help-scout")]
    PresetInfo::hmac(&help_scout::FACTS),
    #[cfg(feature = "buildkite")]
    buildkite::PRESET,
    #[cfg(feature = "front")]
    PresetInfo::hmac(&front::FACTS),
    #[cfg(feature = "webflow")]
    PresetInfo::hmac(&webflow::FACTS),
    #[cfg(feature = "xero")]
    PresetInfo::hmac(&xero::FACTS),
    #[cfg(feature = "quickbooks")]
    PresetInfo::hmac(&quickbooks::FACTS),
    #[cfg(feature = "paystack")]
    PresetInfo::hmac(&paystack::FACTS),
    #[cfg(feature = "woocommerce")]
    PresetInfo::hmac(&woocommerce::FACTS),
    #[cfg(feature = "hookdeck")]
    PresetInfo::hmac(&hookdeck::FACTS),
    #[cfg(feature = "convoy")]
    PresetInfo::hmac(&convoy::FACTS),
    #[cfg(feature = "line")]
    PresetInfo::hmac(&line::FACTS),
    #[cfg(feature = "meta")]
    PresetInfo::hmac(&meta::FACTS),
    #[cfg(feature = "clickup")]
    PresetInfo::hmac(&clickup::FACTS),
    #[cfg(feature = "workos")]
    PresetInfo::hmac(&workos::FACTS),
    #[cfg(feature = "adyen")]
    adyen::PRESET,
    #[cfg(feature = "mandrill")]
    mandrill::PRESET,
    #[cfg(feature = "postmark")]
    postmark::PRESET,
    #[cfg(feature = "vonage")]
    vonage::PRESET,
    #[cfg(feature = "sanity")]
    PresetInfo::hmac(&sanity::FACTS),
    #[cfg(feature = "dropbox")]
    dropbox::PRESET,
    #[cfg(feature = "asana")]
    asana::PRESET,
    #[cfg(feature = "notion")]
    notion::PRESET,
    #[cfg(feature = "aws-sns")]
    aws_sns::PRESET,
    #[cfg(feature = "airtable")]
    airtable::PRESET,
    #[cfg(feature = "docusign")]
    docusign::PRESET,
    #[cfg(feature = "trello")]
    trello::PRESET,
    #[cfg(feature = "apple-app-store")]
    apple_app_store::PRESET,
];

/// Every preset's name, as claims store it (their `provider` column) and
/// operators type it (`--provider`): renaming a preset would orphan its
/// stored claims and their replay window, so each name is pinned here.
#[cfg(test)]
const NAMES: &[&str] = &[
    "adyen",
    "airtable",
    "apple-app-store",
    "asana",
    "aws-sns",
    "bitbucket",
    "box",
    "buildkite",
    "cal-com",
    "calendly",
    "checkout-com",
    "clickup",
    "circleci",
    "coinbase-commerce",
    "convoy",
    "customer-io",
    "discord",
    "docusign",
    "dropbox",
    "forgejo",
    "front",
    "gitea",
    "github",
    "gitlab",
    "gocardless",
    "help-scout",
    "heroku",
    "hookdeck",
    "hubspot",
    "intercom",
    "lemon-squeezy",
    "line",
    "linear",
    "mailgun",
    "mandrill",
    "meta",
    "mux",
    "notion",
    "paddle",
    "pagerduty",
    "paystack",
    "postmark",
    "quickbooks",
    "razorpay",
    "recurly",
    "sanity",
    "sendgrid",
    "sentry",
    "shopify",
    "slack",
    "square",
    "standard-webhooks",
    "stripe",
    "svix",
    "telegram",
    "trello",
    "twilio",
    "twitch",
    "typeform",
    "vercel",
    "vonage",
    "webflow",
    "woocommerce",
    "workos",
    "xero",
    "zendesk",
    "zoom",
];
