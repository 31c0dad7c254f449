//! Linear: the `Linear-Signature` header and the body's `webhookTimestamp`.
//!
//! Scheme (Linear, "Webhooks", section "Securing webhooks",
//! <https://linear.app/developers/webhooks>, and the verifier Linear ships in
//! `@linear/sdk`, `LinearWebhookClient.verify`):
//! - `Linear-Signature: <hex HMAC-SHA256 of the raw body>`, no prefix, keyed
//!   with the webhook's signing secret as UTF-8 bytes. Linear sends one
//!   signature; rotating the secret means configuring both secrets here for
//!   the changeover.
//! - the body carries `webhookTimestamp`, the send time in Unix
//!   **milliseconds**. It is inside the signed body, so it cannot be altered;
//!   Linear's docs ask receivers to check it is within a minute of now to
//!   guard against replays, and the SDK rejects `|now - webhookTimestamp| >
//!   60 000 ms` (it ignores the unsigned `Linear-Timestamp` header, and so does
//!   this verifier). [`DEFAULT_TOLERANCE`] is 60 seconds, both directions,
//!   compared in milliseconds. The signature is checked first; only then is
//!   the body read (a top-level scan for that one field, nothing copied). A
//!   verified body without `webhookTimestamp` is
//!   [`VerifyErrorKind::MissingField`]; one whose value is not a
//!   non-negative integer, or that is not a JSON object, or that repeats the
//!   field, is [`VerifyErrorKind::MalformedHeader`].
//!
//! The event key is the `Linear-Delivery` header, the UUID Linear puts on
//! each webhook delivery; the body holds no event id to use instead
//! (`webhookId` names the webhook configuration, `data.id` the entity).
//! Linear retries a failed delivery after 1 minute, 1 hour and 6 hours
//! (Linear, "Webhooks"); since receivers reject a `webhookTimestamp` older
//! than a minute, each attempt must carry a fresh timestamp, so the body
//! bytes differ between attempts. Linear's docs do not say in so many words
//! that a retry repeats `Linear-Delivery`: that is the one assumption of this
//! preset. The event type is the body's `type` and `action` joined by a dot
//! (`Issue.create`, `Comment.remove`), or the `Linear-Event` header
//! (`Issue`) when the body lacks them.
//!
//! **Why the tolerance stays at 60 seconds.** Some reports (vercel/eve#1570,
//! a review comment on n8n-io/n8n#36487) say Linear resends a failed
//! delivery's bytes unchanged a minute later, which 60 seconds would refuse;
//! neither quotes a captured retry, and the argument they give (the HMAC is
//! over the body, so the body "has to be" the same) does not follow, since
//! Linear signs each attempt itself. The official verifier, `@linear/sdk`
//! 98.0.0 (`LinearWebhookClient.verify`), refuses a `webhookTimestamp` more
//! than 60,000 ms off in either direction, so a widened window would accept
//! what Linear's own SDK refuses. And since the event key is the unsigned
//! `Linear-Delivery` header, a wider window is a wider replay window (see
//! below). Widen with [`LinearVerifier::tolerance`] only together with
//! [`body_digest_guard`](crate::layer::WebhookLayerBuilder::body_digest_guard),
//! which claims the signed body itself.
//!
//! **Limit of the scheme:** `Linear-Delivery` is not signed. Whoever captured
//! a delivery can resend it within the 60-second window under a fresh
//! `Linear-Delivery`, and it is claimed as a new event. Make the business
//! write idempotent on the payload's own identity (`data.id` with `action`
//! and `updatedAt`) where that matters.
//!
//! **Signed / not signed** (<https://linear.app/developers/webhooks>): only the
//! raw body is signed (its `webhookTimestamp` included). The event key
//! (`Linear-Delivery`) is a header and **not signed**. The event type is
//! signed when it comes from the body (`type` and `action`); the
//! `Linear-Event` header it falls back to when the body lacks them is not.
//! Other headers are not signed.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! entity's `updatedAt` (ISO 8601) in `data`, or the payload's
//! `webhookTimestamp` (Unix milliseconds).

use crate::providers::Provider;
use std::fmt;
use std::time::Duration;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use crate::key::{EventIdentity, HeaderKey, KeyError, KeyExtractor};
use crate::verify::{
    header_values, hmac_sha256, match_any_secret, Delivery, SigningSecret, Verifier, VerifyError, VerifyErrorKind,
};

