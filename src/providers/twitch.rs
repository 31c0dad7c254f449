//! Twitch EventSub (webhook transport): the `Twitch-Eventsub-Message-Signature`
//! header, and the `webhook_callback_verification` handshake.
//!
//! Scheme (Twitch, "Handling webhook events", sections "Verifying the event
//! message" and "Responding to a challenge request",
//! <https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message>):
//! - `Twitch-Eventsub-Message-Signature: sha256=<hex HMAC-SHA256>` over the
//!   concatenation, without separators, of the `Twitch-Eventsub-Message-Id`
//!   header, the `Twitch-Eventsub-Message-Timestamp` header (both exactly as
//!   sent) and the raw body, keyed with the `secret` given when the
//!   subscription was created (10 to 100 ASCII characters), as its bytes.
//! - The timestamp is RFC 3339 with up to nanosecond precision
//!   (`2023-11-14T22:13:20.123456789Z`). Twitch: "make sure the value in the
//!   `Twitch-Eventsub-Message-Timestamp` header isn't older than 10 minutes"
//!   ("Guarding against replay attacks"); this crate's default tolerance is
//!   those 600 seconds, applied in both directions, configurable with
//!   `FACTS.verifier().tolerance(d)`. It is parsed strictly by hand
//!   (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; seconds precision is
//!   kept), since the crate has no date-time dependency.
//! - Only `sha256=` signatures are known; other algorithms are ignored.
//!   Several header lines are all considered.
//! - Rotation: the secret belongs to each subscription, so rotating means
//!   creating new subscriptions with the new secret; configure both secrets
//!   until the old subscriptions are deleted.
//!
//! **Challenge.** Right after a subscription is created Twitch sends a
//! message of type `webhook_callback_verification` whose body holds
//! `challenge`. It is signed like any message, so it passes
//! [`FACTS`] first; then `CallbackVerification` answers `200`
//! with the raw challenge as `text/plain`, as Twitch requires. Nothing is
//! claimed. The signed body decides, not the unsigned
//! `Twitch-Eventsub-Message-Type` header: a body with a string `challenge`
//! is always answered as the handshake (a captured handshake relabelled
//! `notification` is not stored as an event); a message labelled a
//! handshake without one is answered `400`.
//!
//! **Event key and type.** The key is `Twitch-Eventsub-Message-Id`, which
//! Twitch keeps when it resends a message (EventSub, "Handling duplicate
//! events", <https://dev.twitch.tv/docs/eventsub/#handling-duplicate-events>)
//! and which the signature covers. The event type is the signed body's
//! `subscription.type` (`channel.follow`; EventSub, "Handling webhook
//! events", the notification, revocation and challenge bodies all carry the
//! `subscription` object), never the `Twitch-Eventsub-Subscription-Type`
//! header: headers other than the id and timestamp are not signed, so a
//! captured message re-sent inside the window with another type header
//! would otherwise be stored under that type. `notification` and
//! `revocation` messages both reach the handler: tell them apart from the
//! signed body (a notification has `event` or `events`; a revocation has
//! neither and its `subscription.status` gives the reason), not from the
//! `Twitch-Eventsub-Message-Type` header.
//!
//! **Signed / not signed.** Signed: the message id (event key), the
//! timestamp and the raw body (so the event type, taken from the body).
//! Not signed: every other header, `Twitch-Eventsub-Message-Type`,
//! `Twitch-Eventsub-Subscription-Type`, `-Subscription-Version` and
//! `-Message-Retry` included; the handler must not trust them
//! (<https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message>).
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! `Twitch-Eventsub-Message-Timestamp` header (RFC 3339, part of the signed
//! message), or the event's own time fields.

use std::time::Duration;

use bytes::Bytes;

use crate::key::{EventIdentity, KeyError, KeyErrorKind};
use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::{HmacScheme, Signed, TimestampFormat, Tolerance};
use crate::verify::Boundary;
use crate::verify::{single_header, Delivery};

/// The header Twitch signs messages with.
const SIGNATURE_HEADER: &str = "twitch-eventsub-message-signature";
/// The header carrying the signed RFC 3339 timestamp.
const TIMESTAMP_HEADER: &str = "twitch-eventsub-message-timestamp";
/// The header carrying the message id (signed; the event key).
const MESSAGE_ID_HEADER: &str = "twitch-eventsub-message-id";
/// The header carrying the message type (`notification`,
/// `webhook_callback_verification`, `revocation`). Not signed.
const MESSAGE_TYPE_HEADER: &str = "twitch-eventsub-message-type";
/// The header carrying the subscription type. Not signed: the preset takes
/// the event type from the body's `subscription.type` instead.
const SUBSCRIPTION_TYPE_HEADER: &str = "twitch-eventsub-subscription-type";
/// The message type of the subscription handshake.
const CALLBACK_VERIFICATION: &str = "webhook_callback_verification";

/// The facts of the twitch preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Twitch EventSub message can be sent again: 30 days.
///
/// Twitch sends each notification at least once and resends it, with the
/// same `Twitch-Eventsub-Message-Id`, when unsure it was received (EventSub,
/// "Handling duplicate events",
/// <https://dev.twitch.tv/docs/eventsub/#handling-duplicate-events>); it
/// publishes no schedule for those resends, only that too many slow or
/// failed answers revoke the subscription (`notification_failures_exceeded`,
/// <https://dev.twitch.tv/docs/eventsub/handling-webhook-events>). No manual
/// replay exists. With the span not stated, the window is the crate's
/// default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "twitch",
    scheme: HmacScheme {
        key_value: Some("sha256"),
        strict: true,
        id_header: Some(MESSAGE_ID_HEADER),
        timestamp_header: Some(TIMESTAMP_HEADER),
        timestamp_format: TimestampFormat::Text { parse: super::rfc3339::parse, write: super::rfc3339::format },
        signed: Signed::IdTimestampBody { separator: "" },
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(600),
            evidence: "\"isn't older than 10 minutes\" (https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message)",
            boundary: Boundary::Inclusive,
        }),
        ..HmacScheme::new(SIGNATURE_HEADER)
    },
    event_key: EventKey::Own {
        extractor: &message_identity,
        reads: "the Twitch-Eventsub-Message-Id header",
        id_header: Some(MESSAGE_ID_HEADER),
    },
    headers: &[MESSAGE_TYPE_HEADER, SUBSCRIPTION_TYPE_HEADER],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "resends with no published span (https://dev.twitch.tv/docs/eventsub/#handling-duplicate-events)",
    challenge: Some(&CallbackVerification),
    example_headers: &[(MESSAGE_TYPE_HEADER, "notification")],
    fixture: super::Fixture::own("twurple's vectors (`twurple.json`), with the challenge answer"),
};

