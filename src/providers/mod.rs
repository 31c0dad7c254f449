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
//! CONTRIBUTING.md ("Adding a preset") lists every place a preset is
//! written (the module, its registry entry here, retention's row, the key
//! hint of `webhook-verify`, the feature table, the fixture, the docs) and
//! shows the declaration of an HMAC preset. New modules and their
//! `REGISTRY` entries go at the end of the lists below.
//!
//! The CLI, the quickstart, the benches, the fuzz targets, the fixture check
//! (the `fixtures` test module) and the registry-wide tests pick it up from
//! the registry.

use crate::provider::Provider;

#[macro_use]
mod macros;

/// The provider `name` verifying with `verifier`, whose event key is the
/// JSON body's value at the pointer `key` and event type the value at
/// `event_type`: how most presets identify an event.
#[allow(dead_code)] // unused without those presets
fn json_keyed(name: &'static str, verifier: impl crate::verify::Verifier, key: &str, event_type: &str) -> Provider {
    Provider::new(name, verifier, crate::key::JsonPointerKey::new(key).event_type(event_type))
}

/// The provider `name` verifying with `verifier`, whose event key is the
/// header `key`'s value and event type the header `event_type`'s: the
/// delivery-id headers of the Git forges and a few others.
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

/// The provider `name` verifying with `verifier`, whose event key is the
/// digest of the canonical JSON body (the sender sends no event id) and event
/// type the header `event_type`'s.
#[allow(dead_code)] // unused without those presets
fn body_keyed(name: &'static str, verifier: impl crate::verify::Verifier, event_type: &'static str) -> Provider {
    let key = crate::key::DerivedKey::new().canonical_body();
    Provider::new(name, verifier, key.event_type_header(http::HeaderName::from_static(event_type)))
}

