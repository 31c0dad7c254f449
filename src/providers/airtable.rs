//! Airtable: the `X-Airtable-Content-MAC` header of a webhook's notification
//! ping.
//!
//! Scheme (Airtable Web API, "Webhooks overview", "Webhook notification
//! delivery", <https://airtable.com/developers/web/api/webhooks-overview>;
//! "Create a webhook",
//! <https://airtable.com/developers/web/api/create-a-webhook>):
//! `X-Airtable-Content-MAC: hmac-sha256=<hex HMAC-SHA256 of the raw body>`,
//! keyed with the **base64-decoded** `macSecretBase64` that the
//! create-webhook call returns once (there is no way to read it again). The
//! preset takes that `macSecretBase64` text as Airtable shows it and decodes
//! it (standard base64, padding optional) once per secret, when the layer is
//! built ([`Verifier::check_secrets`]): text that is not base64 is refused
//! as [`KeyMaterialErrorKind::Malformed`] instead of failing every delivery
//! (the usual mistake: the text itself used as the key, or `atob` in a
//! browser runtime). pyairtable's `WebhookNotification.from_request`, the
//! verifier Airtable's users reach for (Airtable publishes none), does the
//! same and compares `hmac-sha256=` + lower-case hex; the preset reads the
//! hex in either case. Each webhook has its own secret: one endpoint per
//! webhook, or one secret per scope. No rotation exists (a new webhook is a
//! new secret); several configured secrets are each tried.
//!
//! **Event key.** The body is a ping, not the change: `{"base": {"id"},
//! "webhook": {"id"}, "timestamp"}` tells the receiver to fetch the queued
//! payloads ("List webhook payloads",
//! <https://airtable.com/developers/web/api/list-webhook-payloads>) from its
//! stored cursor. Airtable sends no notification id; the key is a
//! [`DerivedKey`](crate::key::DerivedKey) over `base.id`, `webhook.id` and
//! `timestamp` (all three signed), so the same ping delivered twice is one
//! claim; there is no event type. **Limits:** Airtable does not say whether
//! a retried ping keeps its `timestamp`; one that does not is a new key, and
//! so is every later ping. That is harmless by design: a ping carries no
//! change, and the work it triggers is idempotent only through the cursor.
//! The handler must fetch from the **stored** cursor and advance it in the
//! same transaction as the effects (`WebhookTx::apply_if_newer` on the
//! webhook id with the payloads' `baseTransactionNumber`), never process
//! "the payloads of this ping".
//!
//! **Limit of the scheme:** only the body is signed; its `timestamp` is the
//! ping's time, but Airtable sets no acceptance window on it, so the preset
//! checks none: a captured ping verifies forever (and only makes the
//! receiver poll again). Serve the endpoint over TLS.
//!
//! **Retries and replay window.** A failed ping is retried (the webhook's
//! `lastNotificationResult` has `retryNumber` and `willBeRetried`,
//! <https://airtable.com/developers/web/api/model/webhooks-notification>),
//! but no span is published: the window is the crate's default for an
//! unknown span, [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW)
//! (30 days; payloads themselves are kept a week).
//!
//! **Handshake:** none. Creating a webhook pings its URL shortly after
//! ("Create a webhook"): an ordinary signed ping.
//!
//! **Signed / not signed**
//! (<https://airtable.com/developers/web/api/webhooks-overview>): only the
//! raw body is signed, so the key's three fields are. Headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! fetched payloads' `baseTransactionNumber` (the cursor, which increases by
//! one per payload and is never reset); the ping's own `timestamp` orders
//! nothing.

use std::sync::Arc;
use std::time::SystemTime;

use crate::providers::Provider;
use crate::verify::generic::HmacVerifier;
use crate::verify::{
    check_key_material, hmac_sha256, Delivery, Encoding, KeyMaterialError, KeyMaterialErrorKind, SigningSecret,
    Verifier, VerifyError, VerifyErrorKind,
};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "airtable";

/// The header Airtable signs notification pings with.
pub const SIGNATURE_HEADER: &str = "x-airtable-content-mac";

/// Text before the hex tag in [`SIGNATURE_HEADER`].
pub const PREFIX: &str = "hmac-sha256=";

/// How long an Airtable ping can be sent again: 30 days,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
///
/// Airtable retries a failed ping (`retryNumber`, `willBeRetried` in
/// <https://airtable.com/developers/web/api/model/webhooks-notification>)
/// but publishes no span, and offers no manual redelivery.
pub const REPLAY_WINDOW: std::time::Duration = super::DEFAULT_REPLAY_WINDOW;