impl Provider {
    /// Twitch EventSub (`Twitch-Eventsub-Message-Signature`, 600 s; key = the message id; answers the callback verification). See [`crate::providers::twitch`].
    ///
    /// The Twitch EventSub preset: [`twitch::FACTS`](FACTS) (600 s), identity from
    /// `message_identity` (key = `Twitch-Eventsub-Message-Id`, type = the
    /// body's `subscription.type`), and the `CallbackVerification` handshake.
    /// The CLI name is `twitch`.
    pub fn twitch() -> Self {
        FACTS.provider()
    }
}

/// Answers Twitch's `webhook_callback_verification` message (after
/// verification): `200` `text/plain` with the raw `challenge`; `400` when the
/// body has no string `challenge`; `None` for other message types.
#[derive(Debug, Clone, Copy, Default)]
struct CallbackVerification;

fn plain_response(status: http::StatusCode, body: Bytes) -> http::Response<Bytes> {
    let mut res = http::Response::new(body);
    *res.status_mut() = status;
    res.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
    res
}

impl crate::providers::Challenge for CallbackVerification {
    fn respond(&self, delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
        // The signed body decides: only the handshake carries `challenge`.
        // The unsigned type header alone never turns a handshake into an
        // event (a replayed handshake relabelled `notification` is still
        // answered, not stored).
        let challenge = serde_json::from_slice::<serde_json::Value>(delivery.body)
            .ok()
            .and_then(|doc| doc.get("challenge").and_then(|c| c.as_str()).map(|c| Bytes::from(c.to_owned())));
        let labelled = single_header(delivery.parts, MESSAGE_TYPE_HEADER).is_ok_and(|t| t == CALLBACK_VERIFICATION);
        match challenge {
            Some(challenge) => Some(plain_response(http::StatusCode::OK, challenge)),
            None if labelled => {
                Some(plain_response(http::StatusCode::BAD_REQUEST, Bytes::from_static(b"no challenge\n")))
            }
            None => None,
        }
    }
}

