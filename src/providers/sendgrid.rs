//! SendGrid Event Webhook: the `X-Twilio-Email-Event-Webhook-Signature` and
//! `X-Twilio-Email-Event-Webhook-Timestamp` headers (ECDSA P-256).
//!
//! Scheme (Twilio SendGrid, "Getting Started with the Event Webhook Security
//! Features", <https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features>;
//! the `EventWebhook` helpers of SendGrid's libraries, `@sendgrid/eventwebhook`
//! on npm and `sendgrid` on PyPI, compute the same bytes):
//! - `X-Twilio-Email-Event-Webhook-Signature` is the base64 (standard, padded)
//!   ASN.1 DER encoding of an ECDSA signature on curve P-256 with SHA-256 over
//!   `{X-Twilio-Email-Event-Webhook-Timestamp}{raw body}`, concatenated without
//!   a separator (the body ends with the `\r\n` SendGrid sends).
//! - Verification uses the public key shown in the settings of the signed
//!   Event Webhook: base64 of a DER `SubjectPublicKeyInfo`
//!   (`MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE...`). Configure that text as the
//!   endpoint's [`SigningSecret`](crate::verify::SigningSecret) (a PEM `-----BEGIN PUBLIC KEY-----` block is
//!   accepted too). A secret that is not such a key (the webhook's
//!   verification key pasted in part, an API key) is refused by
//!   [`SendGridVerifier`]'s [`Verifier::check_secrets`](crate::verify::Verifier::check_secrets) with
//!   [`KeyMaterialErrorKind::InvalidPublicKey`](crate::verify::KeyMaterialErrorKind::InvalidPublicKey) when the layer is built (or
//!   the resolver returns it), instead of failing every delivery as a
//!   signature mismatch; the verifier itself skips it. Each key is parsed
//!   once and cached on the secret ([`SigningSecret::parsed`](crate::verify::SigningSecret::parsed)).
//! - Signatures with a high `s` are accepted, as SendGrid's libraries do.
//! - The timestamp is Unix seconds. SendGrid documents no tolerance and its
//!   libraries check none (`@sendgrid/eventwebhook` 8.0.0
//!   `eventwebhook.js`, PyPI `sendgrid` 6.12.5 `helpers/eventwebhook`: the
//!   signature only). SendGrid retries "at increasing intervals for up to 24
//!   hours after the event occurs" (Twilio SendGrid, "Event Webhook
//!   troubleshooting") and does not say whether a retry is signed afresh; if
//!   it resends the first timestamp, a shorter tolerance refuses the retries
//!   and the events are lost. [`DEFAULT_TOLERANCE`] is therefore 25 hours,
//!   both directions (configurable with [`SendGridVerifier::tolerance`]). It
//!   costs no replay protection: the key is derived from the signed batch,
//!   so a byte-for-byte replay inside the window is a duplicate of a claim
//!   kept for [`REPLAY_WINDOW`] (2 days).
//! - Rotation: regenerating the key pair switches at once; configure the old
//!   and the new public key meanwhile. Several signature header lines are all
//!   considered.
//!
//! **Event key.** SendGrid POSTs a JSON array of events, each with a unique
//! `sg_event_id`, and a retry resends the batch. The claim is per delivery,
//! so the key is `sha256:` and the hex SHA-256 of the batch's `sg_event_id`s,
//! sorted (each length-prefixed): a resent batch has the same key however
//! it is serialized or ordered. SendGrid documents that an event can be
//! delivered more than once and advises deduplicating on `sg_event_id`; a
//! duplicate that arrives in another batch gets another key: make the
//! handler's writes idempotent per `sg_event_id` (an upsert keyed by it).
//! The event type is the events' common `event` (`delivered`, `open`, ...)
//! when the batch has one, else none.
//!
//! **Signed / not signed**
//! (<https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features>):
//! `X-Twilio-Email-Event-Webhook-Timestamp` and the raw body are signed, so
//! the event key (derived from the body's `sg_event_id`s) and the event type
//! (the events' common `event`) are signed. Other headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): each
//! event's `timestamp` (Unix seconds); one delivery batches several events,
//! possibly of one message.

