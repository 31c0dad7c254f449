//! Calendly: the `Calendly-Webhook-Signature` header.
//!
//! Scheme (Calendly, "Webhook Signatures",
//! <https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures>,
//! and the "Webhooks" overview, <https://developer.calendly.com/docs/webhooks/overview>:
//! "Verify `HMAC-SHA256(key, "<t>." + raw_body)`"):
//! - `Calendly-Webhook-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`, a
//!   comma-separated list of `key=value` items. Calendly sends one `v1`;
//!   several are accepted (any may match) and unknown keys are ignored.
//! - the signed payload is `{t}.{raw body}`, keyed with the webhook signing
//!   key as given (chosen at subscription time with a personal access token,
//!   generated per OAuth application otherwise). To rotate, configure the
//!   old and new keys together while subscriptions move over.
//! - tolerance: the verification example on Calendly's "Webhook Signatures"
//!   page rejects a signature whose `t` is more than three minutes old, to
//!   prevent replay attacks (the example checks the past only).
//!   [`FACTS`]' tolerance is 180 seconds, applied in both directions: the
//!   provider's own number. Calendly retries for 24 hours and does not say
//!   whether a retry is signed afresh; if retries are refused as
//!   `timestamp_too_old`, raise it with `FACTS.verifier().tolerance(d)`.
//!
//! **Event key.** Calendly's payloads carry no event or delivery id. The
//! envelope (`WebhookPayload` in Calendly's API reference) has `event` ("the
//! event that caused the webhook to fire", `invitee.created`), `created_at`
//! ("the moment when the event was created", microsecond precision),
//! `created_by` and `payload`, the resource the event is about, whose `uri`
//! is its canonical reference (an invitee, a routing form submission, an
//! event type). The preset's `CalendlyKey` derives the key from those:
//!
//! ```text
//! "sha256:" + lowercase hex SHA-256( netstring(event) netstring(created_at) netstring(payload.uri) )
//! netstring(s) = "<byte length of s in decimal>:" s ","
//! ```
//!
//! (netstrings, D. J. Bernstein, <https://cr.yp.to/proto/netstrings.txt>, so
//! the concatenation is unambiguous whatever the values hold). Why these
//! fields: none of them is the delivery's own time (that is `t`, which a
//! retry renews), and Calendly's retries, which go on "for 24 hours with an
//! exponential back-off" (Calendly, "Webhook Errors"), resend the same
//! event. `created_at` separates two events of one kind on one resource (a
//! cancel, then after a reschedule another). That a retry repeats these three
//! values is inferred from their definitions: Calendly does not document its
//! retry body byte for byte. An envelope missing any of the three, or holding
//! a non-string, is a key error (400): override the extractor with
//! [`crate::providers::Provider::key_extractor`] for such events. The event type is
//! `event`.
//!
//! **Signed / not signed**
//! (<https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures>):
//! the `t=` timestamp and the raw body are signed, so the event key (derived
//! from the body) and the event type (the body's `event`) are signed. Other
//! headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! payload's `created_at` (ISO 8601), or the invitee's `updated_at`.

use crate::providers::Provider;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::key::{EventIdentity, KeyError, KeyErrorKind, KeyExtractor};
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::{HmacScheme, Tolerance};
use crate::verify::Boundary;

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "calendly-webhook-signature";

/// The facts of the calendly preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Calendly event can be sent again: 2 days.
///
/// Calendly retries a failing delivery for 24 hours with an exponential
/// back-off, then disables the webhook (Calendly, "Webhook Errors",
/// <https://developer.calendly.com/api-docs/overview/webhooks/webhook-errors>);
/// it documents no manual redelivery. The 24 hours of retries plus a day of
/// margin.
pub const FACTS: HmacPreset = HmacPreset {
    name: "calendly",
    scheme: HmacScheme {
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(180),
            evidence: "the verification example refuses a `t` over three minutes old (https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures)",
            boundary: Boundary::Inclusive,
        }),
        ..super::timestamped_entries(SIGNATURE_HEADER, ["t", "v1"], ',', ".")
    },
    event_key: EventKey::Own { extractor: &CalendlyKey, reads: "fields of the JSON body (a derived key)", id_header: None },
    headers: &[],
    replay_window: super::days(2),
    replay_evidence: "retries for 24 hours (https://developer.calendly.com/api-docs/overview/webhooks/webhook-errors)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&["same_event"]),
};

