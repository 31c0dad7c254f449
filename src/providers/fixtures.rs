//! Every preset's recorded fixture, checked from [`REGISTRY`]: a preset is
//! checked here by its fixture files alone, with no test code of its own.
//!
//! A fixture of the common form is `tests/fixtures/providers/<name>/`
//! with `body.json` (the body byte for byte) and `expected.json`, which
//! records the request's `"headers"`, the `"secret"` (text, as
//! [`PresetInfo::secret`] takes it), the `"event_id"` (`null`: the preset
//! derives a `sha256:` key) and the `"event_type"`, and may add
//! - `"verified_at"`: the clock to verify at, in Unix seconds (default
//!   [`NOW`]), also the time the preset's example signs at;
//! - `"url"`: the URL for a preset that signs it;
//! - `"read_event_id"` / `"read_event_type"`: what the provider reads where
//!   that is not the recorded id or type as it stands (a header's id, a
//!   type the provider composes);
//! - `"sdk_time_cases"`: clocks (`"now_ms"` or `"now_s"`) at which the SDK
//!   accepts the recorded delivery or not (`"sdk_accepts"`); the preset
//!   answers alike, unless [`SDK_TIME_CASES_DIFFER`] lists it;
//! - `"rotation_header"` (or `"rotated_header"`): the signature header as
//!   the sender sends it while a second secret signs too (two signatures),
//!   which verifies as well; with `"old_secret"`, that second secret: the
//!   rotated header verifies with it alone, the recorded one does not (but
//!   does with both configured).
//!
//! For each preset [`every_preset_reproduces_its_fixture`] checks that the recorded request
//! verifies (and with its rotation header, where recorded), that it does not over a changed body (unless the scheme signs
//! no body), that the example's signed headers for the recorded secret,
//! event id, time and body are the recorded ones (this pins each module's
//! `sign`), that the provider reads the recorded event id and type, and that
//! the fixture names an `"sdk"` and says `"sdk_verified": true` exactly for
//! the presets [`SDK_VERIFIED`] pins.
//! The presets whose fixtures are of another form are in
//! [`OWN_FIXTURE_TESTS`] and tested in their modules.

use std::path::Path;

use serde_json::Value;

use super::testing::fixture_files;
use super::{PresetInfo, REGISTRY};
use crate::test_support::{at, identity, request, NOW};
use crate::verify::{Delivery, SigningSecret, VerifyErrorKind};

/// The presets whose fixtures are of another form, each tested in its module.
const OWN_FIXTURE_TESTS: &[&str] = &[
    "stripe",            // no fixture directory; its module tests sign and verify each case
    "github",            // GitHub's documented example, in `github_docs_vector`
    "slack",             // Slack's SDK vectors (`event_callback.json`), with the URL-verification answer
    "standard-webhooks", // the library's deliveries (`delivery.json`): whsec_ and whpk_ keys
    "svix",              // Svix's library deliveries (`svix/delivery.json`)
    "square",            // the SDK's vectors (`sdk.json`): signs the notification URL
    "twilio",            // the SDK's vectors (`sdk.json`): signs the URL and the form fields
    "hubspot",           // the SDK's vectors (`sdk.json`): v1, v2 and v3, a batch and its retry
    "mailgun",           // the signature is in the body (`sdk.json`)
    "discord",           // Ed25519 public key, the interactions' vectors (`interactions.json`)
    "sendgrid",          // P-256 public key (`sdk.json`)
    "twitch",            // twurple's vectors (`twurple.json`), with the challenge answer
    "zoom",              // Rivet's vectors (`rivet.json`): an event and the URL validation
    "shopify",           // the SDK's vectors (`sdk.json`), in both header spellings
    "gitlab",            // a token, not a secret, and the signing-token preview (`classic`)
    "box",               // a primary and a secondary key, and Box's own vector
];

/// The presets the central check does not compare the example's signature
/// for, with the recorded header holding their signed time: it is Unix
/// milliseconds with a fraction of a second, which the example (whole
/// seconds) cannot sign. [`check`] asserts that reason; their modules'
/// fixture tests compare `sign` at the millisecond.
const SIGN_CHECKED_IN_MODULE: &[(&str, &str)] = &[
    ("front", "x-front-request-timestamp"),
    ("webflow", "x-webflow-timestamp"),
    ("recurly", "recurly-signature"), // `{ms},{signature}`
];

/// The presets whose fixture was verified by the provider's own SDK (their
/// scripts say which package and version): `"sdk_verified": true` and the
/// SDK named, pinned here so that editing the fixture alone cannot drop it.
const SDK_VERIFIED: &[&str] =
    &["coinbase-commerce", "customer-io", "gocardless", "linear", "mux", "paddle", "razorpay", "recurly", "webflow"];

/// The presets that answer some of their SDK's time cases otherwise, by
/// design: their modules check each case against the preset's own rule.
const SDK_TIME_CASES_DIFFER: &[&str] = &[
    "mux", // the SDK accepts any future time and floors the clock to seconds
];