/// The generic HMAC builder for the header form Stripe made common and
/// Buildkite, Calendly, Mux and Paddle copied: one header of
/// `<timestamp>=<Unix seconds>` and `<signature>=<hex>` entries separated by
/// `list`, where an entry under another key is skipped, and the signed content
/// is the timestamp's text, `content`, then the body.
#[allow(dead_code)] // unused without those presets
fn timestamped_entries(
    header: &str,
    [timestamp, signature]: [&str; 2],
    list: char,
    content: &str,
) -> crate::verify::generic::HmacVerifierBuilder {
    crate::verify::generic::HmacVerifier::builder(header)
        .key_value(signature)
        .timestamp_key(timestamp)
        .signature_separator(list)
        .signed_content(crate::verify::generic::SignedContent::TimestampBody { separator: content.into() })
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
#[cfg(feature = "paystack")]
pub mod paystack;
#[cfg(any(feature = "discord", feature = "sendgrid"))]
mod public_key;
#[cfg(feature = "quickbooks")]
pub mod quickbooks;
#[cfg(any(feature = "box", feature = "twitch", feature = "zendesk"))]
mod rfc3339;
#[cfg(feature = "sentry")]
pub mod sentry;
#[cfg(feature = "vercel")]
pub mod vercel;
#[cfg(feature = "webflow")]
pub mod webflow;
#[cfg(feature = "woocommerce")]
pub mod woocommerce;
#[cfg(feature = "xero")]
pub mod xero;
#[cfg(feature = "zendesk")]
pub mod zendesk;

#[cfg(test)]
#[allow(dead_code)] // each preset's tests use what they need
mod testing;

/// Each preset's recorded fixture checked from the registry: the delivery
/// verifies, a changed body does not, the example signs it alike, and the
/// provider reads its event id and type.
#[cfg(test)]
mod fixtures;

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

mod preset;
#[allow(unused_imports)] // the presets use what they need
use preset::*;
pub use preset::{Example, KeyKind, KeyTextError, PresetInfo, UrlArg, UrlRequired, DEFAULT_REPLAY_WINDOW};

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
        None => REGISTRY.iter().filter(|p| p.name == provider.name()).flat_map(|p| header_names(p.headers)).collect(),
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
    #[cfg(feature = "paystack")]
    paystack::PRESET,
    #[cfg(feature = "woocommerce")]
    woocommerce::PRESET,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{at, NOW};
    use crate::verify::{Delivery, VerifyErrorKind};

    /// Every preset's name, as claims store it (their `provider` column) and
    /// operators type it (`--provider`): renaming a preset would orphan its
    /// stored claims and their replay window, so each name is pinned here.
    const NAMES: &[&str] = &[
        "bitbucket",
        "box",
        "buildkite",
        "cal-com",
        "calendly",
        "checkout-com",
        "circleci",
        "coinbase-commerce",
        "customer-io",
        "discord",
        "forgejo",
        "front",
        "gitea",
        "github",
        "gitlab",
        "gocardless",
        "help-scout",
        "heroku",
        "hubspot",
        "intercom",
        "lemon-squeezy",
        "linear",
        "mailgun",
        "mux",
        "paddle",
        "pagerduty",
        "paystack",
        "quickbooks",
        "razorpay",
        "recurly",
        "sendgrid",
        "sentry",
        "shopify",
        "slack",
        "square",
        "standard-webhooks",
        "stripe",
        "svix",
        "telegram",
        "twilio",
        "twitch",
        "typeform",
        "vercel",
        "webflow",
        "woocommerce",
        "xero",
        "zendesk",
        "zoom",
    ];

    #[test]
    fn every_preset_keeps_its_name() {
        for preset in REGISTRY {
            let name = preset.name;
            assert!(NAMES.contains(&name), "{name}: a new or renamed preset (a rename orphans its stored claims)");
        }
        if cfg!(feature = "full") {
            assert_eq!(REGISTRY.len(), NAMES.len(), "a preset of NAMES is gone");
        }
    }

    /// A preset's credential headers are a fact of its entry and of its
    /// provider, not of its verifier object: they are among the headers it
    /// reads, never among those inbox mode keeps, they include every header
    /// its verifier declares, and a provider whose verifier was replaced by a
    /// closure still names them. GitLab and Telegram are the presets that
    /// have one (pinned, so the test cannot pass on none).
    #[test]
    fn a_preset_s_credential_headers_survive_a_wrapped_verifier_and_are_never_kept() {
        let mut with_credentials = Vec::new();
        for preset in REGISTRY {
            let provider = preset.provider(Some("https://example.com/hook")).unwrap();
            let declared: Vec<http::HeaderName> = header_names(preset.credential_headers).collect();
            for name in preset.credential_headers {
                assert!(preset.headers.contains(name), "{}: {name} not among its headers", preset.name);
            }
            for name in provider.verifier_ref().credential_headers() {
                assert!(declared.contains(name), "{}: its verifier's {name} not in its entry", preset.name);
            }
            assert_eq!(provider.declared_credentials(), &declared[..], "{}: the provider declares them", preset.name);
            let inner = provider.clone();
            let wrapped = provider.verifier(move |d: &Delivery<'_>| inner.verify(d));
            assert!(wrapped.verifier_ref().credential_headers().is_empty(), "a closure declares none");
            for p in [&wrapped, &Provider::new(preset.name, |_: &Delivery<'_>| Ok(()), crate::key::DerivedKey::new())] {
                let stripped = credential_headers(p);
                assert!(declared.iter().all(|n| stripped.contains(n)), "{}: {stripped:?}", preset.name);
                let kept = read_headers(p);
                assert!(!kept.iter().any(|n| declared.contains(n)), "{}: a credential kept: {kept:?}", preset.name);
            }
            if !declared.is_empty() {
                with_credentials.push(preset.name);
            }
        }
        assert_eq!(with_credentials, ["gitlab", "telegram"]);
    }

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

    /// Every preset's example through rotation and an operator replay: with
    /// an unrelated secret configured before the right one it verifies, with
    /// the unrelated one alone it finds no match; a request without the
    /// preset's headers fails the precheck as missing (where the signature is
    /// in a header). A scheme that signs a
    /// time fails its example 400 days late as too old, and an operator replay
    /// (`without_timestamp_check`) then accepts it but still refuses a changed
    /// body. Public-key presets (another key would have to be a valid key of
    /// theirs) rotate in their modules' tests.
    #[test]
    fn every_example_rotates_and_replays() {
        let body = format!(r#"{{"id":"evt_1","type":"t","webhookTimestamp":{}}}"#, NOW * 1000);
        let late = NOW + 400 * 86_400;
        for preset in REGISTRY {
            let name = preset.name;
            let ex = preset.example("delivery-1", at(NOW), body.as_bytes());
            let verifier = ex.provider.verifier_ref();
            let verify = |body: &[u8], secrets: &[crate::verify::SigningSecret], now: u64, replay: bool| {
                let d = Delivery::new(&ex.parts, body, secrets, at(now));
                verifier.verify(&if replay { d.without_timestamp_check() } else { d }).map_err(|e| e.kind())
            };
            // Mailgun signs in the body: its example sends none of its headers.
            if preset.headers.iter().any(|h| ex.parts.headers.contains_key(*h)) {
                let bare = http::Request::post("/").body(()).unwrap().into_parts().0;
                let got = verifier.precheck(&bare).map_err(|e| e.kind());
                assert_eq!(got, Err(VerifyErrorKind::MissingHeader), "{name}: the precheck without its headers");
            }
            if preset.key != KeyKind::PublicKey {
                let unrelated = preset.secret(if preset.key == KeyKind::Whsec {
                    "whsec_dW5yZWxhdGVkLXVucmVsYXRlZC11bnJlbGF0ZWQ="
                } else {
                    "an-unrelated-secret"
                });
                let unrelated = unrelated.unwrap_or_else(|e| panic!("{name}: {e}"));
                let both = [unrelated.clone(), ex.secrets[0].clone()];
                assert_eq!(verify(&ex.body, &both, NOW, false), Ok(()), "{name}: rotation");
                let only = std::slice::from_ref(&unrelated);
                let got = verify(&ex.body, only, NOW, false);
                assert_eq!(got, Err(VerifyErrorKind::NoMatchingSignature), "{name}: the unrelated secret alone");
            }
            if verify(&ex.body, &ex.secrets, late, false) == Err(VerifyErrorKind::TimestampTooOld) {
                assert_eq!(verify(&ex.body, &ex.secrets, late, true), Ok(()), "{name}: an operator replay");
                let mut changed = ex.body.clone();
                let last = changed.len() - 2;
                changed[last] ^= 1;
                let got = verify(&changed, &ex.secrets, late, true).is_err();
                assert_eq!(got, preset.signs_body, "{name}: an operator replay of a changed body");
            } else {
                assert_eq!(verify(&ex.body, &ex.secrets, late, false), Ok(()), "{name}: no time signed");
            }
        }
    }

    /// The longest a signed time is checked against: 400 days.
    const NO_LIMIT: u64 = 400 * 86_400;

    /// How far from its signing time a preset's example still verifies, in
    /// whole seconds: `Some((into the past, into the future))`, each found by
    /// bisection up to [`NO_LIMIT`]; `None` when it verifies that far both
    /// ways (the scheme signs no time).
    fn tolerance(preset: &PresetInfo) -> Option<(u64, u64)> {
        let body = format!(r#"{{"id":"evt_1","type":"t","webhookTimestamp":{}}}"#, NOW * 1000);
        let ex = preset.example("delivery-1", at(NOW), body.as_bytes());
        let verifies = |now: u64| {
            ex.provider.verifier_ref().verify(&Delivery::new(&ex.parts, &ex.body, &ex.secrets, at(now))).is_ok()
        };
        assert!(verifies(NOW), "{}: its example verifies when signed", preset.name);
        let widest = |toward: &dyn Fn(u64) -> u64| {
            if verifies(toward(NO_LIMIT)) {
                return NO_LIMIT;
            }
            let (mut ok, mut late) = (0, NO_LIMIT);
            while late - ok > 1 {
                let mid = ok + (late - ok) / 2;
                *(if verifies(toward(mid)) { &mut ok } else { &mut late }) = mid;
            }
            ok
        };
        let past = widest(&|d| NOW + d);
        let ahead = widest(&|d| NOW - d);
        (past != NO_LIMIT || ahead != NO_LIMIT).then_some((past, ahead))
    }

    /// A tolerance as the docs write it: `300 s`, `2 h`, `600 s past, 60 s
    /// ahead`, anything after in parentheses ignored; `none signed` is
    /// `None`.
    fn parse_tolerance(text: &str) -> Option<(u64, u64)> {
        let text = text.split('(').next().unwrap_or_default().trim();
        if text == "none signed" {
            return None;
        }
        let seconds = |t: &str| -> u64 {
            let (n, unit) = t.trim().split_once(' ').unwrap_or_else(|| panic!("no unit in {t:?}"));
            let n: u64 = n.parse().unwrap_or_else(|_| panic!("not a number: {t:?}"));
            match unit.split_whitespace().next() {
                Some("s") => n,
                Some("h") => n * 3600,
                other => panic!("unit {other:?} in {t:?}"),
            }
        };
        Some(match text.split_once("past,") {
            Some((past, ahead)) => (seconds(past), seconds(ahead.trim_end_matches("ahead"))),
            None => (seconds(text), seconds(text)),
        })
    }

    /// The text of `file`, from the crate's root.
    fn doc(file: &str) -> String {
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap()
    }

    /// The cells of each row of the table in `text` whose header line
    /// starts with `header`.
    fn table_rows(text: &str, header: &str) -> Vec<Vec<String>> {
        let lines = text.lines().skip_while(|l| !l.starts_with(header));
        let rows = lines.skip(2).take_while(|l| l.starts_with('|'));
        rows.map(|row| row.trim_matches('|').split('|').map(|c| c.trim().to_owned()).collect()).collect()
    }

    /// The preset names written in backticks in `text`.
    fn backticked(text: &str) -> Vec<String> {
        text.split('`').skip(1).step_by(2).filter(|name| find(name).is_some()).map(str::to_owned).collect()
    }

    /// SECURITY.md's tolerance table and its list of presets that sign no
    /// timestamp, and the tolerance column of docs/providers.md, say what
    /// each preset's verifier does: its example verifies that far into the
    /// past and the future, and no further ([`tolerance`]), or at any age.
    #[test]
    fn the_docs_state_each_preset_s_tolerance_as_its_verifier_checks_it() {
        let truth: Vec<(&str, Option<(u64, u64)>)> = REGISTRY.iter().map(|p| (p.name, tolerance(p))).collect();
        let security = doc("SECURITY.md");
        let mut stated: Vec<(String, Option<(u64, u64)>)> = Vec::new();
        for cells in table_rows(&security, "| presets | into the past | into the future |") {
            let tolerance = parse_tolerance(&format!("{} past, {} ahead", cells[1], cells[2]));
            stated.extend(backticked(&cells[0]).into_iter().map(|name| (name, tolerance)));
        }
        let unsigned = security.lines().find(|l| l.starts_with("Presets that sign no timestamp:"));
        let unsigned = unsigned.expect("SECURITY.md: no line \"Presets that sign no timestamp: ...\"");
        stated.extend(backticked(unsigned).into_iter().map(|name| (name, None)));
        let mut column: Vec<(String, Option<(u64, u64)>)> = Vec::new();
        for cells in table_rows(&doc("docs/providers.md"), "| preset (`--provider`) | signature | tolerance |") {
            column.extend(backticked(&cells[0]).into_iter().map(|name| (name, parse_tolerance(&cells[2]))));
        }
        for (doc, stated) in [("SECURITY.md", &stated), ("docs/providers.md", &column)] {
            for (name, truth) in &truth {
                let said: Vec<_> = stated.iter().filter(|(n, _)| n == name).map(|(_, t)| *t).collect();
                assert_eq!(
                    said,
                    [*truth],
                    "{doc}: {name}'s tolerance, stated once (seconds into the past, the future)"
                );
            }
            if cfg!(feature = "full") {
                assert_eq!(stated.len(), REGISTRY.len(), "{doc}: a preset stated twice or not in the registry");
            }
        }
    }

    /// Each preset's module docs say which field orders its objects' changes
    /// (the `version` of `WebhookTx::apply_if_newer`).
    #[test]
    fn every_preset_documents_its_ordering_field() {
        for preset in REGISTRY {
            // Svix sends the Standard Webhooks scheme; its preset lives there.
            let module = if preset.name == "svix" { "standard-webhooks" } else { preset.name }.replace('-', "_");
            // The module's file: `<name>.rs`, `<name>/mod.rs`, or `box_com.rs` for `box` (a keyword).
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/providers");
            let source = [format!("{module}.rs"), format!("{module}/mod.rs"), format!("{module}_com.rs")]
                .iter()
                .find_map(|file| std::fs::read_to_string(dir.join(file)).ok());
            let docs: String = source
                .unwrap_or_else(|| panic!("{}: no module file found under src/providers", preset.name))
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
            let ex = preset.example("delivery-1", at(NOW), body);
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