impl Provider {
    /// Calendly (`Calendly-Webhook-Signature` `t=,v1=`, 180 s; derived key). See [`crate::providers::calendly`].
    ///
    /// The Calendly preset: [`calendly::FACTS`](FACTS) with the 180 second tolerance
    /// and the derived `CalendlyKey`.
    pub fn calendly() -> Self {
        FACTS.provider()
    }
}

/// Calendly's derived event key (see the [module docs](self)):
/// `sha256:` + hex SHA-256 of the netstrings of `event`, `created_at` and
/// `payload.uri`; type = `event`.
struct CalendlyKey;

/// The derived key for these field values (see the [module docs](self)).
fn derived_key(event: &str, created_at: &str, payload_uri: &str) -> String {
    let mut hash = Sha256::new();
    for field in [event, created_at, payload_uri] {
        hash.update(field.len().to_string().as_bytes());
        hash.update(b":");
        hash.update(field.as_bytes());
        hash.update(b",");
    }
    format!("sha256:{}", hex::encode(hash.finalize()))
}

impl KeyExtractor for CalendlyKey {
    fn extract(&self, _parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let doc: serde_json::Value = serde_json::from_slice(body).map_err(|_| KeyErrorKind::BodyNotJson)?;
        let text = |pointer: &str| match doc.pointer(pointer) {
            None | Some(serde_json::Value::Null) => Err(KeyError::from(KeyErrorKind::Missing)),
            Some(serde_json::Value::String(s)) if s.is_empty() => Err(KeyErrorKind::Missing.into()),
            Some(serde_json::Value::String(s)) => Ok(s.as_str()),
            Some(_) => Err(KeyErrorKind::Invalid.into()),
        };
        let event = text("/event")?;
        let key = derived_key(event, text("/created_at")?, text("/payload/uri")?);
        Ok(EventIdentity { key, event_type: Some(event.to_owned()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::KeyValueHeader;
    use crate::test_support::header_lines;
    use crate::verify::VerifyErrorKind;

    /// The family's cases at Calendly's 180 s, then its own.
    #[test]
    fn verifies_and_rejects() {
        // Also tampered, stale, future, missing and garbage in the conformance table.
        let wide = FACTS.verifier().tolerance(Duration::from_secs(360));
        KeyValueHeader::t_v1(&FACTS).check("v1=00", wide, |_| {
            vec![
                ("non-numeric t", vec!["t=1e9,v1=00".into()], Err(VerifyErrorKind::MalformedHeader)),
                ("paddle-style header", vec!["ts=1;h1=00".into()], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
    }

    #[test]
    fn key_cases() {
        let x = CalendlyKey;
        let k = derived_key("invitee.created", "2024-01-01T00:00:00.000000Z", "https://api.calendly.com/x");
        let cases: &[(&str, &[u8], Result<(&str, Option<&str>), KeyErrorKind>)] = &[
            (
                "all fields",
                br#"{"event":"invitee.created","created_at":"2024-01-01T00:00:00.000000Z","created_by":"u","payload":{"uri":"https://api.calendly.com/x"}}"#,
                Ok((&k, Some("invitee.created"))),
            ),
            ("no event", br#"{"created_at":"c","payload":{"uri":"u"}}"#, Err(KeyErrorKind::Missing)),
            ("no created_at", br#"{"event":"e","payload":{"uri":"u"}}"#, Err(KeyErrorKind::Missing)),
            ("no payload uri", br#"{"event":"e","created_at":"c","payload":{}}"#, Err(KeyErrorKind::Missing)),
            ("null uri", br#"{"event":"e","created_at":"c","payload":{"uri":null}}"#, Err(KeyErrorKind::Missing)),
            ("empty event", br#"{"event":"","created_at":"c","payload":{"uri":"u"}}"#, Err(KeyErrorKind::Missing)),
            ("numeric created_at", br#"{"event":"e","created_at":1,"payload":{"uri":"u"}}"#, Err(KeyErrorKind::Invalid)),
            ("not json", b"event=e", Err(KeyErrorKind::BodyNotJson)),
        ];
        for (name, body, want) in cases {
            let got = x.extract(&header_lines(SIGNATURE_HEADER, &[]), body);
            let got = got.as_ref().map(|i| (i.key.as_str(), i.event_type.as_deref())).map_err(|e| e.kind());
            assert_eq!(got, *want, "{name}");
        }
        // Netstrings keep field boundaries: moving a character across fields changes the key.
        assert_ne!(derived_key("ab", "c", "d"), derived_key("a", "bc", "d"));
        assert_eq!(derived_key("e", "c", "u").len(), "sha256:".len() + 64);
        assert_eq!(crate::providers::Provider::calendly().name(), "calendly");
    }
}