/// Presets that share another preset's fixture: (preset, fixture directory).
const SHARED_FIXTURES: &[(&str, &str)] = &[("forgejo", "gitea")];

/// The directory of `name`'s fixture, under `tests/fixtures/providers`.
fn fixture_dir(name: &str) -> &str {
    SHARED_FIXTURES.iter().find(|(preset, _)| *preset == name).map_or(name, |(_, dir)| dir)
}

/// Whether `name`'s fixture is of the common form: `body.json` and an
/// `expected.json` with `"headers"` and `"secret"`.
fn has_common_fixture(name: &str) -> bool {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers").join(fixture_dir(name));
    let Ok(text) = std::fs::read_to_string(dir.join("expected.json")) else { return false };
    let expected: Value = serde_json::from_str(&text).expect("expected.json parses");
    dir.join("body.json").is_file() && expected["headers"].is_object() && expected["secret"].is_string()
}

/// The checks of the module docs, for one preset.
fn check(preset: &PresetInfo) {
    let name = preset.name;
    assert!(
        has_common_fixture(name),
        "{name}: no fixture of the common form; add one, or list it in OWN_FIXTURE_TESTS"
    );
    let (body, expected, _) = fixture_files(fixture_dir(name));
    let secret = preset.secret(expected["secret"].as_str().unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let secrets = std::slice::from_ref(&secret);
    let now = expected.get("verified_at").map_or(NOW, |t| t.as_u64().unwrap_or_else(|| panic!("{name}: verified_at")));
    let provider = preset.provider(expected["url"].as_str()).unwrap_or_else(|e| panic!("{e}: add \"url\""));
    let sent: Vec<(&str, &str)> =
        expected["headers"].as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap())).collect();
    let parts = request(&sent);

    let verify_head = |parts: &http::request::Parts, body: &[u8], secrets: &[SigningSecret]| {
        provider.verifier_ref().verify(&Delivery::new(parts, body, secrets, at(now))).map_err(|e| e.kind())
    };
    let verify = |body: &[u8]| verify_head(&parts, body, secrets);
    assert_eq!(verify(body), Ok(()), "{name}: the recorded delivery verifies");
    let sdk_time_cases = expected.get("sdk_time_cases").and_then(Value::as_array).into_iter().flatten();
    for case in sdk_time_cases.filter(|_| !SDK_TIME_CASES_DIFFER.contains(&name)) {
        let clock = case["now_ms"]
            .as_u64()
            .map(|ms| std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
            .or_else(|| case["now_s"].as_u64().map(at))
            .unwrap_or_else(|| panic!("{name}: {case}: now_ms or now_s"));
        let sdk = case["sdk_accepts"].as_bool().unwrap_or_else(|| panic!("{name}: {case}: sdk_accepts"));
        let got = provider.verifier_ref().verify(&Delivery::new(&parts, body, secrets, clock));
        assert_eq!(got.is_ok(), sdk, "{name}: {case}: as the SDK");
    }
    if let Some(rotated) = expected.get("rotation_header").or_else(|| expected.get("rotated_header")) {
        let rotated = rotated.as_str().unwrap_or_else(|| panic!("{name}: the rotation header is text"));
        let signature = preset.headers[0];
        let swapped: Vec<(&str, &str)> =
            sent.iter().map(|&(k, v)| (k, if k.eq_ignore_ascii_case(signature) { rotated } else { v })).collect();
        assert!(swapped.iter().any(|(_, v)| *v == rotated), "{name}: the fixture records no {signature}");
        let rotated = request(&swapped);
        assert_eq!(verify_head(&rotated, body, secrets), Ok(()), "{name}: the rotation header verifies");
        if let Some(old) = expected.get("old_secret") {
            let old =
                preset.secret(old.as_str().expect("old_secret is text")).unwrap_or_else(|e| panic!("{name}: {e}"));
            let (old_only, both) = (std::slice::from_ref(&old), &[old.clone(), secret.clone()]);
            assert_eq!(verify_head(&rotated, body, old_only), Ok(()), "{name}: the rotation header, old secret alone");
            let got = verify_head(&parts, body, old_only);
            assert_eq!(got, Err(VerifyErrorKind::NoMatchingSignature), "{name}: the recorded header, old secret alone");
            assert_eq!(verify_head(&parts, body, both), Ok(()), "{name}: the recorded header, both secrets");
        }
    }
    let changed = [body, b" "].concat();
    let want = if preset.signs_body { Err(VerifyErrorKind::NoMatchingSignature) } else { Ok(()) };
    assert_eq!(verify(&changed), want, "{name}: a changed body");

    let event_id = expected
        .get("read_event_id")
        .or_else(|| expected.get("event_id"))
        .unwrap_or_else(|| panic!("{name}: the fixture records no event_id (null for a derived key)"));
    let read = identity(&provider, &parts, body);
    match event_id {
        Value::String(id) => assert_eq!(read.key.as_str(), id, "{name}: the event id read"),
        Value::Null => assert!(read.key.starts_with("sha256:"), "{name}: a derived key, not {}", read.key.as_str()),
        other => panic!("{name}: event_id {other}: a string, or read_event_id"),
    }
    let event_type = expected.get("read_event_type").unwrap_or(&expected["event_type"]);
    assert_eq!(read.event_type.as_deref(), event_type.as_str(), "{name}: the event type read");
    // Where the key comes from: the body alone (the same key without any
    // header), or one of the recorded headers, as it stands.
    let bare = http::Request::post("/").body(()).unwrap().into_parts().0;
    let from_body = provider.extractor_ref().extract(&bare, body).is_ok_and(|id| id.key == read.key);
    let from_header = sent.iter().any(|(_, v)| v.trim() == read.key.as_str());
    assert!(from_body || from_header, "{name}: the key {} is neither the body's nor a recorded header's", read.key);

    let recorded = |header: &str| sent.iter().find(|(k, _)| k.eq_ignore_ascii_case(header)).map(|(_, v)| *v);
    let exempt = SIGN_CHECKED_IN_MODULE.iter().find(|(preset, _)| *preset == name);
    if let Some((_, time_header)) = exempt {
        let value = recorded(time_header).unwrap_or_else(|| panic!("{name}: the fixture records no {time_header}"));
        let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
        // Unix milliseconds since 2001 have 13 digits.
        let ms: u64 = digits
            .parse()
            .ok()
            .filter(|_| digits.len() == 13)
            .unwrap_or_else(|| panic!("{name}: {time_header} does not start with Unix milliseconds: not exempt"));
        assert_ne!(ms % 1000, 0, "{name}: its signed time is whole seconds, which the example signs: not exempt");
    }
    if let Some(signed) = preset.signed_headers().filter(|_| exempt.is_none()) {
        let made = signed(&secret, event_id.as_str().unwrap_or(""), now, body);
        let signature = preset.headers[0];
        assert!(made.iter().any(|(h, _)| *h == signature), "{name}: the example sends no {signature}");
        assert!(recorded(signature).is_some(), "{name}: the fixture records no {signature}");
        for (header, value) in &made {
            if let Some(want) = recorded(header) {
                assert_eq!(value, want, "{name}: {header} as the preset's example signs it");
            }
        }
    }

    // The fixture's provenance: verified by an SDK exactly when it names one,
    // and exactly for the presets pinned in SDK_VERIFIED.
    let by_sdk = SDK_VERIFIED.contains(&name);
    assert_eq!(expected["sdk"].is_string(), by_sdk, "{name}: names an SDK exactly when SDK_VERIFIED lists it");
    match &expected["sdk_verified"] {
        Value::Bool(verified) => assert_eq!(*verified, by_sdk, "{name}: sdk_verified against SDK_VERIFIED"),
        Value::Object(cases) => {
            assert!(cases.values().all(|v| *v == by_sdk), "{name}: sdk_verified against SDK_VERIFIED");
            // One verdict per recorded header, the rotation header's too.
            assert!(cases.keys().all(|k| expected[k].is_string()), "{name}: sdk_verified names a recorded header");
            for rotation in ["rotation_header", "rotated_header"].iter().filter(|k| expected[**k].is_string()) {
                assert!(cases.contains_key(*rotation), "{name}: sdk_verified says nothing of {rotation}");
            }
        }
        Value::Null => assert!(!by_sdk, "{name}: an SDK-verified fixture records sdk_verified"),
        other => panic!("{name}: sdk_verified is {other}: true or false (or one per case)"),
    }
}

