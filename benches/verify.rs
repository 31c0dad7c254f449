//! Signature verification per preset at 1 KiB, 64 KiB and 1 MiB bodies, with
//! a raw HMAC-SHA256 of the same bytes in the same run as the floor.
//!
//! `cargo bench --all-features --bench verify`
#![allow(missing_docs)] // criterion's macros generate undocumented functions

use std::time::{Duration, UNIX_EPOCH};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use webhook_idempotency::verify::*;

const NOW: u64 = 1_700_000_000;
const SECRET: &str = "bench-secret-0123456789abcdef";
const SEED: [u8; 32] = [7; 32];

/// A JSON body of about `size` bytes, with the fields the body-reading
/// verifiers need.
fn body(size: usize) -> Vec<u8> {
    let head = format!("{{\"id\":\"evt_1\",\"webhookTimestamp\":{},\"pad\":\"", NOW * 1000);
    let mut b = head.into_bytes();
    b.resize(size.saturating_sub(2), b'x');
    b.extend_from_slice(b"\"}");
    b
}

fn parts(uri: &str, headers: Vec<(&str, String)>) -> http::request::Parts {
    let mut req = http::Request::builder().method("POST").uri(uri);
    for (k, v) in headers {
        req = req.header(k, v);
    }
    req.body(()).unwrap().into_parts().0
}

/// One preset ready to verify `body`: its verifier, request head, secrets
/// and the body (Mailgun's carries its signature).
struct Case {
    name: &'static str,
    verifier: Box<dyn Verifier>,
    parts: http::request::Parts,
    secrets: Vec<SigningSecret>,
    body: Vec<u8>,
}

fn case(name: &'static str, verifier: impl Verifier, uri: &str, headers: Vec<(&str, String)>, body: &[u8]) -> Case {
    Case {
        name,
        verifier: Box::new(verifier),
        parts: parts(uri, headers),
        secrets: vec![SigningSecret::from(SECRET)],
        body: body.to_vec(),
    }
}

