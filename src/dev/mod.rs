//! Signed, real-shaped deliveries of every preset, for your tests and
//! `webhook-dev send` (feature `dev`): the request a sender would send,
//! signed with your key as the provider signs it, with the redeliveries,
//! duplicates and faults senders produce.
//!
//! ```
//! use webhook_idempotency::dev::Delivery;
//!
//! // A `payment_intent.succeeded` event with fresh ids, signed now with the
//! // secret your layer is configured with, to the path your router serves.
//! let event = Delivery::new("stripe", "whsec_test_secret")?
//!     .fixture("payment_intent.succeeded")?
//!     .url("http://localhost/webhooks/stripe");
//! let first = event.request()?;
//! // Stripe's retry of the same event: same event id, signed again.
//! let retry = event.request()?;
//! // A copy with one byte of the body changed: your route must refuse it (401).
//! let forged = event.clone().tampered().request()?;
//! // The next event: fresh ids.
//! let next = event.next_event().request()?;
//! # let _ = (first, retry, forged, next);
//! # Ok::<(), webhook_idempotency::dev::DevError>(())
//! ```
//!
//! Send them with `tower::ServiceExt::oneshot` to your router built with the
//! same key: `app.clone().oneshot(event.request()?.map(axum::body::Body::from))`.
//!
//! Each preset signs through the code its verifier is tested against
//! ([`PresetInfo::sign`]). The fixtures ([`fixtures`]) are shaped as the
//! provider documents its deliveries; see the `fixture` module's format
//! (`src/dev/fixture.rs`) to read or add one.

use std::fmt;
use std::time::SystemTime;

use crate::providers::{Example, PresetInfo, SignError, Signing};

mod fixture;

use fixture::EventIds;

/// The names of the fixtures of `preset`, the default first; empty for a
/// preset with none or not compiled in.
pub fn fixtures(preset: &str) -> Vec<String> {
    fixture::file(preset).map(|f| f.fixtures.into_iter().map(|f| f.name).collect()).unwrap_or_default()
}

/// Where the fixtures of `preset` come from (the provider's documented
/// example), if it has any.
pub fn fixture_source(preset: &str) -> Option<String> {
    fixture::file(preset).map(|f| f.source)
}

/// A key of the kind `preset` takes, for tests only: what your test's
/// layer is configured with and [`Delivery::new`] signs with
/// ([`PresetInfo::test_key`]). `None` for an unknown preset or one whose key
/// is the sender's own (AWS SNS).
pub fn test_key(preset: &str) -> Option<&'static str> {
    crate::providers::find(preset)?.test_key()
}

/// The presets with fixtures.
pub fn presets_with_fixtures() -> impl Iterator<Item = &'static str> {
    fixture::presets()
}

/// What a [`Delivery`] refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DevErrorKind {
    /// No preset of that name is compiled in.
    UnknownPreset,
    /// The preset has no fixture of that name.
    UnknownFixture,
    /// The delivery could not be signed: the key, the URL or the body.
    Sign(crate::providers::SignErrorKind),
}

/// A [`Delivery`] could not be built. The message never contains key
/// material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevError {
    kind: DevErrorKind,
    message: String,
}

impl DevError {
    /// What was refused.
    pub fn kind(&self) -> &DevErrorKind {
        &self.kind
    }
}

impl fmt::Display for DevError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DevError {}

impl From<SignError> for DevError {
    fn from(e: SignError) -> Self {
        Self { kind: DevErrorKind::Sign(e.kind()), message: e.to_string() }
    }
}

/// The body a delivery carries.
#[derive(Debug, Clone)]
enum Body {
    /// A fixture, rendered for the event.
    Fixture(fixture::Fixture),
    /// Your own bytes, sent byte for byte.
    Raw(Vec<u8>),
}