/// Twitch's event identity: key = `Twitch-Eventsub-Message-Id` (signed),
/// type = the signed body's `subscription.type` (`channel.follow`), never
/// the unsigned `Twitch-Eventsub-Subscription-Type` header. No type when
/// the body has none.
///
/// # Errors
/// [`KeyErrorKind::Missing`] without a message id,
/// [`KeyErrorKind::Invalid`] for two different ids or one that is not
/// visible ASCII.
fn message_identity(parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
    let key = crate::key::header_str(parts, MESSAGE_ID_HEADER)?.ok_or(KeyErrorKind::Missing)?;
    Ok(EventIdentity { key, event_type: crate::key::json_text(body, "/subscription/type") })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::rfc3339::format as format_timestamp;
    use crate::verify::SigningSecret;

    /// The signature header Twitch sends for `body`, message id `id` and
    /// timestamp text `ts` (byte for byte).
    fn sign(secret: &SigningSecret, id: &str, ts: &str, body: &[u8]) -> String {
        FACTS.verifier().sign_text(secret, id, ts, body)
    }
    use crate::providers::Challenge as _;
    use crate::test_support::fixture_json;
    use crate::test_support::{at, headers as parts, NOW};
    use crate::verify::VerifyErrorKind;
    use crate::verify::{Delivery, Verifier as _};

    /// Fixture from `scripts/fixtures/twitch.js`: signed with the code of
    /// Twitch's "Handling webhook events" example and accepted by
    /// `@twurple/eventsub-http@8.1.4`.
    #[test]
    fn twurple_fixture() {
        let doc: serde_json::Value = fixture_json("twitch/twurple.json");
        let secrets = [SigningSecret::from(doc["secret"].as_str().unwrap())];
        for name in ["notification", "verification", "revocation"] {
            let m = &doc[name];
            assert_eq!(m["twurple"], "valid", "{name}");
            let headers: Vec<(String, String)> = m["headers"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect();
            let h = |n: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)).unwrap().1.clone();
            let body = m["body"].as_str().unwrap().as_bytes();
            assert_eq!(sign(&secrets[0], &h(MESSAGE_ID_HEADER), &h(TIMESTAMP_HEADER), body), h(SIGNATURE_HEADER));
            let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let p = parts(&pairs);
            let now = u64::try_from(crate::providers::rfc3339::parse(&h(TIMESTAMP_HEADER)).unwrap()).unwrap();
            let d = Delivery::new(&p, body, &secrets, at(now + 30));
            assert!(FACTS.verifier().verify(&d).is_ok(), "{name}");
            let answer = CallbackVerification.respond(&d);
            if name == "verification" {
                let answer = answer.unwrap();
                assert_eq!(answer.status(), http::StatusCode::OK);
                assert_eq!(answer.headers()[http::header::CONTENT_TYPE], "text/plain");
                assert_eq!(answer.body(), m["challenge"].as_str().unwrap());
            } else {
                assert!(answer.is_none(), "{name}");
                let id = crate::test_support::identity(&crate::providers::Provider::twitch(), &p, body);
                assert_eq!(id.key, h(MESSAGE_ID_HEADER));
                assert_eq!(id.event_type, Some(h(SUBSCRIPTION_TYPE_HEADER)));
            }
            let tampered = [body, b" "].concat();
            let d = Delivery::new(&p, &tampered, &secrets, at(now));
            assert!(FACTS.verifier().verify(&d).is_err(), "{name}");
        }
    }

    /// A captured message re-sent inside the window with other unsigned
    /// headers still verifies (the headers are not signed), but its type is
    /// the signed body's and a handshake stays a handshake.
    #[test]
    fn unsigned_type_headers_are_not_trusted() {
        let doc: serde_json::Value = fixture_json("twitch/twurple.json");
        let secrets = [SigningSecret::from(doc["secret"].as_str().unwrap())];
        let message = |name: &str, overrides: &[(&str, &str)]| {
            let m = &doc[name];
            let mut headers: Vec<(String, String)> = m["headers"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| !overrides.iter().any(|(o, _)| k.eq_ignore_ascii_case(o)))
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect();
            headers.extend(overrides.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let ts = m["headers"]["Twitch-Eventsub-Message-Timestamp"].as_str().unwrap();
            (
                parts(&pairs),
                m["body"].as_str().unwrap().as_bytes().to_vec(),
                crate::providers::rfc3339::parse(ts).unwrap() as u64,
            )
        };
        let x = crate::providers::Provider::twitch();
        let cases: &[(&str, &str, &[(&str, &str)], Option<&str>, Option<http::StatusCode>)] = &[
            ("genuine notification", "notification", &[], Some("channel.follow"), None),
            (
                "subscription type header spoofed",
                "notification",
                &[(SUBSCRIPTION_TYPE_HEADER, "channel.subscribe")],
                Some("channel.follow"),
                None,
            ),
            (
                "subscription type header removed",
                "notification",
                &[(SUBSCRIPTION_TYPE_HEADER, "")],
                Some("channel.follow"),
                None,
            ),
            (
                "notification relabelled revocation",
                "notification",
                &[(MESSAGE_TYPE_HEADER, "revocation")],
                Some("channel.follow"),
                None,
            ),
            (
                "handshake relabelled notification",
                "verification",
                &[(MESSAGE_TYPE_HEADER, "notification"), (SUBSCRIPTION_TYPE_HEADER, "channel.ban")],
                Some("channel.follow"),
                Some(http::StatusCode::OK),
            ),
        ];
        for (name, which, overrides, want_type, want_answer) in cases {
            let (p, body, now) = message(which, overrides);
            let d = Delivery::new(&p, &body, &secrets, at(now + 30));
            assert!(x.verifier_ref().verify(&d).is_ok(), "{name}: the type headers are not signed");
            let identity = x.extractor_ref().extract(&p, &body).unwrap();
            assert_eq!(identity.event_type.as_deref(), *want_type, "{name}");
            let answer = x.challenge_ref().unwrap().respond(&d).map(|r| r.status());
            assert_eq!(answer, *want_answer, "{name}");
        }
    }

    #[test]
    fn message_identity_cases() {
        let id = (MESSAGE_ID_HEADER, "m-1");
        let cases: &[(&str, Vec<(&str, &str)>, &[u8], Result<(&str, Option<&str>), KeyErrorKind>)] = &[
            ("id and type", vec![id], br#"{"subscription":{"type":"a.b"}}"#, Ok(("m-1", Some("a.b")))),
            ("type header ignored", vec![id, (SUBSCRIPTION_TYPE_HEADER, "x.y")], b"{}", Ok(("m-1", None))),
            ("type not a string", vec![id], br#"{"subscription":{"type":1}}"#, Ok(("m-1", None))),
            ("top-level type ignored", vec![id], br#"{"type":"a.b"}"#, Ok(("m-1", None))),
            ("body not JSON", vec![id], b"type=a.b", Ok(("m-1", None))),
            ("no id", vec![], b"{}", Err(KeyErrorKind::Missing)),
            ("blank id", vec![(MESSAGE_ID_HEADER, " ")], b"{}", Err(KeyErrorKind::Missing)),
            ("two ids", vec![id, (MESSAGE_ID_HEADER, "m-2")], b"{}", Err(KeyErrorKind::Invalid)),
        ];
        for (name, headers, body, want) in cases {
            let got = message_identity(&parts(headers), body);
            let got = got.as_ref().map(|i| (i.key.as_str(), i.event_type.as_deref())).map_err(|e| e.kind());
            assert_eq!(got, *want, "{name}");
        }
    }

    /// A message with `sigs` as signature lines, the id and timestamp
    /// headers (when given) and `extra` header lines.
    fn message(sigs: &[&str], id: Option<&str>, ts: Option<&str>, extra: &[(&str, &str)]) -> http::request::Parts {
        let mut headers: Vec<(&str, &str)> = sigs.iter().map(|s| (SIGNATURE_HEADER, *s)).collect();
        headers.extend(id.map(|id| (MESSAGE_ID_HEADER, id)));
        headers.extend(ts.map(|ts| (TIMESTAMP_HEADER, ts)));
        headers.extend_from_slice(extra);
        parts(&headers)
    }

    #[test]
    fn verifies_and_rejects() {
        let secret = SigningSecret::from("s3cre7-twitch-secret");
        let other = SigningSecret::from("another-twitch-secret");
        let id = "e76c6bd4-55c9-4987-8304-da1588d8988b";
        let ts = "2023-11-14T22:13:20.634234626Z";
        let body = br#"{"subscription":{"type":"channel.follow"},"event":{"user_id":"1234"}}"#;
        let good = sign(&secret, id, ts, body);
        let bad = sign(&other, id, ts, body);
        let upper = format!("sha256={}", good["sha256=".len()..].to_uppercase());
        let md5 = format!("md5={}", "0".repeat(32));
        let not_hex = format!("sha256={}", "g".repeat(64));
        let (g, i, t) = (good.as_str(), Some(id), Some(ts));
        let cases: Vec<(&str, http::request::Parts, &[u8], u64, Result<(), VerifyErrorKind>)> = vec![
            ("valid", message(&[g], i, t, &[]), body, NOW, Ok(())),
            ("upper-case hex", message(&[&upper], i, t, &[]), body, NOW, Ok(())),
            ("two lines", message(&[&bad, g], i, t, &[]), body, NOW, Ok(())),
            ("unknown algorithm ignored", message(&[&md5, g], i, t, &[]), body, NOW, Ok(())),
            ("same id twice", message(&[g], i, t, &[(MESSAGE_ID_HEADER, id)]), body, NOW, Ok(())),
            ("9 minutes late", message(&[g], i, t, &[]), body, NOW + 540, Ok(())),
            ("tampered body", message(&[g], i, t, &[]), b"{}", NOW, Err(VerifyErrorKind::NoMatchingSignature)),
            ("wrong secret", message(&[&bad], i, t, &[]), body, NOW, Err(VerifyErrorKind::NoMatchingSignature)),
            ("other id", message(&[g], Some("x"), t, &[]), body, NOW, Err(VerifyErrorKind::NoMatchingSignature)),
            ("only md5", message(&[&md5], i, t, &[]), body, NOW, Err(VerifyErrorKind::NoMatchingSignature)),
            ("11 minutes late", message(&[g], i, t, &[]), body, NOW + 660, Err(VerifyErrorKind::TimestampTooOld)),
            ("11 minutes early", message(&[g], i, t, &[]), body, NOW - 660, Err(VerifyErrorKind::TimestampInFuture)),
            ("no signature", message(&[], i, t, &[]), body, NOW, Err(VerifyErrorKind::MissingHeader)),
            ("no id", message(&[g], None, t, &[]), body, NOW, Err(VerifyErrorKind::MissingHeader)),
            ("no timestamp", message(&[g], i, None, &[]), body, NOW, Err(VerifyErrorKind::MissingHeader)),
            (
                "two ids",
                message(&[g], i, t, &[(MESSAGE_ID_HEADER, "x")]),
                body,
                NOW,
                Err(VerifyErrorKind::MalformedHeader),
            ),
            (
                "two timestamps",
                message(&[g], i, t, &[(TIMESTAMP_HEADER, "2023-11-14T22:13:21Z")]),
                body,
                NOW,
                Err(VerifyErrorKind::MalformedHeader),
            ),
            ("no algorithm", message(&["abc"], i, t, &[]), body, NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("not hex", message(&[&not_hex], i, t, &[]), body, NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("short", message(&["sha256=ab"], i, t, &[]), body, NOW, Err(VerifyErrorKind::MalformedHeader)),
            (
                "unix timestamp",
                message(&[g], i, Some("1700000000"), &[]),
                body,
                NOW,
                Err(VerifyErrorKind::MalformedHeader),
            ),
        ];
        for (name, p, body, now, want) in cases {
            let got = FACTS.verifier().verify(&Delivery::new(&p, body, std::slice::from_ref(&secret), at(now)));
            assert_eq!(got.map_err(|e| e.kind()), want, "{name}");
            // The head alone already rejects what is missing or malformed.
            let pre = FACTS.verifier().precheck(&p).map_err(|e| e.kind());
            match want {
                Err(k @ (VerifyErrorKind::MissingHeader | VerifyErrorKind::MalformedHeader)) => {
                    assert_eq!(pre, Err(k), "{name}");
                }
                Err(VerifyErrorKind::NoMatchingSignature) if name == "only md5" => {
                    assert_eq!(pre, Err(VerifyErrorKind::NoMatchingSignature), "{name}");
                }
                _ => assert_eq!(pre, Ok(()), "{name}"),
            }
        }
        let p = message(&[g], i, t, &[]);
        assert_eq!(
            FACTS.verifier().verify(&Delivery::new(&p, body, &[], at(NOW))).unwrap_err().kind(),
            VerifyErrorKind::NoSecret
        );
    }

    #[test]
    fn rotation_replay_and_old_dates() {
        let old = SigningSecret::from("old-subscription-secret");
        let new = SigningSecret::from("new-subscription-secret");
        let body = b"{}";
        let ts = format_timestamp(NOW);
        let sig = sign(&new, "m1", &ts, body);
        let p = parts(&[(SIGNATURE_HEADER, &sig), (MESSAGE_ID_HEADER, "m1"), (TIMESTAMP_HEADER, &ts)]);
        let v = FACTS.verifier();
        assert!(v.verify(&Delivery::new(&p, body, &[old.clone(), new.clone()], at(NOW))).is_ok());
        assert!(v.verify(&Delivery::new(&p, body, std::slice::from_ref(&old), at(NOW))).is_err());
        let late = at(NOW + 86_400);
        let only_new = [new.clone()];
        assert!(v.verify(&Delivery::new(&p, body, &only_new, late)).is_err());
        assert!(v.verify(&Delivery::new(&p, body, &only_new, late).without_timestamp_check()).is_ok());
        assert!(FACTS
            .verifier()
            .tolerance(Duration::from_secs(86_400))
            .verify(&Delivery::new(&p, body, &only_new, late))
            .is_ok());

        let ancient = "1960-01-01T00:00:00Z";
        let sig = sign(&new, "m1", ancient, body);
        let p = parts(&[(SIGNATURE_HEADER, &sig), (MESSAGE_ID_HEADER, "m1"), (TIMESTAMP_HEADER, ancient)]);
        assert_eq!(
            v.verify(&Delivery::new(&p, body, &only_new, at(NOW))).unwrap_err().kind(),
            VerifyErrorKind::TimestampTooOld
        );
        assert!(v.verify(&Delivery::new(&p, body, &only_new, at(NOW)).without_timestamp_check()).is_ok());
    }

    #[test]
    fn callback_verification_cases() {
        let cases: &[(&str, Option<&str>, &[u8], Option<(http::StatusCode, &[u8])>)] = &[
            (
                "challenge",
                Some(CALLBACK_VERIFICATION),
                br#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{}}"#,
                Some((http::StatusCode::OK, b"pogchamp-kappa-360noscope-vohiyo")),
            ),
            (
                "challenge in the signed body, labelled notification",
                Some("notification"),
                br#"{"challenge":"x"}"#,
                Some((http::StatusCode::OK, b"x")),
            ),
            (
                "challenge in the signed body, no type header",
                None,
                br#"{"challenge":"x"}"#,
                Some((http::StatusCode::OK, b"x")),
            ),
            ("notification", Some("notification"), br#"{"subscription":{},"event":{}}"#, None),
            ("no type, no challenge", None, br#"{"subscription":{}}"#, None),
            (
                "no challenge",
                Some(CALLBACK_VERIFICATION),
                b"{}",
                Some((http::StatusCode::BAD_REQUEST, b"no challenge\n")),
            ),
            (
                "not json",
                Some(CALLBACK_VERIFICATION),
                b"challenge",
                Some((http::StatusCode::BAD_REQUEST, b"no challenge\n")),
            ),
        ];
        for (name, kind, body, want) in cases {
            let p = match kind {
                Some(k) => parts(&[(MESSAGE_TYPE_HEADER, k)]),
                None => parts(&[]),
            };
            let got = CallbackVerification.respond(&Delivery::new(&p, body, &[], at(NOW)));
            let got = got.as_ref().map(|r| (r.status(), &r.body()[..]));
            assert_eq!(got, *want, "{name}");
        }
    }
}
