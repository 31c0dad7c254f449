//! Property tests: a correctly signed body verifies; any single flipped bit
//! of the body, the signed timestamp or the signature fails. The MACs here
//! are written from each provider's documented formula, not with the
//! presets' own `sign` helpers.
#![cfg(feature = "full")]

use std::time::{Duration, UNIX_EPOCH};

use proptest::collection::vec;
use proptest::prelude::*;
use webhook_idempotency::verify::generic::{HmacVerifier, SignedContent};
use webhook_idempotency::verify::{hmac, Algorithm, Delivery, Encoding, SigningSecret, Verifier};

const NOW: u64 = 1_700_000_000;

/// One signature scheme, taken apart: what it signs, and how the signature
/// and timestamp are written into headers.
struct Scheme {
    name: &'static str,
    verifier: Box<dyn Verifier>,
    /// The MAC over (timestamp, body).
    mac: fn(&SigningSecret, u64, &[u8]) -> Vec<u8>,
    /// Headers carrying (timestamp, signature).
    headers: fn(u64, &[u8]) -> Vec<(&'static str, String)>,
    timestamped: bool,
    /// The preset's tolerance in seconds (signed timestamps are drawn within it).
    tolerance: i64,
}

fn schemes() -> Vec<Scheme> {
    vec![
        Scheme {
            name: "stripe",
            verifier: Box::new(webhook_idempotency::verify::stripe::StripeVerifier::new()),
            mac: |s, ts, body| hmac(Algorithm::Sha256, s, &[ts.to_string().as_bytes(), b".", body]).as_ref().to_vec(),
            headers: |ts, sig| vec![("stripe-signature", format!("t={ts},v1={}", hex::encode(sig)))],
            timestamped: true,
            tolerance: 300,
        },
        Scheme {
            name: "github",
            verifier: Box::new(webhook_idempotency::verify::github::GitHubVerifier::new()),
            mac: |s, _, body| hmac(Algorithm::Sha256, s, &[body]).as_ref().to_vec(),
            headers: |_, sig| vec![("x-hub-signature-256", format!("sha256={}", hex::encode(sig)))],
            timestamped: false,
            tolerance: 300,
        },
        Scheme {
            name: "generic HMAC-SHA512 of id.timestamp.body, base64",
            verifier: Box::new(
                HmacVerifier::builder("x-sig")
                    .algorithm(Algorithm::Sha512)
                    .encoding(Encoding::Base64)
                    .prefix("v1,")
                    .signed_content(SignedContent::IdTimestampBody { separator: ".".into() })
                    .timestamp_header("x-ts")
                    .id_header("x-id")
                    .signature_separator(' ')
                    .build()
                    .unwrap(),
            ),
            mac: |s, ts, body| {
                hmac(
                    Algorithm::Sha512,
                    &SigningSecret::new(s.expose()),
                    &[b"m1.", ts.to_string().as_bytes(), b".", body],
                )
                .as_ref()
                .to_vec()
            },
            headers: |ts, sig| {
                vec![
                    ("x-sig", format!("v1,{}", Encoding::Base64.encode(sig))),
                    ("x-ts", ts.to_string()),
                    ("x-id", "m1".into()),
                ]
            },
            timestamped: true,
            tolerance: 300,
        },
        Scheme {
            name: "slack",
            verifier: Box::new(webhook_idempotency::verify::slack::SlackVerifier::new()),
            mac: |s, ts, body| {
                hmac(Algorithm::Sha256, s, &[b"v0:", ts.to_string().as_bytes(), b":", body]).as_ref().to_vec()
            },
            headers: |ts, sig| {
                vec![
                    ("x-slack-signature", format!("v0={}", hex::encode(sig))),
                    ("x-slack-request-timestamp", ts.to_string()),
                ]
            },
            timestamped: true,
            tolerance: 300,
        },
        Scheme {
            name: "zoom",
            verifier: Box::new(webhook_idempotency::verify::zoom::ZoomVerifier::new()),
            mac: |s, ts, body| {
                hmac(Algorithm::Sha256, s, &[b"v0:", ts.to_string().as_bytes(), b":", body]).as_ref().to_vec()
            },
            headers: |ts, sig| {
                vec![("x-zm-signature", format!("v0={}", hex::encode(sig))), ("x-zm-request-timestamp", ts.to_string())]
            },
            timestamped: true,
            tolerance: 300,
        },
        Scheme {
            name: "paddle",
            verifier: Box::new(webhook_idempotency::verify::paddle::PaddleVerifier::new()),
            mac: |s, ts, body| hmac(Algorithm::Sha256, s, &[ts.to_string().as_bytes(), b":", body]).as_ref().to_vec(),
            headers: |ts, sig| vec![("paddle-signature", format!("ts={ts};h1={}", hex::encode(sig)))],
            timestamped: true,
            tolerance: 5,
        },
        Scheme {
            name: "calendly",
            verifier: Box::new(webhook_idempotency::verify::calendly::CalendlyVerifier::new()),
            mac: |s, ts, body| hmac(Algorithm::Sha256, s, &[ts.to_string().as_bytes(), b".", body]).as_ref().to_vec(),
            headers: |ts, sig| vec![("calendly-webhook-signature", format!("t={ts},v1={}", hex::encode(sig)))],
            timestamped: true,
            tolerance: 180,
        },
        Scheme {
            name: "shopify",
            verifier: Box::new(webhook_idempotency::verify::shopify::ShopifyVerifier::new()),
            mac: |s, _, body| hmac(Algorithm::Sha256, s, &[body]).as_ref().to_vec(),
            headers: |_, sig| vec![("x-shopify-hmac-sha256", Encoding::Base64.encode(sig))],
            timestamped: false,
            tolerance: 0,
        },
        Scheme {
            name: "typeform",
            verifier: Box::new(webhook_idempotency::verify::typeform::TypeformVerifier::new()),
            mac: |s, _, body| hmac(Algorithm::Sha256, s, &[body]).as_ref().to_vec(),
            headers: |_, sig| vec![("typeform-signature", format!("sha256={}", Encoding::Base64.encode(sig)))],
            timestamped: false,
            tolerance: 0,
        },
        Scheme {
            name: "intercom",
            verifier: Box::new(webhook_idempotency::verify::intercom::IntercomVerifier::new()),
            mac: |s, _, body| hmac(Algorithm::Sha1, s, &[body]).as_ref().to_vec(),
            headers: |_, sig| vec![("x-hub-signature", format!("sha1={}", hex::encode(sig)))],
            timestamped: false,
            tolerance: 0,
        },
        Scheme {
            name: "pagerduty",
            verifier: Box::new(webhook_idempotency::verify::pagerduty::PagerDutyVerifier::new()),
            mac: |s, _, body| hmac(Algorithm::Sha256, s, &[body]).as_ref().to_vec(),
            headers: |_, sig| vec![("x-pagerduty-signature", format!("v1={}", hex::encode(sig)))],
            timestamped: false,
            tolerance: 0,
        },
        Scheme {
            name: "square",
            verifier: Box::new(webhook_idempotency::verify::square::SquareVerifier::new("https://example.com/sq")),
            mac: |s, _, body| hmac(Algorithm::Sha256, s, &[b"https://example.com/sq", body]).as_ref().to_vec(),
            headers: |_, sig| vec![("x-square-hmacsha256-signature", Encoding::Base64.encode(sig))],
            timestamped: false,
            tolerance: 0,
        },
    ]
}

fn verifies(scheme: &Scheme, secret: &SigningSecret, ts: u64, sig: &[u8], body: &[u8]) -> bool {
    let mut req = http::Request::builder();
    for (name, value) in (scheme.headers)(ts, sig) {
        req = req.header(name, value);
    }
    let parts = req.body(()).unwrap().into_parts().0;
    let secrets = [secret.clone()];
    let delivery = Delivery::new(&parts, body, &secrets, UNIX_EPOCH + Duration::from_secs(NOW));
    scheme.verifier.precheck(&parts).is_ok() && scheme.verifier.verify(&delivery).is_ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn signed_verifies_and_any_flipped_bit_fails(
        body in vec(any::<u8>(), 0..1500),
        secret in vec(any::<u8>(), 1..64),
        skew in -1.0f64..=1.0,
        pick in any::<usize>(),
        bit in 0u32..8,
    ) {
        let secret = SigningSecret::new(secret);
        for scheme in schemes() {
            // A signed timestamp anywhere within the scheme's tolerance.
            let ts = NOW.checked_add_signed((skew * scheme.tolerance as f64) as i64).unwrap();
            let sig = (scheme.mac)(&secret, ts, &body);
            prop_assert!(verifies(&scheme, &secret, ts, &sig, &body), "{}: signed body must verify", scheme.name);

            if !body.is_empty() {
                let mut b = body.clone();
                b[pick % body.len()] ^= 1 << bit;
                prop_assert!(!verifies(&scheme, &secret, ts, &sig, &b), "{}: flipped body bit", scheme.name);
            }
            let mut s = sig.clone();
            s[pick % sig.len()] ^= 1 << bit;
            prop_assert!(!verifies(&scheme, &secret, ts, &s, &body), "{}: flipped signature bit", scheme.name);
            if scheme.timestamped {
                let flipped = ts ^ (1u64 << (pick % 40));
                prop_assert!(!verifies(&scheme, &secret, flipped, &sig, &body), "{}: flipped timestamp bit", scheme.name);
            }
        }
    }
}
