//! Shopify: the `X-Shopify-Hmac-Sha256` header.
//!
//! Scheme (Shopify, "Verify webhook deliveries",
//! <https://shopify.dev/docs/apps/build/webhooks/verify-deliveries>, and
//! "Deliver webhooks through HTTPS",
//! <https://shopify.dev/docs/apps/build/webhooks/subscribe/https>):
//! `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256 of the raw body>`, keyed with
//! the app's client secret (the API secret key) as UTF-8 bytes. One
//! signature per delivery; no timestamp, no prefix.
//!
//! Shopify's Events deliveries (developer preview,
//! <https://shopify.dev/docs/apps/build/events/verify-deliveries>) sign the
//! same way but name their headers without the `X-`: `Shopify-Hmac-Sha256`,
//! `Shopify-Event-Id`, `Shopify-Webhook-Id`, `Shopify-Topic`. This preset
//! accepts either family (as `@shopify/shopify-api` does); every signature
//! found in either header is tried.
//!
//! **Rotation:** after the client secret is rotated, Shopify may keep
//! signing with the old one for up to an hour; configure both secrets for
//! that time (any one that matches passes).
//!
//! **Event key** ([`ShopifyKey`]): Shopify's "Ignore duplicate webhooks"
//! (<https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates>) names
//! `X-Shopify-Event-Id` ("the same value across more than one webhook
//! indicates a duplicate"); its newer "Verify webhook deliveries" page and
//! the app template's `webhookId` ("the idempotency key") name
//! `X-Shopify-Webhook-Id`. The default reads the event id and falls back to
//! the webhook id when a delivery has none. The two differ when one event
//! reaches the endpoint through several subscriptions to the same topic
//! (Shopify sends one webhook per subscription): the event id claims the
//! event once for all of them, the webhook id once per subscription. Pick
//! [`ShopifyKey::WebhookId`] when the subscriptions differ (other fields, API
//! versions or filters) and each copy must be handled. The event type is
//! `X-Shopify-Topic` (`orders/create`).
//!
//! **Limit of the scheme:** as with GitHub, only the body is signed: no
//! timestamp, and none of the id or topic headers. Whoever captured one
//! delivery can send it again under a fresh event id and it verifies. The
//! claim stops Shopify's retries and concurrent copies, not a replay by
//! someone holding a captured request; make business writes idempotent on
//! the payload's own identity (an order's `id` and `updated_at`).
//!
//! **Signed / not signed**
//! (<https://shopify.dev/docs/apps/build/webhooks/verify-deliveries>): only
//! the raw body is signed. The event key (`X-Shopify-Event-Id` or
//! `X-Shopify-Webhook-Id`, or their unprefixed Events forms) and the event
//! type (`X-Shopify-Topic`) are headers and **not signed**: a captured body
//! re-sent with other id or topic headers verifies.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! resource's `updated_at` (ISO 8601) as Unix milliseconds; deliveries are not
//! ordered (several updates may be folded into one, Shopify developer
//! changelog, "Webhooks delivered from Shopify are being improved"). The
//! `X-Shopify-Triggered-At` header is not signed.

use crate::key::{EventIdentity, KeyError, KeyErrorKind, KeyExtractor};
use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;
use crate::verify::Encoding;

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "x-shopify-hmac-sha256";

/// The facts of the shopify preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Shopify event can be sent again: 2 days.
///
/// Shopify retries a failed delivery 8 times over 4 hours, with exponential
/// backoff, since 2024-09-10 (19 times over 48 hours before; Shopify
/// developer changelog, "Updates to webhook retry mechanism",
/// <https://shopify.dev/changelog/updates-to-webhook-retry-mechanism>;
/// <https://shopify.dev/docs/apps/build/webhooks/troubleshooting-webhooks>),
/// then drops the delivery (and, after repeated failures, an Admin API
/// subscription). It documents no manual redelivery: a dropped event comes
/// back only by reconciling through the Admin API, under no webhook id. The
/// 2 days are a wide margin over the 4 hours, and still cover the 48 hours
/// of the former schedule.
pub const FACTS: HmacPreset = HmacPreset {
    name: "shopify",
    scheme: HmacScheme {
        encoding: Encoding::Base64,
        also_header: Some(EVENTS_SIGNATURE_HEADER),
        strict: true,
        ..HmacScheme::new(SIGNATURE_HEADER)
    },
    event_key: EventKey::Own {
        extractor: &ShopifyKey::EventIdThenWebhookId,
        reads: "the X-Shopify-Event-Id header (else X-Shopify-Webhook-Id)",
        id_header: Some(EVENT_ID_HEADER),
    },
    headers: &[WEBHOOK_ID_HEADER, TOPIC_HEADER, EVENTS_EVENT_ID_HEADER, EVENTS_WEBHOOK_ID_HEADER, EVENTS_TOPIC_HEADER],
    replay_window: super::days(2),
    replay_evidence:
        "8 retries over 4 hours (48 h before 2024-09-10); no manual redelivery (https://shopify.dev/changelog/updates-to-webhook-retry-mechanism)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::own("the SDK's vectors (`sdk.json`), in both header spellings"),
};

