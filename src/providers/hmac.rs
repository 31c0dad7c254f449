//! [`HmacPreset`]: an HMAC-family preset as one constant of facts (its name,
//! its [`HmacScheme`], where its event key lives, the headers it reads, how
//! long its provider resends), read by the one generic
//! [`HmacVerifier`](crate::verify::generic::HmacVerifier), as Convoy's
//! verifiers read a struct of header, hash and encoding.

use std::fmt;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::HeaderName;

use crate::key::{DerivedKey, EventIdentity, HeaderKey, JsonPointerKey, KeyError, KeyExtractor};
use crate::providers::{Challenge, Provider};
use crate::verify::generic::{HmacScheme, HmacVerifier};
use crate::verify::{Delivery, SigningSecret};

/// One field of a request that identifies its event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyField {
    /// The JSON body's value at this JSON Pointer (RFC 6901).
    Json(&'static str),
    /// This header's value (lower case).
    Header(&'static str),
    /// The SHA-256 of the whole body in canonical JSON (RFC 8785): for a
    /// sender that sends no event id.
    CanonicalBody,
}

/// Where a preset reads the event key (the idempotency key) and the event
/// type.
#[derive(Clone, Copy)]
pub enum EventKey {
    /// Both from the JSON body, by JSON Pointer (RFC 6901):
    /// [`JsonPointerKey`].
    Json {
        /// The key's pointer (`/id`).
        id: &'static str,
        /// The type's pointer (`/type`), if the sender says it.
        event_type: Option<&'static str>,
    },
    /// Both from headers (the Git forges' delivery ids): [`HeaderKey`].
    Header {
        /// The key's header (lower case).
        id: &'static str,
        /// The type's header (lower case).
        event_type: &'static str,
    },
    /// A `sha256:` digest of fields that identify the event, for a sender
    /// without an event id: [`DerivedKey`].
    Derived {
        /// The fields, in order.
        fields: &'static [KeyField],
        /// Where the type is read, if the sender says it.
        event_type: Option<KeyField>,
    },
    /// The preset module's own extractor.
    Own {
        /// The extractor.
        extractor: &'static dyn KeyExtractor,
        /// Where it reads the key, in words (`webhook-verify`'s hint).
        reads: &'static str,
        /// The header carrying the event id, if it reads one: an example
        /// delivery sends its id there.
        id_header: Option<&'static str>,
    },
}

impl fmt::Debug for EventKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// `fields` as a [`DerivedKey`] adds them.
fn derive(fields: &[KeyField], event_type: Option<KeyField>) -> DerivedKey {
    let name = |h: &'static str| HeaderName::from_static(h);
    let key = fields.iter().fold(DerivedKey::new(), |key, field| match *field {
        KeyField::Json(pointer) => key.json(pointer),
        KeyField::Header(header) => key.header(name(header)),
        KeyField::CanonicalBody => key.canonical_body(),
    });
    match event_type {
        Some(KeyField::Json(pointer)) => key.event_type_json(pointer),
        Some(KeyField::Header(header)) => key.event_type_header(name(header)),
        Some(KeyField::CanonicalBody) | None => key,
    }
}

/// The extractor an [`EventKey`] describes.
pub(super) enum Extractor {
    Json(JsonPointerKey),
    Header(HeaderKey),
    Derived(DerivedKey),
    Own(&'static dyn KeyExtractor),
}

impl KeyExtractor for Extractor {
    fn extract(&self, parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        match self {
            Self::Json(key) => key.extract(parts, body),
            Self::Header(key) => key.extract(parts, body),
            Self::Derived(key) => key.extract(parts, body),
            Self::Own(key) => key.extract(parts, body),
        }
    }
}

/// A module's own handshake answer, borrowed for the program's life.
struct BorrowedChallenge(&'static dyn Challenge);

impl Challenge for BorrowedChallenge {
    fn respond(&self, delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
        self.0.respond(delivery)
    }
}

impl EventKey {
    /// The extractor these facts describe.
    pub(super) fn extractor(&self) -> Extractor {
        let name = |h: &'static str| HeaderName::from_static(h);
        match *self {
            Self::Json { id, event_type: Some(t) } => Extractor::Json(JsonPointerKey::new(id).event_type(t)),
            Self::Json { id, event_type: None } => Extractor::Json(JsonPointerKey::new(id)),
            Self::Header { id, event_type } => Extractor::Header(HeaderKey::new(name(id)).event_type(name(event_type))),
            Self::Derived { fields, event_type } => Extractor::Derived(derive(fields, event_type)),
            Self::Own { extractor, .. } => Extractor::Own(extractor),
        }
    }

    /// The headers it reads.
    fn headers(&self) -> Vec<&'static str> {
        let header = |f: &KeyField| match f {
            KeyField::Header(h) => Some(*h),
            _ => None,
        };
        match self {
            Self::Json { .. } => vec![],
            Self::Header { id, event_type } => vec![id, event_type],
            Self::Derived { fields, event_type } => fields.iter().chain(event_type).filter_map(header).collect(),
            Self::Own { id_header, .. } => id_header.iter().copied().collect(),
        }
    }

    /// The header an example delivery carries its event id in, if any.
    fn id_header(&self) -> Option<&'static str> {
        match *self {
            Self::Header { id, .. } => Some(id),
            Self::Own { id_header, .. } => id_header,
            Self::Json { .. } | Self::Derived { .. } => None,
        }
    }

    /// Where the key is read, in words: `the body's event.id (JSON)`, `the
    /// x-github-delivery header`, ...
    pub fn describe(&self) -> String {
        match self {
            Self::Json { id, .. } => format!("the body's {} (JSON)", id.trim_start_matches('/').replace('/', ".")),
            Self::Header { id, .. } => format!("the {id} header"),
            Self::Derived { fields: [KeyField::CanonicalBody], .. } => {
                "a digest of the canonical JSON body (a derived key)".to_owned()
            }
            Self::Derived { .. } => "fields of the JSON body (a derived key)".to_owned(),
            Self::Own { reads, .. } => (*reads).to_owned(),
        }
    }
}

/// An HMAC-family preset, as data: everything that tells it from another,
/// read by code written once (the verifier, the provider, the registry's
/// entry and example, `webhook-verify`'s hints). Each such preset module
/// states one, `FACTS`, with the docs of the provider's pages.
///
/// ```
/// # #[cfg(feature = "stripe")] {
/// use std::time::Duration;
/// use webhook_idempotency::providers::stripe;
/// use webhook_idempotency::Provider;
///
/// // The preset at another tolerance than its facts' 300 seconds:
/// let provider = Provider::stripe().verifier(stripe::FACTS.verifier().tolerance(Duration::from_secs(600)));
/// assert_eq!(provider.name(), stripe::FACTS.name);
/// assert_eq!(stripe::FACTS.replay_window, Duration::from_secs(30 * 86_400));
/// # }
/// ```
#[derive(Clone)]
pub struct HmacPreset {
    /// The name: the claim's `provider` column, the `--provider` value of
    /// `webhook-verify`, and the Cargo feature.
    pub name: &'static str,
    /// The signature scheme.
    pub scheme: HmacScheme,
    /// Where the event key and type are read.
    pub event_key: EventKey,
    /// The other headers it reads (besides the scheme's and the key's):
    /// inbox mode stores them with a delivery.
    pub headers: &'static [&'static str],
    /// How long the provider can send one event again, automatic retries
    /// and manual redelivery both: retention keeps the preset's keys at
    /// least this long.
    pub replay_window: Duration,
    /// Why this window: the provider's retry and redelivery pages.
    pub replay_evidence: &'static str,
    /// The answer to the provider's endpoint handshake, if it makes one.
    pub challenge: Option<&'static dyn Challenge>,
    /// Constant headers an example delivery carries besides the signed ones
    /// (Twitch's message type).
    pub(crate) example_headers: &'static [(&'static str, &'static str)],
    /// Where its recorded vectors come from.
    pub(crate) fixture: super::Fixture,
}