/// The JSON Pointers the event key is derived from, in order.
const KEY_FIELDS: [&str; 3] = ["/base/id", "/webhook/id", "/timestamp"];

/// The hint of a secret that is not base64.
const NOT_BASE64: &str = "give the webhook's macSecretBase64 exactly as create-webhook returned it (standard base64)";

/// The MAC key of a `macSecretBase64`: standard base64 (RFC 4648 section 4),
/// padding optional, decoded in constant time; `None` for other text or an
/// empty key.
fn decode(text: &[u8]) -> Option<SigningSecret> {
    super::decode_secret_base64(text).filter(|key| !key.is_empty()).map(SigningSecret::new)
}

/// The MAC key of a configured secret, decoded once and cached on it.
fn mac_key(secret: &SigningSecret) -> Arc<Option<SigningSecret>> {
    secret.parsed(decode)
}

/// Verifies `X-Airtable-Content-MAC` with secrets given as Airtable's
/// `macSecretBase64` text (decoded once each).
#[derive(Debug, Clone)]
#[must_use]
pub struct AirtableVerifier {
    inner: HmacVerifier,
}

impl Default for AirtableVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl AirtableVerifier {
    /// The verifier: one `hmac-sha256=<hex>` per header line, each exactly
    /// one 32-byte tag, anything else malformed.
    pub fn new() -> Self {
        let inner = HmacVerifier::builder(SIGNATURE_HEADER).prefix(PREFIX).strict().build();
        Self { inner: inner.expect("a valid fixed configuration") }
    }
}

impl Verifier for AirtableVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        self.inner.precheck(parts)
    }

    /// Every secret must be the standard base64 of a non-empty key
    /// (`macSecretBase64`); decodes each once (cached on the secret).
    ///
    /// # Errors
    /// What [`check_key_material`] refuses, or
    /// [`KeyMaterialErrorKind::Malformed`] for text that is not base64.
    fn check_secrets(&self, secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        check_key_material(secrets)?;
        match secrets.iter().position(|s| mac_key(s).is_none()) {
            Some(i) => Err(KeyMaterialError::new(KeyMaterialErrorKind::Malformed, Some(i), NOT_BASE64)),
            None => Ok(()),
        }
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        // A secret `check_secrets` refuses is skipped here too, so a direct
        // user of the verifier never keys an HMAC with its text.
        let keys: Vec<SigningSecret> =
            delivery.require_secrets()?.iter().filter_map(|s| (*mac_key(s)).clone()).collect();
        if keys.is_empty() {
            self.inner.precheck(delivery.parts)?;
            return Err(VerifyErrorKind::NoMatchingSignature.into());
        }
        self.inner.verify(&Delivery { secrets: &keys, ..*delivery })
    }
}

/// The `X-Airtable-Content-MAC` value Airtable would send for `body` with
/// the webhook's `mac_secret_base64` (its text), or `None` when that text is
/// not base64. For tests and fixtures.
pub fn sign(mac_secret_base64: &str, body: &[u8]) -> Option<String> {
    let key = decode(mac_secret_base64.as_bytes())?;
    Some(format!("{PREFIX}{}", Encoding::Hex.encode(&hmac_sha256(&key, &[body]))))
}

impl Provider {
    /// Airtable (`X-Airtable-Content-MAC: hmac-sha256=<hex>`, keyed with the
    /// decoded `macSecretBase64`; key derived from `base.id`, `webhook.id`
    /// and `timestamp`). Configure the `macSecretBase64` text as the secret.
    /// See [`crate::providers::airtable`].
    pub fn airtable() -> Self {
        let key = KEY_FIELDS.iter().fold(crate::key::DerivedKey::new(), |key, pointer| key.json(*pointer));
        Provider::new(NAME, AirtableVerifier::new(), key)
    }
}

/// [`PresetInfo::secret`](super::PresetInfo::secret) of this preset: the
/// `macSecretBase64` text, checked to be base64.
fn secret_text(text: &str) -> Result<SigningSecret, super::KeyTextError> {
    match decode(text.as_bytes()) {
        Some(_) => Ok(SigningSecret::from(text)),
        None => Err(super::key_error(format!("airtable: {NOT_BASE64}"))),
    }
}

/// The example's `macSecretBase64`: the base64 of the crate's example secret.
const EXAMPLE_MAC_SECRET: &str = "ZXhhbXBsZS1zZWNyZXQtMDEyMzQ1Njc4OWFiY2RlZg==";

