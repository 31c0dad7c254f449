//! Convoy (the open-source webhooks gateway): the `X-Convoy-Signature`
//! header, advanced signatures.
//!
//! Scheme (Convoy, "Signatures",
//! <https://getconvoy.io/docs/product-manual/signatures>, and "Replay
//! attacks", <https://getconvoy.io/docs/glossary/replay-attacks>; the
//! verifier of convoy-go, `webhook.go`, and its shared signature vectors,
//! `testdata/signature-vectors.json`): `X-Convoy-Signature: t=<Unix
//! seconds>,v1=<hex>[,v1=<hex>...]`, each `v1` a hex HMAC-SHA256 of
//! `{t},{body}` (the timestamp's text, a comma, the raw body) keyed with the
//! endpoint's secret as UTF-8 bytes; the entries may come in any order, one
//! `v1` per active secret. Other versions (`v0=`, the project's older
//! signature versions) are skipped.
//!
//! The hash, the encoding and the header's name are project settings in
//! Convoy: this preset is Convoy's default (SHA-256, hex, `X-Convoy-Signature`)
//! with advanced signatures on. A project with other settings: the same
//! scheme with the generic builder
//! (`HmacVerifier::builder("x-company-signature").algorithm(Algorithm::Sha512)`
//! and the settings of [`FACTS`]`.scheme`). Simple signatures (the body alone,
//! no time) are refused by this preset: turn on advanced signatures, which
//! Convoy's docs recommend against replays.
//!
//! The event key is the `X-Convoy-Idempotency-Key` header, which Convoy sets
//! on the deliveries of an event, its retries and replays included: the
//! event's own idempotency key where the sender gave one, else one Convoy
//! stamps (Convoy, "Idempotency",
//! <https://getconvoy.io/docs/product-manual/idempotency>). A delivery
//! without it is refused as having no event key (400); for events whose id
//! is in the body, key on the body instead
//! (`Provider::convoy().key_extractor(JsonPointerKey::new("/id"))`). No event
//! type (Convoy's event type is not a delivery header).
//!
//! **Signed / not signed:** the body and the time `t`. The event key
//! (`X-Convoy-Idempotency-Key`) is **not signed**: a captured delivery sent
//! again within the tolerance under a fresh key is a new event. Behind
//! Convoy with a provider's own signed id, see
//! [`Provider::behind`](crate::Provider::behind) and
//! [`gateway`](super::gateway).
//!
//! **Tolerance: 300 s**, convoy-go's `DefaultTolerance`, past and future
//! (convoy-go accepts any future time; a clock five minutes ahead is
//! refused here, as for every preset of the crate).
//!
//! **Retries:** linear or exponential back-off, the number of attempts set
//! per project (exponential by default: 10 s, 30 s, 1, 3, 5, 10 and 15
//! minutes; <https://getconvoy.io/docs/glossary/retry-schedule>), and manual
//! and batch retries from the dashboard. **Handshake:** none.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! event's own field in the body; Convoy's retries do not keep the order.

use std::time::Duration;

use crate::providers::gateway::{Gateway, GatewayEventId};
use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::{HmacScheme, Tolerance};
use crate::verify::{Boundary, KeyMaterialError, SigningSecret};

/// The header carrying Convoy's idempotency key (the event key).
pub const EVENT_ID_HEADER: &str = "x-convoy-idempotency-key";

/// The facts of the convoy preset (the scheme is in the module docs).
///
/// **Replay window: 30 days.** Convoy's automatic retries take minutes to
/// hours on the project's schedule, and an event can be retried by hand from
/// the dashboard for as long as the project keeps it (a retention setting;
/// <https://getconvoy.io/docs/glossary/retry-schedule>): the span is not
/// fixed, so the window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "convoy",
    scheme: HmacScheme {
        strict: true,
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(300),
            evidence: "convoy-go's DefaultTolerance, 300 s (https://github.com/frain-dev/convoy-go/blob/main/webhook.go)",
            boundary: Boundary::Inclusive,
        }),
        ..super::timestamped_entries("x-convoy-signature", ["t", "v1"], ',', ",")
    },
    event_key: EventKey::Own {
        extractor: &GatewayEventId(EVENT_ID_HEADER),
        reads: "the x-convoy-idempotency-key header",
        id_header: Some(EVENT_ID_HEADER),
    },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "retries on the project's schedule, manual retries while the project keeps the event (https://getconvoy.io/docs/glossary/retry-schedule)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Convoy, the gateway alone (`X-Convoy-Signature` `t=,v1=` over
    /// `{t},{body}`, 300 s; key = `X-Convoy-Idempotency-Key`):
    /// [`convoy::FACTS`](FACTS). Behind Convoy with the provider's signature
    /// and key, see [`Provider::behind`].
    pub fn convoy() -> Self {
        FACTS.provider()
    }
}

