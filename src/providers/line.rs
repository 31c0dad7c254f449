//! LINE (Messaging API webhooks): the `x-line-signature` header.
//!
//! Scheme (LINE Developers, "Receive messages (webhook)", "Verify signature",
//! <https://developers.line.biz/en/docs/messaging-api/receiving-messages/>,
//! and the Messaging API reference, "Signature validation",
//! <https://developers.line.biz/en/reference/messaging-api/#signature-validation>):
//! `x-line-signature: <base64 HMAC-SHA256 of the raw body>`, no prefix, keyed
//! with the channel secret (the channel's "Basic settings" tab) as its UTF-8
//! bytes. One signature; reissuing the channel secret invalidates the old
//! one at once, so a rotation is configuring the new secret (and the old one
//! until the deliveries signed with it are answered).
//!
//! **The body is a batch.** LINE posts `{"destination":"U...","events":[...]}`:
//! any number of webhook events, each with its own `webhookEventId` ("an ID
//! that uniquely identifies a webhook event", a ULID), `timestamp` (Unix
//! milliseconds) and `deliveryContext.isRedelivery` (LINE's OpenAPI
//! definition, `line/line-openapi`, `webhook.yml`, `Event` and
//! `DeliveryContext`).
//!
//! **Event key.** A redelivered event keeps its `webhookEventId` but carries
//! `"isRedelivery": true` where the first attempt said `false`: the body is
//! not repeated byte for byte, so a digest of the body would make every
//! redelivery a new event. The key is therefore derived from the ids alone:
//!
//! ```text
//! "sha256:" + lowercase hex SHA-256( netstring(id_1) netstring(id_2) ... )
//! ids = the events' webhookEventId values, sorted (bytewise) and each once
//! netstring(s) = "<byte length of s in decimal>:" s ","
//! ```
//!
//! (netstrings, <https://cr.yp.to/proto/netstrings.txt>, keep the ids apart
//! whatever they hold). Sorting makes the key independent of the events'
//! order in the batch. An event without a string `webhookEventId`, or an
//! `events` that is not an array, is a key error (400); a body that is not
//! JSON is `body_not_json` (400). The event type is the events' distinct
//! `type` values, sorted and joined with `,` (`message`, or
//! `follow,message`); none when an event has no string `type`.
//!
//! **Limit of the key:** it names the batch, not each event. LINE does not
//! promise, in the pages this preset read, that a redelivery groups events
//! as the first attempt did; a redelivery of a different grouping is a new
//! key, and its events already processed are processed again. Where that
//! matters, have the handler claim each event too
//! ([`WebhookTx::claim_action`](crate::WebhookTx::claim_action) on its
//! `webhookEventId`).
//!
//! **Handshake.** LINE "may send an empty array that doesn't include a
//! webhook event object to confirm communication" (`webhook.yml`,
//! `CallbackRequest.events`): the console's "Verify" button sends
//! `{"destination":"U...","events":[]}`, **signed** like any delivery. The
//! preset's [`Challenge`](crate::providers::Challenge), `EmptyEventsAnswered`, answers a verified body
//! whose `events` is an empty array with `200` and an empty body; nothing is
//! claimed. An unsigned one is refused (401) like any forged request.
//!
//! **Limit of the scheme:** only the body is signed, with no timestamp: a
//! captured delivery verifies forever; the claim on its ids makes its replay
//! a duplicate for as long as the claim is kept. Serve the endpoint over TLS.
//!
//! **Signed / not signed**
//! (<https://developers.line.biz/en/docs/messaging-api/receiving-messages/>):
//! only the raw body is signed; the event key (its `webhookEventId`s) and
//! type (its `type`s) come from it. Headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): each
//! event's `timestamp` (Unix milliseconds); LINE does not promise the order
//! of deliveries.

use sha2::{Digest, Sha256};

use crate::key::{EventIdentity, KeyError, KeyErrorKind, KeyExtractor};
use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;
use crate::verify::Encoding;

