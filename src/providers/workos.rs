//! WorkOS: the `WorkOS-Signature` header.
//!
//! Scheme (WorkOS, "Webhooks", "Validate the requests",
//! <https://workos.com/docs/events/data-syncing/webhooks>, and the official
//! Node SDK, `workos/workos-node`, `src/common/crypto/signature-provider.ts`,
//! `verifyHeader` and `computeSignature`):
//! - `WorkOS-Signature: t=<Unix milliseconds>, v1=<hex HMAC-SHA256>`: the
//!   SDK splits the value at `,` and each part at `=`; the space WorkOS puts
//!   after the comma is ignored here (entries are trimmed). One `v1`.
//! - the signed payload is `{t}.{raw body}`, `t` as sent (milliseconds),
//!   keyed with the webhook endpoint's secret as given.
//! - tolerance: the SDK refuses a `t` older than `tolerance`, 180 000 ms by
//!   default (`verifyHeader`, `constructEvent`), and checks no future time.
//!   [`FACTS`]' tolerance is those 180 seconds, applied in both directions
//!   and compared to the millisecond. WorkOS does not say whether a retry is
//!   signed afresh; if retries are refused as `timestamp_too_old`, widen it
//!   with `FACTS.verifier().tolerance(d)`.
//!
//! The event key is the body's `id`, the event's id (`event_01H...`), which
//! a retry repeats; the event type is `event` (`dsync.user.created`,
//! `user.created`).
//!
//! **Signed / not signed** (<https://workos.com/docs/events/data-syncing/webhooks>):
//! the `t=` timestamp and the raw body are signed, so the event key and type
//! are. Other headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! event's `created_at` (RFC 3339), or the object's `updated_at`; WorkOS
//! does not promise the order of deliveries.

use std::time::Duration;

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::{HmacScheme, TimestampFormat, Tolerance};
use crate::verify::Boundary;

/// The facts of the workos preset (the scheme is in the module docs).
///
/// **Replay window.** How long a WorkOS event can be sent again: 30 days.
///
/// WorkOS retries a delivery that is not answered 2xx with an exponential
/// back-off (<https://workos.com/docs/events/data-syncing/webhooks>); the
/// research for this preset could not confirm its span, and WorkOS keeps
/// events for replay through its Events API, which is not a webhook
/// redelivery. With the span not confirmed, the window is the crate's
/// default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "workos",
    scheme: HmacScheme {
        strict: true,
        timestamp_format: TimestampFormat::UnixMilliseconds,
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(180),
            evidence: "the SDK's default tolerance, 180000 ms (workos-node src/common/crypto/signature-provider.ts; https://workos.com/docs/events/data-syncing/webhooks)",
            boundary: Boundary::Inclusive,
        }),
        ..super::timestamped_entries("workos-signature", ["t", "v1"], ',', ".")
    },
    event_key: EventKey::Json { id: "/id", event_type: Some("/event") },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no confirmed span (https://workos.com/docs/events/data-syncing/webhooks)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&["timestamp_ms"]),
};

impl Provider {
    /// WorkOS (`WorkOS-Signature` `t=<ms>, v1=<hex>` over `{t}.{body}`,
    /// 180 s; key = body `id`, type = `event`): [`workos::FACTS`](FACTS).
    /// See [`crate::providers::workos`].
    pub fn workos() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::OneHeader;
    use crate::test_support::NOW;
    use crate::verify::{hmac_sha256, SigningSecret, VerifyErrorKind};

