//! Square: the `x-square-hmacsha256-signature` header.
//!
//! Scheme (Square, "Verify and Validate an Event Notification",
//! <https://developer.squareup.com/docs/webhooks/step3validate>):
//! `x-square-hmacsha256-signature: <base64 HMAC-SHA256>` over
//! `{notification URL}{raw body}`, keyed with the webhook subscription's
//! signature key as UTF-8 bytes. One signature per delivery; no timestamp.
//! The legacy `x-square-signature` header (HMAC-SHA1) is not checked.
//!
//! The notification URL is the subscription's URL **exactly as registered
//! in Square** (scheme, host, path, query, trailing slash): it is
//! configuration ([`SquareVerifier::new`], [`Provider::square`](crate::providers::Provider::square)), never rebuilt from
//! the request, whose `Host` and path a proxy may rewrite and an attacker
//! may choose. Each subscription (URL and key) is one endpoint.
//!
//! **Rotation:** a subscription's signature key can be replaced in the
//! Developer Console or with `UpdateWebhookSubscriptionSignatureKey`;
//! configure the old and the new key while notifications signed with the
//! old one may still arrive (any one that matches passes).
//!
//! The event key is the notification's `event_id` (Square, "Manage Webhook
//! Operations", <https://developer.squareup.com/docs/webhooks/step4manage>:
//! "a generated idempotency value ... Design your application to use this
//! value to bypass processing if it's a repeated value"), and the event type
//! its `type` (`payment.updated`).
//!
//! **Limit of the scheme:** the body carries `created_at` but nothing binds
//! a delivery to the time it is sent, so a captured notification verifies
//! forever. Its `event_id` is signed with it, though: a replay is a
//! duplicate of the event it copies, which the claim absorbs.
//!
//! **Signed / not signed** (<https://developer.squareup.com/docs/webhooks/step3validate>):
//! the configured notification URL and the raw body are signed, so the event
//! key (the body's `event_id`) and the event type (the body's `type`) are
//! signed. Headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! object's `version` (an integer Square increments with every change, for
//! example `data.object.payment.version`) where it has one, else the event's
//! `created_at` (<https://developer.squareup.com/docs/webhooks/overview>).

use crate::providers::Provider;
use crate::verify::generic::{HmacVerifier, Quirks, SignedContent};
use crate::verify::{hmac_sha256, Delivery, Encoding, SigningSecret, Verifier, VerifyError};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "square";
/// How long a Square event can be sent again: 4 days.
///
/// Square retries an unacknowledged notification for up to 72 hours, then
/// discards it (Square, "Troubleshoot Webhooks",
/// <https://developer.squareup.com/docs/webhooks/troubleshooting>; an earlier
/// version of the page said 24 hours). Its webhook event logs are kept for 28
/// days (<https://developer.squareup.com/docs/devtools/webhook-logs>) for
/// inspection; no resend from them is documented. The 72 hours plus a day of
/// margin.
pub const REPLAY_WINDOW: std::time::Duration = super::days(4);

/// The header Square signs notifications with.
pub const SIGNATURE_HEADER: &str = "x-square-hmacsha256-signature";

/// Verifies `x-square-hmacsha256-signature` for one notification URL.
#[derive(Debug, Clone)]
#[must_use]
pub struct SquareVerifier {
    notification_url: String,
    inner: HmacVerifier,
}

impl SquareVerifier {
    /// A verifier for the subscription whose notification URL is
    /// `notification_url`, byte for byte as registered in Square (for example
    /// `https://example.com/webhooks/square`). An empty URL is accepted (the
    /// body alone is then signed).
    pub fn new(notification_url: impl Into<String>) -> Self {
        let notification_url = notification_url.into();
        // The scheme as a specification of the generic HMAC verifier: one
        // base64 tag of exactly 32 bytes per line, anything else malformed.
        let inner = HmacVerifier::builder(SIGNATURE_HEADER)
            .encoding(Encoding::Base64)
            .signed_content(SignedContent::UrlBody { url: notification_url.clone() })
            .quirks(Quirks::SQUARE)
            .strict()
            .build();
        Self { notification_url, inner: inner.expect("a valid fixed configuration") }
    }

    /// The notification URL the signature covers.
    pub fn notification_url(&self) -> &str {
        &self.notification_url
    }
}

impl Verifier for SquareVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        self.inner.precheck(parts)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        self.inner.verify(delivery)
    }
}

/// The `x-square-hmacsha256-signature` value Square would send for `body`
/// posted to `notification_url` with signature key `secret`. For tests and
/// fixtures.
pub fn sign(secret: &SigningSecret, notification_url: &str, body: &[u8]) -> String {
    Encoding::Base64.encode(&hmac_sha256(secret, &[notification_url.as_bytes(), body]))
}