/// One event of a preset, as its sender delivers it: signed anew at each
/// [`request`](Self::request), with the same event ids until
/// [`next_event`](Self::next_event). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Delivery {
    preset: &'static PresetInfo,
    key: String,
    body: Body,
    ids: EventIds,
    url: String,
    /// The URL the sender signs, where it is not [`url`](Self::url).
    signed_url: Option<String>,
    /// Headers added by [`header`](Self::header).
    headers: Vec<(String, String)>,
    at: Option<SystemTime>,
    tampered: bool,
    rotated_from: Option<String>,
    /// The seed of [`seeded`](Self::seeded), if any: the ids are drawn
    /// from it, the preset and the body.
    seed: Option<String>,
}

impl Delivery {
    /// An event of `preset` with its default fixture (the first of
    /// [`fixtures`]; a JSON body with fresh ids for a preset without one),
    /// to be signed with `key` (the text [`PresetInfo::sign`] takes: your
    /// signing secret; a public-key scheme's private key), sent to
    /// `http://localhost/webhooks/<preset>` until [`url`](Self::url) says
    /// otherwise.
    ///
    /// # Errors
    /// [`DevErrorKind::UnknownPreset`] when no preset of that name is
    /// compiled in (each is behind its Cargo feature).
    pub fn new(preset: &str, key: impl Into<String>) -> Result<Self, DevError> {
        let info = crate::providers::find(preset).ok_or_else(|| DevError {
            kind: DevErrorKind::UnknownPreset,
            message: format!(
                "no preset `{preset}` (compiled in: {})",
                crate::providers::all().iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
            ),
        })?;
        let body = match fixture::file(info.name).and_then(|f| f.fixtures.into_iter().next()) {
            Some(first) => Body::Fixture(first),
            None => Body::Fixture(generic()),
        };
        Ok(Self {
            preset: info,
            key: key.into(),
            body,
            ids: EventIds::fresh(),
            url: format!("http://localhost/webhooks/{}", info.name),
            signed_url: None,
            headers: Vec::new(),
            at: None,
            tampered: false,
            rotated_from: None,
            seed: None,
        })
    }

    /// The same event with the preset's fixture `name` as its body.
    ///
    /// # Errors
    /// [`DevErrorKind::UnknownFixture`], naming the fixtures there are.
    pub fn fixture(mut self, name: &str) -> Result<Self, DevError> {
        let file = fixture::file(self.preset.name);
        let found = file.as_ref().and_then(|f| f.fixtures.iter().find(|f| f.name == name).cloned());
        let Some(found) = found else {
            return Err(DevError {
                kind: DevErrorKind::UnknownFixture,
                message: format!(
                    "{} has no fixture `{name}` (it has: {})",
                    self.preset.name,
                    fixtures(self.preset.name).join(", ")
                ),
            });
        };
        self.body = Body::Fixture(found);
        Ok(self.reseeded())
    }

