//! Standard Webhooks and Svix: the `webhook-signature` (or `svix-signature`)
//! header.
//!
//! Scheme (Standard Webhooks specification, "Verifying webhook
//! authenticity",
//! <https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md>;
//! Svix, "Verifying Webhooks Manually",
//! <https://docs.svix.com/receiving/verifying-payloads/how-manual>):
//! - three headers: `webhook-id` (the message id), `webhook-timestamp` (Unix
//!   seconds) and `webhook-signature`. Svix sends the same scheme as
//!   `svix-id`, `svix-timestamp` and `svix-signature`.
//! - the signed content is `{id}.{timestamp}.{raw body}`, the two header
//!   values as sent.
//! - `webhook-signature` is a space-separated list of `version,signature`
//!   entries; several appear while keys are rotated and any one may match.
//!   `v1` is base64 HMAC-SHA256, `v1a` is base64 Ed25519; entries of other
//!   versions are ignored.
//! - symmetric secrets are shown as `whsec_` + base64 of the key; the HMAC key
//!   is the decoded bytes. Ed25519 public keys are shown as `whpk_` + base64
//!   of the 32-byte key (private keys, `whsk_`, stay with the sender).
//! - the timestamp must be within five minutes of now in both directions (the
//!   official libraries' fixed tolerance); here [`DEFAULT_TOLERANCE`],
//!   configurable with [`StandardWebhooksVerifier::tolerance`].
//!
//! **Secrets.** Each configured [`SigningSecret`] is read by its prefix, as
//! the specification intends ("a unique and consistent secret format allows
//! implementations to correctly use the correct scheme"), and the prefix is
//! required:
//! - `whsec_<base64>`: an HMAC key of [`MIN_SECRET_BYTES`] to
//!   [`MAX_SECRET_BYTES`] bytes (the specification's "At least 24 bytes
//!   (192 bits, 512 maximum)"), checked against the `v1` entries. This is
//!   what [`secret`] returns; [`SigningSecret::from`] of the dashboard's
//!   `whsec_...` text is the same thing. Padding is optional, as in the
//!   official libraries.
//! - `whpk_<base64>`: an Ed25519 public key, checked against the `v1a`
//!   entries only. This is what [`public_key`] returns. A public key is never
//!   used as an HMAC key: anyone can read it, so a `v1` signature made with
//!   it would prove nothing.
//! - unprefixed base64 of 24 to 64 bytes: a symmetric secret, as the official
//!   libraries read it (`standardwebhooks` on npm and PyPI and its Rust
//!   crate, `svix`: each strips an optional `whsec_`), **except** exactly 32
//!   bytes, the size of an Ed25519 public key: a public key pasted without
//!   its `whpk_` would, as an HMAC key, let anyone holding it sign `v1`
//!   deliveries, so a 32-byte secret needs its `whsec_`. The libraries'
//!   laxer readings (npm drops a stray trailing character, PyPI discards
//!   non-base64 characters) are not copied: whitespace and other characters
//!   are refused.
//! - `whsk_...` (the sender's private key) and anything else are refused.
//!   Raw key bytes are not accepted.
//!
//! [`StandardWebhooksVerifier`]'s [`Verifier::check_secrets`] enforces this
//! when the layer is built (fixed secrets) and for every endpoint a resolver
//! returns, with a [`KeyMaterialErrorKind`](crate::verify::KeyMaterialErrorKind) per case; the verifier itself
//! skips a secret that fails it, like one that does not match. Each secret
//! is decoded once, in constant time (`base64ct`), and the decoded key is
//! cached on the secret ([`SigningSecret::parsed`]), never decoded per
//! delivery.
//!
//! **Presets.** [`Provider::standard_webhooks`](crate::providers::Provider::standard_webhooks) (`standard-webhooks`) reads the `webhook-*`
//! headers only. [`Provider::svix`](crate::providers::Provider::svix) (`svix`) reads each `svix-*` header and
//! falls back to its `webhook-*` counterpart when absent, as the Svix
//! libraries do, so it also accepts Svix's unbranded headers.
//!
//! The event key is the message id header (`webhook-id`, or `svix-id`), which
//! the specification defines as the same on every retry of a message and
//! meant as the idempotency key; the event type is the body's top-level
//! `type` when the body is a JSON object with a string `type` (the
//! specification's payload structure), and absent otherwise.
//!
//! At most [`MAX_ED25519_SIGNATURES`] `v1a` entries are accepted per
//! delivery (a header with more is malformed), so a long header cannot make
//! one request cost thousands of Ed25519 verifications. `v1` entries are
//! cheap (one HMAC per secret) and not limited beyond the header's size.
//! Ed25519 needs the signed content in one buffer, so it is assembled (body
//! copied once) only when a `v1a` entry and a public key are both present.
//!
//! **Signed / not signed** (the specification's "Signature scheme",
//! <https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md>):
//! the message id header, the timestamp header and the raw body are signed,
//! so the event key (`webhook-id` / `svix-id`) and the event type (the body's
//! `type`) are signed. Other headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! payload's own version or `timestamp` (the spec's envelope field, RFC 3339);
//! not the `webhook-timestamp` header, which is the time of sending and changes
//! on a retry.

use std::time::Duration;

use base64::engine::general_purpose;
use base64::Engine as _;
use ed25519_dalek::Signature;

mod key;

use crate::providers::Provider;

use key::{classify, hint, Key};
pub use key::{
    public_key, public_key_of, secret, sign, sign_ed25519, SecretError, SecretErrorKind, MAX_SECRET_BYTES,
    MIN_SECRET_BYTES,
};

use crate::key::{EventIdentity, KeyError, KeyErrorKind};
use crate::verify::{
    any_matches, check_key_material, check_signature_header_size, check_verifications, count_entry, header_values,
    hmac_sha256, parse_unix_seconds, single_header, Delivery, KeyMaterialError, SigningSecret, Verifier, VerifyError,
    VerifyErrorKind,
};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "standard-webhooks";

/// The Svix preset's name.
pub const SVIX_NAME: &str = "svix";
/// How long a Standard Webhooks or Svix message can be sent again: 30 days.
/// Both presets, [`NAME`] and [`SVIX_NAME`], use it.
///
/// The Standard Webhooks specification leaves retries to the sender. Svix,
/// its reference sender, attempts a message immediately, then 5 seconds, 5
/// minutes, 30 minutes, 2, 5, 10 and 10 hours after each failure, about 27.6
/// hours in all (Svix, "Retry Schedule", <https://docs.svix.com/retries>);
/// its App Portal also resends one message, or recovers every failed message
/// since a chosen time, on demand and with the same message id (Svix,
/// "Replaying Messages",
/// <https://docs.svix.com/receiving/using-app-portal/replaying-messages>).
/// How far back a recovery reaches is bounded by the sender's message
/// retention, which those pages do not fix, so the window is the crate's
/// default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW); state a longer one
/// with [`RetentionBuilder::window`](crate::store::retention::RetentionBuilder::window)
/// if your sender keeps and recovers older messages.
pub const REPLAY_WINDOW: std::time::Duration = super::DEFAULT_REPLAY_WINDOW;

