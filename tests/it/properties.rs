//! Property tests: a correctly signed body verifies; any single flipped bit
//! of the body, the signed timestamp or the signature fails. The MACs here
//! are written from each provider's documented formula, not with the
//! presets' own `sign` helpers.
//!
//! And: event keys are injective. Two JSON values get one key exactly when
//! they mean the same value, whatever their spelling.
#![cfg(feature = "full")]

use std::time::{Duration, UNIX_EPOCH};

use proptest::collection::vec;
use proptest::prelude::*;
use webhook_idempotency::key::{DerivedKey, JsonPointerKey, KeyErrorKind, KeyExtractor};
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
            verifier: Box::new(webhook_idempotency::providers::stripe::FACTS.verifier()),
            mac: |s, ts, body| hmac(Algorithm::Sha256, s, &[ts.to_string().as_bytes(), b".", body]).as_ref().to_vec(),
            headers: |ts, sig| vec![("stripe-signature", format!("t={ts},v1={}", hex::encode(sig)))],
            timestamped: true,
            tolerance: 300,
        },
        Scheme {
            name: "github",
            verifier: Box::new(webhook_idempotency::providers::github::FACTS.verifier()),
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
            verifier: Box::new(webhook_idempotency::providers::slack::FACTS.verifier()),
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
            verifier: Box::new(webhook_idempotency::providers::zoom::FACTS.verifier()),
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
            verifier: Box::new(webhook_idempotency::providers::paddle::FACTS.verifier()),
            mac: |s, ts, body| hmac(Algorithm::Sha256, s, &[ts.to_string().as_bytes(), b":", body]).as_ref().to_vec(),
            headers: |ts, sig| vec![("paddle-signature", format!("ts={ts};h1={}", hex::encode(sig)))],
            timestamped: true,
            tolerance: 5,
        },
        Scheme {
            name: "calendly",
            verifier: Box::new(webhook_idempotency::providers::calendly::FACTS.verifier()),
            mac: |s, ts, body| hmac(Algorithm::Sha256, s, &[ts.to_string().as_bytes(), b".", body]).as_ref().to_vec(),
            headers: |ts, sig| vec![("calendly-webhook-signature", format!("t={ts},v1={}", hex::encode(sig)))],
            timestamped: true,
            tolerance: 180,
        },
        Scheme {
            name: "shopify",
            verifier: Box::new(webhook_idempotency::providers::shopify::FACTS.verifier()),
            mac: |s, _, body| hmac(Algorithm::Sha256, s, &[body]).as_ref().to_vec(),
            headers: |_, sig| vec![("x-shopify-hmac-sha256", Encoding::Base64.encode(sig))],
            timestamped: false,
            tolerance: 0,
        },
        Scheme {
            name: "typeform",
            verifier: Box::new(webhook_idempotency::providers::typeform::FACTS.verifier()),
            mac: |s, _, body| hmac(Algorithm::Sha256, s, &[body]).as_ref().to_vec(),
            headers: |_, sig| vec![("typeform-signature", format!("sha256={}", Encoding::Base64.encode(sig)))],
            timestamped: false,
            tolerance: 0,
        },
        Scheme {
            name: "intercom",
            verifier: Box::new(webhook_idempotency::providers::intercom::FACTS.verifier()),
            mac: |s, _, body| hmac(Algorithm::Sha1, s, &[body]).as_ref().to_vec(),
            headers: |_, sig| vec![("x-hub-signature", format!("sha1={}", hex::encode(sig)))],
            timestamped: false,
            tolerance: 0,
        },
        Scheme {
            name: "pagerduty",
            verifier: Box::new(webhook_idempotency::providers::pagerduty::FACTS.verifier()),
            mac: |s, _, body| hmac(Algorithm::Sha256, s, &[body]).as_ref().to_vec(),
            headers: |_, sig| vec![("x-pagerduty-signature", format!("v1={}", hex::encode(sig)))],
            timestamped: false,
            tolerance: 0,
        },
        Scheme {
            name: "square",
            verifier: Box::new(webhook_idempotency::providers::square::SquareVerifier::new("https://example.com/sq")),
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

/// A JSON value as the sender means it: strings unescaped, numbers as exact
/// decimals (`0.digits × 10^point`, digits without leading or trailing
/// zeros), objects as maps. Two models are equal exactly when two events
/// are the same event.
#[derive(Debug, Clone, PartialEq)]
enum Model {
    Null,
    Bool(bool),
    Zero,
    Number { negative: bool, digits: String, point: i64 },
    String(String),
    Array(Vec<Model>),
    Object(std::collections::BTreeMap<String, Model>),
}

fn model_number() -> impl Strategy<Value = Model> {
    // Near neighbours (equal but for the last digits) and the 2^53 and 2^64
    // boundaries, where rounding to a double or to 64 bits would collide.
    let digits = prop_oneof![
        Just("1".to_owned()),
        Just("15".to_owned()),
        Just("9007199254740993".to_owned()),
        Just("9007199254740992".to_owned()),
        Just("18446744073709551617".to_owned()),
        Just("18446744073709551616".to_owned()),
        "1844674407370955161[1-9]",
        "1000000000000000[0-9]{0,3}[1-9]",
        "[1-9]([0-9]{0,22}[1-9])?",
    ];
    let point = prop_oneof![Just(1i64), Just(16), Just(20), -25i64..25];
    prop_oneof![
        1 => Just(Model::Zero),
        8 => (any::<bool>(), digits, point).prop_map(|(negative, digits, point)| Model::Number { negative, digits, point }),
    ]
}

fn model_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\u{0}integer:9007199254740993".to_owned()),
        Just("#int:42".to_owned()),
        Just("42".to_owned()),
        Just("null".to_owned()),
        "[ab#:/\"\\\\\u{0}\u{1f}\u{7f}é\u{e000}😀]{0,4}",
    ]
}