impl fmt::Debug for HmacPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HmacPreset")
            .field("name", &self.name)
            .field("scheme", &self.scheme)
            .field("event_key", &self.event_key)
            .field("headers", &self.headers)
            .field("replay_window", &self.replay_window)
            .finish_non_exhaustive()
    }
}

impl HmacPreset {
    /// The preset's verifier, at its default tolerance; `.tolerance(d)` sets
    /// another.
    ///
    /// # Panics
    /// When the scheme is not a valid one, which the crate's presets are
    /// (`providers::tests::every_hmac_preset_builds`): only a copy changed
    /// by hand can be.
    pub fn verifier(&self) -> HmacVerifier {
        HmacVerifier::try_from(&self.scheme).unwrap_or_else(|e| panic!("the {} scheme: {e}", self.name))
    }

    /// The preset's [`Provider`]: `Provider::<name>()`.
    pub fn provider(&self) -> Provider {
        let mut provider = Provider::new(self.name, self.verifier(), self.event_key.extractor());
        if let Some(challenge) = self.challenge {
            provider = provider.challenge(BorrowedChallenge(challenge));
        }
        provider
    }

    /// Every request header it reads, in lower case: the signature
    /// header(s), the timestamp and id headers, the key's headers and
    /// [`HmacPreset::headers`], each once, the signature header first.
    pub fn read_headers(&self) -> Vec<&'static str> {
        let s = &self.scheme;
        let scheme = [Some(s.header), s.also_header, s.timestamp_header, s.id_header].into_iter().flatten();
        let all = scheme.chain(self.event_key.headers()).chain(self.headers.iter().copied());
        let mut headers: Vec<&'static str> = Vec::new();
        for header in all {
            if !headers.contains(&header) {
                headers.push(header);
            }
        }
        headers
    }

    /// The signature header the sender sends for `body` at `timestamp`
    /// (Unix seconds, written in the scheme's unit; ignored by a scheme that
    /// signs no time: pass 0), signed with `secret`: for tests and fixtures
    /// (`stripe::FACTS.sign(&secret, now, body)`). A scheme that signs a
    /// message id (Twitch) signs the empty one here; see
    /// [`HmacVerifier::sign`].
    pub fn sign(&self, secret: &SigningSecret, timestamp: u64, body: &[u8]) -> String {
        self.verifier().sign(secret, "", timestamp, body)
    }

    /// Where the event key is read, in words.
    pub fn key_source(&self) -> String {
        self.event_key.describe()
    }

    /// The headers a delivery of `body` sends, signed with `secret` at `at`
    /// (written in the scheme's unit), with the event id `id` in its header
    /// where the preset reads one there.
    pub(crate) fn signed_headers(
        &self,
        secret: &SigningSecret,
        id: &str,
        at: SystemTime,
        body: &[u8],
    ) -> Vec<(&'static str, String)> {
        let (s, verifier) = (&self.scheme, self.verifier());
        let ts = verifier.timestamp_text(at);
        let mut headers = vec![(s.header, verifier.sign_text(secret, id, &ts, body))];
        headers.extend(s.timestamp_header.map(|h| (h, ts)));
        headers.extend(s.id_header.map(|h| (h, id.to_owned())));
        if let Some(header) = self.event_key.id_header().filter(|h| !headers.iter().any(|(n, _)| n == h)) {
            headers.push((header, id.to_owned()));
        }
        headers.extend(self.example_headers.iter().map(|(h, v)| (*h, (*v).to_owned())));
        headers
    }
}