/// The header Linear signs deliveries with.
pub const SIGNATURE_HEADER: &str = "linear-signature";
/// The header carrying the delivery UUID (the event key).
pub const DELIVERY_HEADER: &str = "linear-delivery";
/// The header carrying the entity type (`Issue`, `Comment`).
pub const EVENT_HEADER: &str = "linear-event";
/// The signed body field holding the send time in Unix milliseconds.
pub const TIMESTAMP_FIELD: &str = "webhookTimestamp";

/// Linear's tolerance for `webhookTimestamp`: 60 seconds.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(60);

/// The CLI name of the preset and the `provider` column of its claims.
pub const NAME: &str = "linear";
/// How long a Linear delivery can be sent again: 2 days.
///
/// Linear retries a failed delivery at most 3 times, after 1 minute, 1 hour
/// and 6 hours (Linear, "Webhooks",
/// <https://developers.linear.app/docs/graphql/webhooks>, now
/// <https://linear.app/developers/webhooks>; an earlier version of the page
/// gave about 10 minutes, then 30 minutes, then longer), and documents no
/// manual redelivery. The retries end about 7 hours after the first attempt;
/// 2 days leaves a margin for either schedule.
pub const REPLAY_WINDOW: std::time::Duration = super::days(2);

timed_verifier! {
    /// Verifies `Linear-Signature` and the signed `webhookTimestamp`.
    pub struct LinearVerifier;
    /// A verifier with Linear's tolerance of 60 seconds.
    fn new();
    /// Sets how far (both directions) `webhookTimestamp` may be from now.
    fn tolerance();
}

/// Every `Linear-Signature` value (one per header line), decoded.
fn parse(parts: &http::request::Parts) -> Result<Vec<[u8; 32]>, VerifyError> {
    let mut signatures = Vec::new();
    crate::verify::check_signature_header_size(parts, SIGNATURE_HEADER)?;
    let mut entries = 0;
    for value in header_values(parts, SIGNATURE_HEADER) {
        crate::verify::count_entry(&mut entries)?;
        let mut sig = [0u8; 32];
        hex::decode_to_slice(value?.trim(), &mut sig).map_err(|_| VerifyErrorKind::MalformedHeader)?;
        signatures.push(sig);
    }
    if signatures.is_empty() {
        return Err(VerifyErrorKind::MissingHeader.into());
    }
    Ok(signatures)
}

/// Reads the top-level `webhookTimestamp` of a JSON object without building
/// the document: other members are skipped with [`IgnoredAny`].
struct TimestampScan;

/// Whether a map key is [`TIMESTAMP_FIELD`], compared without allocating.
struct IsTimestampKey;

impl<'de> Visitor<'de> for IsTimestampKey {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == TIMESTAMP_FIELD)
    }
}

impl<'de> DeserializeSeed<'de> for IsTimestampKey {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for TimestampScan {
    type Value = Option<u64>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<u64>, A::Error> {
        let mut found = None;
        while let Some(is_timestamp) = map.next_key_seed(IsTimestampKey)? {
            if !is_timestamp {
                map.next_value::<IgnoredAny>()?;
            } else if found.replace(map.next_value::<u64>()?).is_some() {
                return Err(de::Error::custom("duplicate webhookTimestamp"));
            }
        }
        Ok(found)
    }
}

/// The signed `webhookTimestamp` (Unix milliseconds) of a verified body.
fn webhook_timestamp(body: &[u8]) -> Result<u64, VerifyError> {
    use serde::Deserializer as _;
    let mut de = serde_json::Deserializer::from_slice(body);
    let found = de.deserialize_map(TimestampScan).map_err(|_| VerifyErrorKind::MalformedHeader)?;
    de.end().map_err(|_| VerifyErrorKind::MalformedHeader)?;
    found.ok_or_else(|| VerifyErrorKind::MissingField.into())
}

impl Verifier for LinearVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        parse(parts).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let signatures = parse(delivery.parts)?;
        match_any_secret(delivery, signatures.iter().map(|s| &s[..]), |secret| hmac_sha256(secret, &[delivery.body]))?;
        // Read only once the body is known to be Linear's.
        let millis = webhook_timestamp(delivery.body)?;
        delivery.check_time_millis(millis, self.tolerance)
    }
}

