//! Stripe: the `Stripe-Signature` header.
//!
//! Scheme (Stripe, "Verify webhook signatures manually",
//! <https://docs.stripe.com/webhooks#verify-manually>):
//! - the header is a comma-separated list of `key=value` items: one `t=` (Unix
//!   seconds) and one or more `v1=` (hex HMAC-SHA256). Several `v1` values
//!   appear while a secret is being rolled; any one may match. `v0` (test
//!   mode's legacy scheme) and unknown keys are ignored.
//! - the signed payload is `{t}.{raw body}`, keyed with the endpoint's
//!   signing secret exactly as shown in the dashboard (the whole `whsec_...`
//!   string, not base64-decoded).
//! - the timestamp must be within the tolerance of now (Stripe's libraries
//!   default to 300 seconds); this crate applies it in both directions.
//!
//! The event key is the Event's `id` (`evt_...`) in the body and the event
//! type its `type` (Stripe, "Handle duplicate events",
//! <https://docs.stripe.com/webhooks#handle-duplicate-events>).
//!
//! **Signed / not signed** (<https://docs.stripe.com/webhooks#verify-manually>):
//! the raw body and the `t=` timestamp are signed, so the event key (the
//! body's `id`) and the event type (the body's `type`) are signed. No other
//! header is: the handler must not trust any header but `Stripe-Signature`'s
//! timestamp.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! event's `created` (Unix seconds): Stripe does not deliver events in the
//! order they happened (<https://docs.stripe.com/webhooks#event-ordering>), and
//! its objects carry no version. Two changes within one second compare equal,
//! and the second is not applied: fetch the object from the API when that
//! matters.

use std::time::Duration;

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::{HmacScheme, Quirks, Tolerance};
use crate::verify::Boundary;

/// The Stripe preset's facts: the `Stripe-Signature` header of `t=` and
/// `v1=` entries, comma-separated (a `v1` value that is not 64 hex digits is
/// skipped like an unknown scheme; kept from the preset's own parser: `t` is
/// read with Rust's `u64` parser, a leading `+` passing, and only by
/// `verify`), over `{t}.{body}`, within 300 seconds; key = the Event `id`,
/// type = `type`.
///
/// **Replay window: 30 days.** Stripe retries a failed delivery for up to 3
/// days with an exponential back-off; the Dashboard resends events of the
/// last 15 days and the Stripe CLI (`stripe events resend`) those of the last
/// 30, under the same event `id` (<https://docs.stripe.com/webhooks#retries>).
/// The longest of these, the CLI's 30 days, is the window.
pub const FACTS: HmacPreset = HmacPreset {
    name: "stripe",
    scheme: HmacScheme {
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(300),
            evidence: "Stripe's libraries' default (https://docs.stripe.com/webhooks#verify-manually)",
            boundary: Boundary::Inclusive,
        }),
        quirks: Quirks::STRIPE,
        ..super::timestamped_entries("stripe-signature", ["t", "v1"], ',', ".")
    },
    event_key: EventKey::Json { id: "/id", event_type: Some("/type") },
    headers: &[],
    replay_window: super::days(30),
    replay_evidence: "3 days of retries; CLI resend of the last 30 days (https://docs.stripe.com/webhooks#retries)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::own("no fixture directory; its module tests sign and verify each case"),
};

impl Provider {
    /// Stripe (`Stripe-Signature`, 300 s tolerance; key = the Event `id`
    /// (`evt_...`), type = `type`): [`stripe::FACTS`](FACTS).
    /// The CLI name is `stripe`.
    pub fn stripe() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::{sign_at, KeyValueHeader};
    use crate::test_support::{at, header_lines, NOW};
    use crate::verify::SigningSecret;
    use crate::verify::VerifyErrorKind;
    use crate::verify::{Delivery, Verifier as _};

    /// The family's cases, then Stripe's own: its test mode's `v0` is
    /// ignored, and a non-numeric `t` is read by `verify` only, after the
    /// signatures (`v1=00` is none).
    #[test]
    fn verifies_and_rejects() {
        // Also tampered, stale, future, missing and garbage in the conformance table.
        let wide = FACTS.verifier().tolerance(Duration::from_secs(600));
        KeyValueHeader::t_v1(&FACTS).check("garbage", wide, |_| {
            vec![("non-numeric t", vec!["t=abc,v1=00".into()], Err(VerifyErrorKind::NoMatchingSignature))]
        });
    }

    /// Input from the third security review: `t=<now>,` + 5,000 `v1=` entries
    /// (340 KB) cost 4.6 ms per request, parsed two or three times. The header
    /// is refused by its size (4 KiB) before it is split, and past 16 entries
    /// however short: precheck and verify alike.
    #[test]
    fn signature_lists_past_the_caps_are_malformed_before_any_hmac() {
        let secret = SigningSecret::from("whsec_test_secret");
        let body = br#"{"id":"evt_1"}"#;
        let good = sign_at(&FACTS, &secret, NOW, body);
        let list = |n: usize| format!("{good}{}", format!(",v1={}", "0".repeat(64)).repeat(n - 2));
        let v = FACTS.verifier();
        for (entries, want) in
            [(16, Ok(())), (17, Err(VerifyErrorKind::MalformedHeader)), (5_001, Err(VerifyErrorKind::MalformedHeader))]
        {
            let header = list(entries);
            let p = header_lines(FACTS.scheme.header, &[&header]);
            let d = Delivery::new(&p, body, std::slice::from_ref(&secret), at(NOW));
            assert_eq!(v.verify(&d).map_err(|e| e.kind()), want, "{entries} entries");
            assert_eq!(v.precheck(&p).map_err(|e| e.kind()), want, "{entries} entries, precheck");
        }
        // The size cap holds over repeated header lines too.
        let line = format!("v1={}", "0".repeat(64));
        let many: Vec<&str> = std::iter::once(good.as_str()).chain(std::iter::repeat_n(line.as_str(), 60)).collect();
        let p = header_lines(FACTS.scheme.header, &many);
        assert_eq!(v.precheck(&p).map_err(|e| e.kind()), Err(VerifyErrorKind::MalformedHeader));
    }
}