#[test]
fn every_preset_reproduces_its_fixture() {
    let failed: Vec<&str> = REGISTRY
        .iter()
        .filter(|p| !OWN_FIXTURE_TESTS.contains(&p.name))
        .filter(|p| std::panic::catch_unwind(|| check(p)).is_err())
        .map(|p| p.name)
        .collect();
    assert!(failed.is_empty(), "fixtures not reproduced (see each panic above): {failed:?}");
}

/// A preset is checked here or listed; a listed name is a preset, whose
/// fixture is not of the common form (else it would be checked here).
#[test]
fn every_preset_has_its_fixture_checked() {
    for preset in REGISTRY {
        let listed = OWN_FIXTURE_TESTS.contains(&preset.name);
        assert_eq!(has_common_fixture(preset.name), !listed, "{}: listed, or a common fixture", preset.name);
    }
    // Without every preset compiled in a listed name may be absent.
    if cfg!(feature = "full") {
        let exempt = SIGN_CHECKED_IN_MODULE.iter().map(|(p, _)| p);
        let shared = SHARED_FIXTURES.iter().map(|(p, _)| p);
        for name in
            OWN_FIXTURE_TESTS.iter().chain(exempt).chain(SDK_VERIFIED).chain(SDK_TIME_CASES_DIFFER).chain(shared)
        {
            assert!(super::find(name).is_some(), "{name}: listed but not a preset");
        }
    }
    for (name, _) in SIGN_CHECKED_IN_MODULE {
        assert!(!OWN_FIXTURE_TESTS.contains(name), "{name}: in both lists");
    }
}