use crate::providers::Provider;
use std::time::Duration;

use p256::ecdsa::signature::{MultipartSigner as _, MultipartVerifier as _};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePublicKey as _, EncodePublicKey as _};
use sha2::{Digest as _, Sha256};

use super::public_key::{Scheme, Signed};
use crate::key::{EventIdentity, KeyError, KeyErrorKind};
use crate::verify::{header_values, parse_unix_seconds, single_header, Encoding, VerifyError, VerifyErrorKind};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "sendgrid";
/// How long a SendGrid batch can be sent again: 2 days.
///
/// SendGrid retries a failed Event Webhook POST for up to 24 hours (Twilio
/// SendGrid, "Event Webhook",
/// <https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/event>)
/// and documents no manual redelivery. The 24 hours plus a day of margin.
pub const REPLAY_WINDOW: std::time::Duration = super::days(2);

/// The header carrying the base64 DER ECDSA signature.
pub const SIGNATURE_HEADER: &str = "x-twilio-email-event-webhook-signature";
/// The header carrying the signed Unix timestamp (seconds).
pub const TIMESTAMP_HEADER: &str = "x-twilio-email-event-webhook-timestamp";

/// Default tolerance: 90,000 seconds (25 hours), both directions:
/// SendGrid's retries span 24 hours and SendGrid does not say they are
/// signed afresh (see the module docs).
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(90_000);

timed_verifier! {
    /// Verifies SendGrid's signed Event Webhook.
    pub struct SendGridVerifier;
    /// A verifier with the default tolerance of 90,000 seconds (25 hours).
    fn new();
    /// Sets how far (both directions) the signed timestamp may be from now.
    fn tolerance();
    scheme: P256;
}

/// Most signature lines checked per delivery: each is an ECDSA verification
/// per configured key, so more is refused as malformed rather than letting
/// one request cost hundreds of verifications.
pub const MAX_SIGNATURES: usize = 4;

/// SendGrid's scheme: ECDSA P-256 with SHA-256 over `timestamp || body`, each
/// signature base64 DER in its own signature header line.
#[derive(Debug)]
pub(crate) struct P256;

impl Scheme for P256 {
    type Key = VerifyingKey;
    type Signature = Signature;
    type Message<'m> = [&'m [u8]; 2];
    const KEY_HINT: &'static str =
        "a SendGrid verification key is the base64 public key (MFkwEwYH...) shown in the Event Webhook settings";

    /// Base64 of a DER `SubjectPublicKeyInfo`, as SendGrid shows it, or the
    /// same in PEM; `None` when it is no P-256 public key.
    fn parse_key(raw: &[u8]) -> Option<VerifyingKey> {
        let text = std::str::from_utf8(raw).ok()?.trim();
        if text.starts_with("-----BEGIN") {
            VerifyingKey::from_public_key_pem(text).ok()
        } else {
            VerifyingKey::from_public_key_der(&Encoding::Base64.decode(text)?).ok()
        }
    }

    fn signed(parts: &http::request::Parts) -> Result<Signed<'_, Signature>, VerifyError> {
        let mut signatures = Vec::new();
        crate::verify::check_signature_header_size(parts, SIGNATURE_HEADER)?;
        for value in header_values(parts, SIGNATURE_HEADER) {
            if signatures.len() == MAX_SIGNATURES {
                return Err(VerifyErrorKind::MalformedHeader.into());
            }
            let der = Encoding::Base64.decode(value?.trim()).ok_or(VerifyErrorKind::MalformedHeader)?;
            signatures.push(Signature::from_der(&der).map_err(|_| VerifyErrorKind::MalformedHeader)?);
        }
        if signatures.is_empty() {
            return Err(VerifyErrorKind::MissingHeader.into());
        }
        let timestamp = single_header(parts, TIMESTAMP_HEADER)?;
        let seconds = parse_unix_seconds(timestamp)?;
        Ok(Signed { timestamp, seconds, signatures })
    }

    fn message<'m>(timestamp: &'m [u8], body: &'m [u8]) -> [&'m [u8]; 2] {
        [timestamp, body]
    }

    fn verifies(key: &VerifyingKey, message: &[&[u8]; 2], signature: &Signature) -> bool {
        key.multipart_verify(message, signature).is_ok()
    }
}