/// The message id header (the event key).
pub const ID_HEADER: &str = "webhook-id";
/// The signed timestamp header (Unix seconds).
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// The signature list header.
pub const SIGNATURE_HEADER: &str = "webhook-signature";
/// Svix's name for [`ID_HEADER`].
pub const SVIX_ID_HEADER: &str = "svix-id";
/// Svix's name for [`TIMESTAMP_HEADER`].
pub const SVIX_TIMESTAMP_HEADER: &str = "svix-timestamp";
/// Svix's name for [`SIGNATURE_HEADER`].
pub const SVIX_SIGNATURE_HEADER: &str = "svix-signature";

/// The specification's tolerance: five minutes.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// The most `v1a` (Ed25519) entries one delivery may carry: 8. The cost of a
/// delivery is also capped across keys: its `v1a` signatures times the
/// endpoint's `whpk_` keys may not exceed
/// [`MAX_PUBLIC_KEY_VERIFICATIONS`](crate::verify::MAX_PUBLIC_KEY_VERIFICATIONS)
/// (8), and the whole header holds at most
/// [`MAX_SIGNATURE_ENTRIES`](crate::verify::MAX_SIGNATURE_ENTRIES) entries in
/// [`MAX_SIGNATURE_HEADER_BYTES`](crate::verify::MAX_SIGNATURE_HEADER_BYTES);
/// past any of them the delivery is
/// [`MalformedHeader`](crate::verify::VerifyErrorKind::MalformedHeader), before
/// any cryptography. The timestamp is checked before the signatures.
pub const MAX_ED25519_SIGNATURES: usize = 8;

/// Which header names a verifier reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Names {
    /// `webhook-*` only.
    Standard,
    /// `svix-*`, each falling back to `webhook-*`.
    Svix,
}

impl Names {
    /// The id, timestamp and signature header names, in the order tried.
    fn id(self) -> &'static [&'static str] {
        match self {
            Self::Standard => &[ID_HEADER],
            Self::Svix => &[SVIX_ID_HEADER, ID_HEADER],
        }
    }

    fn timestamp(self) -> &'static [&'static str] {
        match self {
            Self::Standard => &[TIMESTAMP_HEADER],
            Self::Svix => &[SVIX_TIMESTAMP_HEADER, TIMESTAMP_HEADER],
        }
    }

    fn signature(self) -> &'static [&'static str] {
        match self {
            Self::Standard => &[SIGNATURE_HEADER],
            Self::Svix => &[SVIX_SIGNATURE_HEADER, SIGNATURE_HEADER],
        }
    }
}

/// The first of `names` present in the request.
fn present(parts: &http::request::Parts, names: &'static [&'static str]) -> Option<&'static str> {
    names.iter().copied().find(|n| parts.headers.contains_key(*n))
}

/// Verifies Standard Webhooks signatures (`v1` HMAC-SHA256 and `v1a`
/// Ed25519).
#[derive(Debug, Clone)]
#[must_use]
pub struct StandardWebhooksVerifier {
    names: Names,
    tolerance: Duration,
}

impl Default for StandardWebhooksVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl StandardWebhooksVerifier {
    /// A verifier of the `webhook-*` headers with the default tolerance of
    /// five minutes.
    pub fn new() -> Self {
        Self { names: Names::Standard, tolerance: DEFAULT_TOLERANCE }
    }

    /// A verifier of Svix's `svix-*` headers, each falling back to its
    /// `webhook-*` counterpart, with the default tolerance.
    pub fn svix() -> Self {
        Self { names: Names::Svix, tolerance: DEFAULT_TOLERANCE }
    }

    setters! {
        /// Sets how far (both directions) the timestamp header may be from now.
        pub fn tolerance(tolerance: Duration) => tolerance = tolerance;
    }
}

/// The parsed headers: id, timestamp and the decoded signatures.
#[derive(Debug)]
struct Header<'a> {
    id: &'a str,
    timestamp: &'a str,
    seconds: u64,
    v1: Vec<[u8; 32]>,
    v1a: Vec<Signature>,
}

/// Decodes standard, padded base64 of exactly `N` bytes.
fn decode_exact<const N: usize>(text: &str) -> Option<[u8; N]> {
    // Padded base64 of N bytes is exactly 4 * ceil(N / 3) characters; the
    // buffer holds the decoder's estimate for that length.
    if text.len() != N.div_ceil(3) * 4 {
        return None;
    }
    let mut buf = [0u8; 96];
    let n = general_purpose::STANDARD.decode_slice(text, &mut buf).ok()?;
    buf.get(..n)?.try_into().ok()
}

fn parse(parts: &http::request::Parts, names: Names) -> Result<Header<'_>, VerifyError> {
    let id_name = present(parts, names.id()).ok_or(VerifyErrorKind::MissingHeader)?;
    let ts_name = present(parts, names.timestamp()).ok_or(VerifyErrorKind::MissingHeader)?;
    let sig_name = present(parts, names.signature()).ok_or(VerifyErrorKind::MissingHeader)?;
    let id = single_header(parts, id_name)?.trim();
    if id.is_empty() {
        return Err(VerifyErrorKind::MalformedHeader.into());
    }
    let timestamp = single_header(parts, ts_name)?.trim();
    let seconds = parse_unix_seconds(timestamp)?;
    let mut v1 = Vec::new();
    let mut v1a = Vec::new();
    check_signature_header_size(parts, sig_name)?;
    let mut entries = 0usize;
    for value in header_values(parts, sig_name) {
        for entry in value?.split_ascii_whitespace() {
            count_entry(&mut entries)?;
            let (version, sig) = entry.split_once(',').ok_or(VerifyErrorKind::MalformedHeader)?;
            // A signature of the wrong length or not base64 can never match;
            // skip it like an unknown version instead of failing the others.
            match version {
                "v1" => v1.extend(decode_exact::<32>(sig)),
                "v1a" => {
                    if let Some(bytes) = decode_exact::<64>(sig) {
                        if v1a.len() == MAX_ED25519_SIGNATURES {
                            return Err(VerifyErrorKind::MalformedHeader.into());
                        }
                        v1a.push(Signature::from_bytes(&bytes));
                    }
                }
                _ => {}
            }
        }
    }
    if v1.is_empty() && v1a.is_empty() {
        return Err(VerifyErrorKind::NoMatchingSignature.into());
    }
    Ok(Header { id, timestamp, seconds, v1, v1a })
}

impl Verifier for StandardWebhooksVerifier {
    /// Deliveries carrying `v1a` (Ed25519) signatures are verified on the
    /// blocking pool; HMAC-only ones inline.
    fn costly(&self, parts: &http::request::Parts) -> bool {
        present(parts, self.names.signature())
            .is_some_and(|name| header_values(parts, name).any(|v| v.is_ok_and(|v| v.contains("v1a,"))))
    }

