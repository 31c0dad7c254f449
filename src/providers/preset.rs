//! [`PresetInfo`], a preset as data, and what it is made of: the URL and key
//! material it takes, its signed [`Example`], and the helpers the preset
//! modules build their entries and examples with.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::delivery::{example_parts, Example, SendFn, Signing};
use super::HmacPreset;
use crate::providers::Provider;
use crate::verify::SigningSecret;

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
    /// Nothing configured: the sender's published key, fetched from the URL
    /// the delivery names and checked against an allowlist (AWS SNS's
    /// certificate; [`verify::fetch`](crate::verify::fetch)).
    Fetched,
    /// A shared HMAC secret given as the sender shows it, in standard
    /// base64, whose decoded bytes key the HMAC (Airtable's
    /// `macSecretBase64`).
    Base64Secret,
    /// A shared HMAC secret given as the sender shows it, in hexadecimal,
    /// whose decoded bytes key the HMAC (Adyen's HMAC key).
    HexSecret,
    /// Nothing configured: the delivery carries its certificate chain, checked up to a root the crate ships
    /// (Apple App Store Server Notifications: Apple Root CA - G3).
    ShippedRoot,
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

/// One preset, as data. See [`REGISTRY`](super::REGISTRY).
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
    /// How long the provider can send one event again, automatic retries and
    /// manual redelivery both: an HMAC preset's
    /// [`HmacPreset::replay_window`], another's module `REPLAY_WINDOW`,
    /// which cites the provider's page.
    /// [`Retention`](crate::store::retention::Retention) keeps the preset's
    /// keys at least this long.
    pub replay_window: Duration,
    /// Of the headers it reads ([`headers`](Self::headers)), those whose
    /// value alone authenticates any delivery (a shared token: GitLab's
    /// `x-gitlab-token`, Telegram's `x-telegram-bot-api-secret-token`), in
    /// lower case: the layer removes them from the request once the delivery
    /// is verified, whatever verifier the provider was given
    /// ([`credential_headers`](super::credential_headers)), and inbox mode
    /// never keeps them. Empty for a signature scheme.
    pub credential_headers: &'static [&'static str],
    /// Whether the signature of the entry's example covers the body: false
    /// for a shared-token scheme (GitLab, Telegram), which authenticates the
    /// sender and signs nothing, so a changed body still verifies (a
    /// signature scheme with a token mode beside it, Buildkite, is true: its
    /// example is signed).
    pub signs_body: bool,
    /// Whether a second delivery of one request is a duplicate: false for a
    /// sender whose notifications name no event and whose every delivery
    /// must run the handler (Dropbox's "something changed, fetch with your
    /// cursor": its key is new for each delivery).
    pub dedupes: bool,
    pub(super) source: Source,
    /// How a delivery of a preset whose example is made whole is signed
    /// with given key material ([`PresetInfo::sign`]); `None`: it cannot be.
    pub(super) send: Option<SendFn>,
    pub(super) secret: fn(&str) -> Result<SigningSecret, KeyTextError>,
    public_key: Option<fn(&str) -> Result<SigningSecret, KeyTextError>>,
    key_source: &'static str,
    signature: &'static str,
    /// Where its recorded vectors come from (`providers::tests::fixtures`).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fixture: Fixture,
}

/// What a preset is made of: an HMAC preset's facts, or the module's own code.
#[derive(Clone, Copy)]
pub(super) enum Source {
    Hmac(&'static HmacPreset),
    Code { build: fn(&str) -> Provider, headers: &'static [&'static str], example: ExampleOf },
}

/// Where a preset's recorded vectors come from, pinned with the preset so
/// that editing its fixture alone cannot drop a check
/// (`providers::tests::fixtures` reads it).
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Fixture {
    pub(crate) kind: FixtureKind,
    /// The optional facts its `expected.json` records (`sdk_time_cases`,
    /// `sdk_differs`, `old_secret`, `same_event`, `extra_vectors`,
    /// `timestamp_ms`).
    pub(crate) records: &'static [&'static str],
    /// Another preset whose fixture directory it reads (Forgejo: Gitea's).
    pub(crate) dir: Option<&'static str>,
}

/// How a preset's fixture was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum FixtureKind {
    /// The common form, verified by the provider's SDK (named in the
    /// fixture, its script saying which package and version).
    Sdk,
    /// The common form, made from the documented formula.
    Formula,
    /// Another form, tested in the module: why.
    Own(&'static str),
}