/// The `X-Twilio-Email-Event-Webhook-Signature` value SendGrid would send for
/// `body` at `timestamp` (Unix seconds, sent as
/// `X-Twilio-Email-Event-Webhook-Timestamp`), signed with `key`: base64 of the
/// DER signature (deterministic, RFC 6979). For tests and fixtures.
pub fn sign(key: &SigningKey, timestamp: u64, body: &[u8]) -> String {
    let sig: Signature = key.multipart_sign(&[timestamp.to_string().as_bytes(), body]);
    Encoding::Base64.encode(sig.to_der().as_bytes())
}

/// The verification key as SendGrid shows it (base64 of the DER
/// `SubjectPublicKeyInfo`): the [`SigningSecret`](crate::verify::SigningSecret) text to configure for a
/// key made with [`sign`]'s `SigningKey`.
pub fn public_key_base64(key: &VerifyingKey) -> String {
    // Encoding a valid P-256 point as SubjectPublicKeyInfo cannot fail.
    key.to_public_key_der().map(|der| Encoding::Base64.encode(der.as_bytes())).unwrap_or_default()
}

/// SendGrid's event identity: key `sha256:<hex>` of the batch's sorted
/// `sg_event_id`s, type = the events' common `event` (see the module docs).
///
/// # Errors
/// [`KeyErrorKind::BodyNotJson`] for a body that is not JSON,
/// [`KeyErrorKind::Invalid`] when it is not an array of objects or an
/// `sg_event_id` is not a string, [`KeyErrorKind::Missing`] for an empty
/// batch or an event without `sg_event_id`.
pub fn batch_identity(_parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
    let doc: serde_json::Value = serde_json::from_slice(body).map_err(|_| KeyErrorKind::BodyNotJson)?;
    let events = doc.as_array().ok_or(KeyErrorKind::Invalid)?;
    if events.is_empty() {
        return Err(KeyErrorKind::Missing.into());
    }
    let mut ids = Vec::with_capacity(events.len());
    let mut types = events.iter().map(|e| e.get("event").and_then(serde_json::Value::as_str));
    let first_type = types.next().flatten();
    let common_type = first_type.filter(|t| types.all(|other| other == Some(*t)));
    for event in events {
        match event.as_object().ok_or(KeyErrorKind::Invalid)?.get("sg_event_id") {
            Some(serde_json::Value::String(id)) if !id.is_empty() => ids.push(id.as_str()),
            Some(serde_json::Value::String(_)) | None => return Err(KeyErrorKind::Missing.into()),
            Some(_) => return Err(KeyErrorKind::Invalid.into()),
        }
    }
    ids.sort_unstable();
    let mut hash = Sha256::new();
    for id in ids {
        hash.update((id.len() as u64).to_be_bytes());
        hash.update(id.as_bytes());
    }
    Ok(EventIdentity {
        key: format!("sha256:{}", hex::encode(hash.finalize())),
        event_type: common_type.filter(|t| !t.is_empty()).map(str::to_owned),
    })
}

impl crate::providers::Provider {
    /// SendGrid Event Webhook (ECDSA P-256; derived key over the batch's `sg_event_id`s). See [`crate::providers::sendgrid`].
    ///
    /// The SendGrid preset: [`SendGridVerifier`] (25 h), key from
    /// [`batch_identity`]. The CLI name is `sendgrid`.
    pub fn sendgrid() -> Self {
        crate::providers::Provider::new(NAME, SendGridVerifier::new(), batch_identity)
    }
}

