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
//!   attacks but states no window. [`DEFAULT_TOLERANCE`] is the crate's usual
//!   300 seconds in both directions, our choice; widen it with
//!   [`ZendeskVerifier::tolerance`].
//!
//! The event key is the body's `id`, the event id of a webhook **subscribed
//! to Zendesk events** (`type` = `zen:event-type:...`): the id of the event,
//! which its retries repeat. A webhook **connected to a trigger or an
//! automation** sends the body the admin wrote: it has an id only if the
//! template puts one there (`{{ticket.id}}` is the ticket, not the event;
//! pair it with the ticket's `updated_at`), so such a webhook needs its own
//! key extractor ([`Provider::key_extractor`](crate::provider::Provider::key_extractor) with a
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

use crate::verify::generic::{HmacVerifier, SignedContent, TimestampFormat};
use crate::verify::{hmac_sha256, Encoding, SigningSecret};

hmac_preset! {
    name: "zendesk";
    /// The header Zendesk signs deliveries with.
    header: "x-zendesk-webhook-signature";
    /// The header carrying the signed RFC 3339 timestamp.
    timestamp_header: "x-zendesk-webhook-signature-timestamp";
    /// How long a Zendesk event can be sent again: 30 days.
    ///
    /// Zendesk retries a failed request for some response codes (a `409` up to
    /// three times, a `429` or `503` with a `Retry-After` it honours) and trips a
    /// circuit breaker on an endpoint that keeps failing ("Webhook retries" in
    /// the Webhooks API introduction,
    /// <https://developer.zendesk.com/api-reference/webhooks/introduction>); it
    /// gives no overall span and no manual redelivery. With the span not stated,
    /// the window is the crate's default for an unknown span,
    /// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
    replay_window: super::DEFAULT_REPLAY_WINDOW;
    /// Verifies the `X-Zendesk-Webhook-Signature` header.
    pub struct ZendeskVerifier = {
        HmacVerifier::builder(SIGNATURE_HEADER)
            .encoding(Encoding::Base64)
            .strict()
            .signed_content(SignedContent::TimestampBody { separator: String::new() })
            .timestamp_header(TIMESTAMP_HEADER)
            .timestamp_format(TimestampFormat::Custom(super::rfc3339::parse))
    };
    /// The preset's tolerance: 300 seconds (Zendesk states none; see the module
    /// docs).
    tolerance: Duration::from_secs(300);
    sign: by hand;
    /// Zendesk (`X-Zendesk-Webhook-Signature` of `{timestamp}{body}`, 300 s; key = body `id`). See [`crate::providers::zendesk`].
    ///
    /// The Zendesk preset for webhooks subscribed to Zendesk events:
    /// [`ZendeskVerifier`] with the 300 second tolerance; key = the body's
    /// `id`, type = `type`. Trigger and automation webhooks need their own key
    /// extractor (see the module docs).
    fn zendesk() = super::json_keyed(NAME, ZendeskVerifier::new(), "/id", "/type");
    headers: [TIMESTAMP_HEADER];
    signed: |s, _, at, b| signed_headers(s, super::unix_seconds(at), b);
}

/// The `X-Zendesk-Webhook-Signature` value Zendesk would send for `body`
/// with the timestamp header `timestamp` (RFC 3339 text, used byte for
/// byte): base64 HMAC-SHA256 of `{timestamp}{body}`. For tests and fixtures.
pub fn sign(secret: &SigningSecret, timestamp: &str, body: &[u8]) -> String {
    Encoding::Base64.encode(&hmac_sha256(secret, &[timestamp.as_bytes(), body]))
}

fn signed_headers(secret: &SigningSecret, unix_seconds: u64, body: &[u8]) -> Vec<(&'static str, String)> {
    let timestamp = super::rfc3339::format(unix_seconds);
    vec![(SIGNATURE_HEADER, sign(secret, &timestamp, body)), (TIMESTAMP_HEADER, timestamp)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::testing::TwoHeaders;
    use crate::test_support::NOW;
    use crate::verify::VerifyErrorKind;

    fn two_headers(body: &[u8]) -> TwoHeaders<'_> {
        let mut t = TwoHeaders::hmac(ZendeskVerifier::new(), [SIGNATURE_HEADER, TIMESTAMP_HEADER], body, |s, ts, b| {
            sign(s, &super::super::rfc3339::format(ts), b)
        });
        t.timestamp = super::super::rfc3339::format(NOW);
        t
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
            .check_rotation_tolerance_and_replay(ZendeskVerifier::new().tolerance(Duration::from_secs(600)));
    }
}
