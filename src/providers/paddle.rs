//! Paddle Billing: the `Paddle-Signature` header.
//!
//! Scheme (Paddle, "Verify webhook signatures",
//! <https://developer.paddle.com/webhooks/about/signature-verification>):
//! - the header is a `;`-separated list of `key=value` items: one `ts=`
//!   (Unix seconds) and at least one `h1=` (hex HMAC-SHA256), for example
//!   `ts=1671552777;h1=eb4d0dc8...`. Paddle's docs say a signature carries
//!   "at least one `h1`": while a secret is being rotated there are several,
//!   and any one may match. Unknown keys are ignored.
//! - the signed payload is `{ts}:{raw body}` (a colon, not Stripe's dot),
//!   keyed with the notification destination's endpoint secret exactly as
//!   shown (`pdl_ntfset_...`, used byte for byte).
//! - tolerance: Paddle's docs say its SDK helpers "enforce a five-second
//!   timestamp tolerance by default" and that manual implementations should
//!   apply the same check; the SDKs agree (`paddle-python-sdk`
//!   `Verifier(maximum_variance=5)`, both directions;
//!   `@paddle/paddle-node-sdk` `MAX_VALID_TIME_DIFFERENCE = 5`, past only).
//!   [`FACTS`]' tolerance is therefore 5 seconds, applied in both
//!   directions. It is short: a receiver whose clock drifts, or a proxy that
//!   queues requests, will see `timestamp_too_old`; widen it with
//!   `FACTS.verifier().tolerance(d)`. Retries: Paddle retries for 3 days and
//!   replays up to 90 days later; its own 5-second default can only work if
//!   every attempt is signed when it is sent, so retries are taken to carry
//!   a fresh `ts` (an inference: Paddle does not say so in these words).
//!
//! The event key is the body's `event_id` (`evt_...`) and the event type its
//! `event_type` (`transaction.completed`). Paddle's "How webhooks work"
//! (<https://developer.paddle.com/webhooks/about/how-webhooks-work>) says to
//! deduplicate on `event_id`: a replayed notification gets a new
//! `notification_id` but keeps the `event_id`, and one event sent to several
//! destinations has one `event_id` too.
//!
//! **Signed / not signed**
//! (<https://developer.paddle.com/webhooks/about/signature-verification>): the
//! `ts` of `Paddle-Signature` and the raw body are signed, so the event key
//! (the body's `event_id`) and the event type (the body's `event_type`) are
//! signed. Other headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! event's `occurred_at` (RFC 3339, microseconds): Paddle advises ordering by
//! it, as deliveries may arrive out of order
//! (<https://developer.paddle.com/webhooks/about/how-webhooks-work>).

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::{HmacScheme, Tolerance};
use crate::verify::Boundary;
use std::time::Duration;

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "paddle-signature";

/// The facts of the paddle preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Paddle event can be sent again: 90 days.
///
/// Paddle retries a failed notification of a live account up to 60 times
/// over 3 days with an exponential back-off (Paddle, "Handle webhook
/// delivery", <https://developer.paddle.com/webhooks/about/how-webhooks-work>),
/// and a `delivered` or `failed` notification can be replayed through the
/// API for as long as Paddle keeps it, 90 days (Paddle, "Replay a
/// notification",
/// <https://developer.paddle.com/api-reference/notifications/replay-notification>).
/// A replay is a new notification of the same `event_id`, the key of this
/// preset, so the window is the full 90 days: longer than
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "paddle",
    scheme: HmacScheme {
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(5),
            evidence: "the SDK helpers' five-second default (https://developer.paddle.com/webhooks/about/signature-verification)",
            boundary: Boundary::Inclusive,
        }),
        ..super::timestamped_entries(SIGNATURE_HEADER, ["ts", "h1"], ';', ":")
    },
    event_key: EventKey::Json { id: "/event_id", event_type: Some("/event_type") },
    headers: &[],
    replay_window: super::days(90),
    replay_evidence:
        "3 days of retries; API replay of the last 90 days (https://developer.paddle.com/webhooks/about/how-webhooks-work)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::sdk(&["old_secret"]),
};

impl Provider {
    /// Paddle Billing (`Paddle-Signature` `ts=;h1=`, 5 s; key = `event_id`). See [`crate::providers::paddle`].
    ///
    /// The Paddle Billing preset: [`paddle::FACTS`](FACTS) with the 5 second default
    /// tolerance; key = the body's `event_id`, type = `event_type`.
    pub fn paddle() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::sign_at;
    use crate::providers::tests::support::{KeyValueHeader, OneHeader};
    use crate::providers::Provider;
    use crate::test_support::{assert_body_identity, NOW};
    use crate::verify::SigningSecret;
    use crate::verify::{Verifier as _, VerifyErrorKind};