impl Provider {
    /// Shopify (`X-Shopify-Hmac-Sha256` base64; key = `X-Shopify-Event-Id`, else
    /// `X-Shopify-Webhook-Id`). See [`crate::providers::shopify`].
    ///
    /// The Shopify preset: [`shopify::FACTS`](FACTS), key [`ShopifyKey::default`]
    /// (`X-Shopify-Event-Id`, falling back to `X-Shopify-Webhook-Id`), type
    /// `X-Shopify-Topic`. Another key policy:
    /// `Provider::shopify().key_extractor(ShopifyKey::WebhookId)`.
    pub fn shopify() -> Self {
        FACTS.provider()
    }
}

/// The header carrying the event id (the default event key).
const EVENT_ID_HEADER: &str = "x-shopify-event-id";
/// The header carrying the webhook (delivery) id, equal on retries.
const WEBHOOK_ID_HEADER: &str = "x-shopify-webhook-id";
/// The header carrying the topic (the event type).
const TOPIC_HEADER: &str = "x-shopify-topic";

/// Events deliveries' signature header (no `X-`).
const EVENTS_SIGNATURE_HEADER: &str = "shopify-hmac-sha256";
/// Events deliveries' event id header.
const EVENTS_EVENT_ID_HEADER: &str = "shopify-event-id";
/// Events deliveries' webhook id header.
const EVENTS_WEBHOOK_ID_HEADER: &str = "shopify-webhook-id";
/// Events deliveries' topic header.
const EVENTS_TOPIC_HEADER: &str = "shopify-topic";

/// Where a Shopify delivery's event key is read. Each header is looked up
/// under its webhook name (`X-Shopify-...`) and then its Events name
/// (`Shopify-...`); the type is always the topic header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ShopifyKey {
    /// `X-Shopify-Event-Id`, or `X-Shopify-Webhook-Id` when the delivery has
    /// no event id. The default.
    #[default]
    EventIdThenWebhookId,
    /// `X-Shopify-Event-Id` only: one claim per event, whatever the number of
    /// subscriptions that delivered it.
    EventId,
    /// `X-Shopify-Webhook-Id` only: one claim per subscription's delivery.
    WebhookId,
}

/// The single, non-blank value of the first of `names` present.
fn first_header(parts: &http::request::Parts, names: [&str; 2]) -> Result<Option<String>, KeyError> {
    for name in names {
        let mut values = parts.headers.get_all(name).iter();
        let Some(first) = values.next() else { continue };
        // Two different values for one header make the key ambiguous.
        if values.any(|v| v != first) {
            return Err(KeyErrorKind::Invalid.into());
        }
        let text = first.to_str().map_err(|_| KeyErrorKind::Invalid)?.trim();
        if !text.is_empty() {
            return Ok(Some(text.to_owned()));
        }
    }
    Ok(None)
}