    /// The same event with `body` as its body, sent byte for byte (a
    /// delivery you captured): the schemes that sign inside the body
    /// (Mailgun, Adyen) write their signature into it. Sent as
    /// `application/x-www-form-urlencoded` when it reads as a form and not
    /// as JSON, else as `application/json`.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Body::Raw(body.into());
        self.reseeded()
    }

    /// Sent to `url`, an absolute `http` or `https` URL: its path and query
    /// are the request's target, and the schemes that sign a URL (Square,
    /// Twilio, HubSpot, Trello, Mandrill) sign it.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = url.into();
        self
    }

    /// Signed for `url` while sent to [`url`](Self::url)'s address: a
    /// receiver behind a tunnel or a proxy is configured with its public URL,
    /// which the URL-signing schemes (Twilio, Square, HubSpot, Trello,
    /// Mandrill) sign. The request's path and query are this URL's.
    pub fn signed_url(mut self, url: impl Into<String>) -> Self {
        self.signed_url = Some(url.into());
        self
    }

    /// With one more header, `name: value`, as the sender sends it (an
    /// event-type header beside a captured [`body`](Self::body)); it
    /// replaces the fixture's header of that name, never a header the
    /// scheme signs or writes.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into().to_ascii_lowercase(), value.into()));
        self
    }

    /// Signed at `at` instead of the time of each [`request`](Self::request)
    /// (a stale or future timestamp: `SystemTime::now() - 3600 s`).
    pub fn at(mut self, at: SystemTime) -> Self {
        self.at = Some(at);
        self
    }

    /// With one byte changed after signing: in the body for a scheme that
    /// signs it (a letter or digit near the middle, so the body stays
    /// well-formed), in the credential header for a shared-token scheme
    /// (GitLab, Telegram, Postmark). A receiver must refuse it.
    pub fn tampered(mut self) -> Self {
        self.tampered = true;
        self
    }

    /// Signed during a rotation of the signing secret from `old_key` to this
    /// delivery's key, as senders do in the overlap: where the scheme
    /// carries several signatures in one header (Stripe's `v1=` entries,
    /// Standard Webhooks' and Svix's space-separated list, the presets whose
    /// scheme has a [`separator`](crate::verify::generic::HmacScheme::separator)),
    /// the header holds the signatures of both keys; elsewhere the delivery
    /// is signed with `old_key` alone, which a receiver holding both keys
    /// must accept.
    pub fn rotated_from(mut self, old_key: impl Into<String>) -> Self {
        self.rotated_from = Some(old_key.into());
        self
    }

    /// The sender's next event: the same fixture with fresh ids, untampered.
    pub fn next_event(&self) -> Self {
        Self { ids: EventIds::fresh(), tampered: false, seed: None, ..self.clone() }
    }

    /// The next event about the same object (`{{object}}` kept, `{{seq}}`
    /// one higher, fresh event ids): send it before this one for an
    /// out-of-order pair.
    pub fn next_of_object(&self) -> Self {
        Self { ids: self.ids.next_of_object(), tampered: false, seed: None, ..self.clone() }
    }

    /// The same event with ids drawn from `seed` instead of at random: the
    /// same seed and fixture give the same event ids in every run (a body
    /// that carries the event's time still differs between runs).
    pub fn seeded(mut self, seed: &str) -> Self {
        self.seed = Some(seed.to_owned());
        self.reseeded()
    }

    /// The ids drawn anew from the seed, the preset and the body (a
    /// fixture by name, your own bytes by their SHA-256), when seeded: one
    /// seed used with two fixtures gives two events, not one event twice.
    fn reseeded(mut self) -> Self {
        use sha2::Digest as _;
        if let Some(seed) = &self.seed {
            let body = match &self.body {
                Body::Fixture(f) => format!("fixture {}", f.name),
                Body::Raw(bytes) => format!("body {}", hex::encode(sha2::Sha256::digest(bytes))),
            };
            self.ids = EventIds::seeded(&format!("{}\n{body}\n{seed}", self.preset.name));
        }
        self
    }

    /// The URL's `scheme://host[:port]`.
    ///
    /// # Errors
    /// [`DevErrorKind::Sign`] when the URL is not an absolute `http` or
    /// `https` URL.
    pub fn origin(&self) -> Result<String, DevError> {
        Ok(Signing::new(&self.url, "", SystemTime::UNIX_EPOCH, b"").origin()?)
    }

    /// The preset's name.
    pub fn preset(&self) -> &'static str {
        self.preset.name
    }

    /// The id the sender writes in a header of its own for this event
    /// ([`Signing::id`]).
    pub fn header_id(&self) -> String {
        match &self.body {
            Body::Fixture(f) => fixture::render(&f.id, &self.ids),
            Body::Raw(_) => self.ids.uuid.clone(),
        }
    }

    /// The delivery signed now (or at [`at`](Self::at)): the request head,
    /// the body as sent, the provider as the receiver builds it for the URL
    /// and the key material it verifies with.
    ///
    /// # Errors
    /// [`DevErrorKind::Sign`]: the key is not in the preset's format, the
    /// URL is not absolute, or the preset's key is the sender's own.
    pub fn signed(&self) -> Result<Example, DevError> {
        let at = self.at.unwrap_or_else(SystemTime::now);
        let (body, extra) = match &self.body {
            Body::Fixture(f) => {
                let mut headers = vec![("content-type".to_owned(), f.content_type().to_owned())];
                let ids = EventIds { sent: at, ..self.ids.clone() };
                headers.extend(f.headers.iter().map(|(k, v)| (k.clone(), fixture::render(v, &ids))));
                (f.body(&ids), headers)
            }
            Body::Raw(bytes) => (bytes.clone(), vec![("content-type".to_owned(), raw_content_type(bytes).to_owned())]),
        };
        let (mut extra, id) = (extra, self.header_id());
        extra.retain(|(name, _)| !self.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)));
        extra.extend(self.headers.iter().cloned());
        let signing = Signing::new(self.signed_url.as_deref().unwrap_or(&self.url), &id, at, &body);
        let mut signed = self.preset.sign(&self.key, &signing)?;
        if let Some(old) = &self.rotated_from {
            let by_old = self.preset.sign(old, &signing)?;
            signed = self.merge_rotated(signed, by_old);
        }
        for (name, value) in extra {
            let (Ok(name), Ok(value)) = (http::HeaderName::try_from(name), http::HeaderValue::try_from(value)) else {
                continue;
            };
            if !signed.parts.headers.contains_key(&name) {
                signed.parts.headers.insert(name, value);
            }
        }
        if self.tampered {
            self.tamper(&mut signed, &signing);
        }
        Ok(signed)
    }

    /// The request a sender would send, signed now (or at
    /// [`at`](Self::at)), with a `host` header from the URL.
    ///
    /// # Errors
    /// As [`signed`](Self::signed).
    pub fn request(&self) -> Result<http::Request<bytes::Bytes>, DevError> {
        let signed = self.signed()?;
        let mut parts = signed.parts;
        if let Some(host) = self.url.parse::<http::Uri>().ok().and_then(|u| u.authority().cloned()) {
            if let Ok(value) = http::HeaderValue::from_str(host.as_str()) {
                parts.headers.insert(http::header::HOST, value);
            }
        }
        Ok(http::Request::from_parts(parts, bytes::Bytes::from(signed.body)))
    }

    /// The key text the receiver configures to verify these deliveries:
    /// the signing secret as given, or a public-key scheme's public key.
    ///
    /// # Errors
    /// As [`signed`](Self::signed).
    pub fn receiver_key(&self) -> Result<String, DevError> {
        let signed = self.signed()?;
        Ok(signed.secrets.first().map(|s| String::from_utf8_lossy(s.expose()).into_owned()).unwrap_or_default())
    }

    /// The delivery of a rotation (see [`rotated_from`](Self::rotated_from)):
    /// `new`'s signature header with `old`'s signatures added where the
    /// scheme carries several, else `old`. Verified by both keys.
    fn merge_rotated(&self, mut new: Example, old: Example) -> Example {
        let (header, separator) = match self.preset.facts() {
            Some(facts) => (facts.scheme.header, facts.scheme.separator),
            None if ["standard-webhooks", "svix"].contains(&self.preset.name) => (self.preset.headers()[2], Some(' ')),
            None => ("", None),
        };
        let text = |ex: &Example| ex.parts.headers.get(header).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (Some(sep), Some(mine), Some(theirs)) = (separator, text(&new), text(&old)) else {
            let mut old = old;
            old.secrets.extend(new.secrets);
            return old;
        };
        let mut parts: Vec<&str> = mine.split(sep).collect();
        parts.extend(theirs.split(sep).filter(|p| !mine.split(sep).any(|m| m == *p)));
        let joined = parts.join(&sep.to_string());
        if let Ok(value) = http::HeaderValue::from_str(&joined) {
            new.parts.headers.insert(header, value);
        }
        new.secrets.extend(old.secrets);
        new
    }

    /// Changes one byte of what authenticates `signed` (see
    /// [`tampered`](Self::tampered)). A scheme that signs inside the body
    /// (Mailgun, Adyen) covers only some of its fields: there the byte
    /// changed is one of the signature's own, found where the same delivery
    /// signed with another key differs.
    fn tamper(&self, signed: &mut Example, signing: &Signing<'_>) {
        if self.preset.signs_body {
            let other_key = other_key(&self.key);
            if let Ok(other) = self.preset.sign(&other_key, signing) {
                let differs = signed.body.iter().zip(&other.body).position(|(a, b)| a != b);
                if let (true, Some(i)) = (other.body.len() == signed.body.len(), differs) {
                    // A signature's character: a letter or digit becomes another, `+`, `/` or `=` an `A`.
                    if signed.body[i].is_ascii_alphanumeric() {
                        flip_middle(&mut signed.body[i..=i]);
                    } else {
                        signed.body[i] = b'A';
                    }
                    return;
                }
            }
            tamper_body(&mut signed.body);
            return;
        }
        for name in self.preset.credential_headers {
            if let Some(value) = signed.parts.headers.get(*name) {
                let mut bytes = value.as_bytes().to_vec();
                change_one_byte(&mut bytes);
                if let Ok(value) = http::HeaderValue::from_bytes(&bytes) {
                    signed.parts.headers.insert(*name, value);
                }
                return;
            }
        }
        tamper_body(&mut signed.body);
    }
}