/// The `Linear-Signature` value Linear would send for `body` with `secret`:
/// the bare hex digest. The body must carry `webhookTimestamp` itself. For
/// tests and fixtures.
pub fn sign(secret: &SigningSecret, body: &[u8]) -> String {
    hex::encode(hmac_sha256(secret, &[body]))
}

/// Linear's event identity: key = `Linear-Delivery`; type = body `type` and
/// `action` as `Type.action`, else the `Linear-Event` header.
///
/// # Errors
/// [`KeyErrorKind::Missing`](crate::key::KeyErrorKind::Missing) without `Linear-Delivery`,
/// [`KeyErrorKind::Invalid`](crate::key::KeyErrorKind::Invalid) for two different values of it or one
/// that is not visible ASCII.
pub fn event_identity(parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
    let mut identity = HeaderKey::new(http::HeaderName::from_static(DELIVERY_HEADER))
        .event_type(http::HeaderName::from_static(EVENT_HEADER))
        .extract(parts, body)?;
    if let Ok(doc) = serde_json::from_slice::<serde_json::Value>(body) {
        let text = |name: &str| doc.get(name).and_then(serde_json::Value::as_str).filter(|s| !s.is_empty());
        if let (Some(kind), Some(action)) = (text("type"), text("action")) {
            identity.event_type = Some(format!("{kind}.{action}"));
        }
    }
    Ok(identity)
}