/// The registry's example: `POST /` signed with [`EXAMPLE_MAC_SECRET`].
fn example(_: &str, _: SystemTime, body: &[u8]) -> super::Example {
    let header = sign(EXAMPLE_MAC_SECRET, body).expect("the example secret is base64");
    super::Example {
        provider: Provider::airtable(),
        secrets: vec![SigningSecret::from(EXAMPLE_MAC_SECRET)],
        parts: super::example_parts("/", vec![(SIGNATURE_HEADER, header)]),
        body: body.to_vec(),
    }
}

/// [`PresetInfo::sign`](super::PresetInfo::sign) for Airtable: `key` is the
/// `macSecretBase64` text.
fn send(key: &str, d: &super::Signing<'_>) -> Result<super::Example, super::SignError> {
    let secret = secret_text(key)?;
    let header = sign(key, d.body).expect("checked to be base64");
    super::signed_delivery(Provider::airtable(), secret, d, vec![(SIGNATURE_HEADER, header)], d.body.to_vec())
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER],
    |_| Provider::airtable(),
    super::ExampleOf::Whole(example),
)
.sends(send)
.keys(super::KeyKind::Base64Secret, secret_text, None)
.signs("`x-airtable-content-mac`: `hmac-sha256=` hex HMAC-SHA256 of the body, keyed with the base64-decoded secret")
.key_from("fields of the JSON body (a derived key: base.id, webhook.id, timestamp)")
.fixture(super::Fixture::sdk(&[]));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::test_support::{at, header_lines, headers, identity, NOW};

    fn verify(lines: &[&str], body: &[u8], secrets: &[&str]) -> Result<(), VerifyErrorKind> {
        let secrets: Vec<SigningSecret> = secrets.iter().map(|s| SigningSecret::from(*s)).collect();
        let p = header_lines(SIGNATURE_HEADER, lines);
        AirtableVerifier::new().verify(&Delivery::new(&p, body, &secrets, at(NOW))).map_err(|e| e.kind())
    }

    /// pyairtable's own vector (`tests/test_models_webhook.py`,
    /// `test_notification_from_request`): Python's `json.dumps` of the
    /// docs' example ping, the secret `secret-key` as base64.
    #[test]
    fn pyairtable_test_vector() {
        let body = br#"{"base": {"id": "app00000000000000"}, "webhook": {"id": "ach00000000000000"}, "timestamp": "2022-02-01T21:25:05.663Z"}"#;
        let header = "hmac-sha256=e26da696a90933647bddc83995c3e1e3bb1c3d8ce1ff61cb7469767d50b2b2d4";
        assert_eq!(sign("c2VjcmV0LWtleQ==", body).as_deref(), Some(header));
        assert_eq!(verify(&[header], body, &["c2VjcmV0LWtleQ=="]), Ok(()));
        // Unpadded base64 is the same key.
        assert_eq!(verify(&[header], body, &["c2VjcmV0LWtleQ"]), Ok(()));
        // The SDK's refusals: another body, a bad header, another secret.
        assert_eq!(verify(&[header], b"[1,2,3]", &["c2VjcmV0LWtleQ=="]), Err(VerifyErrorKind::NoMatchingSignature));
        assert_eq!(verify(&["bad-header"], body, &["c2VjcmV0LWtleQ=="]), Err(VerifyErrorKind::MalformedHeader));
        let other = "YmFkLXNlY3JldA=="; // base64("bad-secret")
        assert_eq!(verify(&[header], body, &[other]), Err(VerifyErrorKind::NoMatchingSignature));
        // The text itself as the key (the usual mistake) is not how Airtable signs.
        let as_text =
            format!("{PREFIX}{}", hex::encode(hmac_sha256(&SigningSecret::from("c2VjcmV0LWtleQ=="), &[body])));
        assert_eq!(verify(&[&as_text], body, &["c2VjcmV0LWtleQ=="]), Err(VerifyErrorKind::NoMatchingSignature));
    }

    #[test]
    fn verifies_and_rejects() {
        use VerifyErrorKind::{MalformedHeader, MissingHeader, NoMatchingSignature, NoSecret};
        let (key, other) = ("a2V5LW9uZQ==", "a2V5LXR3bw=="); // key-one, key-two
        let body = br#"{"base":{"id":"app1"},"webhook":{"id":"ach1"},"timestamp":"2024-01-01T00:00:00.000Z"}"#;
        let good = sign(key, body).unwrap();
        let by_other = sign(other, body).unwrap();
        let hex = &good[PREFIX.len()..];
        let upper = format!("{PREFIX}{}", hex.to_uppercase());
        let sha1 = format!("hmac-sha1={hex}");
        let short = format!("{PREFIX}{}", &hex[..40]);
        let cases: &[(&str, Vec<&str>, &[u8], &[&str], Result<(), VerifyErrorKind>)] = &[
            ("valid", vec![&good], body, &[key], Ok(())),
            ("upper-case hex", vec![&upper], body, &[key], Ok(())),
            ("tampered body", vec![&good], b"{}", &[key], Err(NoMatchingSignature)),
            ("wrong secret", vec![&by_other], body, &[key], Err(NoMatchingSignature)),
            ("two secrets, the second signs", vec![&good], body, &[other, key], Ok(())),
            ("two lines, the second good", vec![&by_other, &good], body, &[key], Ok(())),
            ("missing", vec![], body, &[key], Err(MissingHeader)),
            ("no prefix", vec![hex], body, &[key], Err(MalformedHeader)),
            ("another algorithm's prefix", vec![&sha1], body, &[key], Err(MalformedHeader)),
            ("a shorter tag", vec![&short], body, &[key], Err(MalformedHeader)),
            ("empty", vec![""], body, &[key], Err(MalformedHeader)),
            ("no secret", vec![&good], body, &[], Err(NoSecret)),
            // A secret that is not base64 keys nothing (the layer refuses it first).
            ("a secret that is not base64", vec![&good], body, &["not base64!"], Err(NoMatchingSignature)),
        ];
        for (name, lines, body, secrets, want) in cases {
            assert_eq!(verify(lines, body, secrets), *want, "{name}");
        }
        let v = AirtableVerifier::new();
        assert_eq!(v.precheck(&header_lines(SIGNATURE_HEADER, &[&good])).map_err(|e| e.kind()), Ok(()));
        assert_eq!(v.precheck(&header_lines(SIGNATURE_HEADER, &[])).map_err(|e| e.kind()), Err(MissingHeader));
        assert_eq!(v.precheck(&header_lines(SIGNATURE_HEADER, &[hex])).map_err(|e| e.kind()), Err(MalformedHeader));
    }

    /// The secret is checked as base64 when the layer is built, and the
    /// registry's text parser refuses what the layer would.
    #[test]
    fn secrets_are_base64() {
        let v = AirtableVerifier::new();
        let kind = |texts: &[&str]| {
            let secrets: Vec<SigningSecret> = texts.iter().map(|s| SigningSecret::from(*s)).collect();
            v.check_secrets(&secrets).map_err(|e| (e.kind(), e.index()))
        };
        assert_eq!(kind(&["c2VjcmV0LWtleQ==", "c2VjcmV0LWtleQ"]), Ok(()));
        assert_eq!(kind(&[]).map_err(|e| e.0), Err(KeyMaterialErrorKind::NoSecret));
        assert_eq!(kind(&[""]).map_err(|e| e.0), Err(KeyMaterialErrorKind::Empty));
        let malformed = Err((KeyMaterialErrorKind::Malformed, Some(1)));
        for bad in ["not base64!", "c2VjcmV0LWtleQ=", "c2Vj-cmV0", "===="] {
            assert_eq!(kind(&["c2VjcmV0LWtleQ==", bad]), malformed, "{bad}");
            assert!(secret_text(bad).is_err(), "{bad}");
        }
        assert!(secret_text("c2VjcmV0LWtleQ==").is_ok());
    }

    /// The key: one per ping, from its three fields in any layout; a body
    /// missing one has none.
    #[test]
    fn the_key_is_derived_from_the_ping() {
        let p = Provider::airtable();
        let h = headers(&[]);
        let a = identity(&p, &h, br#"{"base":{"id":"app1"},"webhook":{"id":"ach1"},"timestamp":"t1"}"#);
        let spaced = identity(&p, &h, br#"{ "timestamp": "t1", "webhook": {"id": "ach1"}, "base": {"id": "app1"} }"#);
        let later = identity(&p, &h, br#"{"base":{"id":"app1"},"webhook":{"id":"ach1"},"timestamp":"t2"}"#);
        let other = identity(&p, &h, br#"{"base":{"id":"app1"},"webhook":{"id":"ach2"},"timestamp":"t1"}"#);
        assert!(a.key.starts_with("sha256:"));
        assert_eq!(a.key, spaced.key);
        assert_ne!(a.key, later.key);
        assert_ne!(a.key, other.key);
        assert_eq!(a.event_type, None);
        let missing = p.identify(&h, br#"{"base":{"id":"app1"},"timestamp":"t1"}"#).map_err(|e| e.kind());
        assert_eq!(missing.unwrap_err(), KeyErrorKind::Missing);
        assert_eq!(p.name(), NAME);
    }
}