impl crate::providers::Provider {
    /// Square (`x-square-hmacsha256-signature` over the notification URL +
    /// body; key = `event_id`). `notification_url` is the URL exactly as
    /// registered in Square. See [`crate::providers::square`].
    ///
    /// The Square preset for the subscription registered with `notification_url`
    /// (exactly as entered in Square): [`SquareVerifier`], key `/event_id`, type
    /// `/type`.
    pub fn square(notification_url: impl Into<String>) -> Self {
        super::json_keyed(NAME, SquareVerifier::new(notification_url), "/event_id", "/type")
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    "square",
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER],
    |url| Provider::square(url),
    super::ExampleOf::Signed(|s, d| vec![(SIGNATURE_HEADER, sign(s, d.url, d.body))]),
)
.signing(super::UrlArg::NotificationUrl)
.signs("`x-square-hmacsha256-signature` base64 HMAC-SHA256 of `{notification URL}{body}`")
.key_from("the body's event_id (JSON)")
.fixture(super::Fixture::own("the SDK's vectors (`sdk.json`): signs the notification URL"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::test_support::fixture_json;
    use crate::verify::VerifyErrorKind;
    use std::time::SystemTime;

    fn parts(values: &[&str]) -> http::request::Parts {
        let mut b = http::Request::builder().method("POST").uri("https://attacker.example/other?x=1");
        for v in values {
            b = b.header(SIGNATURE_HEADER, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    fn verify(url: &str, values: &[&str], body: &[u8], secrets: &[SigningSecret]) -> Result<(), VerifyErrorKind> {
        let p = parts(values);
        SquareVerifier::new(url).verify(&Delivery::new(&p, body, secrets, SystemTime::now())).map_err(|e| e.kind())
    }

    /// The fixed vectors in Square's Node.js SDK tests
    /// (`square-nodejs-sdk`, `test/utilities/webhooksHelper.test.ts`).
    #[test]
    fn square_sdk_test_vectors() {
        let body = r#"{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}"#;
        let url = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9";
        let key = SigningSecret::from("Ibxx_5AKakO-3qeNVR61Dw");
        let sig = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=";
        let cases: &[(&str, &str, &str, &str, &str, Result<(), VerifyErrorKind>)] = &[
            ("pass", url, body, "Ibxx_5AKakO-3qeNVR61Dw", sig, Ok(())),
            (
                "unescaped chars",
                "https://webhook.site/webhooks",
                r#"{"data":{"type":"webhooks","id":"fake_id"}}"#,
                "signature-key",
                "W3FlCNk5IA3ZQ2LHTWoajvzfaDu/OwY2tNHIHC3IUOA=",
                Ok(()),
            ),
            (
                "escaped chars",
                "https://webhook.site/webhooks",
                r#"{"data":{"type":"webhooks","id":">id<"}}"#,
                "signature-key",
                "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U=",
                Ok(()),
            ),
            (
                "url mismatch",
                "https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9",
                body,
                "Ibxx_5AKakO-3qeNVR61Dw",
                sig,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            ("wrong key", url, body, "MCmhFRxGX82xMwg5FsaoQA", sig, Err(VerifyErrorKind::NoMatchingSignature)),
            // A 20-byte (HMAC-SHA1 sized) value can never match.
            (
                "invalid header",
                url,
                body,
                "Ibxx_5AKakO-3qeNVR61Dw",
                "1z2n3DEJJiUPKcPzQo1ftvbxGdw=",
                Err(VerifyErrorKind::MalformedHeader),
            ),
            (
                "body mismatch",
                url,
                &body.replace("2022-07-13", "2022-06-13"),
                "Ibxx_5AKakO-3qeNVR61Dw",
                sig,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
        ];
        for (name, url, body, key, sig, want) in cases {
            assert_eq!(verify(url, &[sig], body.as_bytes(), &[SigningSecret::from(*key)]), *want, "{name}");
        }
        assert_eq!(sign(&key, url, body.as_bytes()), sig);
    }

    #[derive(serde::Deserialize)]
    struct Fixture {
        notification_url: String,
        signature_key: String,
        body: String,
        signature: String,
    }

    /// Made by [`sign`] and accepted by the `square@46.0.0` SDK's
    /// `WebhooksHelper.verifySignature` and the legacy
    /// `isValidWebhookEventSignature` (`scripts/fixtures/square.js`).
    #[test]
    fn square_sdk_fixture() {
        let f: Fixture = fixture_json("square/sdk.json");
        let key = SigningSecret::from(f.signature_key.as_str());
        assert_eq!(sign(&key, &f.notification_url, f.body.as_bytes()), f.signature);
        let secrets = [key];
        assert_eq!(verify(&f.notification_url, &[&f.signature], f.body.as_bytes(), &secrets), Ok(()));
        let p = parts(&[&f.signature]);
        let id = crate::providers::Provider::square(f.notification_url.as_str())
            .extractor_ref()
            .extract(&p, f.body.as_bytes())
            .unwrap();
        assert_eq!(id.key, "5e8c6f1a-2d8b-4c3e-9a41-0b7f3d2e6c19");
        assert_eq!(id.event_type.as_deref(), Some("payment.updated"));
    }

    #[test]
    fn verifies_and_rejects() {
        let url = "https://example.com/webhooks/square";
        let key = SigningSecret::from("sig-key-new");
        let old = SigningSecret::from("sig-key-old");
        let body = br#"{"event_id":"e1","type":"payment.created"}"#;
        let good = sign(&key, url, body);
        let by_old = sign(&old, url, body);
        let other_url = sign(&key, "https://example.com/webhooks/square/", body);
        let current = std::slice::from_ref(&key);
        let cases: &[(&str, Vec<&str>, &[u8], &[SigningSecret], Result<(), VerifyErrorKind>)] = &[
            ("valid", vec![&good], body, current, Ok(())),
            ("tampered body", vec![&good], b"{}", current, Err(VerifyErrorKind::NoMatchingSignature)),
            ("signed for another URL", vec![&other_url], body, current, Err(VerifyErrorKind::NoMatchingSignature)),
            ("old key only", vec![&by_old], body, current, Err(VerifyErrorKind::NoMatchingSignature)),
            ("rotation: both keys configured", vec![&by_old], body, &[key.clone(), old.clone()], Ok(())),
            ("two lines, one good", vec![&by_old, &good], body, current, Ok(())),
            ("duplicate lines", vec![&good, &good], body, current, Ok(())),
            ("missing", vec![], body, current, Err(VerifyErrorKind::MissingHeader)),
            ("malformed", vec!["not base64!"], body, current, Err(VerifyErrorKind::MalformedHeader)),
            ("empty", vec![""], body, current, Err(VerifyErrorKind::MalformedHeader)),
            ("no secret", vec![&good], body, &[], Err(VerifyErrorKind::NoSecret)),
        ];
        for (name, values, body, secrets, want) in cases {
            assert_eq!(verify(url, values, body, secrets), *want, "{name}");
        }
        // The request's own URI plays no part (parts() uses another host).
        assert_eq!(SquareVerifier::new(url).notification_url(), url);
    }

    /// `SquareVerifier::new("")` is accepted, as before it was a
    /// specification of the generic builder: the body alone is signed.
    #[test]
    fn empty_url_signs_the_body_alone() {
        let key = SigningSecret::from("k");
        let body = br#"{"event_id":"e"}"#;
        let cases = [
            ("body alone", sign(&key, "", body), Ok(())),
            ("with a URL", sign(&key, "u", body), Err(VerifyErrorKind::NoMatchingSignature)),
        ];
        for (name, sig, want) in cases {
            assert_eq!(verify("", &[&sig], body, std::slice::from_ref(&key)), want, "{name}");
        }
    }

    #[test]
    fn precheck_and_key() {
        let v = SquareVerifier::new("https://example.com/");
        assert_eq!(v.precheck(&parts(&[])).unwrap_err().kind(), VerifyErrorKind::MissingHeader);
        assert_eq!(v.precheck(&parts(&["x"])).unwrap_err().kind(), VerifyErrorKind::MalformedHeader);
        assert!(v.precheck(&parts(&[&sign(&SigningSecret::from("k"), "u", b"")])).is_ok());
        let x = crate::providers::Provider::square("https://example.com/");
        let p = parts(&[]);
        let cases: &[(&str, &[u8], Result<(&str, Option<&str>), KeyErrorKind>)] = &[
            ("both", br#"{"event_id":"e","type":"t"}"#, Ok(("e", Some("t")))),
            ("no event_id", br#"{"id":"e","type":"t"}"#, Err(KeyErrorKind::Missing)),
            ("not json", b"event_id=e", Err(KeyErrorKind::BodyNotJson)),
        ];
        for (name, body, want) in cases {
            let got = x.extractor_ref().extract(&p, body);
            let got = got.as_ref().map(|i| (i.key.as_str(), i.event_type.as_deref())).map_err(|e| e.kind());
            assert_eq!(got, *want, "{name}");
        }
        assert_eq!(x.name(), "square");
    }
}