impl Gateway {
    /// Convoy, with the endpoint's signing secret(s): the
    /// preset's scheme (advanced signatures,
    /// HMAC-SHA256, hex, 300 s).
    ///
    /// # Errors
    /// As [`Gateway::new`].
    pub fn convoy(secrets: impl IntoIterator<Item = SigningSecret>) -> Result<Self, KeyMaterialError> {
        Self::new("convoy", FACTS.verifier(), secrets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::KeyValueHeader;
    use crate::test_support::header_lines;
    use crate::verify::{Delivery, SigningSecret, Verifier as _, VerifyErrorKind};
    use std::time::{SystemTime, UNIX_EPOCH};

    /// The family's cases at Convoy's 300 s, then its own.
    #[test]
    fn verifies_and_rejects() {
        let wide = FACTS.verifier().tolerance(Duration::from_secs(600));
        KeyValueHeader::t_v1(&FACTS).check("v1=00", wide, |_| {
            vec![
                ("t=Infinity", vec!["t=Infinity,v1=00".into()], Err(VerifyErrorKind::MalformedHeader)),
                ("simple signature", vec!["a".repeat(64)], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
    }

    /// Convoy's shared signature vectors (convoy-go,
    /// `testdata/signature-vectors.json`, generated from Convoy's server
    /// signing code) for the preset's settings (advanced, SHA256, hex),
    /// checked at the vectors' time, 1700000000.
    #[test]
    fn convoy_shared_vectors() {
        let secret = [SigningSecret::from("convoy-webhook-secret")];
        let body = br#"{"event":"charge.success","amount":1000,"currency":"NGN"}"#;
        let good = "77b8b9269f25a199846a55a2bd25b3fba151c70fdae60bb1dcd87fbbc943c55c";
        let other = "449623e4897bbde05e35358293f97b8c2f697367ffa3e7466e98178dfba44d19";
        let cases: Vec<(&str, String, Result<(), VerifyErrorKind>)> = vec![
            ("advanced_sha256_hex_valid", format!("t=1700000000,v1={good}"), Ok(())),
            ("advanced_t_not_first", format!("v1={good},t=1700000000"), Ok(())),
            ("advanced_multi_v1_one_valid", format!("t=1700000000,v1={other},v1={good}"), Ok(())),
            ("advanced_tamper", format!("t=1700000000,v1={}0", &good[..63]), Err(VerifyErrorKind::NoMatchingSignature)),
            ("advanced_missing_timestamp", format!("v1={good},v2={good}"), Err(VerifyErrorKind::MalformedHeader)),
            ("advanced_numeric_signature", "t=1700000000,v1=1234567890".into(), Err(VerifyErrorKind::MalformedHeader)),
        ];
        let at = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        for (name, header, want) in cases {
            let p = header_lines(FACTS.scheme.header, &[header.as_str()]);
            let got = FACTS.verifier().verify(&Delivery::new(&p, body, &secret, at)).map_err(|e| e.kind());
            assert_eq!(got, want, "{name}");
        }
        // advanced_expired: the valid header, checked now, years later.
        let p = header_lines(FACTS.scheme.header, &[&format!("t=1700000000,v1={good}")]);
        let late = FACTS.verifier().verify(&Delivery::new(&p, body, &secret, SystemTime::now()));
        assert_eq!(late.unwrap_err().kind(), VerifyErrorKind::TimestampTooOld);
    }
}
