//! Mux: the `mux-signature` header.
//!
//! Scheme (Mux, "Verify webhook signatures",
//! <https://www.mux.com/docs/core/verify-webhook-signatures>, and the
//! verifier in `@mux/mux-node`, `webhooks.verifySignature`):
//! `mux-signature: t=<Unix seconds>,v1=<hex HMAC-SHA256>`, the HMAC of
//! `{t}.{raw body}` keyed with the webhook's signing secret as UTF-8 bytes.
//! The SDK accepts any `v1=` entry, so several may appear while a secret is
//! rotated; configuring both secrets here covers the changeover.
//!
//! **Tolerance:** the SDK rejects a `t` more than 300 seconds old and checks
//! no future time. [`FACTS`]' tolerance is 300 seconds in **both**
//! directions, as every timestamped preset of this crate: a `t` more than
//! 5 minutes ahead of the clock, which the SDK would accept, is refused
//! here (`timestamp_in_future`); widen it with `FACTS.verifier().tolerance(d)`.
//!
//! **Signed / not signed**
//! (<https://www.mux.com/docs/core/verify-webhook-signatures>): `t` and the
//! raw body are signed, so the event key (the body's `id`) and the event
//! type (its `type`) are signed. Other headers are not.
//!
//! The event key is the body's `id`, the event's UUID, and the event type its
//! `type` (`video.asset.ready`). Mux's payloads carry the earlier delivery
//! attempts in `attempts`, so a retry is another body and another signature
//! of the same `id`; that the `id` is kept is what the payload describes
//! (the event), not a sentence of the docs: the one assumption of this
//! preset.
//!
//! **Retries** ("Listen for webhooks",
//! <https://www.mux.com/docs/core/listen-for-webhooks>): a delivery not
//! answered 2xx is retried, for up to 24 hours (the page's figure; not
//! re-read when this preset was written), hence [`FACTS`]' `replay_window`.
//! **Handshake:** none.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! event's `created_at` (RFC 3339, microseconds); Mux does not promise the
//! order of deliveries.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::{HmacScheme, Tolerance};
use crate::verify::Boundary;
use std::time::Duration;

/// The facts of the mux preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Mux event can be sent again: 2 days.
///
/// Mux retries a delivery that is not answered 2xx for up to 24 hours
/// (Mux, "Listen for webhooks",
/// <https://www.mux.com/docs/core/listen-for-webhooks>) and documents no
/// manual redelivery. The 24 hours plus a day of margin.
pub const FACTS: HmacPreset = HmacPreset {
    name: "mux",
    scheme: HmacScheme {
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(300),
            evidence: "the SDK refuses a `t` over 300 seconds old (https://www.mux.com/docs/core/verify-webhook-signatures); here both ways",
            boundary: Boundary::Inclusive,
        }),
        ..super::timestamped_entries("mux-signature", ["t", "v1"], ',', ".")
    },
    event_key: EventKey::Json { id: "/id", event_type: Some("/type") },
    headers: &[],
    replay_window: super::days(2),
    replay_evidence: "retries for up to 24 hours (https://www.mux.com/docs/core/listen-for-webhooks)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::sdk(&["sdk_time_cases", "sdk_differs"]),
};

impl Provider {
    /// Mux (`mux-signature` `t=,v1=`, 300 s; key = `id`). See [`crate::providers::mux`].
    ///
    /// The Mux preset: [`mux::FACTS`](FACTS) with the 300 second tolerance; key =
    /// the body's `id`, type = `type`.
    pub fn mux() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::KeyValueHeader;
    use crate::verify::VerifyErrorKind;

    /// The family's cases, then Mux's own: a `v0` entry alone is no
    /// signature, and `t` must be a number.
    #[test]
    fn verifies_and_rejects() {
        let wide = FACTS.verifier().tolerance(Duration::from_secs(600));
        KeyValueHeader::t_v1(&FACTS).check("garbage", wide, |good| {
            let v0 = good.replace("v1=", "v0=");
            vec![
                ("other scheme only", vec![v0], Err(VerifyErrorKind::NoMatchingSignature)),
                ("text t", vec!["t=abc,v1=00".into()], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
    }
}