/// `body` with one byte changed ([`change_one_byte`]); an empty body gets
/// one byte, the only change it can have.
fn tamper_body(body: &mut Vec<u8>) {
    if body.is_empty() {
        body.push(b'0');
    } else {
        change_one_byte(body);
    }
}

/// Changes one byte of `bytes` (not empty): the letter or digit nearest the
/// middle ([`flip_middle`]), else, where there is none (`{}`, binary), the
/// middle byte's lowest bit.
fn change_one_byte(bytes: &mut [u8]) {
    if !flip_middle(bytes) {
        if let Some(byte) = bytes.get_mut(bytes.len() / 2) {
            *byte ^= 1;
        }
    }
}

/// `key` with its last letter or digit changed to another of its kind: a
/// key of the same form (hexadecimal stays hexadecimal).
fn other_key(key: &str) -> String {
    let mut bytes = key.as_bytes().to_vec();
    if let Some(i) = bytes.iter().rposition(u8::is_ascii_alphanumeric) {
        bytes[i] = match bytes[i] {
            b'0' => b'1',
            b'a' | b'A' => bytes[i] + 1,
            b => {
                if b.is_ascii_digit() {
                    b'0'
                } else {
                    b - 1
                }
            }
        };
    }
    String::from_utf8(bytes).unwrap_or_default()
}

