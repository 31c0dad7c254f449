//! Every preset's signature-header parser, verifier and key extractor on
//! arbitrary header values and bodies: must never panic.
//!
//! Input: `header value bytes 0x00 body bytes`. The value goes into every
//! header any preset reads (as one line, and split at `\n` into several
//! lines), with the body, for all presets.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use webhook_idempotency::verify::{Delivery, SigningSecret};
use webhook_idempotency::providers;
use webhook_idempotency::Provider;

/// Every header any preset reads (from the registry), and `content-type`.
fn headers() -> Vec<&'static str> {
    let mut names = vec!["content-type"];
    for preset in providers::all() {
        for h in preset.headers() {
            if !names.contains(&h) {
                names.push(h);
            }
        }
    }
    names
}

/// Every preset in the registry, with a URL where it signs one.
fn all_providers() -> Vec<Provider> {
    providers::all()
        .iter()
        .map(|p| p.provider(Some("https://example.com/square")).expect("a URL is given"))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let (value, body) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let secrets = [
        SigningSecret::from("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
        SigningSecret::from("whpk_BL4BuXNGmE0sjbAOtOP9h6HpjvtMfBcA1TG+ClyNiyU="),
        SigningSecret::from("b0e1d8cd3aa0e8b2b8e2f3ec1d1c40d3e0a6cbbba4f6f8d9d4e9d6c5b3a2a1f0"),
        SigningSecret::from("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="),
    ];
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for lines in [vec![value], value.split(|b| *b == b'\n').collect::<Vec<_>>()] {
        let mut req = http::Request::builder().method("POST").uri("/hook?bodySHA256=abc&x=1");
        for name in headers() {
            for line in &lines {
                if let Ok(v) = http::HeaderValue::from_bytes(line) {
                    req = req.header(name, v);
                }
            }
        }
        let Ok(req) = req.body(()) else { return };
        let parts = req.into_parts().0;
        for provider in all_providers() {
            let delivery = Delivery::new(&parts, body, &secrets, now);
            let _ = provider.check(&delivery);
            let _ = provider.check(&delivery.without_timestamp_check());
        }
    }
});