fn model() -> impl Strategy<Value = Model> {
    let leaf = prop_oneof![
        Just(Model::Null),
        any::<bool>().prop_map(Model::Bool),
        model_number(),
        model_string().prop_map(Model::String),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Model::Array),
            proptest::collection::btree_map("[ab\u{e000}😀]{0,2}", inner, 0..4).prop_map(Model::Object),
        ]
    })
}

/// Writes `model` as JSON text, the spelling varied by `style` (whitespace,
/// member order, escapes, number layout), never the meaning.
fn spell(model: &Model, style: u64, out: &mut String) {
    let bit = |n: u32| style.rotate_right(n) & 1 == 1;
    let ws = if bit(0) { " \n" } else { "" };
    match model {
        Model::Null => out.push_str("null"),
        Model::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Model::Zero => out.push_str(if bit(1) { "-0.0e5" } else { "0" }),
        Model::Number { negative, digits, point } => {
            if *negative {
                out.push('-');
            }
            let k = digits.len() as i64;
            if bit(2) {
                // d.ddd000e±x
                out.push_str(&digits[..1]);
                out.push('.');
                out.push_str(&digits[1..]);
                out.push_str("00");
                out.push_str(&format!("{}{}", if bit(3) { "E" } else { "e" }, point - 1));
            } else if *point >= k {
                out.push_str(digits);
                out.push_str(&"0".repeat((point - k) as usize));
                if bit(3) {
                    out.push_str(".000");
                }
            } else if *point > 0 {
                out.push_str(&format!("{}.{}", &digits[..*point as usize], &digits[*point as usize..]));
            } else {
                out.push_str(&format!("0.{}{digits}", "0".repeat(-point as usize)));
            }
        }
        Model::String(s) => spell_string(s, style, out),
        Model::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(ws);
                spell(item, style.rotate_left(7) ^ i as u64, out);
            }
            out.push_str(ws);
            out.push(']');
        }
        Model::Object(members) => {
            out.push('{');
            let mut members: Vec<_> = members.iter().collect();
            if bit(4) {
                members.reverse();
            }
            for (i, (name, value)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(ws);
                spell_string(name, style.rotate_left(3), out);
                out.push(':');
                out.push_str(ws);
                spell(value, style.rotate_left(11) ^ i as u64, out);
            }
            out.push('}');
        }
    }
}