    /// Every secret must be `whsec_` + base64 of [`MIN_SECRET_BYTES`] to
    /// [`MAX_SECRET_BYTES`] bytes, or `whpk_` + base64 of a valid Ed25519
    /// public key; decodes each once (cached on the secret).
    ///
    /// # Errors
    /// [`KeyMaterialErrorKind::NoSecret`](crate::verify::KeyMaterialErrorKind::NoSecret), [`KeyMaterialErrorKind::Empty`](crate::verify::KeyMaterialErrorKind::Empty),
    /// [`KeyMaterialErrorKind::OnlyPrefix`](crate::verify::KeyMaterialErrorKind::OnlyPrefix) (a bare `whsec_`),
    /// [`KeyMaterialErrorKind::Malformed`](crate::verify::KeyMaterialErrorKind::Malformed) (no prefix, a `whsk_` private key,
    /// not base64), [`KeyMaterialErrorKind::TooShort`](crate::verify::KeyMaterialErrorKind::TooShort),
    /// [`KeyMaterialErrorKind::TooLong`](crate::verify::KeyMaterialErrorKind::TooLong), or
    /// [`KeyMaterialErrorKind::InvalidPublicKey`](crate::verify::KeyMaterialErrorKind::InvalidPublicKey) for a bad `whpk_` key.
    fn check_secrets(&self, secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        check_key_material(secrets)?;
        for (i, secret) in secrets.iter().enumerate() {
            if let Err(kind) = &*classify(secret) {
                return Err(KeyMaterialError::new(*kind, Some(i), hint(secret.expose(), *kind)));
            }
        }
        Ok(())
    }

    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        parse(parts, self.names).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let header = parse(delivery.parts, self.names)?;
        // Cheap checks first: the timestamp, then the cost cap, then the cryptography.
        delivery.check_time(header.seconds, self.tolerance)?;
        let secrets = delivery.require_secrets()?;
        if !header.v1a.is_empty() {
            let public_keys = secrets.iter().filter(|s| matches!(&*classify(s), Ok(Key::Public(_)))).count();
            check_verifications(header.v1a.len(), public_keys)?;
        }
        let pieces: [&[u8]; 5] = [header.id.as_bytes(), b".", header.timestamp.as_bytes(), b".", delivery.body];
        let mut matched = false;
        let mut content: Option<Vec<u8>> = None;
        for secret in secrets {
            // A secret `check_secrets` refuses is skipped here too, so direct
            // users of the verifier never key an HMAC with it.
            match &*classify(secret) {
                Ok(Key::Hmac(key)) if !header.v1.is_empty() => {
                    let expected = hmac_sha256(key, &pieces);
                    matched |= any_matches(&expected, header.v1.iter().map(|s| &s[..]));
                }
                Ok(Key::Public(key)) if !header.v1a.is_empty() => {
                    let content = content.get_or_insert_with(|| pieces.concat());
                    matched |= header.v1a.iter().any(|sig| key.verify_strict(content, sig).is_ok());
                }
                _ => {}
            }
        }
        if !matched {
            return Err(VerifyErrorKind::NoMatchingSignature.into());
        }
        Ok(())
    }
}

/// The message id header (`names` in order) as the key, and the body's
/// top-level string `type`, if any, as the event type.
#[derive(Debug, Clone, Copy)]
struct MessageKey {
    names: Names,
}

impl crate::key::KeyExtractor for MessageKey {
    fn extract(&self, parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let name = present(parts, self.names.id()).ok_or(KeyErrorKind::Missing)?;
        let key = crate::key::header_str(parts, name)?.ok_or(KeyErrorKind::Missing)?;
        Ok(EventIdentity { key, event_type: crate::key::json_text(body, "/type") })
    }
}

impl crate::providers::Provider {
    /// Standard Webhooks (`webhook-id`/`-timestamp`/`-signature`, `v1` and `v1a`; key = `webhook-id`). See [`crate::providers::standard_webhooks`].
    ///
    /// The Standard Webhooks preset: [`StandardWebhooksVerifier::new`]
    /// (`webhook-*` headers, five minutes), key = `webhook-id`, type = the body's
    /// `type`. Name: `standard-webhooks`.
    pub fn standard_webhooks() -> Self {
        crate::providers::Provider::new(NAME, StandardWebhooksVerifier::new(), MessageKey { names: Names::Standard })
    }
}

impl crate::providers::Provider {
    /// Svix (the Standard Webhooks scheme under `svix-*` headers). See [`crate::providers::standard_webhooks`].
    ///
    /// The Svix preset: [`StandardWebhooksVerifier::svix`] (`svix-*` headers,
    /// falling back to `webhook-*`; five minutes), key = `svix-id` (or
    /// `webhook-id`), type = the body's `type`. Name: `svix`.
    pub fn svix() -> Self {
        crate::providers::Provider::new(SVIX_NAME, StandardWebhooksVerifier::svix(), MessageKey { names: Names::Svix })
    }
}

/// The registry's example for the Standard Webhooks presets (`svix`: the
/// `svix-*` header names), signed with a fixed test `whsec_` key.
pub(crate) fn example(
    provider: crate::providers::Provider,
    svix: bool,
    id: &str,
    timestamp: u64,
    body: &[u8],
) -> super::Example {
    const WHSEC: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let key = secret(WHSEC).expect("a valid whsec_ key");
    let headers = signed_headers(&key, svix, id, timestamp, body);
    super::Example { provider, secrets: vec![key], parts: super::example_parts("/", headers), body: body.to_vec() }
}

/// The three headers of a delivery signed with `key` (decoded), under the
/// `svix-*` names when `svix`.
fn signed_headers(
    key: &SigningSecret,
    svix: bool,
    id: &str,
    timestamp: u64,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    let sig = sign(key, id, timestamp, body).expect("an HMAC key");
    let names = if svix {
        [SVIX_ID_HEADER, SVIX_TIMESTAMP_HEADER, SVIX_SIGNATURE_HEADER]
    } else {
        [ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER]
    };
    vec![(names[0], id.to_owned()), (names[1], timestamp.to_string()), (names[2], sig)]
}

/// [`PresetInfo::sign`](super::PresetInfo::sign) for the Standard Webhooks
/// presets: `key` is the `whsec_` secret; the id is the message id.
fn send(
    provider: crate::providers::Provider,
    svix: bool,
    key: &str,
    d: &super::Signing<'_>,
) -> Result<super::Example, super::SignError> {
    let secret = whsec_text(key)?;
    let headers = signed_headers(&secret, svix, d.id, super::unix_seconds(d.at), d.body);
    super::signed_delivery(provider, secret, d, headers, d.body.to_vec())
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    "standard-webhooks",
    REPLAY_WINDOW,
    &[ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER],
    |_| Provider::standard_webhooks(),
    super::ExampleOf::Whole(|id, at, body| {
        example(Provider::standard_webhooks(), false, id, super::unix_seconds(at), body)
    }),
)
.sends(|key, d| send(Provider::standard_webhooks(), false, key, d))
.keys(super::KeyKind::Whsec, whsec_text, Some(whpk_text))
.signs("`webhook-signature: v1,<b64>` HMAC-SHA256 of `{id}.{ts}.{body}` (`whsec_` secrets of 24–64 key bytes; unprefixed base64 too, as the official libraries take it, except 32 bytes, a public key's size), `v1a` Ed25519 (`whpk_` keys)")
.key_from("the webhook-id header")
.fixture(super::Fixture::own("the library's deliveries (`delivery.json`): whsec_ and whpk_ keys"));

/// The registry entry of the Svix preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const SVIX_PRESET: super::PresetInfo = super::PresetInfo::new(
    SVIX_NAME,
    "standard-webhooks",
    REPLAY_WINDOW,
    &[SVIX_ID_HEADER, SVIX_TIMESTAMP_HEADER, SVIX_SIGNATURE_HEADER, ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER],
    |_| Provider::svix(),
    super::ExampleOf::Whole(|id, at, body| example(Provider::svix(), true, id, super::unix_seconds(at), body)),
)
.sends(|key, d| send(Provider::svix(), true, key, d))
.keys(super::KeyKind::Whsec, whsec_text, Some(whpk_text))
.signs("the same under `svix-*` headers")
.key_from("the svix-id header (else webhook-id)")
.fixture(super::Fixture::own("Svix's library deliveries (`svix/delivery.json`)"));

