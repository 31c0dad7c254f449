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
use webhook_idempotency::Provider;

const HEADERS: &[&str] = &[
    "stripe-signature",
    "x-hub-signature-256",
    "x-github-delivery",
    "x-github-event",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    "x-shopify-hmac-sha256",
    "x-shopify-event-id",
    "x-shopify-webhook-id",
    "x-shopify-topic",
    "shopify-hmac-sha256",
    "x-square-hmacsha256-signature",
    "x-twilio-signature",
    "x-twilio-webhooks-signature-settings",
    "i-twilio-idempotency-token",
    "paddle-signature",
    "linear-signature",
    "linear-delivery",
    "linear-event",
    "x-hubspot-signature-v3",
    "x-hubspot-request-timestamp",
    "x-pagerduty-signature",
    "x-zm-signature",
    "x-zm-request-timestamp",
    "twitch-eventsub-message-signature",
    "twitch-eventsub-message-id",
    "twitch-eventsub-message-timestamp",
    "twitch-eventsub-message-type",
    "twitch-eventsub-subscription-type",
    "x-hub-signature",
    "calendly-webhook-signature",
    "typeform-signature",
    "x-signature-ed25519",
    "x-signature-timestamp",
    "x-twilio-email-event-webhook-signature",
    "x-twilio-email-event-webhook-timestamp",
    "content-type",
];

fn providers() -> Vec<Provider> {
    vec![
        Provider::stripe(),
        Provider::github(),
        Provider::slack(),
        Provider::standard_webhooks(),
        Provider::svix(),
        Provider::shopify(),
        Provider::square("https://example.com/square"),
        Provider::twilio("https://example.com"),
        Provider::paddle(),
        Provider::linear(),
        Provider::hubspot("https://example.com"),
        Provider::pagerduty(),
        Provider::zoom(),
        Provider::twitch(),
        Provider::intercom(),
        Provider::mailgun(),
        Provider::calendly(),
        Provider::typeform(),
        Provider::discord(),
        Provider::sendgrid(),
    ]
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
        for name in HEADERS {
            for line in &lines {
                if let Ok(v) = http::HeaderValue::from_bytes(line) {
                    req = req.header(*name, v);
                }
            }
        }
        let Ok(req) = req.body(()) else { return };
        let parts = req.into_parts().0;
        for provider in providers() {
            let delivery = Delivery::new(&parts, body, &secrets, now);
            let _ = provider.check(&delivery);
            let _ = provider.check(&delivery.without_timestamp_check());
        }
    }
});