#[allow(dead_code)] // each preset uses what its fixture is
impl Fixture {
    /// A fixture verified by the provider's SDK, recording `records`.
    pub(crate) const fn sdk(records: &'static [&'static str]) -> Self {
        Self { kind: FixtureKind::Sdk, records, dir: None }
    }

    /// A fixture made from the documented formula, recording `records`.
    pub(crate) const fn formula(records: &'static [&'static str]) -> Self {
        Self { kind: FixtureKind::Formula, records, dir: None }
    }

    /// A fixture of another form, tested in the module, for the reason `why`.
    pub(crate) const fn own(why: &'static str) -> Self {
        Self { kind: FixtureKind::Own(why), records: &[], dir: None }
    }

    /// The same, read from the fixture directory of the preset `name`.
    pub(crate) const fn of(self, name: &'static str) -> Self {
        Self { dir: Some(name), ..self }
    }
}

/// How a preset makes its [`Example`].
#[derive(Clone, Copy)]
#[allow(dead_code)] // a variant is unused without some presets
pub(super) enum ExampleOf {
    /// The headers an HMAC preset sends with `body`, signed with the given
    /// secret (event key, signing time, body): the example is `POST /` with
    /// them and the test secret, to the provider built with the example URL.
    Signed(SignedHeaders),
    /// The whole example (another key kind, URI or body), signed at the time given.
    Whole(fn(&str, SystemTime, &[u8]) -> Example),
}

/// The signed-example headers of an HMAC preset: the secret, and the
/// delivery (event key, the signing time, which the scheme writes in its own
/// unit: whole seconds, milliseconds, RFC 3339; body; the URL it is sent to).
#[allow(dead_code)] // unused without an HMAC preset
pub(super) type SignedHeaders = fn(&SigningSecret, &Signing<'_>) -> Vec<(&'static str, String)>;

/// `at` in whole Unix seconds (rounded down; 0 before 1970), as the
/// examples of schemes that sign seconds write it.
#[allow(dead_code)] // unused without a preset that signs seconds
pub(super) fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The example headers of a scheme that sends its signature and its signed
/// time in two headers: `signature` with `sign(time)` and `timestamp` with
/// `time` in decimal. `time` is in the scheme's unit: [`unix_seconds`] or
/// [`unix_millis`] of the example's instant.
#[allow(dead_code)] // unused without such a preset
pub(super) fn signature_and_time(
    signature: &'static str,
    timestamp: &'static str,
    time: u64,
    sign: impl FnOnce(u64) -> String,
) -> Vec<(&'static str, String)> {
    vec![(signature, sign(time)), (timestamp, time.to_string())]
}

/// `at` in whole Unix milliseconds (rounded down; 0 before 1970), as the
/// examples of schemes that sign milliseconds write it.
#[allow(dead_code)] // unused without a preset that signs milliseconds
pub(super) fn unix_millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A key-text parser of a preset.
#[allow(dead_code)] // unused without a public-key preset
pub(super) type KeyText = fn(&str) -> Result<SigningSecret, KeyTextError>;

#[allow(dead_code)] // the registry entries use what their presets need
impl PresetInfo {
    /// The entry of an HMAC-family preset, all of it read from its facts.
    pub(super) const fn hmac(facts: &'static HmacPreset) -> Self {
        Self {
            name: facts.name,
            feature: facts.name,
            url: UrlArg::None,
            key: KeyKind::Secret,
            replay_window: facts.replay_window,
            credential_headers: &[],
            signs_body: true,
            dedupes: true,
            source: Source::Hmac(facts),
            send: None,
            secret: raw_secret,
            public_key: None,
            key_source: "",
            signature: "",
            fixture: facts.fixture,
        }
    }

