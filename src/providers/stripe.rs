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

use std::time::Duration;

use crate::verify::{
    header_values, hmac_sha256, match_any_secret, Delivery, SigningSecret, Verifier, VerifyError, VerifyErrorKind,
};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "stripe";

/// The header Stripe signs deliveries with.
pub const SIGNATURE_HEADER: &str = "stripe-signature";

/// Stripe's default tolerance: 300 seconds.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// Verifies the `Stripe-Signature` header.
#[derive(Debug, Clone)]
#[must_use]
pub struct StripeVerifier {
    tolerance: Duration,
}

impl Default for StripeVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl StripeVerifier {
    /// A verifier with the default tolerance of 300 seconds.
    pub fn new() -> Self {
        Self { tolerance: DEFAULT_TOLERANCE }
    }

    /// Sets how far (seconds, both directions) `t=` may be from now.
    pub fn tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = tolerance;
        self
    }
}

/// The parsed `Stripe-Signature` header: the timestamp and every `v1` value.
#[derive(Debug, PartialEq, Eq)]
struct Header<'a> {
    timestamp: &'a str,
    v1: Vec<[u8; 32]>,
}

fn parse(parts: &http::request::Parts) -> Result<Header<'_>, VerifyError> {
    let mut timestamp = None;
    let mut v1 = Vec::new();
    let mut seen_header = false;
    for value in header_values(parts, SIGNATURE_HEADER) {
        seen_header = true;
        for item in value?.split(',') {
            let Some((key, val)) = item.trim().split_once('=') else {
                return Err(VerifyErrorKind::MalformedHeader.into());
            };
            match key {
                // Two different timestamps make the header ambiguous.
                "t" if timestamp.replace(val).is_some_and(|prev| prev != val) => {
                    return Err(VerifyErrorKind::MalformedHeader.into());
                }
                "v1" => {
                    // A value that is not 64 hex digits can never match; skip it
                    // like an unknown scheme instead of failing the others.
                    let mut sig = [0u8; 32];
                    if hex::decode_to_slice(val, &mut sig).is_ok() {
                        v1.push(sig);
                    }
                }
                _ => {}
            }
        }
    }
    if !seen_header {
        return Err(VerifyErrorKind::MissingHeader.into());
    }
    let timestamp = timestamp.ok_or(VerifyErrorKind::MalformedHeader)?;
    if v1.is_empty() {
        return Err(VerifyErrorKind::NoMatchingSignature.into());
    }
    Ok(Header { timestamp, v1 })
}

impl Verifier for StripeVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        parse(parts).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let header = parse(delivery.parts)?;
        let ts: u64 = header.timestamp.parse().map_err(|_| VerifyErrorKind::MalformedHeader)?;
        match_any_secret(delivery, header.v1.iter().map(|s| &s[..]), |secret| {
            hmac_sha256(secret, &[header.timestamp.as_bytes(), b".", delivery.body])
        })?;
        delivery.check_time(ts, self.tolerance)
    }
}

/// The Stripe preset: [`StripeVerifier`] (300 s), key = the Event `id`
/// (`evt_...`), type = `type`. The CLI name is `stripe`.
pub(crate) fn provider() -> crate::Provider {
    crate::Provider::new(NAME, StripeVerifier::new(), crate::key::JsonPointerKey::new("/id").event_type("/type"))
}

/// The `Stripe-Signature` value Stripe would send for `body` at `timestamp`
/// (Unix seconds) with `secret`: `t={timestamp},v1={hex}`. For tests and
/// fixtures.
pub fn sign(secret: &SigningSecret, timestamp: u64, body: &[u8]) -> String {
    let ts = timestamp.to_string();
    let mac = hmac_sha256(secret, &[ts.as_bytes(), b".", body]);
    format!("t={ts},v1={}", hex::encode(mac))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    fn parts(values: &[&str]) -> http::request::Parts {
        let mut b = http::Request::builder();
        for v in values {
            b = b.header(SIGNATURE_HEADER, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    const NOW: u64 = 1_700_000_000;
    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn verifies_and_rejects() {
        let secret = SigningSecret::from("whsec_test_secret");
        let other = SigningSecret::from("whsec_other");
        let body = br#"{"id":"evt_1","type":"payment_intent.succeeded"}"#;
        let good = sign(&secret, NOW, body);
        let bad_sig = format!("t={NOW},v1={}", "0".repeat(64));
        let rotated = format!("{},v1={}", sign(&other, NOW, body), &good[good.find("v1=").unwrap() + 3..]);
        let with_v0 = format!("{good},v0={}", "a".repeat(64));
        let cases: &[(&str, Vec<&str>, &[u8], u64, Result<(), VerifyErrorKind>)] = &[
            ("valid", vec![&good], body, NOW, Ok(())),
            ("two v1 during rotation", vec![&rotated], body, NOW, Ok(())),
            ("v0 ignored", vec![&with_v0], body, NOW, Ok(())),
            ("tampered body", vec![&good], b"{\"id\":\"evt_2\"}", NOW, Err(VerifyErrorKind::NoMatchingSignature)),
            ("wrong signature", vec![&bad_sig], body, NOW, Err(VerifyErrorKind::NoMatchingSignature)),
            ("stale", vec![&good], body, NOW + 301, Err(VerifyErrorKind::TimestampTooOld)),
            ("future", vec![&good], body, NOW - 301, Err(VerifyErrorKind::TimestampInFuture)),
            ("missing", vec![], body, NOW, Err(VerifyErrorKind::MissingHeader)),
            ("no t", vec!["v1=00"], body, NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("no v1", vec!["t=1"], body, NOW, Err(VerifyErrorKind::NoMatchingSignature)),
            ("garbage", vec!["garbage"], body, NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("non-numeric t", vec!["t=abc,v1=00"], body, NOW, Err(VerifyErrorKind::NoMatchingSignature)),
        ];
        for (name, headers, body, now, want) in cases {
            let p = parts(headers);
            let got = StripeVerifier::new().verify(&Delivery::new(&p, body, std::slice::from_ref(&secret), at(*now)));
            assert_eq!(got.map_err(|e| e.kind()), *want, "{name}");
        }
    }

    #[test]
    fn rotated_secret_list_accepts_either() {
        let old = SigningSecret::from("whsec_old");
        let new = SigningSecret::from("whsec_new");
        let body = b"{}";
        let header = sign(&new, NOW, body);
        let v = StripeVerifier::new();
        let p = parts(&[&header]);
        assert!(v.verify(&Delivery::new(&p, body, &[old.clone(), new], at(NOW))).is_ok());
        assert!(v.verify(&Delivery::new(&p, body, &[old], at(NOW))).is_err());
        // An operator replay skips the age check, not the signature.
        let stale = at(NOW + 86_400);
        let new_only = [SigningSecret::from("whsec_new")];
        assert!(v.verify(&Delivery::new(&p, body, &new_only, stale)).is_err());
        assert!(v.verify(&Delivery::new(&p, body, &new_only, stale).without_timestamp_check()).is_ok());
        assert!(v.verify(&Delivery::new(&p, b"{ }", &new_only, stale).without_timestamp_check()).is_err());
    }
}
