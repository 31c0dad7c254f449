//! Intercom: the `X-Hub-Signature` header.
//!
//! Scheme (Intercom, "Signed notifications" in "Webhook notifications",
//! <https://developers.intercom.com/docs/references/webhooks/webhook-models>,
//! and the older reference
//! <https://developers.intercom.com/intercom-api-reference/v1.0/reference/signed-notifications>):
//! `X-Hub-Signature: sha1=<hex HMAC-SHA1 of the raw body>`, "the hexadecimal
//! (40-byte) representation of a SHA-1 signature computed using the HMAC
//! algorithm as defined in RFC2104", keyed with the app's `client_secret`
//! (Developer Hub, Basic Info) as given. SHA-1's collision attacks do not
//! carry over to HMAC-SHA1 (RFC 6194), and it is the only choice Intercom
//! offers. Intercom sends one
//! signature; rotating the client secret means configuring both here for the
//! changeover. Each header line is one candidate.
//!
//! The event key is the body's `id`, the notification id (`notif_...`),
//! which Intercom keeps across redelivery attempts (the envelope counts them
//! in `delivery_attempts`, so the body itself changes between attempts); the
//! event type is `topic` (`conversation.user.created`, or `ping` for the test
//! notification sent when the endpoint is saved).
//!
//! **The `ping`.** The test notification Intercom sends when a webhook is
//! saved carries `"topic": "ping"` and, in captured pings, `"id": null`, so it
//! has no event key. `Ping` answers a *verified* ping 200 with an empty body
//! before any claim (nothing is stored, the handler is not called); an
//! unsigned or forged one is refused 401 like any delivery.
//!
//! **Limit of the scheme:** like GitHub's, the signature covers only the
//! body, with no timestamp; the body's `created_at` and `first_sent_at` are
//! signed but Intercom sets no acceptance window on them. A captured
//! delivery verifies forever; the claim on `id` makes its replay a
//! duplicate. Serve the endpoint over TLS.
//!
//! **Signed / not signed**
//! (<https://developers.intercom.com/docs/references/webhooks/webhook-models>):
//! only the raw body is signed (no timestamp); the event key (the
//! notification's `id`) and the event type (its `topic`) come from it and are
//! signed. Headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! notification's `created_at` (Unix seconds), or the item's own `updated_at`.

use bytes::Bytes;

use crate::providers::Challenge;
use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;
use crate::verify::{Algorithm, Delivery};

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "x-hub-signature";

/// The facts of the intercom preset (the scheme is in the module docs).
///
/// **Replay window.** How long an Intercom notification can be sent again: 30 days.
///
/// Intercom publishes no retry schedule. Its "Delivering Webhook
/// Notifications" page
/// (<https://developers.intercom.com/docs/webhooks/webhook-notifications>)
/// counts the attempts in the notification's `delivery_attempts`, throttles
/// after a 429 with delays from 1 minute to 2 hours, and suspends a private
/// app's subscription only after its endpoint has answered errors for more
/// than seven days (a public app's, never); no manual redelivery is
/// documented. Since attempts may go on for at least 7 days and the span is
/// not stated, the window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "intercom",
    scheme: HmacScheme {
        algorithm: Algorithm::Sha1,
        prefix: "sha1=",
        strict: true,
        ..HmacScheme::new(SIGNATURE_HEADER)
    },
    event_key: EventKey::Json { id: "/id", event_type: Some("/topic") },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence:
        "no published span; suspension after 7 days of errors (https://developers.intercom.com/docs/webhooks/webhook-notifications)",
    challenge: Some(&Ping),
    example_headers: &[],
    fixture: super::Fixture::formula(&["same_event", "extra_vectors"]),
};

impl Provider {
    /// Intercom (`X-Hub-Signature` `sha1=`; key = the notification `id`; answers `ping`). See [`crate::providers::intercom`].
    ///
    /// The Intercom preset: [`intercom::FACTS`](FACTS); key = the notification `id`,
    /// type = `topic`; `Ping` answers the test notification.
    pub fn intercom() -> Self {
        FACTS.provider()
    }
}

/// Answers Intercom's verified test notification (`"topic": "ping"`) 200
/// with an empty body, before any claim: it has no event key (`"id": null`).
/// `None` for every other notification.
#[derive(Debug, Clone, Copy, Default)]
struct Ping;

impl Challenge for Ping {
    fn respond(&self, delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
        let doc: serde_json::Value = serde_json::from_slice(delivery.body).ok()?;
        (doc.get("topic").and_then(serde_json::Value::as_str) == Some("ping"))
            .then(|| http::Response::new(Bytes::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::sign;
    use crate::providers::tests::support::BodyOnly;
    use crate::providers::Provider;
    use crate::test_support::NOW;
    use crate::verify::SigningSecret;
    use crate::verify::VerifyErrorKind::MalformedHeader;

    /// The ping as Intercom sends it when a webhook is saved (`"id": null`):
    /// answered 200 once verified, nothing claimed; forged, refused.
    #[test]
    fn a_verified_ping_is_answered_without_a_key_and_a_forged_one_is_not() {
        use crate::test_support::{at, headers};
        let secret = SigningSecret::from("intercom_client_secret");
        let body = br#"{"type":"notification_event","app_id":"a","data":{"type":"notification_event_data","item":{"type":"ping","message":"hi"}},"links":{},"id":null,"topic":"ping","delivery_status":null,"delivery_attempts":1,"created_at":1718000000}"#;
        let secrets = [secret.clone()];
        let provider = Provider::intercom();
        let good = headers(&[(SIGNATURE_HEADER, &sign(&FACTS, &secret, body))]);
        let answer = provider.handshake(&Delivery::new(&good, body, &secrets, at(NOW))).unwrap();
        assert_eq!(answer.map(|r| r.status()), Some(http::StatusCode::OK));
        let forged = headers(&[(SIGNATURE_HEADER, &sign(&FACTS, &SigningSecret::from("other"), body))]);
        assert!(provider.handshake(&Delivery::new(&forged, body, &secrets, at(NOW))).is_err());
        // Any other notification goes on to its claim.
        let event = br#"{"id":"notif_1","topic":"conversation.user.created"}"#;
        let signed = headers(&[(SIGNATURE_HEADER, &sign(&FACTS, &secret, event))]);
        assert_eq!(
            provider.handshake(&Delivery::new(&signed, event, &secrets, at(NOW))).unwrap().map(|r| r.status()),
            None
        );
    }

    /// The common cases, rotation and precheck, and Intercom's own: `sha1=`
    /// and hex of HMAC-SHA1 (any case).
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"type":"notification_event","id":"notif_1","topic":"ping"}"#;
        let tampered = b"{\"id\":\"notif_2\"}";
        BodyOnly::of(&FACTS).check_cases("intercom_client_secret", body, tampered, "sha1=", |secret, good| {
            let sha256 = format!("sha256={}", hex::encode(crate::verify::hmac_sha256(secret, &[body])));
            vec![
                ("upper-case hex", vec![format!("sha1={}", good[5..].to_uppercase())], Ok(())),
                ("no prefix", vec![good[5..].to_owned()], Err(MalformedHeader)),
                ("sha256 instead", vec![sha256], Err(MalformedHeader)),
                ("short hex", vec!["sha1=abcd".to_owned()], Err(MalformedHeader)),
                ("not hex", vec![format!("sha1={}", "g".repeat(40))], Err(MalformedHeader)),
                ("one bad line", vec![good.to_owned(), "sha1=00".to_owned()], Err(MalformedHeader)),
            ]
        });
    }
}