    /// The entry of a preset written as code, verifying with a shared secret
    /// used byte for byte, signing no URL (the modifiers below say
    /// otherwise), reading `headers` (the signature header first); `example`
    /// says how its example is made, [`PresetInfo::key_source`] where its
    /// key is read.
    pub(super) const fn new(
        name: &'static str,
        feature: &'static str,
        replay_window: Duration,
        headers: &'static [&'static str],
        build: fn(&str) -> Provider,
        example: ExampleOf,
    ) -> Self {
        Self {
            name,
            feature,
            url: UrlArg::None,
            key: KeyKind::Secret,
            replay_window,
            credential_headers: &[],
            signs_body: true,
            dedupes: true,
            source: Source::Code { build, headers, example },
            send: None,
            secret: raw_secret,
            public_key: None,
            key_source: "",
            signature: "",
            fixture: Fixture::formula(&[]),
        }
    }

    /// The same entry for a scheme that signs a URL.
    pub(super) const fn signing(self, url: UrlArg) -> Self {
        Self { url, ..self }
    }

    /// The same entry for a shared-token scheme, which signs no body and
    /// whose token is in the headers `credential_headers`.
    pub(super) const fn shared_token(self, credential_headers: &'static [&'static str]) -> Self {
        Self { signs_body: false, credential_headers, ..self }
    }

    /// The same entry for a signature scheme whose sender may instead send
    /// a shared token in `credential_headers` (Buildkite's token mode): the
    /// token header is a credential, and the entry's example, signed, still
    /// signs the body.
    pub(super) const fn token_mode(self, credential_headers: &'static [&'static str]) -> Self {
        Self { credential_headers, ..self }
    }

    /// The same entry for a sender whose every delivery runs the handler
    /// ([`dedupes`](Self::dedupes) false).
    pub(super) const fn every_delivery_runs(self) -> Self {
        Self { dedupes: false, ..self }
    }

    /// The [`credential_headers`](Self::credential_headers), for the preset's
    /// constructor to declare ([`Provider::credentials_in`]).
    pub(super) fn credentials(&self) -> impl Iterator<Item = http::HeaderName> {
        super::header_names(self.credential_headers)
    }

    /// The same entry with other key material.
    pub(super) const fn keys(self, key: KeyKind, secret: KeyText, public_key: Option<KeyText>) -> Self {
        Self { key, secret, public_key, ..self }
    }

    /// The same entry reading its event key where `source` says, in words
    /// (`the webhook-id header`).
    pub(super) const fn key_from(self, source: &'static str) -> Self {
        Self { key_source: source, ..self }
    }

    /// The same entry signing as `text` says, in one line (the docs' table).
    pub(super) const fn signs(self, text: &'static str) -> Self {
        Self { signature: text, ..self }
    }

    /// The same entry signing deliveries with given key material as `send`
    /// does ([`PresetInfo::sign`]), for a preset whose example is made whole.
    pub(super) const fn sends(self, send: SendFn) -> Self {
        Self { send: Some(send), ..self }
    }

    /// The same entry with its fixture made as `fixture` says.
    pub(super) const fn fixture(self, fixture: Fixture) -> Self {
        Self { fixture, ..self }
    }
}

#[cfg(test)]
impl PresetInfo {
    /// The headers its example sends for `body`, signed with `secret` at
    /// `at` (event key `id`), where the example is a plain HMAC delivery;
    /// `None` for an example made whole.
    pub(crate) fn signed(
        &self,
        secret: &SigningSecret,
        id: &str,
        at: SystemTime,
        body: &[u8],
    ) -> Option<Vec<(&'static str, String)>> {
        match self.source {
            Source::Hmac(facts) => Some(facts.signed_headers(secret, id, at, body)),
            Source::Code { example: ExampleOf::Signed(signed), .. } => {
                Some(signed(secret, &Signing::new(EXAMPLE_SQUARE_URL, id, at, body)))
            }
            Source::Code { example: ExampleOf::Whole(_), .. } => None,
        }
    }
}