/// The facts of the line preset (the scheme is in the module docs).
///
/// **Replay window.** How long a LINE event can be sent again: 30 days.
///
/// LINE redelivers a webhook the bot server failed to receive when "Webhook
/// redelivery" is enabled on the channel, and stops after a while, mailing
/// the channel's admins that it stopped (LINE Developers, "Error
/// notification",
/// <https://developers.line.biz/en/docs/partner-docs/error-notification/>);
/// the pages this preset read publish no span for it. With the span not
/// stated, the window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "line",
    scheme: HmacScheme { encoding: Encoding::Base64, strict: true, ..HmacScheme::new("x-line-signature") },
    event_key: EventKey::Own {
        extractor: &LineKey,
        reads: "the webhookEventId of each of the body's events (a derived key)",
        id_header: None,
    },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence:
        "redelivery with no published span (https://developers.line.biz/en/docs/partner-docs/error-notification/)",
    challenge: Some(&super::EmptyEventsAnswered),
    example_headers: &[],
    fixture: super::Fixture::formula(&["same_event"]),
};

impl Provider {
    /// LINE (`x-line-signature`, base64 HMAC-SHA256; key derived from the
    /// batch's `webhookEventId`s; answers the empty communication check).
    /// See [`crate::providers::line`].
    ///
    /// The LINE Messaging API preset: [`line::FACTS`](FACTS); type = the
    /// events' `type`s.
    pub fn line() -> Self {
        FACTS.provider()
    }
}

/// The key of a batch whose events carry `ids` (see the [module docs](self)).
fn batch_key<'a>(ids: impl IntoIterator<Item = &'a str>) -> String {
    let mut ids: Vec<&str> = ids.into_iter().collect();
    ids.sort_unstable();
    ids.dedup();
    let mut hash = Sha256::new();
    for id in ids {
        hash.update(id.len().to_string().as_bytes());
        hash.update(b":");
        hash.update(id.as_bytes());
        hash.update(b",");
    }
    format!("sha256:{}", hex::encode(hash.finalize()))
}

/// LINE's event key (see the [module docs](self)): the batch's
/// `webhookEventId`s, digested; type = its events' `type`s.
struct LineKey;

impl KeyExtractor for LineKey {
    fn extract(&self, _parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let doc: serde_json::Value = serde_json::from_slice(body).map_err(|_| KeyErrorKind::BodyNotJson)?;
        let events = match doc.get("events") {
            None | Some(serde_json::Value::Null) => return Err(KeyErrorKind::Missing.into()),
            Some(serde_json::Value::Array(events)) if events.is_empty() => return Err(KeyErrorKind::Missing.into()),
            Some(serde_json::Value::Array(events)) => events,
            Some(_) => return Err(KeyErrorKind::Invalid.into()),
        };
        let mut ids = Vec::with_capacity(events.len());
        let mut types: Option<Vec<&str>> = Some(Vec::new());
        for event in events {
            match event.get("webhookEventId") {
                None | Some(serde_json::Value::Null) => return Err(KeyErrorKind::Missing.into()),
                Some(serde_json::Value::String(id)) if id.is_empty() => return Err(KeyErrorKind::Missing.into()),
                Some(serde_json::Value::String(id)) => ids.push(id.as_str()),
                Some(_) => return Err(KeyErrorKind::Invalid.into()),
            }
            match (event.get("type").and_then(serde_json::Value::as_str), types.as_mut()) {
                (Some(t), Some(list)) if !t.is_empty() => list.push(t),
                _ => types = None,
            }
        }
        let event_type = types.map(|mut list| {
            list.sort_unstable();
            list.dedup();
            list.join(",")
        });
        Ok(EventIdentity { key: batch_key(ids), event_type })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::{sign, BodyOnly, OneHeader};
    use crate::test_support::{assert_body_identity, header_lines, NOW};
    use crate::verify::Delivery;
    use crate::verify::{SigningSecret, VerifyErrorKind};

    /// LINE's SDK vector: line/line-bot-sdk-python `tests/test_webhook.py`
    /// (`TestSignatureValidator.test_validate`): channel secret
    /// `channel_secret`, body `bodybodybodybody`.
    #[test]
    fn line_sdk_vector() {
        let secret = SigningSecret::from("channel_secret");
        let header = "/gg9a+LvFevTH1sd7XCQycD7tsWclCsInj7MhBHxN7k=";
        assert_eq!(sign(&FACTS, &secret, b"bodybodybodybody"), header);
        let one = OneHeader::of(&FACTS);
        assert_eq!(one.check(&[header], b"bodybodybodybody", std::slice::from_ref(&secret), NOW), Ok(()));
        assert_eq!(
            one.check(&["invalid_signature"], b"bodybodybodybody", &[secret], NOW),
            Err(VerifyErrorKind::MalformedHeader)
        );
    }

    /// The common cases, rotation and precheck, and LINE's own: the
    /// standard padded base64 of the tag alone.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"destination":"U1","events":[{"type":"follow","webhookEventId":"01A"}]}"#;
        BodyOnly::of(&FACTS)
            .check_cases("line_secret", body, b"{\"events\":[]}", "%%", |_, good| BodyOnly::base64_alone(good));
    }