    /// The `t=,v1=` family's cases at WorkOS's 180 s, written in
    /// milliseconds, then its own.
    #[test]
    fn verifies_and_rejects() {
        use VerifyErrorKind::{
            MalformedHeader, MissingHeader, NoMatchingSignature, TimestampInFuture, TimestampTooOld,
        };
        let (secret, other) = (SigningSecret::from("workos_secret"), SigningSecret::from("another"));
        let body: &[u8] = br#"{"id":"event_1","event":"user.created"}"#;
        let (good, by_other) = (FACTS.sign(&secret, NOW, body), FACTS.sign(&other, NOW, body));
        let ms = NOW * 1000;
        let sig = &good[good.find("v1=").expect("a v1 entry")..];
        let rotated = format!("{by_other},{sig}");
        let spaced = good.replacen(",v1=", ", v1=", 1);
        let unknown = format!("{good},v0={}", "a".repeat(64));
        let zeros = format!("t={ms},v1={}", "0".repeat(64));
        let seconds =
            format!("t={NOW},v1={}", hex::encode(hmac_sha256(&secret, &[format!("{NOW}.").as_bytes(), body])));
        let two_timestamps = format!("t={},{good}", ms + 1);
        let tampered = [body, b" "].concat();
        let cases: &[(&str, Vec<&str>, &[u8], u64, Result<(), VerifyErrorKind>)] = &[
            ("valid", vec![good.as_str()], body, NOW, Ok(())),
            ("the SDK's spacing, `, v1=`", vec![spaced.as_str()], body, NOW, Ok(())),
            ("two signatures during rotation", vec![rotated.as_str()], body, NOW, Ok(())),
            ("unknown key ignored", vec![unknown.as_str()], body, NOW, Ok(())),
            ("edge past", vec![good.as_str()], body, NOW + 180, Ok(())),
            ("edge future", vec![good.as_str()], body, NOW - 180, Ok(())),
            ("stale", vec![good.as_str()], body, NOW + 181, Err(TimestampTooOld)),
            ("future", vec![good.as_str()], body, NOW - 181, Err(TimestampInFuture)),
            ("tampered body", vec![good.as_str()], &tampered, NOW, Err(NoMatchingSignature)),
            ("other secret", vec![by_other.as_str()], body, NOW, Err(NoMatchingSignature)),
            ("wrong signature", vec![zeros.as_str()], body, NOW, Err(NoMatchingSignature)),
            ("seconds instead of milliseconds: 1970", vec![seconds.as_str()], body, NOW, Err(TimestampTooOld)),
            ("missing", vec![], body, NOW, Err(MissingHeader)),
            ("no timestamp", vec!["v1=00"], body, NOW, Err(MalformedHeader)),
            ("no signature", vec!["t=1"], body, NOW, Err(NoMatchingSignature)),
            ("two timestamps", vec![two_timestamps.as_str()], body, NOW, Err(MalformedHeader)),
            ("fractional t", vec!["t=1.5,v1=00"], body, NOW, Err(MalformedHeader)),
        ];
        let one = OneHeader::of(&FACTS);
        for (name, lines, body, now, want) in cases {
            assert_eq!(one.check(lines, body, std::slice::from_ref(&secret), *now), *want, "{name}");
        }
        one.check_rotation_and_precheck([&other, &secret], &good, body, NOW, "v1=00");
        let wide = FACTS.verifier().tolerance(Duration::from_secs(360));
        one.check_replay_and_tolerance(wide, (&good, body, &secret), [NOW, NOW + 360]);
    }

    /// The SDK's test (`src/webhooks/webhooks.spec.ts`) signs
    /// `` `${timestamp}.${payload}` `` with secret `secret` and sends
    /// `` `t=${timestamp}, v1=${hash}` ``: the same bytes verify here.
    #[test]
    fn the_sdks_test_form() {
        let secret = SigningSecret::from("secret");
        let body = br#"{"id":"wh_123","event":"dsync.user.created","data":{}}"#;
        let ms = NOW * 1000 + 123;
        let hash = hex::encode(hmac_sha256(&secret, &[format!("{ms}.").as_bytes(), body]));
        let header = format!("t={ms}, v1={hash}");
        let one = OneHeader::of(&FACTS).millis();
        assert_eq!(one.check(&[&header], body, std::slice::from_ref(&secret), ms), Ok(()));
        let late = ms + 180_001;
        assert_eq!(one.check(&[&header], body, &[secret], late), Err(VerifyErrorKind::TimestampTooOld));
        assert_eq!(Provider::workos().name(), "workos");
    }
}