impl fmt::Debug for PresetInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PresetInfo")
            .field("name", &self.name)
            .field("hmac", &self.facts().is_some())
            .field("feature", &self.feature)
            .field("url", &self.url)
            .field("key", &self.key)
            .field("replay_window", &self.replay_window)
            .field("signs_body", &self.signs_body)
            .field("dedupes", &self.dedupes)
            .field("credential_headers", &self.credential_headers)
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
        let url = match (self.url, url) {
            (UrlArg::None, _) => "",
            (_, Some(url)) => url,
            (_, None) => return Err(UrlRequired { preset: self.name }),
        };
        Ok(match self.source {
            Source::Hmac(facts) => facts.provider(),
            Source::Code { build, .. } => build(url),
        })
    }

    /// The facts of an HMAC-family preset; `None` for a scheme written as
    /// code (Twilio, Standard Webhooks, the public-key ones, ...).
    pub fn facts(&self) -> Option<&'static HmacPreset> {
        match self.source {
            Source::Hmac(facts) => Some(facts),
            Source::Code { .. } => None,
        }
    }

    /// Every request header it reads (signature, timestamp, key, type), in
    /// lower case, the signature header first: for an HMAC preset, those of
    /// its facts ([`HmacPreset::read_headers`]).
    pub fn headers(&self) -> Vec<&'static str> {
        match self.source {
            Source::Hmac(facts) => facts.read_headers(),
            Source::Code { headers, .. } => headers.to_vec(),
        }
    }

    /// How it signs, in one line: the header, how signatures are written and
    /// the signed bytes (an HMAC preset's from its facts,
    /// [`HmacScheme::describe`](crate::verify::generic::HmacScheme::describe)).
    pub fn signature(&self) -> String {
        match self.source {
            Source::Hmac(facts) => facts.scheme.describe(),
            Source::Code { .. } => self.signature.to_owned(),
        }
    }

    /// Where its provider reads the event key, in words (`the body's id
    /// (JSON)`, `the x-github-delivery header`): `webhook-verify`'s hint
    /// when the key is missing.
    pub fn key_source(&self) -> String {
        match self.source {
            Source::Hmac(facts) => facts.key_source(),
            Source::Code { .. } => self.key_source.to_owned(),
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

    /// A delivery the preset accepts: event key `id` where the scheme carries one in a header, signed at `at`
    /// over `body`, with a fixed test key. The scheme writes `at` in its own unit, truncating what it cannot
    /// carry: whole seconds for most, milliseconds for Front, Webflow, Recurly and HubSpot, RFC 3339 text to the
    /// second for Box, Twitch and Zendesk. Schemes that read the body check what it carries: Linear wants
    /// `webhookTimestamp` (Unix milliseconds) in it. An `id` that cannot be a header value leaves that header
    /// out; a scheme that reads its key from the body (Stripe, Front, most presets) ignores `id`: put the event
    /// id in `body`.
    pub fn example(&self, id: &str, at: SystemTime, body: &[u8]) -> Example {
        let secret = example_secret();
        let (provider, headers) = match self.source {
            Source::Code { example: ExampleOf::Whole(example), .. } => return example(id, at, body),
            Source::Code { build, example: ExampleOf::Signed(signed), .. } => {
                let url = match self.url {
                    UrlArg::None => "",
                    UrlArg::NotificationUrl => EXAMPLE_SQUARE_URL,
                    UrlArg::PublicBaseUrl => EXAMPLE_BASE,
                };
                (build(url), signed(&secret, &Signing::new(EXAMPLE_SQUARE_URL, id, at, body)))
            }
            Source::Hmac(facts) => (facts.provider(), facts.signed_headers(&secret, id, at, body)),
        };
        Example { provider, secrets: vec![secret], parts: example_parts("/", headers), body: body.to_vec() }
    }
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
pub(super) const fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}

/// The example's HMAC secret.
#[allow(dead_code)] // unused without an HMAC preset
pub(super) const EXAMPLE_SECRET: &str = "example-secret-0123456789abcdef";
/// The example's URLs, for presets that sign one.
#[allow(dead_code)]
pub(super) const EXAMPLE_BASE: &str = "https://example.com";
#[allow(dead_code)]
pub(super) const EXAMPLE_SQUARE_URL: &str = "https://example.com/webhooks/square";

#[allow(dead_code)]
pub(super) fn raw_secret(text: &str) -> Result<SigningSecret, KeyTextError> {
    Ok(SigningSecret::from(text))
}

#[allow(dead_code)]
pub(super) fn key_error(e: impl fmt::Display) -> KeyTextError {
    KeyTextError { message: e.to_string() }
}

/// A public-key preset's example: `POST /` with `headers`, verified by
/// `public_key` (its text, as the sender shows it).
#[allow(dead_code)] // unused without a public-key preset
pub(super) fn asymmetric_example(
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
pub(super) fn hmac_example(provider: Provider, body: &[u8], headers: Vec<(&'static str, String)>) -> Example {
    Example {
        provider,
        secrets: vec![SigningSecret::from(EXAMPLE_SECRET)],
        parts: example_parts("/", headers),
        body: body.to_vec(),
    }
}

#[allow(dead_code)]
pub(super) fn example_secret() -> SigningSecret {
    SigningSecret::from(EXAMPLE_SECRET)
}