    #[test]
    fn batch_key_cases() {
        let p = Provider::line();
        let ev = |id: &str, t: &str, redelivery: bool| {
            format!(r#"{{"type":"{t}","webhookEventId":"{id}","deliveryContext":{{"isRedelivery":{redelivery}}}}}"#)
        };
        let batch = |events: &[String]| format!(r#"{{"destination":"U1","events":[{}]}}"#, events.join(","));
        let key = batch_key(["01B", "01A"]);
        let first = batch(&[ev("01A", "message", false), ev("01B", "follow", false)]);
        assert_body_identity(&p, first.as_bytes(), &key, Some("follow,message"));
        // A redelivery flips isRedelivery and may reorder: the same key.
        let again = batch(&[ev("01B", "follow", true), ev("01A", "message", true)]);
        assert_body_identity(&p, again.as_bytes(), &key, Some("follow,message"));
        // Another grouping is another key (the documented limit).
        assert_ne!(batch_key(["01A"]), key);
        assert_body_identity(&p, batch(&[ev("01A", "message", true)]).as_bytes(), &batch_key(["01A"]), Some("message"));
        // Netstrings keep the ids apart; a repeated id counts once.
        assert_ne!(batch_key(["ab", "c"]), batch_key(["a", "bc"]));
        assert_eq!(batch_key(["x", "x"]), batch_key(["x"]));
        let untyped = br#"{"events":[{"webhookEventId":"01A"}]}"#;
        assert_body_identity(&p, untyped, &batch_key(["01A"]), None);

        let cases: &[(&str, &[u8], KeyErrorKind)] = &[
            ("no events", br#"{"destination":"U1"}"#, KeyErrorKind::Missing),
            ("empty events", br#"{"events":[]}"#, KeyErrorKind::Missing),
            ("events not a list", br#"{"events":{}}"#, KeyErrorKind::Invalid),
            ("an event without an id", br#"{"events":[{"webhookEventId":"01A"},{"type":"t"}]}"#, KeyErrorKind::Missing),
            ("an empty id", br#"{"events":[{"webhookEventId":""}]}"#, KeyErrorKind::Missing),
            ("a numeric id", br#"{"events":[{"webhookEventId":1}]}"#, KeyErrorKind::Invalid),
            ("not json", b"events=1", KeyErrorKind::BodyNotJson),
        ];
        for (name, body, want) in cases {
            let got = LineKey.extract(&header_lines(FACTS.scheme.header, &[]), body);
            assert_eq!(got.map_err(|e| e.kind()).err(), Some(*want), "{name}");
        }
        assert_eq!(p.name(), "line");
    }

    #[test]
    fn answers_the_signed_communication_check_only() {
        let secret = SigningSecret::from("line_secret");
        let provider = Provider::line();
        let answer = |body: &[u8], header: &str| {
            let p = header_lines(FACTS.scheme.header, &[header]);
            let secrets = [secret.clone()];
            provider.handshake(&Delivery::new(&p, body, &secrets, crate::test_support::at(NOW))).map_err(|e| e.kind())
        };
        let check = br#"{"destination":"U1","events":[]}"#;
        let res = answer(check, &sign(&FACTS, &secret, check)).unwrap().expect("answered");
        assert_eq!(res.status(), http::StatusCode::OK);
        assert!(res.body().is_empty());
        let event = br#"{"destination":"U1","events":[{"type":"follow","webhookEventId":"01A"}]}"#;
        assert!(answer(event, &sign(&FACTS, &secret, event)).unwrap().is_none(), "an event is no check");
        // A forged check is refused before any answer.
        let forged = sign(&FACTS, &SigningSecret::from("other"), check);
        assert_eq!(answer(check, &forged).unwrap_err(), VerifyErrorKind::NoMatchingSignature);
    }
}