fn cases(b: &[u8]) -> Vec<Case> {
    let s = SigningSecret::from(SECRET);
    let ts = NOW.to_string();
    let whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let twitch_ts = twitch::format_timestamp(NOW);
    let sendgrid_key = p256::ecdsa::SigningKey::from_slice(&[9u8; 32]).unwrap();
    let mailgun_body = mailgun::signed_body(
        &s,
        NOW,
        "token-0123456789",
        &serde_json::json!({
            "id": "evt", "pad": String::from_utf8_lossy(&b[..b.len().saturating_sub(200)]),
        }),
    )
    .into_bytes();
    let twilio_uri = format!("/hook?bodySHA256={}", twilio::body_sha256(b));
    let mut v = vec![
        case("stripe", stripe::StripeVerifier::new(), "/", vec![("stripe-signature", stripe::sign(&s, NOW, b))], b),
        case("github", github::GitHubVerifier::new(), "/", vec![("x-hub-signature-256", github::sign(&s, b))], b),
        case(
            "slack",
            slack::SlackVerifier::new(),
            "/",
            vec![("x-slack-signature", slack::sign(&s, NOW, b)), ("x-slack-request-timestamp", ts.clone())],
            b,
        ),
        case("shopify", shopify::ShopifyVerifier::new(), "/", vec![("x-shopify-hmac-sha256", shopify::sign(&s, b))], b),
        case(
            "square",
            square::SquareVerifier::new("https://example.com/square"),
            "/",
            vec![("x-square-hmacsha256-signature", square::sign(&s, "https://example.com/square", b))],
            b,
        ),
        case(
            "twilio",
            twilio::TwilioVerifier::new("https://example.com"),
            &twilio_uri,
            vec![
                ("x-twilio-signature", twilio::sign(&s, &format!("https://example.com{twilio_uri}"), &[])),
                ("content-type", "application/json".into()),
            ],
            b,
        ),
        case("paddle", paddle::PaddleVerifier::new(), "/", vec![("paddle-signature", paddle::sign(&s, NOW, b))], b),
        case("linear", linear::LinearVerifier::new(), "/", vec![("linear-signature", linear::sign(&s, b))], b),
        case(
            "hubspot",
            hubspot::HubSpotVerifier::new("https://example.com"),
            "/hook",
            vec![
                ("x-hubspot-signature-v3", hubspot::sign(&s, "POST", "https://example.com/hook", b, NOW * 1000)),
                ("x-hubspot-request-timestamp", (NOW * 1000).to_string()),
            ],
            b,
        ),
        case(
            "pagerduty",
            pagerduty::PagerDutyVerifier::new(),
            "/",
            vec![("x-pagerduty-signature", pagerduty::sign(std::slice::from_ref(&s), b))],
            b,
        ),
        case(
            "zoom",
            zoom::ZoomVerifier::new(),
            "/",
            vec![("x-zm-signature", zoom::sign(&s, NOW, b)), ("x-zm-request-timestamp", ts.clone())],
            b,
        ),
        case(
            "twitch",
            twitch::TwitchVerifier::new(),
            "/",
            vec![
                ("twitch-eventsub-message-id", "m1".into()),
                ("twitch-eventsub-message-timestamp", twitch_ts.clone()),
                ("twitch-eventsub-message-signature", twitch::sign(&s, "m1", &twitch_ts, b)),
            ],
            b,
        ),
        case(
            "intercom (SHA-1)",
            intercom::IntercomVerifier::new(),
            "/",
            vec![("x-hub-signature", intercom::sign(&s, b))],
            b,
        ),
        case("mailgun", mailgun::MailgunVerifier::new(), "/", vec![], &mailgun_body),
        case(
            "calendly",
            calendly::CalendlyVerifier::new(),
            "/",
            vec![("calendly-webhook-signature", calendly::sign(&s, NOW, b))],
            b,
        ),
        case(
            "typeform",
            typeform::TypeformVerifier::new(),
            "/",
            vec![("typeform-signature", typeform::sign(&s, b))],
            b,
        ),
        case(
            "generic (HMAC-SHA256)",
            generic::HmacVerifier::builder("x-sig").build().unwrap(),
            "/",
            vec![("x-sig", hex::encode(hmac(Algorithm::Sha256, &s, &[b])))],
            b,
        ),
        case(
            "generic (HMAC-SHA512)",
            generic::HmacVerifier::builder("x-sig").algorithm(Algorithm::Sha512).build().unwrap(),
            "/",
            vec![("x-sig", hex::encode(hmac(Algorithm::Sha512, &s, &[b])))],
            b,
        ),
    ];
    let std_webhooks_secret = standard_webhooks::secret(whsec).unwrap();
    let mut sw = case(
        "standard-webhooks",
        standard_webhooks::StandardWebhooksVerifier::new(),
        "/",
        vec![
            ("webhook-id", "msg_1".into()),
            ("webhook-timestamp", ts.clone()),
            ("webhook-signature", standard_webhooks::sign(&std_webhooks_secret, "msg_1", NOW, b).unwrap()),
        ],
        b,
    );
    sw.secrets = vec![std_webhooks_secret];
    v.push(sw);
    let mut discord = case(
        "discord (Ed25519)",
        discord::DiscordVerifier::new(),
        "/",
        vec![("x-signature-ed25519", discord::sign(&SEED, NOW, b)), ("x-signature-timestamp", ts.clone())],
        b,
    );
    discord.secrets = vec![SigningSecret::from(discord::public_key_of(&SEED))];
    v.push(discord);
    let mut sendgrid = case(
        "sendgrid (ECDSA P-256)",
        sendgrid::SendGridVerifier::new(),
        "/",
        vec![
            ("x-twilio-email-event-webhook-signature", sendgrid::sign(&sendgrid_key, NOW, b)),
            ("x-twilio-email-event-webhook-timestamp", ts),
        ],
        b,
    );
    sendgrid.secrets = vec![SigningSecret::from(sendgrid::public_key_base64(sendgrid_key.verifying_key()))];
    v.push(sendgrid);
    v
}

fn bench(c: &mut Criterion) {
    let now = UNIX_EPOCH + Duration::from_secs(NOW);
    for (label, size) in [("1KiB", 1024), ("64KiB", 64 * 1024), ("1MiB", 1024 * 1024)] {
        let mut group = c.benchmark_group(format!("verify/{label}"));
        group.throughput(Throughput::Bytes(size as u64));
        let b = body(size);
        group.bench_with_input(BenchmarkId::from_parameter("raw HMAC-SHA256"), &b, |bench, body| {
            bench.iter(|| {
                let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(SECRET.as_bytes()).unwrap();
                mac.update(body);
                mac.finalize()
            })
        });
        // The floors for the presets on other hashes.
        let secret = SigningSecret::from(SECRET);
        for (label, alg) in [("raw HMAC-SHA1", Algorithm::Sha1), ("raw HMAC-SHA512", Algorithm::Sha512)] {
            group.bench_with_input(BenchmarkId::from_parameter(label), &b, |bench, body| {
                bench.iter(|| hmac(alg, &secret, &[body]))
            });
        }
        for case in cases(&b) {
            let delivery = Delivery::new(&case.parts, &case.body, &case.secrets, now);
            case.verifier.verify(&delivery).unwrap_or_else(|e| panic!("{}: {e}", case.name));
            group.bench_function(BenchmarkId::from_parameter(case.name), |bench| {
                bench.iter(|| case.verifier.verify(&delivery).unwrap())
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