impl crate::providers::Provider {
    /// Linear (`Linear-Signature`, `webhookTimestamp` within 60 s; key = `Linear-Delivery`). See [`crate::providers::linear`].
    ///
    /// The Linear preset: [`LinearVerifier`] with the 60 second tolerance and
    /// [`event_identity`].
    pub fn linear() -> Self {
        Provider::new(NAME, LinearVerifier::new(), event_identity)
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER, DELIVERY_HEADER, EVENT_HEADER],
    |_| crate::providers::Provider::linear(),
    super::ExampleOf::Signed(|s, d| vec![(SIGNATURE_HEADER, sign(s, d.body)), (DELIVERY_HEADER, d.id.to_owned())]),
)
.signs("`Linear-Signature` hex HMAC-SHA256 of the body; body `webhookTimestamp`")
.key_from("the Linear-Delivery header")
.fixture(super::Fixture::sdk(&["sdk_time_cases"]));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::providers::tests::support::OneHeader;

    #[test]
    fn verifies_and_rejects() {
        const NOW: u64 = 1_700_000_000_000;
        let secret = SigningSecret::from("lin_wh_test");
        let body = format!(r#"{{"action":"create","type":"Issue","data":{{"id":"x"}},"webhookTimestamp":{NOW}}}"#);
        let body = body.as_bytes();
        let good = sign(&secret, body);
        let upper = good.to_uppercase();
        let zeros = "0".repeat(64);
        let no_ts = br#"{"action":"create","type":"Issue"}"#;
        let no_ts_sig = sign(&secret, no_ts);
        let float_ts = br#"{"webhookTimestamp":1700000000000.5}"#;
        let float_sig = sign(&secret, float_ts);
        let str_ts = br#"{"webhookTimestamp":"1700000000000"}"#;
        let str_sig = sign(&secret, str_ts);
        let dup_ts = br#"{"webhookTimestamp":1700000000000,"webhookTimestamp":1700000000000}"#;
        let dup_sig = sign(&secret, dup_ts);
        let nested = br#"{"data":{"webhookTimestamp":1700000000000}}"#;
        let nested_sig = sign(&secret, nested);
        let array = b"[1700000000000]";
        let array_sig = sign(&secret, array);
        let trailing = br#"{"webhookTimestamp":1700000000000} x"#;
        let trailing_sig = sign(&secret, trailing);
        let huge = br#"{"webhookTimestamp":18446744073709551615}"#;
        let huge_sig = sign(&secret, huge);
        let prefixed = format!("sha256={good}");
        let not_hex = "z".repeat(64);
        OneHeader::preset(&PRESET).millis().check_timed(
            &secret,
            &[
                ("valid", vec![&good], body, NOW, Ok(())),
                ("upper-case hex", vec![&upper], body, NOW, Ok(())),
                ("same header twice", vec![&good, &good], body, NOW, Ok(())),
                ("edge past", vec![&good], body, NOW + 60_000, Ok(())),
                ("edge future", vec![&good], body, NOW - 60_000, Ok(())),
                ("stale by a millisecond", vec![&good], body, NOW + 60_001, Err(VerifyErrorKind::TimestampTooOld)),
                ("future by a millisecond", vec![&good], body, NOW - 60_001, Err(VerifyErrorKind::TimestampInFuture)),
                (
                    "tampered body",
                    vec![&good],
                    b"{\"webhookTimestamp\":1}",
                    NOW,
                    Err(VerifyErrorKind::NoMatchingSignature),
                ),
                ("wrong signature", vec![&zeros], body, NOW, Err(VerifyErrorKind::NoMatchingSignature)),
                ("one bad line", vec![&zeros, &good], body, NOW, Ok(())),
                ("missing", vec![], body, NOW, Err(VerifyErrorKind::MissingHeader)),
                ("sha256= prefix", vec![&prefixed], body, NOW, Err(VerifyErrorKind::MalformedHeader)),
                ("short hex", vec!["abcd"], body, NOW, Err(VerifyErrorKind::MalformedHeader)),
                ("not hex", vec![&not_hex], body, NOW, Err(VerifyErrorKind::MalformedHeader)),
                ("no webhookTimestamp", vec![&no_ts_sig], no_ts, NOW, Err(VerifyErrorKind::MissingField)),
                ("only nested webhookTimestamp", vec![&nested_sig], nested, NOW, Err(VerifyErrorKind::MissingField)),
                ("fractional timestamp", vec![&float_sig], float_ts, NOW, Err(VerifyErrorKind::MalformedHeader)),
                ("string timestamp", vec![&str_sig], str_ts, NOW, Err(VerifyErrorKind::MalformedHeader)),
                ("duplicate timestamp", vec![&dup_sig], dup_ts, NOW, Err(VerifyErrorKind::MalformedHeader)),
                ("not an object", vec![&array_sig], array, NOW, Err(VerifyErrorKind::MalformedHeader)),
                ("trailing bytes", vec![&trailing_sig], trailing, NOW, Err(VerifyErrorKind::MalformedHeader)),
                ("timestamp past SystemTime", vec![&huge_sig], huge, NOW, Err(VerifyErrorKind::TimestampInFuture)),
            ],
        );
    }

    #[test]
    fn rotation_replay_and_precheck() {
        let (old, new) = (SigningSecret::from("old"), SigningSecret::from("new"));
        let body = br#"{"webhookTimestamp":1000}"#;
        let header = sign(&new, body);
        OneHeader::preset(&PRESET).millis().check_rotation_and_precheck([&old, &new], &header, body, 1_000, "nothex");
        let wide = LinearVerifier::new().tolerance(Duration::from_secs(86_400));
        OneHeader::preset(&PRESET).millis().check_replay_and_tolerance(
            wide,
            (&header, body, &new),
            [1_000, 1_000 + 86_400_000],
        );
    }

    #[test]
    fn key_cases() {
        let x = event_identity;
        let with = |delivery: Option<&str>, event: Option<&str>| {
            let mut b = http::Request::builder();
            if let Some(d) = delivery {
                b = b.header(DELIVERY_HEADER, d);
            }
            if let Some(e) = event {
                b = b.header(EVENT_HEADER, e);
            }
            b.body(()).unwrap().into_parts().0
        };
        let full = br#"{"type":"Comment","action":"remove"}"#;
        let cases: &[(&str, http::request::Parts, &[u8], Result<(&str, Option<&str>), KeyErrorKind>)] = &[
            ("body type and action", with(Some("d-1"), Some("Comment")), full, Ok(("d-1", Some("Comment.remove")))),
            ("header fallback", with(Some("d-1"), Some("Issue")), b"{}", Ok(("d-1", Some("Issue")))),
            ("action missing", with(Some("d-1"), Some("Issue")), br#"{"type":"Issue"}"#, Ok(("d-1", Some("Issue")))),
            ("no type at all", with(Some("d-1"), None), b"not json", Ok(("d-1", None))),
            ("no delivery header", with(None, Some("Issue")), full, Err(KeyErrorKind::Missing)),
        ];
        for (name, p, body, want) in cases {
            let got = x.extract(p, body);
            let got = got.as_ref().map(|i| (i.key.as_str(), i.event_type.as_deref())).map_err(|e| e.kind());
            assert_eq!(got, *want, "{name}");
        }
        assert_eq!(crate::providers::Provider::linear().name(), "linear");
    }
}