/// [`secret`] for the registry's key-text parser.
fn whsec_text(text: &str) -> Result<SigningSecret, super::KeyTextError> {
    secret(text).map_err(super::key_error)
}

/// [`public_key`] for the registry's key-text parser.
fn whpk_text(text: &str) -> Result<SigningSecret, super::KeyTextError> {
    public_key(text).map_err(super::key_error)
}

#[cfg(test)]
mod tests {
    use crate::test_support::fixture_json;
    use std::sync::Arc;

    use super::key::Classified;
    use super::*;
    use crate::test_support::{at, headers as parts};
    use crate::verify::KeyMaterialErrorKind;
    use std::time::UNIX_EPOCH;

    fn check(
        v: &StandardWebhooksVerifier,
        p: &http::request::Parts,
        body: &[u8],
        secrets: &[SigningSecret],
        now: u64,
    ) -> Result<(), VerifyErrorKind> {
        v.verify(&Delivery::new(p, body, secrets, at(now))).map_err(|e| e.kind())
    }

    const SEED: [u8; 32] = *b"standard webhooks unit test seed";

    /// The specification repository's test vectors (its Go library,
    /// `libraries/go/webhook_symmetric_test.go` and
    /// `webhook_asymmetric_test.go`, `TestSymmetricWebhookSign` and
    /// `TestAsymmetricWebhookSign`; the `v1` one is also the example in
    /// Svix's verification documentation).
    #[test]
    fn spec_vectors() {
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let ts = 1_614_265_330;
        let body = br#"{"test": 2432232314}"#;

        let whsec = secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let v1 = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert_eq!(sign(&whsec, id, ts, body).unwrap(), v1);
        // The official libraries also take the text without `whsec_`, and so
        // does this crate (24 bytes; see the module docs).
        let bare = secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(bare.expose(), whsec.expose(), "canonical form");
        assert_eq!(sign(&SigningSecret::from("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), id, ts, body).unwrap(), v1);

        let seed: [u8; 32] = general_purpose::STANDARD
            .decode("VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk=")
            .unwrap()
            .try_into()
            .unwrap();
        let v1a = "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag==";
        assert_eq!(sign_ed25519(&seed, id, ts, body), v1a);

        let whpk = public_key(&public_key_of(&seed)).unwrap();
        let v = StandardWebhooksVerifier::new();
        for (name, sig, secrets) in [("v1", v1, [whsec.clone()]), ("v1a", v1a, [whpk.clone()])] {
            let p = parts(&[(ID_HEADER, id), (TIMESTAMP_HEADER, "1614265330"), (SIGNATURE_HEADER, sig)]);
            assert_eq!(check(&v, &p, body, &secrets, ts), Ok(()), "{name}");
            assert_eq!(check(&v, &p, &body[1..], &secrets, ts), Err(VerifyErrorKind::NoMatchingSignature), "{name}");
        }

        // The specification's example header: both kinds in one list.
        let both = format!("{v1} {v1a}");
        let p = parts(&[(ID_HEADER, id), (TIMESTAMP_HEADER, "1614265330"), (SIGNATURE_HEADER, &both)]);
        assert_eq!(check(&v, &p, body, std::slice::from_ref(&whsec), ts), Ok(()));
        assert_eq!(check(&v, &p, body, &[whpk], ts), Ok(()));

        // Svix's own verification example uses the same `v1` vector under
        // the `svix-*` names.
        let p = parts(&[(SVIX_ID_HEADER, id), (SVIX_TIMESTAMP_HEADER, "1614265330"), (SVIX_SIGNATURE_HEADER, v1)]);
        assert_eq!(check(&StandardWebhooksVerifier::svix(), &p, body, &[whsec], ts), Ok(()));
    }

    /// A delivery signed by the official `standardwebhooks` 1.1.1 npm
    /// library (`v1`, current and old secret) and by Node's Ed25519 (`v1a`);
    /// see `scripts/fixtures/standard-webhooks.js`.
    #[test]
    fn standardwebhooks_library_fixture() {
        let f: serde_json::Value = fixture_json("standard-webhooks/delivery.json");
        let s = |name: &str| f[name].as_str().unwrap().to_owned();
        let (id, ts, body) = (s("id"), s("timestamp"), s("body"));
        let now: u64 = ts.parse().unwrap();
        let current = secret(&s("secret")).unwrap();
        let old = secret(&s("old_secret")).unwrap();
        let whpk = public_key(&s("public_key")).unwrap();
        assert_eq!(sign(&current, &id, now, body.as_bytes()).unwrap(), s("signature_v1"));
        assert_eq!(sign(&old, &id, now, body.as_bytes()).unwrap(), s("signature_v1_old"));
        let seed: [u8; 32] = general_purpose::STANDARD
            .decode(s("private_key").strip_prefix("whsk_").unwrap())
            .unwrap()
            .try_into()
            .unwrap();
        assert_eq!(sign_ed25519(&seed, &id, now, body.as_bytes()), s("signature_v1a"));
        assert_eq!(public_key_of(&seed), s("public_key"));

        let rotation = format!("{} {}", s("signature_v1_old"), s("signature_v1"));
        let v = StandardWebhooksVerifier::new();
        // The SDK's own secrets pass the key-material check.
        let dashboard = SigningSecret::from(s("secret"));
        assert_eq!(v.check_secrets(&[current.clone(), old.clone(), whpk.clone(), dashboard]), Ok(()));
        let cases: &[(&str, String, Vec<SigningSecret>, Result<(), VerifyErrorKind>)] = &[
            ("v1", s("signature_v1"), vec![current.clone()], Ok(())),
            ("v1 as dashboard text", s("signature_v1"), vec![SigningSecret::from(s("secret"))], Ok(())),
            ("rotation header, new secret", rotation.clone(), vec![current.clone()], Ok(())),
            ("rotation header, old secret", rotation.clone(), vec![old.clone()], Ok(())),
            ("old signature, both secrets", s("signature_v1_old"), vec![current.clone(), old.clone()], Ok(())),
            (
                "old signature, new secret only",
                s("signature_v1_old"),
                vec![current.clone()],
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            ("v1a", s("signature_v1a"), vec![whpk.clone()], Ok(())),
            (
                "v1a, public key ignored for v1",
                s("signature_v1"),
                vec![whpk.clone()],
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            (
                "v1a, HMAC secret ignored for v1a",
                s("signature_v1a"),
                vec![current.clone()],
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
        ];
        for (name, sig, secrets, want) in cases {
            let p = parts(&[(ID_HEADER, &id), (TIMESTAMP_HEADER, &ts), (SIGNATURE_HEADER, sig)]);
            assert_eq!(check(&v, &p, body.as_bytes(), secrets, now), *want, "{name}");
        }
        let p = parts(&[(ID_HEADER, &id), (TIMESTAMP_HEADER, &ts), (SIGNATURE_HEADER, &s("signature_v1"))]);
        let identity =
            crate::providers::Provider::standard_webhooks().extractor_ref().extract(&p, body.as_bytes()).unwrap();
        assert_eq!((identity.key.as_str(), identity.event_type.as_deref()), (id.as_str(), Some("contact.created")));
    }

    /// A delivery signed by the official `svix` 1.99.1 npm library; see
    /// `scripts/fixtures/svix.js`.
    #[test]
    fn svix_library_fixture() {
        let f: serde_json::Value = fixture_json("svix/delivery.json");
        let s = |name: &str| f[name].as_str().unwrap().to_owned();
        let (id, ts, body, sig) = (s("id"), s("timestamp"), s("body"), s("signature"));
        let now: u64 = ts.parse().unwrap();
        let secrets = [secret(&s("secret")).unwrap()];
        assert_eq!(sign(&secrets[0], &id, now, body.as_bytes()).unwrap(), sig);
        let svix = crate::providers::Provider::svix();
        assert_eq!(svix.name(), "svix");
        let branded = parts(&[(SVIX_ID_HEADER, &id), (SVIX_TIMESTAMP_HEADER, &ts), (SVIX_SIGNATURE_HEADER, &sig)]);
        let unbranded = parts(&[(ID_HEADER, &id), (TIMESTAMP_HEADER, &ts), (SIGNATURE_HEADER, &sig)]);
        for (name, p) in [("svix-*", &branded), ("webhook-*", &unbranded)] {
            let d = Delivery::new(p, body.as_bytes(), &secrets, at(now));
            assert!(svix.verifier_ref().verify(&d).is_ok(), "{name}");
            let identity = svix.extractor_ref().extract(p, body.as_bytes()).unwrap();
            assert_eq!((identity.key.as_str(), identity.event_type.as_deref()), (id.as_str(), Some("invoice.paid")));
        }
        // The Standard Webhooks preset reads only the webhook-* names.
        let d = Delivery::new(&branded, body.as_bytes(), &secrets, at(now));
        assert_eq!(
            crate::providers::Provider::standard_webhooks().verifier_ref().verify(&d).unwrap_err().kind(),
            VerifyErrorKind::MissingHeader
        );
    }

    /// Input from the third security review: four `whpk_` keys and a header of
    /// eight signatures from an unrelated key cost 32 Ed25519 verifications
    /// per request. The cap counts signatures times keys, and the cheap checks
    /// (format, timestamp) come before any cryptography.
    #[test]
    fn public_key_verifications_are_capped_across_keys_and_come_after_the_cheap_checks() {
        const NOW: u64 = 1_700_000_000;
        let id = "msg_flood";
        let body = br#"{"type":"user.created"}"#;
        let keys: Vec<SigningSecret> = (0u8..4).map(|i| public_key(&public_key_of(&[i + 1; 32])).unwrap()).collect();
        let unrelated = *b"an unrelated key signs this one.";
        let ts = NOW.to_string();
        let sigs = |n: usize| vec![sign_ed25519(&unrelated, id, NOW, body); n].join(" ");
        let p = |sig: &str| parts(&[(ID_HEADER, id), (TIMESTAMP_HEADER, &ts), (SIGNATURE_HEADER, sig)]);
        let v = StandardWebhooksVerifier::new();
        let cases: [(&str, usize, usize, Result<(), VerifyErrorKind>); 4] = [
            ("8 signatures x 4 keys = 32: refused unverified", 8, 4, Err(VerifyErrorKind::MalformedHeader)),
            ("3 signatures x 3 keys = 9: refused unverified", 3, 3, Err(VerifyErrorKind::MalformedHeader)),
            ("4 signatures x 2 keys = 8: verified", 4, 2, Err(VerifyErrorKind::NoMatchingSignature)),
            ("1 signature x 4 keys = 4: verified", 1, 4, Err(VerifyErrorKind::NoMatchingSignature)),
        ];
        for (name, n_sigs, n_keys, want) in cases {
            assert_eq!(check(&v, &p(&sigs(n_sigs)), body, &keys[..n_keys], NOW), want, "{name}");
        }
        // A stale delivery is refused by its timestamp before any signature is checked.
        assert_eq!(check(&v, &p(&sigs(1)), body, &keys, NOW + 301), Err(VerifyErrorKind::TimestampTooOld));
        // The signing key among four is still found within the cap.
        let mut with_signer = keys[..3].to_vec();
        with_signer.push(public_key(&public_key_of(&unrelated)).unwrap());
        assert_eq!(check(&v, &p(&sigs(2)), body, &with_signer, NOW), Ok(()));
    }

    /// An unbounded signature list (the review's 5,000 entries) is refused by
    /// its size before it is split, and past 16 entries however short.
    #[test]
    fn signature_lists_past_the_caps_are_malformed() {
        const NOW: u64 = 1_700_000_000;
        let key = secret("whsec_dGhlIHJlYWwgc2lnbmluZyBzZWNyZXQh").unwrap();
        let id = "msg_1";
        let ts = NOW.to_string();
        let body = b"{}";
        let good = sign(&key, id, NOW, body).unwrap();
        let filler = format!("v1,{}", "A".repeat(43) + "=");
        let list = |n: usize| {
            let mut entries = vec![filler.clone(); n - 1];
            entries.push(good.clone());
            entries.join(" ")
        };
        let v = StandardWebhooksVerifier::new();
        let secrets = std::slice::from_ref(&key);
        for (n, want) in
            [(16, Ok(())), (17, Err(VerifyErrorKind::MalformedHeader)), (5_000, Err(VerifyErrorKind::MalformedHeader))]
        {
            let header = list(n);
            let p = parts(&[(ID_HEADER, id), (TIMESTAMP_HEADER, &ts), (SIGNATURE_HEADER, &header)]);
            assert_eq!(check(&v, &p, body, secrets, NOW), want, "{n} entries");
            assert_eq!(v.precheck(&p).map_err(|e| e.kind()), want.map(drop), "{n} entries, precheck");
        }
    }

    #[test]
    fn verifies_and_rejects() {
        use VerifyErrorKind::{
            MalformedHeader, MissingHeader, NoMatchingSignature, TimestampInFuture, TimestampTooOld,
        };
        type Case<'a> = (&'a str, Vec<(&'a str, String)>, &'a [u8], u64, Result<(), VerifyErrorKind>);
        const NOW: u64 = 1_700_000_000;
        let key = secret("whsec_dGhlIHJlYWwgc2lnbmluZyBzZWNyZXQh").unwrap();
        let other = secret("whsec_c29tZSBvdGhlciBzaWduaW5nIHNlY3JldA==").unwrap();
        let id = "msg_1";
        let ts = NOW.to_string();
        let body = br#"{"type":"user.created","data":{}}"#;
        let good = sign(&key, id, NOW, body).unwrap();
        let by_other = sign(&other, id, NOW, body).unwrap();
        let good_v1a = sign_ed25519(&SEED, id, NOW, body);
        let both = format!("{by_other} {good}");
        let with_unknown = format!("v2,AAAA v1b,{} {good}", &good[3..]);
        let extra_spaces = format!("  {by_other}   {good} ");
        let nine_v1a = [good_v1a.as_str(); MAX_ED25519_SIGNATURES + 1].join(" ");
        let eight_v1a = [good_v1a.as_str(); MAX_ED25519_SIGNATURES].join(" ");
        let truncated = &good[..good.len() - 1];
        let h = |sig: &'static str, value: &str| -> (&'static str, String) { (sig, value.to_owned()) };
        // The id, timestamp and signature header lines, in that order.
        let heads = |ids: &[&str], stamps: &[&str], sigs: &[&str]| -> Vec<(&'static str, String)> {
            let lines = |name: &'static str, values: &[&str]| values.iter().map(|v| h(name, v)).collect::<Vec<_>>();
            [lines(ID_HEADER, ids), lines(TIMESTAMP_HEADER, stamps), lines(SIGNATURE_HEADER, sigs)].concat()
        };
        let std3 = |sig: &str| heads(&[id], &[&ts], &[sig]);
        // A case of the body at NOW.
        let case = |name, headers, want| -> Case<'_> { (name, headers, body, NOW, want) };
        let cases: Vec<Case<'_>> = vec![
            case("valid", std3(&good), Ok(())),
            case("valid v1a", std3(&good_v1a), Ok(())),
            case("two signatures, second matches", std3(&both), Ok(())),
            case("unknown versions ignored", std3(&with_unknown), Ok(())),
            case("extra spaces", std3(&extra_spaces), Ok(())),
            case("v1a up to the limit", std3(&eight_v1a), Ok(())),
            case("signatures over two header lines", heads(&[id], &[&ts], &[&by_other, &good]), Ok(())),
            case(
                "header names any case",
                vec![h("Webhook-Id", id), h("Webhook-Timestamp", &ts), h("Webhook-Signature", &good)],
                Ok(()),
            ),
            case("same id twice", heads(&[id, id], &[&ts], &[&good]), Ok(())),
            ("tampered body", std3(&good), br#"{"type":"user.deleted","data":{}}"#, NOW, Err(NoMatchingSignature)),
            ("tampered body, v1a", std3(&good_v1a), b"{}", NOW, Err(NoMatchingSignature)),
            case("other id", heads(&["msg_2"], &[&ts], &[&good]), Err(NoMatchingSignature)),
            case("other timestamp", heads(&[id], &["1700000001"], &[&good]), Err(NoMatchingSignature)),
            case("wrong secret", std3(&by_other), Err(NoMatchingSignature)),
            ("stale", std3(&good), body, NOW + 301, Err(TimestampTooOld)),
            ("future", std3(&good), body, NOW - 301, Err(TimestampInFuture)),
            ("edge past", std3(&good), body, NOW + 300, Ok(())),
            ("edge future", std3(&good), body, NOW - 300, Ok(())),
            case("no id", heads(&[], &[&ts], &[&good]), Err(MissingHeader)),
            case("no timestamp", heads(&[id], &[], &[&good]), Err(MissingHeader)),
            case("no signature", heads(&[id], &[&ts], &[]), Err(MissingHeader)),
            case(
                "svix names not read",
                vec![h(SVIX_ID_HEADER, id), h(SVIX_TIMESTAMP_HEADER, &ts), h(SVIX_SIGNATURE_HEADER, &good)],
                Err(MissingHeader),
            ),
            case("empty id", heads(&[""], &[&ts], &[&good]), Err(MalformedHeader)),
            case("two different ids", heads(&[id, "msg_2"], &[&ts], &[&good]), Err(MalformedHeader)),
            case("two different timestamps", heads(&[id], &[&ts, "1"], &[&good]), Err(MalformedHeader)),
            case("timestamp not digits", heads(&[id], &["1.7e9"], &[&good]), Err(MalformedHeader)),
            case("entry without comma", std3("v1"), Err(MalformedHeader)),
            case("empty signature", std3("v1,"), Err(NoMatchingSignature)),
            case("only unknown versions", std3("v2,abc v0,def"), Err(NoMatchingSignature)),
            case("truncated base64", std3(truncated), Err(NoMatchingSignature)),
            case("not base64", std3(&format!("v1,{}", "!".repeat(44))), Err(NoMatchingSignature)),
            case("blank header", std3(" "), Err(NoMatchingSignature)),
            case("too many v1a", std3(&nine_v1a), Err(MalformedHeader)),
            case("non-ASCII", std3("v1,é"), Err(MalformedHeader)),
        ];
        let secrets = [key, SigningSecret::from(public_key_of(&SEED))];
        let v = StandardWebhooksVerifier::new();
        for (name, headers, body, now, want) in &cases {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let p = parts(&headers);
            assert_eq!(check(&v, &p, body, &secrets, *now), *want, "{name}");
            // No usable signature is visible in the head alone, too.
            let no_usable =
                ["empty signature", "only unknown versions", "truncated base64", "not base64", "blank header"];
            let head_only = matches!(want, Err(VerifyErrorKind::MissingHeader | VerifyErrorKind::MalformedHeader))
                || no_usable.contains(name);
            let want_precheck = if head_only { *want } else { Ok(()) };
            assert_eq!(v.precheck(&p).map_err(|e| e.kind()), want_precheck, "{name} precheck");
        }
    }

    #[test]
    fn secrets_by_prefix() {
        const NOW: u64 = 1_700_000_000;
        let id = "msg_1";
        let body = b"{}";
        let ts = NOW.to_string();
        let mac = |key: &[u8]| {
            let tag = hmac_sha256(&SigningSecret::new(key), &[id.as_bytes(), b".", ts.as_bytes(), b".", body]);
            format!("v1,{}", general_purpose::STANDARD.encode(tag))
        };
        let raw_key = b"raw key bytes, no prefix".to_vec();
        let whsec = SigningSecret::from(format!("whsec_{}", general_purpose::STANDARD.encode(&raw_key)));
        let v1 = sign(&whsec, id, NOW, body).unwrap();
        assert_eq!(v1, mac(&raw_key));
        let key25 = b"raw key bytes, no prefix!".to_vec();
        let v1_25 = mac(&key25);
        let unpadded = SigningSecret::from(format!("whsec_{}", general_purpose::STANDARD_NO_PAD.encode(&key25)));
        let v1a = sign_ed25519(&SEED, id, NOW, body);
        let whpk_text = public_key_of(&SEED);
        let pk_b64 = &whpk_text["whpk_".len()..];
        // What anyone holding the public key can compute: an HMAC keyed by
        // the key's bytes, or by its text with or without the prefix.
        let forged_with_public = mac(&general_purpose::STANDARD.decode(pk_b64).unwrap());
        let forged_with_text = mac(whpk_text.as_bytes());
        let forged_with_bare_text = mac(pk_b64.as_bytes());
        let short_key = vec![9u8; MIN_SECRET_BYTES - 1];
        let short = SigningSecret::from(format!("whsec_{}", general_purpose::STANDARD.encode(&short_key)));
        let p = |sig: &str| parts(&[(ID_HEADER, id), (TIMESTAMP_HEADER, &ts), (SIGNATURE_HEADER, sig)]);
        let v = StandardWebhooksVerifier::new();
        let whpk = SigningSecret::from(whpk_text.clone());
        let whsk = SigningSecret::from(format!("whsk_{}", general_purpose::STANDARD.encode(SEED)));
        let none = Err(VerifyErrorKind::NoMatchingSignature);
        let cases: &[(&str, &str, Vec<SigningSecret>, Result<(), VerifyErrorKind>)] = &[
            ("whsec_ text", &v1, vec![whsec.clone()], Ok(())),
            ("whsec_ without padding", &v1_25, vec![unpadded], Ok(())),
            (
                "whsec_ not base64, beside a good one",
                &v1,
                vec![SigningSecret::from("whsec_***"), whsec.clone()],
                Ok(()),
            ),
            ("whsec_ not base64, alone", &v1, vec![SigningSecret::from("whsec_***")], none),
            ("raw key bytes never an HMAC key", &v1, vec![SigningSecret::new(raw_key.clone())], none),
            ("whsec_ key under 24 bytes not used", &mac(&short_key), vec![short], none),
            ("whpk_", &v1a, vec![whpk.clone()], Ok(())),
            ("whpk_ never an HMAC key", &forged_with_public, vec![whpk.clone()], none),
            ("whpk_ text never an HMAC key", &forged_with_text, vec![whpk.clone()], none),
            (
                "public key without whpk_ never an HMAC key",
                &forged_with_bare_text,
                vec![SigningSecret::from(pk_b64)],
                none,
            ),
            ("whsk_ never used", &v1a, vec![whsk], none),
            ("whpk_ not a key", &v1a, vec![SigningSecret::from("whpk_AAAA")], none),
            ("HMAC key not used for v1a", &v1a, vec![whsec.clone()], none),
            ("no secrets", &v1, vec![], Err(VerifyErrorKind::NoSecret)),
        ];
        for (name, sig, secrets, want) in cases {
            assert_eq!(check(&v, &p(sig), body, secrets, NOW), *want, "{name}");
        }
    }

    /// `check_secrets` refuses key material that authenticates nothing, or
    /// that anyone could sign with, naming the secret and the reason.
    #[test]
    fn check_secrets_cases() {
        let b64 = |bytes: &[u8]| general_purpose::STANDARD.encode(bytes);
        let whsec = |n: usize| SigningSecret::from(format!("whsec_{}", b64(&vec![5u8; n])));
        let whpk = SigningSecret::from(public_key_of(&SEED));
        let pk_b64 = public_key_of(&SEED)["whpk_".len()..].to_owned();
        let not_a_point = format!("whpk_{}", b64(&[[2u8].as_slice(), &[0u8; 31]].concat()));
        let weak = format!("whpk_{}", b64(&[[1u8].as_slice(), &[0u8; 31]].concat()));
        use KeyMaterialErrorKind as K;
        let cases: Vec<(&str, Vec<SigningSecret>, Result<(), (K, Option<usize>)>)> = vec![
            ("whsec_, 24 bytes", vec![whsec(MIN_SECRET_BYTES)], Ok(())),
            ("whsec_, 64 bytes", vec![whsec(MAX_SECRET_BYTES)], Ok(())),
            ("whsec_ official example", vec![SigningSecret::from("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")], Ok(())),
            ("whsec_ unpadded", vec![SigningSecret::from("whsec_c29tZSBvdGhlciBzaWduaW5nIHNlY3JldA")], Ok(())),
            ("whpk_", vec![whpk.clone()], Ok(())),
            ("both kinds", vec![whsec(32), whpk.clone()], Ok(())),
            ("no secret", vec![], Err((K::NoSecret, None))),
            ("empty", vec![SigningSecret::from("")], Err((K::Empty, Some(0)))),
            ("bare whsec_", vec![SigningSecret::from("whsec_")], Err((K::OnlyPrefix, Some(0)))),
            ("bare whpk_", vec![SigningSecret::from("whpk_")], Err((K::OnlyPrefix, Some(0)))),
            ("whsec_ + 23 bytes", vec![whsec(MIN_SECRET_BYTES - 1)], Err((K::TooShort, Some(0)))),
            ("whsec_ + 65 bytes", vec![whsec(MAX_SECRET_BYTES + 1)], Err((K::TooLong, Some(0)))),
            ("whsec_ + 1 byte", vec![whsec(1)], Err((K::TooShort, Some(0)))),
            ("whsec_ not base64", vec![SigningSecret::from("whsec_***")], Err((K::Malformed, Some(0)))),
            (
                "whsec_ with a trailing newline",
                vec![SigningSecret::from("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")],
                Err((K::Malformed, Some(0))),
            ),
            (
                "unprefixed base64 of an Ed25519 public key",
                vec![SigningSecret::from(pk_b64.as_str())],
                Err((K::Malformed, Some(0))),
            ),
            (
                "unprefixed text",
                vec![SigningSecret::from("a long raw secret, no prefix")],
                Err((K::Malformed, Some(0))),
            ),
            ("unprefixed base64, 24 bytes", vec![SigningSecret::from("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")], Ok(())),
            ("unprefixed base64, 64 bytes", vec![SigningSecret::from(b64(&[5u8; 64]))], Ok(())),
            ("unprefixed base64, 33 bytes", vec![SigningSecret::from(b64(&[5u8; 33]))], Ok(())),
            (
                "unprefixed base64, 32 bytes (a public key's size)",
                vec![SigningSecret::from(b64(&[5u8; 32]))],
                Err((K::Malformed, Some(0))),
            ),
            ("unprefixed base64, 23 bytes", vec![SigningSecret::from(b64(&[5u8; 23]))], Err((K::Malformed, Some(0)))),
            ("unprefixed base64, 65 bytes", vec![SigningSecret::from(b64(&[5u8; 65]))], Err((K::Malformed, Some(0)))),
            (
                "unprefixed with a trailing newline",
                vec![SigningSecret::from("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")],
                Err((K::Malformed, Some(0))),
            ),
            (
                "whsk_ private key",
                vec![SigningSecret::from(format!("whsk_{}", b64(&SEED)))],
                Err((K::Malformed, Some(0))),
            ),
            ("whpk_ not base64", vec![SigningSecret::from("whpk_***")], Err((K::Malformed, Some(0)))),
            ("whpk_ of 3 bytes", vec![SigningSecret::from("whpk_YWJj")], Err((K::InvalidPublicKey, Some(0)))),
            ("whpk_ not a curve point", vec![SigningSecret::from(not_a_point)], Err((K::InvalidPublicKey, Some(0)))),
            ("whpk_ of small order", vec![SigningSecret::from(weak)], Err((K::InvalidPublicKey, Some(0)))),
            ("second secret bad", vec![whsec(32), whsec(8)], Err((K::TooShort, Some(1)))),
        ];
        for v in [StandardWebhooksVerifier::new(), StandardWebhooksVerifier::svix()] {
            for (name, secrets, want) in &cases {
                let got = v.check_secrets(secrets).map_err(|e| (e.kind(), e.index()));
                assert_eq!(got, *want, "{name}");
            }
        }
        // Through the preset, as `Provider::check` and the layer call it.
        let p = parts(&[]);
        let short = [whsec(MIN_SECRET_BYTES - 1)];
        let d = Delivery::new(&p, b"{}", &short, UNIX_EPOCH);
        let checked = crate::providers::Provider::standard_webhooks().check(&d);
        let material = checked.as_ref().err().and_then(crate::providers::CheckError::key_material);
        assert_eq!(material.map(|e| e.kind()), Some(K::TooShort), "expected a key material error, got {checked:?}");
    }

    /// The classification is computed once per secret and shared by clones.
    #[test]
    fn secrets_decoded_once() {
        let secret = SigningSecret::from("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let clone = secret.clone();
        StandardWebhooksVerifier::new().check_secrets(std::slice::from_ref(&secret)).unwrap();
        let cached = clone.parsed::<Classified>(|_| panic!("decoded a second time"));
        assert!(matches!(&*cached, Ok(Key::Hmac(k)) if k.expose().len() == 24));
        assert!(Arc::ptr_eq(&cached, &classify(&secret)));
    }

    #[test]
    fn secret_and_key_parsing() {
        let canonical = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        assert_eq!(secret(canonical).unwrap().expose(), canonical.as_bytes());
        let padded = "whsec_c29tZSBvdGhlciBzaWduaW5nIHNlY3JldA==";
        assert_eq!(secret(padded).unwrap().expose(), padded.as_bytes());
        assert_eq!(secret(padded.trim_end_matches('=')).unwrap().expose(), padded.as_bytes(), "unpadded");
        let sized = |n: usize| format!("whsec_{}", general_purpose::STANDARD.encode(vec![7u8; n]));
        for n in [MIN_SECRET_BYTES, MAX_SECRET_BYTES] {
            assert!(secret(&sized(n)).is_ok(), "{n} bytes");
        }
        let (short, long) = (sized(MIN_SECRET_BYTES - 1), sized(MAX_SECRET_BYTES + 1));
        let bad = [
            ("empty", "whsec_", SecretErrorKind::Empty),
            ("no prefix, 32 bytes", "BQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQU=", SecretErrorKind::MissingPrefix),
            ("23 bytes", &short, SecretErrorKind::TooShort),
            ("65 bytes", &long, SecretErrorKind::TooLong),
            ("not base64", "whsec_***", SecretErrorKind::NotBase64),
            ("trailing newline", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n", SecretErrorKind::NotBase64),
            ("non-canonical last character", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSx=", SecretErrorKind::NotBase64),
            ("public key", "whpk_YWJj", SecretErrorKind::WrongKind),
            ("private key", "whsk_YWJj", SecretErrorKind::WrongKind),
        ];
        for (name, input, want) in bad {
            assert_eq!(secret(input).unwrap_err().kind(), want, "{name}");
        }
        let whpk = public_key_of(&SEED);
        assert_eq!(public_key(&whpk).unwrap().expose(), whpk.as_bytes());
        assert_eq!(public_key(&whpk[5..]).unwrap().expose(), whpk.as_bytes());
        let weak = format!(
            "whpk_{}",
            general_purpose::STANDARD.encode([1u8].iter().chain(&[0u8; 31]).copied().collect::<Vec<_>>())
        );
        let bad = [
            ("short", "whpk_YWJj".to_owned(), SecretErrorKind::NotAPublicKey),
            ("not base64", "whpk_***".to_owned(), SecretErrorKind::NotBase64),
            ("symmetric secret", canonical.to_owned(), SecretErrorKind::WrongKind),
            ("private key", "whsk_YWJj".to_owned(), SecretErrorKind::WrongKind),
            ("weak", weak, SecretErrorKind::NotAPublicKey),
        ];
        for (name, input, want) in bad {
            assert_eq!(public_key(&input).unwrap_err().kind(), want, "{name}");
        }
        assert_eq!(
            sign(&SigningSecret::from(whpk.as_str()), "m", 1, b"").unwrap_err().kind(),
            SecretErrorKind::WrongKind
        );
        assert_eq!(
            sign(&SigningSecret::from("whsk_YWJj"), "m", 1, b"").unwrap_err().kind(),
            SecretErrorKind::WrongKind
        );
        assert_eq!(
            sign(&SigningSecret::from("whsec_***"), "m", 1, b"").unwrap_err().kind(),
            SecretErrorKind::NotBase64
        );
        assert_eq!(sign(&SigningSecret::new(Vec::new()), "m", 1, b"").unwrap_err().kind(), SecretErrorKind::Empty);
        assert_eq!(
            sign(&SigningSecret::from("raw key"), "m", 1, b"").unwrap_err().kind(),
            SecretErrorKind::MissingPrefix
        );
        assert_eq!(
            sign(&SigningSecret::from(short.as_str()), "m", 1, b"").unwrap_err().kind(),
            SecretErrorKind::TooShort
        );
    }

    #[test]
    fn rotation_tolerance_and_replay() {
        const NOW: u64 = 1_700_000_000;
        let key = secret("whsec_dGhlIHJlYWwgc2lnbmluZyBzZWNyZXQh").unwrap();
        let body = b"{}";
        let ts = NOW.to_string();
        let sig = sign(&key, "msg_1", NOW, body).unwrap();
        let p = parts(&[(ID_HEADER, "msg_1"), (TIMESTAMP_HEADER, &ts), (SIGNATURE_HEADER, &sig)]);
        let secrets = [key];
        let v = StandardWebhooksVerifier::new();
        assert_eq!(check(&v, &p, body, &secrets, NOW + 600), Err(VerifyErrorKind::TimestampTooOld));
        assert_eq!(check(&v.clone().tolerance(Duration::from_secs(600)), &p, body, &secrets, NOW + 600), Ok(()));
        let replay = Delivery::new(&p, body, &secrets, at(NOW + 86_400)).without_timestamp_check();
        assert!(v.verify(&replay).is_ok());
        let forged = Delivery::new(&p, b"[]", &secrets, at(NOW + 86_400)).without_timestamp_check();
        assert!(v.verify(&forged).is_err());
    }

    #[test]
    fn message_keys() {
        let std_key = MessageKey { names: Names::Standard };
        let svix_key = MessageKey { names: Names::Svix };
        let cases: &[(&str, MessageKey, Vec<(&str, &str)>, &[u8], Result<(&str, Option<&str>), KeyErrorKind>)] = &[
            ("id and type", std_key, vec![(ID_HEADER, "msg_1")], br#"{"type":"a.b"}"#, Ok(("msg_1", Some("a.b")))),
            ("no type", std_key, vec![(ID_HEADER, "msg_1")], br#"{"data":{}}"#, Ok(("msg_1", None))),
            ("type not a string", std_key, vec![(ID_HEADER, "msg_1")], br#"{"type":3}"#, Ok(("msg_1", None))),
            ("body not JSON", std_key, vec![(ID_HEADER, "msg_1")], b"plain text", Ok(("msg_1", None))),
            ("nested type only", std_key, vec![(ID_HEADER, "msg_1")], br#"{"data":{"type":"x"}}"#, Ok(("msg_1", None))),
            ("no id", std_key, vec![], b"{}", Err(KeyErrorKind::Missing)),
            ("blank id", std_key, vec![(ID_HEADER, " ")], b"{}", Err(KeyErrorKind::Missing)),
            ("two ids", std_key, vec![(ID_HEADER, "a"), (ID_HEADER, "b")], b"{}", Err(KeyErrorKind::Invalid)),
            ("svix id", svix_key, vec![(SVIX_ID_HEADER, "msg_s")], b"{}", Ok(("msg_s", None))),
            (
                "svix prefers svix-id",
                svix_key,
                vec![(ID_HEADER, "msg_w"), (SVIX_ID_HEADER, "msg_s")],
                b"{}",
                Ok(("msg_s", None)),
            ),
            ("svix falls back", svix_key, vec![(ID_HEADER, "msg_w")], b"{}", Ok(("msg_w", None))),
            ("standard ignores svix-id", std_key, vec![(SVIX_ID_HEADER, "msg_s")], b"{}", Err(KeyErrorKind::Missing)),
        ];
        for (name, x, headers, body, want) in cases {
            let got = crate::key::KeyExtractor::extract(x, &parts(headers), body);
            let got = got.as_ref().map(|i| (i.key.as_str(), i.event_type.as_deref())).map_err(|e| e.kind());
            assert_eq!(got, *want, "{name}");
        }
        assert_eq!(crate::providers::Provider::standard_webhooks().name(), "standard-webhooks");
        assert!(crate::providers::Provider::standard_webhooks().challenge_ref().is_none());
    }
}