/// Replaces the letter or digit nearest the middle of `bytes` with another
/// of its kind; whether there was one.
fn flip_middle(bytes: &mut [u8]) -> bool {
    let mid = bytes.len() / 2;
    let nearest = (0..bytes.len()).filter(|&i| bytes[i].is_ascii_alphanumeric()).min_by_key(|&i| i.abs_diff(mid));
    if let Some(i) = nearest {
        bytes[i] = match bytes[i] {
            b'9' => b'0',
            b'z' => b'a',
            b'Z' => b'A',
            b => b + 1,
        };
    }
    nearest.is_some()
}

/// The content type of your own bytes: form-encoded when they read as
/// `name=value&...` and not as JSON (a captured Slack slash command, a
/// Twilio callback), else JSON.
fn raw_content_type(bytes: &[u8]) -> &'static str {
    let form_byte = |b: &u8| b.is_ascii_alphanumeric() || b"=&%+-_.*~[]:,;/@!$'()".contains(b);
    let form = bytes.contains(&b'=') && bytes.iter().all(form_byte);
    if form && serde_json::from_slice::<serde_json::Value>(bytes).is_err() {
        "application/x-www-form-urlencoded"
    } else {
        "application/json"
    }
}

/// The body of a preset without fixtures: an event most presets keyed by a
/// JSON field can read.
fn generic() -> fixture::Fixture {
    fixture::Fixture {
        name: "event".to_owned(),
        id: "{{uuid}}".to_owned(),
        headers: Default::default(),
        body: Some(serde_json::json!({
            "id": "evt_{{id}}", "event_id": "evt_{{id}}", "type": "thing.created", "created_at": "{{now_rfc3339}}",
            "data": {"id": "obj_{{object}}", "version": "{{seq}}"},
        })),
        form: None,
    }
}

#[cfg(test)]
mod tests;