/// [`PresetInfo::sign`](super::PresetInfo::sign) for SendGrid: `key` is
/// the P-256 private scalar (32 bytes, hexadecimal); the receiver verifies
/// with its public key (base64 DER).
fn send(key: &str, d: &super::Signing<'_>) -> Result<super::Example, super::SignError> {
    let key = hex::decode(key.trim())
        .ok()
        .and_then(|bytes| SigningKey::from_slice(&bytes).ok())
        .ok_or_else(|| super::key_error("sendgrid: the private key is a P-256 scalar (32 bytes) in hexadecimal"))?;
    let ts = super::unix_seconds(d.at);
    let headers = super::signature_and_time(SIGNATURE_HEADER, TIMESTAMP_HEADER, ts, |ts| sign(&key, ts, d.body));
    let public = crate::verify::SigningSecret::from(public_key_base64(key.verifying_key()));
    super::signed_delivery(Provider::sendgrid(), public, d, headers, d.body.to_vec())
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    "sendgrid",
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER, TIMESTAMP_HEADER],
    |_| Provider::sendgrid(),
    super::ExampleOf::Whole(|_, at, body| {
        let key = p256::ecdsa::SigningKey::from_slice(&[9; 32]).expect("a valid P-256 scalar");
        let headers = super::signature_and_time(SIGNATURE_HEADER, TIMESTAMP_HEADER, super::unix_seconds(at), |ts| {
            sign(&key, ts, body)
        });
        super::asymmetric_example(Provider::sendgrid(), public_key_base64(key.verifying_key()), headers, body)
    }),
)
.sends(send)
.keys(super::KeyKind::PublicKey, super::raw_secret, Some(super::raw_secret))
.signs("`X-Twilio-Email-Event-Webhook-Signature` ECDSA P-256 over `{timestamp}{body}`")
.key_from("fields of the JSON body (a derived key)")
.fixture(super::Fixture::own("P-256 public key (`sdk.json`)"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::TwoHeaders;
    use crate::test_support::fixture_json;
    use crate::test_support::{at, NOW};
    use crate::verify::VerifyErrorKind::{MalformedHeader, NoMatchingSignature};
    use crate::verify::{Delivery, SigningSecret, Verifier as _};

    fn parts(signatures: &[&str], timestamps: &[&str]) -> http::request::Parts {
        crate::test_support::two_header_lines(SIGNATURE_HEADER, signatures, TIMESTAMP_HEADER, timestamps)
    }

    fn check(
        v: &SendGridVerifier,
        key: &str,
        body: &[u8],
        sig: &str,
        ts: &str,
        now: u64,
    ) -> Result<(), VerifyErrorKind> {
        let p = parts(&[sig], &[ts]);
        let secrets = [SigningSecret::from(key)];
        v.verify(&Delivery::new(&p, body, &secrets, at(now))).map_err(|e| e.kind())
    }

    /// SendGrid's published sample: public key, payload, signature and
    /// timestamp of its "Verify the signature" example, used by the official
    /// libraries' examples and tests (sendgrid-java `examples/eventwebhook`,
    /// sendgrid-go, sendgrid-python, sendgrid-ruby, sendgrid-php
    /// `EventWebhookTest`). sendgrid-go's test also publishes the private key
    /// (SEC1 `MHcCAQEEIEQmZgBE...`), whose scalar is `DOCS_PRIVATE_KEY`.
    const DOCS_PUBLIC_KEY: &str = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==";
    const DOCS_PAYLOAD: &str = r#"{"category":"example_payload","event":"test_event","message_id":"message_id"}"#;
    const DOCS_SIGNATURE: &str =
        "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0=";
    const DOCS_TIMESTAMP: &str = "1588788367";
    const DOCS_PRIVATE_KEY: &str = "442666004487d0dc53dccc977e1cccadf1a2fe0062f9bd3f7afbacd07674d5ed";

    #[test]
    fn docs_sample() {
        let v = SendGridVerifier::new();
        let now = 1_588_788_367;
        let cases: &[(&str, &str, &str, &str, &str, Result<(), VerifyErrorKind>)] = &[
            ("valid", DOCS_PUBLIC_KEY, DOCS_PAYLOAD, DOCS_SIGNATURE, DOCS_TIMESTAMP, Ok(())),
            ("payload changed", DOCS_PUBLIC_KEY, "payload", DOCS_SIGNATURE, DOCS_TIMESTAMP, Err(VerifyErrorKind::NoMatchingSignature)),
            (
                // Within the tolerance (checked first), so the signature decides: the timestamp is signed.
                "timestamp changed",
                DOCS_PUBLIC_KEY,
                DOCS_PAYLOAD,
                DOCS_SIGNATURE,
                "1588788368",
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            (
                // sendgrid-nodejs's "bad signature": one base64 digit changed.
                "signature changed",
                DOCS_PUBLIC_KEY,
                DOCS_PAYLOAD,
                "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH3j/0=",
                DOCS_TIMESTAMP,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            (
                // sendgrid-nodejs's "invalid key".
                "other key",
                "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEqTxd43gyp8IOEto2LdIfjRQrIbsd4SXZkLW6jDutdhXSJCWHw8REntlo7aNDthvj+y7GjUuFDb/R1NGe1OPzpA==",
                DOCS_PAYLOAD,
                DOCS_SIGNATURE,
                DOCS_TIMESTAMP,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            ("not a key", "c2VjcmV0", DOCS_PAYLOAD, DOCS_SIGNATURE, DOCS_TIMESTAMP, Err(VerifyErrorKind::NoMatchingSignature)),
            ("non-numeric timestamp", DOCS_PUBLIC_KEY, DOCS_PAYLOAD, DOCS_SIGNATURE, "timestamp", Err(VerifyErrorKind::MalformedHeader)),
        ];
        for (name, key, payload, sig, ts, want) in cases {
            assert_eq!(check(&v, key, payload.as_bytes(), sig, ts, now), *want, "{name}");
        }
        // The same key as PEM.
        let pem = format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n{}\n-----END PUBLIC KEY-----",
            &DOCS_PUBLIC_KEY[..64],
            &DOCS_PUBLIC_KEY[64..]
        );
        assert_eq!(check(&v, &pem, DOCS_PAYLOAD.as_bytes(), DOCS_SIGNATURE, DOCS_TIMESTAMP, now), Ok(()));
        // The published private key signs what the published public key verifies.
        let key = SigningKey::from_slice(&hex::decode(DOCS_PRIVATE_KEY).unwrap()).unwrap();
        assert_eq!(public_key_base64(key.verifying_key()), DOCS_PUBLIC_KEY);
        let ours = sign(&key, 1_588_788_367, DOCS_PAYLOAD.as_bytes());
        assert_eq!(check(&v, DOCS_PUBLIC_KEY, DOCS_PAYLOAD.as_bytes(), &ours, DOCS_TIMESTAMP, now), Ok(()));
    }

    /// The fixed vectors of `@sendgrid/eventwebhook@8.0.0`'s own spec
    /// (`src/eventwebhook.spec.js`): one event, and two events with `\r\n`
    /// between them (its signature has a high `s`).
    #[test]
    fn sdk_spec_vectors() {
        let v = SendGridVerifier::new().tolerance(Duration::from_secs(u64::MAX / 4));
        let single = concat!(
            r#"[{"email":"hello@world.com","event":"dropped","reason":"Bounced Address","sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA","#,
            r#""sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0","#,
            r#""smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>","timestamp":1600112492}]"#,
            "\r\n"
        );
        let multiple = concat!(
            r#"[{"email":"invalid@gmail.com","event":"processed","send_at":0,"sg_event_id":"cHJvY2Vzc2VkLTE5OTQyMTEyLXFOd0JMZ1BRUWpXNkRKdktRd1NBYnctMA","#,
            r#""sg_message_id":"qNwBLgPQQjW6DJvKQwSAbw.filterdrecv-canary-547b64655b-cw6zx-1-6089EA4A-56.0","#,
            r#""smtp-id":"<qNwBLgPQQjW6DJvKQwSAbw@ismtpd0178p1mdw1.sendgrid.net>","timestamp":1619651146},"#,
            "\r\n",
            r#"{"email":"invalid@gmail.com","event":"bounce","ip":"167.89.101.76","#,
            r#""reason":"552 5.2.2 The email account that you tried to reach is over quota and inactive. Please direct the recipient to https://support.google.com/mail/?p=OverQuotaPerm c17si1130468pgv.34 - gsmtp","#,
            r#""sg_event_id":"Ym91bmNlLTAtMTk5NDIxMTItcU53QkxnUFFRalc2REp2S1F3U0Fidy0w","#,
            r#""sg_message_id":"qNwBLgPQQjW6DJvKQwSAbw.filterdrecv-canary-547b64655b-cw6zx-1-6089EA4A-56.0","#,
            r#""smtp-id":"<qNwBLgPQQjW6DJvKQwSAbw@ismtpd0178p1mdw1.sendgrid.net>","status":"5.2.2","timestamp":1619651147,"tls":1,"type":"blocked"}]"#,
            "\r\n"
        );
        let single_key = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==";
        let single_sig =
            "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM=";
        let multi_key = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEQ4LIFtWztlsF7skFqOncjD1lun4H5w8XOhyOArHW9RcIx/FfEzx6cikC/yPfUvwaX/JScE7Fc9CJD2afQ9Ok3Q==";
        let multi_sig =
            "MEYCIQC/I4o6vCgqRYrTljjoVWB/GRWNtxeePlLMHr3x9ETeRQIhAIpV+03nREPTTHWSW0wIOA0EoMPdcNgXa70yCaqDJlu5";
        let high_s = Signature::from_der(&Encoding::Base64.decode(multi_sig).unwrap()).unwrap();
        assert_ne!(high_s.normalize_s(), high_s);
        let cases: &[(&str, &str, &str, &str, &str, Result<(), VerifyErrorKind>)] = &[
            ("single event", single_key, single, single_sig, "1600112502", Ok(())),
            ("multiple events, high s", multi_key, multiple, multi_sig, "1619651159", Ok(())),
            (
                "without the final CRLF",
                single_key,
                single.trim_end(),
                single_sig,
                "1600112502",
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            ("keys swapped", multi_key, single, single_sig, "1600112502", Err(VerifyErrorKind::NoMatchingSignature)),
        ];
        for (name, key, body, sig, ts, want) in cases {
            assert_eq!(check(&v, key, body.as_bytes(), sig, ts, 1_700_000_000), *want, "{name}");
        }
        let id = batch_identity(&parts(&[], &[]), multiple.as_bytes()).unwrap();
        assert_eq!(id.event_type, None);
        assert!(id.key.starts_with("sha256:"));
        assert_eq!(batch_identity(&parts(&[], &[]), single.as_bytes()).unwrap().event_type.as_deref(), Some("dropped"));
    }

    /// Fixture from `scripts/fixtures/sendgrid.js`: signed with node:crypto
    /// (ECDSA P-256, SHA-256, DER) and accepted by `@sendgrid/eventwebhook@8.0.0`
    /// and by `sendgrid==6.12.5` (Python).
    #[test]
    fn sdk_fixture() {
        let doc: serde_json::Value = fixture_json("sendgrid/sdk.json");
        assert_eq!(doc["npm"], "valid");
        assert_eq!(doc["pypi"], "valid");
        let s = |k: &str| doc[k].as_str().unwrap();
        let ts: u64 = s("timestamp").parse().unwrap();
        let v = SendGridVerifier::new();
        assert_eq!(check(&v, s("public_key"), s("body").as_bytes(), s("signature"), s("timestamp"), ts + 10), Ok(()));
        assert_eq!(
            check(
                &v,
                s("public_key"),
                s("body").replace("delivered", "bounce").as_bytes(),
                s("signature"),
                s("timestamp"),
                ts
            ),
            Err(VerifyErrorKind::NoMatchingSignature)
        );
        let id = crate::test_support::identity(
            &crate::providers::Provider::sendgrid(),
            &parts(&[], &[]),
            s("body").as_bytes(),
        );
        assert_eq!(id.event_type.as_deref(), Some("delivered"));
    }

    /// The deliveries of `body` signed with the key of seed `[7; 32]` (or
    /// of `[9; 32]`).
    fn scheme(body: &[u8]) -> TwoHeaders<'_> {
        let keys = [7u8, 9].map(|b| SigningKey::from_slice(&[b; 32]).unwrap());
        let public = keys.clone().map(|k| SigningSecret::from(public_key_base64(k.verifying_key())));
        let mut s =
            TwoHeaders::new(SendGridVerifier::new(), [SIGNATURE_HEADER, TIMESTAMP_HEADER], body, public, |i, b| {
                sign(&keys[i], NOW, b)
            });
        s.tolerance = 90_000; // the pinned default: SendGrid retries for 24 hours
        s
    }

    #[test]
    fn verifies_and_rejects() {
        let s = scheme(b"[{\"email\":\"a@example.com\",\"event\":\"delivered\",\"sg_event_id\":\"ZGVsaXZlcmVk\"}]\r\n");
        let raw_sig = {
            let sig = Signature::from_der(&Encoding::Base64.decode(&s.good).unwrap()).unwrap();
            Encoding::Base64.encode(&sig.to_bytes())
        };
        s.check_with_common(&[
            s.case("spaces around").signature(&format!(" {} ", s.good)),
            s.case("two lines, one good").signatures(&[&s.by_other, &s.good]),
            s.case("same timestamp twice").timestamps(&[&s.timestamp, &s.timestamp]),
            s.case("other timestamp").timestamp("1700000001").fails(NoMatchingSignature),
            s.case("not base64").signature("***").fails(MalformedHeader),
            s.case("unpadded base64").signature(s.good.trim_end_matches('=')).fails(MalformedHeader),
            s.case("raw r||s, not DER").signature(&raw_sig).fails(MalformedHeader),
            s.case("empty").signature("").fails(MalformedHeader),
            s.case("bad line beside a good one").signatures(&["***", &s.good]).fails(MalformedHeader),
        ]);
    }

    #[test]
    fn rotation_and_replay() {
        let s = scheme(b"[]\r\n");
        s.check_rotation_tolerance_and_replay(SendGridVerifier::new().tolerance(4 * DEFAULT_TOLERANCE));
        // A secret that is no key at all is skipped, not fatal.
        let p = parts(&[&s.good], &[&s.timestamp]);
        let keys = [SigningSecret::from("not a key"), s.other_key.clone(), s.key.clone()];
        assert!(SendGridVerifier::new().verify(&Delivery::new(&p, s.body, &keys, at(NOW))).is_ok());
    }

    #[test]
    fn check_secrets_cases() {
        use crate::verify::KeyMaterialErrorKind as K;
        let pem = format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n{}\n-----END PUBLIC KEY-----\n",
            &DOCS_PUBLIC_KEY[..64],
            &DOCS_PUBLIC_KEY[64..]
        );
        // The start of a P-384 key in the same DER form (truncated).
        let p384 = "MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAE";
        // The published key with its point's last byte changed: off the curve.
        let off_curve = {
            let mut der = Encoding::Base64.decode(DOCS_PUBLIC_KEY).unwrap();
            *der.last_mut().unwrap() ^= 1;
            Encoding::Base64.encode(&der)
        };
        let cases: Vec<(&str, Vec<SigningSecret>, Result<(), (K, Option<usize>)>)> = vec![
            ("published key", vec![SigningSecret::from(DOCS_PUBLIC_KEY)], Ok(())),
            ("PEM", vec![SigningSecret::from(pem.as_str())], Ok(())),
            ("no secret", vec![], Err((K::NoSecret, None))),
            ("empty", vec![SigningSecret::from("")], Err((K::Empty, Some(0)))),
            ("not base64", vec![SigningSecret::from("***")], Err((K::InvalidPublicKey, Some(0)))),
            (
                "an API key",
                vec![SigningSecret::from("SG.abcdefghijklmnop.qrstuvwxyz")],
                Err((K::InvalidPublicKey, Some(0))),
            ),
            ("truncated", vec![SigningSecret::from(&DOCS_PUBLIC_KEY[..60])], Err((K::InvalidPublicKey, Some(0)))),
            ("off the curve", vec![SigningSecret::from(off_curve)], Err((K::InvalidPublicKey, Some(0)))),
            ("P-384 prefix", vec![SigningSecret::from(p384)], Err((K::InvalidPublicKey, Some(0)))),
            (
                "second key bad",
                vec![SigningSecret::from(DOCS_PUBLIC_KEY), SigningSecret::from("c2VjcmV0")],
                Err((K::InvalidPublicKey, Some(1))),
            ),
        ];
        for (name, secrets, want) in &cases {
            let got = SendGridVerifier::new().check_secrets(secrets).map_err(|e| (e.kind(), e.index()));
            assert_eq!(got, *want, "{name}");
        }
        // Parsed once, shared by clones.
        let secret = SigningSecret::from(DOCS_PUBLIC_KEY);
        SendGridVerifier::new().check_secrets(std::slice::from_ref(&secret)).unwrap();
        let cached = secret.clone().parsed::<Option<VerifyingKey>>(|_| panic!("parsed a second time"));
        assert_eq!(cached.as_ref().as_ref().map(public_key_base64).as_deref(), Some(DOCS_PUBLIC_KEY));
    }

    #[test]
    fn batch_key_cases() {
        let p = parts(&[], &[]);
        let ab = br#"[{"sg_event_id":"a","event":"open"},{"sg_event_id":"b","event":"open"}]"#;
        let ba = br#"[ {"event":"open","sg_event_id":"b"}, {"event":"open","sg_event_id":"a"} ]"#;
        let abc = br#"[{"sg_event_id":"a","event":"open"},{"sg_event_id":"bc","event":"open"}]"#;
        let a_bc = br#"[{"sg_event_id":"ab","event":"open"},{"sg_event_id":"c","event":"open"}]"#;
        let id = batch_identity(&p, ab).unwrap();
        assert_eq!(id.event_type.as_deref(), Some("open"));
        assert_eq!(batch_identity(&p, ba).unwrap(), id);
        assert_ne!(batch_identity(&p, abc).unwrap().key, batch_identity(&p, a_bc).unwrap().key);
        assert_eq!(id.key.len(), "sha256:".len() + 64);

        let cases: &[(&str, &[u8], Result<Option<&str>, KeyErrorKind>)] = &[
            ("mixed types", br#"[{"sg_event_id":"a","event":"open"},{"sg_event_id":"b","event":"click"}]"#, Ok(None)),
            ("no type", br#"[{"sg_event_id":"a"}]"#, Ok(None)),
            ("not json", b"sg_event_id=a", Err(KeyErrorKind::BodyNotJson)),
            ("object", br#"{"sg_event_id":"a"}"#, Err(KeyErrorKind::Invalid)),
            ("empty batch", b"[]", Err(KeyErrorKind::Missing)),
            ("missing id", br#"[{"sg_event_id":"a"},{"event":"open"}]"#, Err(KeyErrorKind::Missing)),
            ("empty id", br#"[{"sg_event_id":""}]"#, Err(KeyErrorKind::Missing)),
            ("numeric id", br#"[{"sg_event_id":1}]"#, Err(KeyErrorKind::Invalid)),
            ("not an object", br#"["a"]"#, Err(KeyErrorKind::Invalid)),
        ];
        for (name, body, want) in cases {
            let got = batch_identity(&p, body).map(|i| i.event_type).map_err(|e| e.kind());
            assert_eq!(got.as_ref().map(|t| t.as_deref()).map_err(|e| *e), *want, "{name}");
        }
    }

    #[test]
    fn more_than_max_signature_lines_is_malformed() {
        let sig = "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz/C+1hK6gV9bmz3cK3UxJY3xZ4c+cvxJ8FwgA8nIA=";
        let lines = vec![sig; MAX_SIGNATURES + 1];
        let err = P256::signed(&parts(&lines, &["1588788367"])).map(|_| ()).unwrap_err();
        assert_eq!(err.kind(), VerifyErrorKind::MalformedHeader);
        assert!(P256::signed(&parts(&[sig; MAX_SIGNATURES], &["1588788367"])).is_ok());
    }
}