impl KeyExtractor for ShopifyKey {
    fn extract(&self, parts: &http::request::Parts, _body: &[u8]) -> Result<EventIdentity, KeyError> {
        let event_id = || first_header(parts, [EVENT_ID_HEADER, EVENTS_EVENT_ID_HEADER]);
        let webhook_id = || first_header(parts, [WEBHOOK_ID_HEADER, EVENTS_WEBHOOK_ID_HEADER]);
        let key = match self {
            Self::EventIdThenWebhookId => match event_id()? {
                Some(id) => Some(id),
                None => webhook_id()?,
            },
            Self::EventId => event_id()?,
            Self::WebhookId => webhook_id()?,
        };
        let key = key.ok_or(KeyErrorKind::Missing)?;
        let event_type = first_header(parts, [TOPIC_HEADER, EVENTS_TOPIC_HEADER])?;
        Ok(EventIdentity { key, event_type })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::sign;
    use crate::test_support::fixture_json;
    use crate::verify::SigningSecret;
    use crate::verify::VerifyErrorKind;
    use crate::verify::{Delivery, Verifier as _};
    use std::time::SystemTime;

    fn parts(headers: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::builder().method("POST").uri("/webhooks/shopify");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    fn verify(headers: &[(&str, &str)], body: &[u8], secrets: &[SigningSecret]) -> Result<(), VerifyErrorKind> {
        let p = parts(headers);
        FACTS.verifier().verify(&Delivery::new(&p, body, secrets, SystemTime::now())).map_err(|e| e.kind())
    }

    /// The fixed vector in `@shopify/shopify-api`'s own webhook tests
    /// (`lib/webhooks/__tests__/validate.test.ts`: secret `test_secret_key`
    /// from `test-config.ts`, body `{"foo": "bar"}`).
    #[test]
    fn shopify_sdk_test_vector() {
        let secret = SigningSecret::from("test_secret_key");
        let body = br#"{"foo": "bar"}"#;
        let expected = "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g=";
        assert_eq!(sign(&FACTS, &secret, body), expected);
        assert_eq!(verify(&[(SIGNATURE_HEADER, expected)], body, std::slice::from_ref(&secret)), Ok(()));
        assert_eq!(
            verify(&[(SIGNATURE_HEADER, expected)], br#"{"foo": "baz"}"#, &[secret]),
            Err(VerifyErrorKind::NoMatchingSignature)
        );
    }

    #[derive(serde::Deserialize)]
    struct Fixture {
        secret: String,
        body: String,
        headers: std::collections::BTreeMap<String, String>,
        events_headers: std::collections::BTreeMap<String, String>,
    }

    /// Signed by `@shopify/shopify-api@13.1.0` and accepted by its
    /// `webhooks.validate` (`scripts/fixtures/shopify.js`), in both header
    /// families.
    #[test]
    fn shopify_sdk_fixture() {
        let f: Fixture = fixture_json("shopify/sdk.json");
        let secret = SigningSecret::from(f.secret.as_str());
        for (family, headers) in [("webhooks", &f.headers), ("events", &f.events_headers)] {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let p = parts(&headers);
            let secrets = [secret.clone()];
            let d = Delivery::new(&p, f.body.as_bytes(), &secrets, SystemTime::now());
            assert_eq!(FACTS.verifier().verify(&d), Ok(()), "{family}");
            assert_eq!(
                FACTS.verifier().verify(&Delivery::new(&p, b"{}", &secrets, SystemTime::now())).unwrap_err().kind(),
                VerifyErrorKind::NoMatchingSignature,
                "{family} tampered"
            );
            let id = crate::test_support::identity(&crate::providers::Provider::shopify(), &p, f.body.as_bytes());
            let want_key = if family == "webhooks" {
                &f.headers["X-Shopify-Event-Id"]
            } else {
                &f.events_headers["Shopify-Event-Id"]
            };
            assert_eq!(&id.key, want_key, "{family}");
            assert_eq!(id.event_type.as_deref(), Some("orders/create"), "{family}");
        }
        assert_eq!(sign(&FACTS, &secret, f.body.as_bytes()), f.headers["X-Shopify-Hmac-Sha256"]);
    }

    #[test]
    fn verifies_and_rejects() {
        let secret = SigningSecret::from("shpss_current");
        let old = SigningSecret::from("shpss_old");
        let body = br#"{"id":1}"#;
        let good = sign(&FACTS, &secret, body);
        let by_old = sign(&FACTS, &old, body);
        let wrong = sign(&FACTS, &SigningSecret::from("other"), body);
        let spaced = format!(" {good} ");
        let hex_sig = "ab".repeat(32);
        let stars = "*".repeat(44);
        let long = "A".repeat(100_000);
        let current = std::slice::from_ref(&secret);
        let h = SIGNATURE_HEADER;
        let cases: &[(&str, Vec<(&str, &str)>, &[u8], &[SigningSecret], Result<(), VerifyErrorKind>)] = &[
            ("valid", vec![(h, &good)], body, current, Ok(())),
            ("header name case-insensitive", vec![("X-Shopify-Hmac-SHA256", &good)], body, current, Ok(())),
            ("surrounding spaces", vec![(h, &spaced)], body, current, Ok(())),
            ("events header", vec![(EVENTS_SIGNATURE_HEADER, &good)], body, current, Ok(())),
            ("tampered body", vec![(h, &good)], b"{\"id\":2}", current, Err(VerifyErrorKind::NoMatchingSignature)),
            ("wrong secret", vec![(h, &wrong)], body, current, Err(VerifyErrorKind::NoMatchingSignature)),
            ("old secret only in rotation list", vec![(h, &by_old)], body, &[secret.clone(), old.clone()], Ok(())),
            ("two lines, one good", vec![(h, &wrong), (h, &good)], body, current, Ok(())),
            ("duplicate lines", vec![(h, &good), (h, &good)], body, current, Ok(())),
            ("missing", vec![], body, current, Err(VerifyErrorKind::MissingHeader)),
            ("hex instead of base64", vec![(h, &hex_sig)], body, current, Err(VerifyErrorKind::MalformedHeader)),
            ("short", vec![(h, "AAAA")], body, current, Err(VerifyErrorKind::MalformedHeader)),
            ("not base64", vec![(h, &stars)], body, current, Err(VerifyErrorKind::MalformedHeader)),
            (
                "one line malformed",
                vec![(h, &good), (h, "garbage")],
                body,
                current,
                Err(VerifyErrorKind::MalformedHeader),
            ),
            ("long header", vec![(h, &long)], body, current, Err(VerifyErrorKind::MalformedHeader)),
            ("no secret", vec![(h, &good)], body, &[], Err(VerifyErrorKind::NoSecret)),
        ];
        for (name, headers, body, secrets, want) in cases {
            assert_eq!(verify(headers, body, secrets), *want, "{name}");
        }
    }

    #[test]
    fn precheck_needs_a_parsable_header() {
        let v = FACTS.verifier();
        let good = sign(&FACTS, &SigningSecret::from("s"), b"");
        assert!(v.precheck(&parts(&[(SIGNATURE_HEADER, &good)])).is_ok());
        assert_eq!(v.precheck(&parts(&[])).unwrap_err().kind(), VerifyErrorKind::MissingHeader);
        assert_eq!(
            v.precheck(&parts(&[(SIGNATURE_HEADER, "x")])).unwrap_err().kind(),
            VerifyErrorKind::MalformedHeader
        );
        // Not visible ASCII.
        let mut p = parts(&[]);
        p.headers.insert(SIGNATURE_HEADER, http::HeaderValue::from_bytes(b"\xff\xfe").unwrap());
        assert_eq!(v.precheck(&p).unwrap_err().kind(), VerifyErrorKind::MalformedHeader);
    }

    #[test]
    fn key_policies() {
        type Want = Result<(&'static str, Option<&'static str>), KeyErrorKind>;
        let both = vec![(EVENT_ID_HEADER, "evt-1"), (WEBHOOK_ID_HEADER, "wh-1"), (TOPIC_HEADER, "orders/create")];
        let webhook_only = vec![(WEBHOOK_ID_HEADER, "wh-1"), (TOPIC_HEADER, "orders/create")];
        let events =
            vec![(EVENTS_EVENT_ID_HEADER, "evt-2"), (EVENTS_WEBHOOK_ID_HEADER, "wh-2"), (EVENTS_TOPIC_HEADER, "t")];
        let cases: Vec<(&str, ShopifyKey, Vec<(&str, &str)>, Want)> = vec![
            ("default, event id", ShopifyKey::default(), both.clone(), Ok(("evt-1", Some("orders/create")))),
            ("default, fallback", ShopifyKey::default(), webhook_only.clone(), Ok(("wh-1", Some("orders/create")))),
            (
                "default, blank event id",
                ShopifyKey::default(),
                vec![(EVENT_ID_HEADER, " "), (WEBHOOK_ID_HEADER, "wh-1")],
                Ok(("wh-1", None)),
            ),
            ("default, events family", ShopifyKey::default(), events.clone(), Ok(("evt-2", Some("t")))),
            ("event id only", ShopifyKey::EventId, both.clone(), Ok(("evt-1", Some("orders/create")))),
            ("event id only, absent", ShopifyKey::EventId, webhook_only, Err(KeyErrorKind::Missing)),
            ("webhook id", ShopifyKey::WebhookId, both, Ok(("wh-1", Some("orders/create")))),
            ("webhook id, events family", ShopifyKey::WebhookId, events, Ok(("wh-2", Some("t")))),
            ("nothing", ShopifyKey::default(), vec![(TOPIC_HEADER, "t")], Err(KeyErrorKind::Missing)),
            (
                "two event ids",
                ShopifyKey::default(),
                vec![(EVENT_ID_HEADER, "a"), (EVENT_ID_HEADER, "b")],
                Err(KeyErrorKind::Invalid),
            ),
            (
                "same event id twice",
                ShopifyKey::default(),
                vec![(EVENT_ID_HEADER, "a"), (EVENT_ID_HEADER, "a")],
                Ok(("a", None)),
            ),
        ];
        for (name, x, headers, want) in cases {
            let got = x.extract(&parts(&headers), b"");
            let got = got.as_ref().map(|i| (i.key.as_str(), i.event_type.as_deref())).map_err(|e| e.kind());
            assert_eq!(got, want, "{name}");
        }
        let mut p = parts(&[]);
        p.headers.insert(EVENT_ID_HEADER, http::HeaderValue::from_bytes(b"\xff").unwrap());
        assert_eq!(ShopifyKey::default().extract(&p, b"").unwrap_err().kind(), KeyErrorKind::Invalid);
    }

    #[test]
    fn preset_name() {
        assert_eq!(crate::providers::Provider::shopify().name(), "shopify");
    }
}