    /// The fixed vector in Paddle's Go SDK (`PaddleHQ/paddle-go-sdk`,
    /// `webhook_verifier_test.go`): a real `price.created` notification.
    #[test]
    fn paddle_go_sdk_vector() {
        let body = br#"{"data":{"id":"pri_01hsdn96k2hxjzsq5yerecdj9j","name":null,"status":"active","quantity":{"maximum":999999,"minimum":1},"tax_mode":"account_setting","product_id":"pro_01hsdn8qp7yydry3x1yeg6a9rv","unit_price":{"amount":"1000","currency_code":"USD"},"custom_data":null,"description":"testing","import_meta":null,"trial_period":null,"billing_cycle":{"interval":"month","frequency":1},"unit_price_overrides":[]},"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created","occurred_at":"2024-03-20T10:07:35.590857Z","notification_id":"ntf_01hsdn977e920kbgzt6r6c9rqc"}"#;
        let secret = SigningSecret::from("pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr");
        let header = "ts=1710929255;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8";
        assert_eq!(sign_at(&FACTS, &secret, 1_710_929_255, body), header);
        let secrets = [secret];
        assert_eq!(OneHeader::of(&FACTS).check(&[header], body, &secrets, 1_710_929_255), Ok(()));
        assert_eq!(
            OneHeader::of(&FACTS).check(&[header], b"{}", &secrets, 1_710_929_255),
            Err(VerifyErrorKind::NoMatchingSignature)
        );
        assert_eq!(
            OneHeader::of(&FACTS).check(&[header], body, &[SigningSecret::from("abc")], 1_710_929_255),
            Err(VerifyErrorKind::NoMatchingSignature)
        );

        assert_body_identity(&Provider::paddle(), body, "evt_01hsdn97563968dy0szkmgjwh3", Some("price.created"));
    }

    /// The rotation vector in Paddle's Python SDK (`paddle-python-sdk`,
    /// `tests/Unit/Notification/test_Verifier.py`): a dummy `h1` before the
    /// real one and three secrets, of which only the last matches.
    #[test]
    fn paddle_python_sdk_rotation_vector() {
        let header = "ts=1696195954;h1=dummy;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02";
        let secrets = [
            SigningSecret::from("pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_TjIG2BXbm83HPXqNfziwe506sBEdqL/4"),
            SigningSecret::from("pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_vB/yIOnTOCWIvpBadM5jzBZPHc7OmdSo"),
            SigningSecret::from("pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh"),
        ];
        assert_eq!(OneHeader::of(&FACTS).check(&[header], b"hello-world", &secrets, 1_696_195_954), Ok(()));
        assert_eq!(
            OneHeader::of(&FACTS).check(&[header], b"hello-world", &secrets[..2], 1_696_195_954),
            Err(VerifyErrorKind::NoMatchingSignature)
        );
    }

    #[test]
    fn verifies_and_rejects() {
        // Also tampered, stale, future, missing and garbage in the conformance table.
        let wide = FACTS.verifier().tolerance(Duration::from_secs(10));
        KeyValueHeader::of(&FACTS, ["ts", "h1", "h2"]).check("h1=00", wide, |good| {
            use VerifyErrorKind::MalformedHeader;
            let two_ts = good.replacen("ts=", &format!("ts={};ts=", NOW + 1), 1);
            vec![
                ("spaces after separators", vec![good.replace(';', "; ")], Ok(())),
                ("non-numeric ts", vec!["ts=abc;h1=00".into()], Err(MalformedHeader)),
                ("negative ts", vec!["ts=-1;h1=00".into()], Err(MalformedHeader)),
                ("huge ts", vec!["ts=99999999999999999999999;h1=00".into()], Err(MalformedHeader)),
                ("timestamps across lines", vec![good.to_owned(), two_ts], Err(MalformedHeader)),
                ("stripe-style header", vec!["t=1,v1=00".into()], Err(MalformedHeader)),
            ]
        });
    }

    #[test]
    fn non_ascii_header_bytes_never_panic() {
        let v = FACTS.verifier();
        let mut odd = http::Request::builder().body(()).unwrap().into_parts().0;
        odd.headers.insert(SIGNATURE_HEADER, http::HeaderValue::from_bytes(b"ts=1;h1=\xff").unwrap());
        assert_eq!(v.precheck(&odd).unwrap_err().kind(), VerifyErrorKind::MalformedHeader);
        assert_eq!(crate::providers::Provider::paddle().name(), "paddle");
    }
}
