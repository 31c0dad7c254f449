//! Zendesk: the `X-Zendesk-Webhook-Signature` and
//! `X-Zendesk-Webhook-Signature-Timestamp` headers.
//!
//! Scheme (Zendesk, "Verifying webhook authenticity",
//! <https://developer.zendesk.com/documentation/webhooks/verifying/>:
//! "base64(HMACSHA256(TIMESTAMP + BODY))"):
//! - `X-Zendesk-Webhook-Signature-Timestamp` is an ISO 8601 UTC time
//!   (`2021-03-19T20:13:09Z`, RFC 3339), and `X-Zendesk-Webhook-Signature`
//!   the base64 HMAC-SHA256 of `{timestamp}{raw body}`, no separator, keyed
//!   with the webhook's signing secret as given (`GET
//!   /api/v2/webhooks/{id}/signing_secret`). One secret per webhook;
//!   resetting it replaces it, so configure the old and new ones together
//!   for the changeover. A request without a body (a trigger webhook's `GET`
//!   or `DELETE`) signs the timestamp alone.
//! - tolerance: Zendesk says the signed timestamp helps prevent replay
//!   attacks but states no window. [`FACTS`]' tolerance is the crate's usual
//!   300 seconds in both directions, our choice; widen it with
//!   `FACTS.verifier().tolerance(d)`.
//!
//! The event key is the body's `id`, the event id of a webhook **subscribed
//! to Zendesk events** (`type` = `zen:event-type:...`): the id of the event,
//! which its retries repeat. A webhook **connected to a trigger or an
//! automation** sends the body the admin wrote: it has an id only if the
//! template puts one there (`{{ticket.id}}` is the ticket, not the event;
//! pair it with the ticket's `updated_at`), so such a webhook needs its own
//! key extractor ([`Provider::key_extractor`](crate::providers::Provider::key_extractor) with a
//! [`DerivedKey`](crate::key::DerivedKey) over the template's fields); the
//! preset answers its deliveries 400 `key_missing` otherwise. The event type
//! is `type`.
//!
//! **Signed / not signed**
//! (<https://developer.zendesk.com/documentation/webhooks/verifying/>): the
//! timestamp header and the raw body are signed, so the event key and type
//! (from the body) are signed. Other headers (`x-zendesk-webhook-id`,
//! `x-zendesk-webhook-invocation-id`) are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! event's `time` (RFC 3339).

use std::time::Duration;

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::{HmacScheme, Signed, TimestampFormat, Tolerance};
use crate::verify::Boundary;
use crate::verify::Encoding;

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "x-zendesk-webhook-signature";
/// The header the signed timestamp travels in.
const TIMESTAMP_HEADER: &str = "x-zendesk-webhook-signature-timestamp";

/// The facts of the zendesk preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Zendesk event can be sent again: 30 days.
///
/// Zendesk retries a failed request for some response codes (a `409` up to
/// three times, a `429` or `503` with a `Retry-After` it honours) and trips a
/// circuit breaker on an endpoint that keeps failing ("Webhook retries" in
/// the Webhooks API introduction,
/// <https://developer.zendesk.com/api-reference/webhooks/introduction>); it
/// gives no overall span and no manual redelivery. With the span not stated,
/// the window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "zendesk",
    scheme: HmacScheme {
        encoding: Encoding::Base64,
        strict: true,
        signed: Signed::TimestampBody { separator: "" },
        timestamp_header: Some(TIMESTAMP_HEADER),
        timestamp_format: TimestampFormat::Text { parse: super::rfc3339::parse, write: super::rfc3339::format },
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(300),
            evidence:
                "none stated (https://developer.zendesk.com/documentation/webhooks/verifying/): the usual 300 seconds",
            boundary: Boundary::Inclusive,
        }),
        ..HmacScheme::new(SIGNATURE_HEADER)
    },
    event_key: EventKey::Json { id: "/id", event_type: Some("/type") },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://developer.zendesk.com/api-reference/webhooks/introduction)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Zendesk (`X-Zendesk-Webhook-Signature` of `{timestamp}{body}`, 300 s; key = body `id`). See [`crate::providers::zendesk`].
    ///
    /// The Zendesk preset for webhooks subscribed to Zendesk events:
    /// [`zendesk::FACTS`](FACTS) with the 300 second tolerance; key = the body's
    /// `id`, type = `type`. Trigger and automation webhooks need their own key
    /// extractor (see the module docs).
    pub fn zendesk() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::TwoHeaders;
    use crate::test_support::NOW;
    use crate::verify::VerifyErrorKind;
    use crate::verify::{hmac_sha256, SigningSecret};

    /// The signature header for `body` with the timestamp header's text
    /// `timestamp` (byte for byte), signed with `secret`.
    fn sign(secret: &SigningSecret, timestamp: &str, body: &[u8]) -> String {
        FACTS.verifier().sign_text(secret, "", timestamp, body)
    }

    fn two_headers(body: &[u8]) -> TwoHeaders<'_> {
        TwoHeaders::facts(&FACTS, body)
    }

    #[test]
    fn verifies_and_rejects() {
        use VerifyErrorKind::{MalformedHeader, NoMatchingSignature};
        let body = br#"{"type":"zen:event-type:ticket.created","id":"01HZ"}"#;
        let t = two_headers(body);
        let hex = hex::encode(hmac_sha256(&t.key, &[t.timestamp.as_bytes(), body]));
        let unix = NOW.to_string();
        let by_unix = sign(&t.key, &unix, body);
        let offset = "2023-11-14T23:13:20+01:00";
        let by_offset = sign(&t.key, offset, body);
        let empty = sign(&t.key, &t.timestamp, b"");
        t.check_with_common(&[
            t.case("rotation: the other line matches").signatures(&[&t.by_other, &t.good]),
            t.case("offset timestamp signed as sent").timestamp(offset).signature(&by_offset),
            t.case("no body: the timestamp alone").body(b"").signature(&empty),
            t.case("hex instead of base64").signature(&hex).fails(MalformedHeader),
            t.case("unix seconds").timestamp(&unix).signature(&by_unix).fails(MalformedHeader),
            t.case("another second").timestamp("2023-11-14T22:13:21Z").fails(NoMatchingSignature),
        ]);
    }

    #[test]
    fn rotation_tolerance_and_replay() {
        two_headers(br#"{"id":"1"}"#)
            .check_rotation_tolerance_and_replay(FACTS.verifier().tolerance(Duration::from_secs(600)));
    }
}