fn spell_string(s: &str, style: u64, out: &mut String) {
    out.push('"');
    for (i, c) in s.chars().enumerate() {
        let escape = style.rotate_right(i as u32 + 5) & 1 == 1;
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' if escape => out.push_str("\\/"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 || escape => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn spelled(model: &Model, style: u64) -> String {
    let mut out = String::new();
    spell(model, style, &mut out);
    out
}

/// `model` with its first number's last digit changed (a value that rounds
/// like it), or `model` itself when it holds no number.
fn neighbour(model: &Model) -> Model {
    fn go(m: &mut Model) -> bool {
        match m {
            Model::Number { digits, .. } => {
                let last = digits.pop().unwrap().to_digit(10).unwrap();
                digits.push(char::from_digit(last % 9 + 1, 10).unwrap());
                true
            }
            Model::Array(items) => items.iter_mut().any(go),
            Model::Object(members) => members.values_mut().any(go),
            _ => false,
        }
    }
    let mut m = model.clone();
    go(&mut m);
    m
}

fn key_of(extractor: &dyn KeyExtractor, body: &str) -> String {
    let parts = http::Request::new(()).into_parts().0;
    match extractor.extract(&parts, body.as_bytes()) {
        Ok(identity) => identity.key,
        Err(e) => panic!("{body}: {:?}", e.kind()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// DerivedKey: two bodies get one key exactly when they mean one value,
    /// for a field by pointer and for the whole canonical body.
    #[test]
    fn derived_keys_are_injective(a in model(), b in model(), sa in any::<u64>(), sb in any::<u64>()) {
        for b in [b, a.clone(), neighbour(&a)] {
            let field = DerivedKey::new().json("/v");
            let (ta, tb) = (spelled(&a, sa), spelled(&b, sb));
            let (ka, kb) = (key_of(&field, &format!(r#"{{"v":{ta}}}"#)), key_of(&field, &format!(r#"{{ "v" : {tb} }}"#)));
            prop_assert_eq!(ka == kb, a == b, "json(/v): {} vs {}", ta, tb);
            let body = DerivedKey::new().canonical_body();
            prop_assert_eq!(key_of(&body, &ta) == key_of(&body, &tb), a == b, "canonical_body: {} vs {}", ta, tb);
        }
    }

    /// JsonPointerKey: strings and 64-bit integers, distinct as (type, value).
    #[test]
    fn pointer_keys_are_injective(
        a in prop_oneof![model_string().prop_filter("non-empty", |s| !s.is_empty() && !s.contains('\0')).prop_map(Ok), any::<i64>().prop_map(|i| Err(i128::from(i))), any::<u64>().prop_map(|u| Err(i128::from(u)))],
        b in prop_oneof![model_string().prop_filter("non-empty", |s| !s.is_empty() && !s.contains('\0')).prop_map(Ok), (-50i128..50).prop_map(Err)],
        sa in any::<u64>(),
        sb in any::<u64>(),
    ) {
        let key = JsonPointerKey::new("/id");
        let body = |v: &Result<String, i128>, style| match v {
            Ok(s) => format!(r#"{{"id":{}}}"#, spelled(&Model::String(s.clone()), style)),
            Err(i) => format!(r#"{{"id":{i}}}"#),
        };
        for b in [b, a.clone()] {
            let (ba, bb) = (body(&a, sa), body(&b, sb));
            prop_assert_eq!(key_of(&key, &ba) == key_of(&key, &bb), a == b, "{} vs {}", ba, bb);
            // A string's key is its text unless it starts with '#'.
            if let Ok(s) = &a {
                if !s.starts_with('#') {
                    prop_assert_eq!(&key_of(&key, &ba), s);
                }
            }
        }
    }

    /// JsonPointerKey's streaming reader answers, for every pointer into a
    /// body, what `serde_json::Value::pointer` over the parsed document
    /// gives, encoded as the key docs say.
    #[test]
    fn pointer_keys_match_the_parsed_document(m in model(), style in any::<u64>()) {
        let body = spelled(&m, style);
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        let mut pointers = vec![String::new(), "/absent".to_owned()];
        paths(&m, String::new(), &mut pointers);
        let parts = http::Request::post("/").body(()).unwrap().into_parts().0;
        for pointer in pointers {
            let expected = match doc.pointer(&pointer) {
                Some(serde_json::Value::String(s)) if s.starts_with('#') => Ok(format!("#{s}")),
                Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(s.clone()),
                Some(serde_json::Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(format!("#int:{n}")),
                None | Some(serde_json::Value::String(_)) => Err(KeyErrorKind::Missing),
                Some(_) => Err(KeyErrorKind::Invalid),
            };
            let got = JsonPointerKey::new(pointer.clone()).extract(&parts, body.as_bytes()).map(|id| id.key).map_err(|e| e.kind());
            prop_assert_eq!(got, expected, "{} in {}", pointer, body);
        }
    }
}

/// Every JSON Pointer into `m` (RFC 6901 escapes), below `prefix`.
fn paths(m: &Model, prefix: String, out: &mut Vec<String>) {
    let children: Vec<(String, &Model)> = match m {
        Model::Array(items) => items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
        Model::Object(members) => members.iter().map(|(k, v)| (k.replace('~', "~0").replace('/', "~1"), v)).collect(),
        _ => Vec::new(),
    };
    for (token, child) in children {
        let pointer = format!("{prefix}/{token}");
        out.push(pointer.clone());
        paths(child, pointer, out);
    }
}
