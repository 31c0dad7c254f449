//! Every preset's recorded fixture, checked from [`REGISTRY`]: a preset is
//! checked here by its fixture files alone, with no test code of its own.
//!
//! A fixture of the common form is `tests/fixtures/providers/<name>/`
//! with `body.json` (the body byte for byte) and `expected.json`, which
//! records the request's `"headers"`, the `"secret"` (text, as
//! [`PresetInfo::secret`] takes it), the `"event_id"` (`null`: the preset
//! derives a `sha256:` key, which `"read_event_id"` then records as the
//! script computed it on its own) and the `"event_type"`, and may add
//! - `"verified_at"`: the clock to verify at, in Unix seconds (default
//!   [`NOW`]), also the time the preset's example signs at;
//! - `"timestamp_ms"`: for a scheme that signs Unix milliseconds, the
//!   recorded signed time, a fraction of a second past `verified_at` (which
//!   must be its second): the example signs at that millisecond instead;
//! - `"tolerance_s"`: for a scheme that signs a time, the preset's default
//!   tolerance in seconds: the recorded delivery verifies that long after
//!   `verified_at` (its signed time, in whole seconds) and is
//!   `TimestampTooOld` a second later. A fixture whose delivery is still
//!   refused as too old ten years on must record it;
//! - `"url"`: the URL for a preset that signs it;
//! - `"read_event_id"` / `"read_event_type"`: what the provider reads where
//!   that is not the recorded id or type as it stands (a header's id, a
//!   type the provider composes);
//! - `"sdk_time_cases"`: clocks (`"now_ms"`, `"now_s"`, or `"age_s"`:
//!   seconds after `verified_at`, before it if negative) at which the SDK
//!   accepts the recorded delivery or not (`"sdk_accepts"`); the preset
//!   answers alike, except in the cases that say why not in `"sdk_differs"`
//!   (which only the presets recording `sdk_differs` have): one of
//!   the reasons of [`SDK_DIFFERS`], each of which covers only some cases;
//! - `"rotation_header"` (or `"rotated_header"`): the signature header as
//!   the sender sends it while a second secret signs too (two signatures),
//!   which verifies as well; with `"old_secret"`, that second secret: the
//!   rotated header verifies with it alone, the recorded one does not (but
//!   does with both configured);
//! - `"same_event"`: other deliveries of the recorded event (a retry, the
//!   body re-serialised or cut down to the fields a derived key reads),
//!   each with `"body"` (a file of the fixture; default `body.json`),
//!   `"headers"` set over the recorded ones (a retry's signature or attempt
//!   number) and `"verified_at"` (a retry signed afresh: its signed time,
//!   past the recorded delivery's tolerance): the provider reads the recorded event's
//!   identity from each, and each that is signed (the recorded body, or its
//!   own signature header) verifies at its time with the headers the example
//!   signs; one with a time of its own is a retry signed afresh, by when the
//!   recorded delivery is too old;
//! - `"extra_vectors"`: more bodies (`"body"`, a file of the fixture) with
//!   their signature `"header"`, each verifying at `verified_at` as the
//!   example signs it, and read as its `"event_id"` and `"event_type"`
//!   where it records them.
//!
//! For each preset [`every_preset_reproduces_its_fixture`] checks that the recorded request
//! verifies (and with its rotation header, where recorded), that it does not over a changed body (unless the scheme signs
//! no body), that the example's signed headers for the recorded secret,
//! event id, time and body are the recorded ones (this pins each module's
//! `sign`), that the provider reads the recorded event id and type, and that
//! the fixture names an `"sdk"` and says `"sdk_verified": true` exactly for
//! the presets whose facts say `Fixture::sdk` (`"sdk_verified"` is recorded
//! either way); and each fact above the fixture adds. Which facts each
//! preset's fixture records (`sdk_time_cases`, `sdk_differs`, `old_secret`,
//! `same_event`, `extra_vectors`, `timestamp_ms`) is pinned with the preset
//! (its facts' `fixture`, or its registry entry's), so that a fact dropped
//! from a fixture fails instead of dropping its check. The presets whose
//! fixtures are of another form say `Fixture::own(why)` and are tested in
//! their modules.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::support::fixture_files;
use crate::key::EventIdentity;
use crate::providers::Provider;
use crate::providers::{FixtureKind, PresetInfo, REGISTRY};
use crate::test_support::{at, identity, request, NOW};
use crate::verify::{Delivery, SigningSecret, VerifyErrorKind};

/// Long past any preset's tolerance: a delivery still refused as too old
/// then is signed at a time.
const TEN_YEARS: u64 = 10 * 365 * 86_400;

/// The reasons a preset may refuse a time case its SDK accepts, each with
/// the cases it covers: `(clock, signed time, tolerance)` in milliseconds.
/// A case the reason does not cover fails, whatever it says.
const SDK_DIFFERS: &[(&str, fn(i128, i128, i128) -> bool)] = &[
    // The SDK checks only the age; the preset refuses a time that far ahead.
    ("the SDK checks no future time", |clock, signed, tolerance| clock < signed - tolerance),
    // The SDK compares whole seconds; the preset refuses the last fraction of
    // a second past the tolerance.
    ("the SDK floors the clock to whole seconds", |clock, signed, tolerance| {
        clock > signed + tolerance && clock < signed + tolerance + 1000
    }),
];

/// The optional facts a fixture may record, each pinned with its preset
/// (`Fixture::records`).
const OPTIONAL_FACTS: &[&str] = &["sdk_time_cases", "old_secret", "same_event", "extra_vectors", "timestamp_ms"];

/// The directory of `preset`'s fixture, under `tests/fixtures/providers`.
fn fixture_dir(preset: &PresetInfo) -> &'static str {
    preset.fixture.dir.unwrap_or(preset.name)
}

/// Whether `preset`'s fixture is of the common form: `body.json` and an
/// `expected.json` with `"headers"` and `"secret"`.
fn has_common_fixture(preset: &PresetInfo) -> bool {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers").join(fixture_dir(preset));
    let Ok(text) = std::fs::read_to_string(dir.join("expected.json")) else { return false };
    let expected: Value = serde_json::from_str(&text).expect("expected.json parses");
    dir.join("body.json").is_file() && expected["headers"].is_object() && expected["secret"].is_string()
}

/// The objects listed under `field` in `expected` (none if absent).
fn entries<'a>(expected: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    expected.get(field).map(|list| list.as_array().unwrap_or_else(|| panic!("{field}: a list"))).into_iter().flatten()
}

/// The file of `preset`'s fixture directory that `file` names.
fn fixture_file(preset: &PresetInfo, file: &Value) -> Vec<u8> {
    let name = preset.name;
    let file = file.as_str().unwrap_or_else(|| panic!("{name}: {file}: a file name"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers").join(fixture_dir(preset));
    std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{name}: {file}: {e}"))
}

/// The (name, value) pairs of a JSON object of headers (none if absent).
fn header_pairs(headers: &Value) -> Vec<(&str, &str)> {
    let pairs = headers.as_object().into_iter().flatten();
    pairs.map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_else(|| panic!("{k}: text")))).collect()
}

/// `sent` with the headers `set` set over it: a header of the same name (in
/// any case) replaced, the others added.
fn with_headers<'a>(sent: &[(&'a str, &'a str)], set: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let new = |name: &str| set.iter().copied().find(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut heads: Vec<(&str, &str)> = sent.iter().map(|&(k, v)| new(k).unwrap_or((k, v))).collect();
    heads.extend(set.iter().filter(|(k, _)| !sent.iter().any(|(s, _)| s.eq_ignore_ascii_case(k))));
    heads
}

/// One preset's recorded fixture and what its checks share.
struct Fixture<'a> {
    preset: &'a PresetInfo,
    name: &'static str,
    body: &'a [u8],
    expected: &'a Value,
    secret: SigningSecret,
    /// The clock the recorded delivery verifies at (`verified_at`).
    now: u64,
    /// The time the example signs at: `now`, or `timestamp_ms`.
    signed_at: SystemTime,
    provider: Provider,
    /// The recorded headers, and the request they make.
    sent: Vec<(&'a str, &'a str)>,
    parts: http::request::Parts,
}

/// The checks of the module docs, for one preset.
fn check(preset: &PresetInfo) {
    let name = preset.name;
    assert!(
        has_common_fixture(preset),
        "{name}: no fixture of the common form; add one, or say Fixture::own(why) in its facts"
    );
    let (body, expected, _) = fixture_files(fixture_dir(preset));
    for fact in OPTIONAL_FACTS {
        let pinned = preset.fixture.records.contains(fact);
        assert_eq!(expected.get(*fact).is_some(), pinned, "{name}: records {fact} exactly when its preset pins it");
    }
    for fact in preset.fixture.records {
        assert!(OPTIONAL_FACTS.contains(fact) || *fact == "sdk_differs", "{name}: {fact} is no fixture fact");
    }
    let fixture = Fixture::read(preset, body, &expected);
    fixture.verifies();
    fixture.tolerance_edge();
    fixture.sdk_time_cases();
    fixture.rotation();
    fixture.changed_body();
    let read = fixture.identity();
    fixture.example_signs();
    fixture.same_event(&read);
    fixture.extra_vectors();
    fixture.provenance();
}

impl<'a> Fixture<'a> {
    fn read(preset: &'a PresetInfo, body: &'a [u8], expected: &'a Value) -> Self {
        let name = preset.name;
        let secret = preset.secret(expected["secret"].as_str().unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let now =
            expected.get("verified_at").map_or(NOW, |t| t.as_u64().unwrap_or_else(|| panic!("{name}: verified_at")));
        let signed_at = expected.get("timestamp_ms").map_or(at(now), |ms| {
            let ms = ms.as_u64().unwrap_or_else(|| panic!("{name}: timestamp_ms"));
            // The tolerance's edge counts from `verified_at`: the signed second.
            assert_eq!(now, ms / 1000, "{name}: verified_at is the second of timestamp_ms");
            // A whole second would not tell a scheme that writes seconds times 1000.
            assert_ne!(ms % 1000, 0, "{name}: timestamp_ms is a fraction of a second past verified_at");
            UNIX_EPOCH + Duration::from_millis(ms)
        });
        let provider = preset.provider(expected["url"].as_str()).unwrap_or_else(|e| panic!("{e}: add \"url\""));
        let sent = header_pairs(&expected["headers"]);
        let parts = request(&sent);
        Self { preset, name, body, expected, secret, now, signed_at, provider, sent, parts }
    }

    fn secrets(&self) -> &[SigningSecret] {
        std::slice::from_ref(&self.secret)
    }

    /// The verdict on `body` sent with `parts`, checked with `secrets` at `clock`.
    fn verify_at(
        &self,
        parts: &http::request::Parts,
        body: &[u8],
        secrets: &[SigningSecret],
        clock: SystemTime,
    ) -> Result<(), VerifyErrorKind> {
        self.provider.verifier_ref().verify(&Delivery::new(parts, body, secrets, clock)).map_err(|e| e.kind())
    }

    /// The verdict on the recorded request with `body`, `secrets` and the recorded clock.
    fn verify(&self, body: &[u8], secrets: &[SigningSecret]) -> Result<(), VerifyErrorKind> {
        self.verify_at(&self.parts, body, secrets, at(self.now))
    }

    /// The recorded value of `header`, in any case.
    fn recorded(&self, header: &str) -> Option<&'a str> {
        self.sent.iter().find(|(k, _)| k.eq_ignore_ascii_case(header)).map(|(_, v)| *v)
    }

    /// The event id the example signs with: the recorded one's text (none
    /// for a derived key).
    fn example_id(&self) -> &'a str {
        self.event_id().as_str().unwrap_or("")
    }

    /// The recorded event id: `read_event_id`, else `event_id`.
    fn event_id(&self) -> &'a Value {
        let name = self.name;
        self.expected
            .get("read_event_id")
            .or_else(|| self.expected.get("event_id"))
            .unwrap_or_else(|| panic!("{name}: the fixture records no event_id (null for a derived key)"))
    }

    fn verifies(&self) {
        let got = self.verify(self.body, self.secrets());
        let hint = if matches!(got, Err(VerifyErrorKind::TimestampInFuture | VerifyErrorKind::TimestampTooOld)) {
            " (its scheme signs a time: record verified_at, the signed time)"
        } else {
            ""
        };
        assert_eq!(got, Ok(()), "{}: the recorded delivery verifies{hint}", self.name);
    }

    /// The tolerance's edge, for a scheme that signs a time (its delivery is
    /// too old ten years on).
    fn tolerance_edge(&self) {
        let name = self.name;
        let later = |seconds: u64| self.verify_at(&self.parts, self.body, self.secrets(), at(self.now + seconds));
        match self.expected.get("tolerance_s").map(|t| t.as_u64().unwrap_or_else(|| panic!("{name}: tolerance_s"))) {
            Some(tolerance) => {
                assert_eq!(later(tolerance), Ok(()), "{name}: the tolerance's last second");
                let got = later(tolerance + 1);
                assert_eq!(got, Err(VerifyErrorKind::TimestampTooOld), "{name}: a second past the tolerance");
            }
            None => assert_ne!(
                later(TEN_YEARS),
                Err(VerifyErrorKind::TimestampTooOld),
                "{name}: its scheme signs a time: record tolerance_s"
            ),
        }
    }

    /// The SDK's verdicts at other clocks: the same, or a reason of
    /// [`SDK_DIFFERS`] that covers the case.
    fn sdk_time_cases(&self) {
        let name = self.name;
        for case in entries(self.expected, "sdk_time_cases") {
            let age = |s: i64| self.now.checked_add_signed(s).map(at);
            let clock = case["now_ms"]
                .as_u64()
                .map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
                .or_else(|| case["now_s"].as_u64().map(at))
                .or_else(|| case["age_s"].as_i64().and_then(age))
                .unwrap_or_else(|| panic!("{name}: {case}: now_ms, now_s or age_s"));
            let sdk = case["sdk_accepts"].as_bool().unwrap_or_else(|| panic!("{name}: {case}: sdk_accepts"));
            let got = self.verify_at(&self.parts, self.body, self.secrets(), clock).is_ok();
            match case.get("sdk_differs") {
                None => assert_eq!(got, sdk, "{name}: {case}: as the SDK"),
                Some(why) => {
                    let (_, covers) = SDK_DIFFERS
                        .iter()
                        .find(|(reason, _)| why == reason)
                        .unwrap_or_else(|| panic!("{name}: {case}: sdk_differs is one of SDK_DIFFERS"));
                    let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_millis() as i128;
                    let tolerance =
                        self.expected["tolerance_s"].as_u64().expect("a time case's preset records tolerance_s");
                    let (clock, signed) = (ms(clock), i128::from(self.now) * 1000);
                    assert!(sdk && !got, "{name}: {case}: the SDK accepts what the preset refuses");
                    assert!(covers(clock, signed, i128::from(tolerance) * 1000), "{name}: {case}: not a case of {why}");
                }
            }
        }
        let differs = entries(self.expected, "sdk_time_cases").any(|case| case["sdk_differs"].is_string());
        assert_eq!(
            differs,
            self.preset.fixture.records.contains(&"sdk_differs"),
            "{name}: sdk_differs exactly when its preset pins it"
        );
    }

    /// The rotation header verifies; with the old secret, it alone does.
    fn rotation(&self) {
        let name = self.name;
        let Some(rotated) = self.expected.get("rotation_header").or_else(|| self.expected.get("rotated_header")) else {
            return;
        };
        let rotated = rotated.as_str().unwrap_or_else(|| panic!("{name}: the rotation header is text"));
        let signature = self.preset.headers()[0];
        assert!(self.recorded(signature).is_some(), "{name}: the fixture records no {signature}");
        let rotated = request(&with_headers(&self.sent, &[(signature, rotated)]));
        let at_now = at(self.now);
        assert_eq!(
            self.verify_at(&rotated, self.body, self.secrets(), at_now),
            Ok(()),
            "{name}: the rotation header verifies"
        );
        if let Some(old) = self.expected.get("old_secret") {
            let old =
                self.preset.secret(old.as_str().expect("old_secret is text")).unwrap_or_else(|e| panic!("{name}: {e}"));
            let (old_only, both) = (std::slice::from_ref(&old), &[old.clone(), self.secret.clone()]);
            let got = self.verify_at(&rotated, self.body, old_only, at_now);
            assert_eq!(got, Ok(()), "{name}: the rotation header, old secret alone");
            let got = self.verify(self.body, old_only);
            assert_eq!(got, Err(VerifyErrorKind::NoMatchingSignature), "{name}: the recorded header, old secret alone");
            assert_eq!(self.verify(self.body, both), Ok(()), "{name}: the recorded header, both secrets");
        }
    }

    fn changed_body(&self) {
        let changed = [self.body, b" "].concat();
        let want = if self.preset.signs_body { Err(VerifyErrorKind::NoMatchingSignature) } else { Ok(()) };
        assert_eq!(self.verify(&changed, self.secrets()), want, "{}: a changed body", self.name);
    }

    /// The provider reads the recorded event id and type, from the body
    /// alone or from one of the recorded headers as it stands.
    fn identity(&self) -> EventIdentity {
        let name = self.name;
        let read = identity(&self.provider, &self.parts, self.body);
        match self.event_id() {
            Value::String(id) => assert_eq!(read.key.as_str(), id, "{name}: the event id read"),
            Value::Null => {
                panic!("{name}: a derived key ({}): record it as read_event_id, computed by the script", read.key)
            }
            other => panic!("{name}: event_id {other}: a string, or read_event_id"),
        }
        let event_type = self.expected.get("read_event_type").unwrap_or(&self.expected["event_type"]);
        assert_eq!(read.event_type.as_deref(), event_type.as_str(), "{name}: the event type read");
        let bare = http::Request::post("/").body(()).unwrap().into_parts().0;
        let from_body = self.provider.extractor_ref().extract(&bare, self.body).is_ok_and(|id| id.key == read.key);
        let from_header = self.sent.iter().any(|(_, v)| v.trim() == read.key.as_str());
        assert!(from_body || from_header, "{name}: the key {} is neither the body's nor a recorded header's", read.key);
        read
    }

    /// The headers the example makes for the recorded secret, event id,
    /// time and body equal the recorded ones wherever the fixture records
    /// them too (this pins each preset's signing); they include the signature
    /// header, and with `timestamp_ms` a header carrying that millisecond.
    fn example_signs(&self) {
        let name = self.name;
        if let Some(made) = self.preset.signed(&self.secret, self.example_id(), self.signed_at, self.body) {
            let signature = self.preset.headers()[0];
            assert!(made.iter().any(|(h, _)| *h == signature), "{name}: the example sends no {signature}");
            assert!(self.recorded(signature).is_some(), "{name}: the fixture records no {signature}");
            if let Some(ms) = self.expected.get("timestamp_ms") {
                // The signed millisecond travels in a header of the example's.
                let ms = ms.to_string();
                assert!(made.iter().any(|(_, v)| v.contains(&ms)), "{name}: the example sends no header with {ms}");
            }
        }
        self.as_signed(&self.sent, self.example_id(), self.signed_at, self.body, name);
    }

    /// The headers `heads` of a delivery of `body` at `time` are those the
    /// example signs, where it makes them.
    fn as_signed(&self, heads: &[(&str, &str)], id: &str, time: SystemTime, body: &[u8], what: &str) {
        for (header, value) in self.preset.signed(&self.secret, id, time, body).iter().flatten() {
            if let Some((_, want)) = heads.iter().find(|(k, _)| k.eq_ignore_ascii_case(header)) {
                assert_eq!(value, want, "{what}: {header} as the preset's example signs it");
            }
        }
    }

    /// Other deliveries of the recorded event: the same identity, and each
    /// signed one verifies (a retry signed afresh: once the first is too old).
    fn same_event(&self, read: &EventIdentity) {
        let id = self.example_id();
        for (i, again) in entries(self.expected, "same_event").enumerate() {
            let what = format!("{}: same_event[{i}]", self.name);
            let body = again.get("body").map_or_else(|| self.body.to_vec(), |file| fixture_file(self.preset, file));
            let set = header_pairs(&again["headers"]);
            let heads = request(&with_headers(&self.sent, &set));
            let clock = again
                .get("verified_at")
                .map_or(self.now, |t| t.as_u64().unwrap_or_else(|| panic!("{what}: verified_at")));
            if body == self.body || set.iter().any(|(k, _)| k.eq_ignore_ascii_case(self.preset.headers()[0])) {
                assert_eq!(self.verify_at(&heads, &body, self.secrets(), at(clock)), Ok(()), "{what}: verifies");
                self.as_signed(&set, id, at(clock), &body, &what);
            }
            if clock != self.now {
                let got = self.verify_at(&self.parts, self.body, self.secrets(), at(clock));
                assert_eq!(
                    got,
                    Err(VerifyErrorKind::TimestampTooOld),
                    "{what}: the recorded delivery is too old by then"
                );
            }
            assert_eq!(&identity(&self.provider, &heads, &body), read, "{what}: the recorded event");
        }
    }

    /// More bodies, each with its signature header, that verify (and are
    /// read as the events they record).
    fn extra_vectors(&self) {
        for (i, vector) in entries(self.expected, "extra_vectors").enumerate() {
            let what = format!("{}: extra_vectors[{i}]", self.name);
            let body = fixture_file(self.preset, &vector["body"]);
            let header = vector["header"].as_str().unwrap_or_else(|| panic!("{what}: its header"));
            let set = [(self.preset.headers()[0], header)];
            let heads = request(&with_headers(&self.sent, &set));
            assert_eq!(self.verify_at(&heads, &body, self.secrets(), at(self.now)), Ok(()), "{what}: verifies");
            let id = vector["event_id"].as_str();
            self.as_signed(&set, id.unwrap_or(""), self.signed_at, &body, &what);
            if let Some(id) = id {
                let got = identity(&self.provider, &heads, &body);
                assert_eq!(
                    (got.key.as_str(), got.event_type.as_deref()),
                    (id, vector["event_type"].as_str()),
                    "{what}: the event read"
                );
            }
        }
    }

    /// The fixture's provenance: verified by an SDK exactly when it names
    /// one, and exactly for the presets pinned `Fixture::sdk`.
    fn provenance(&self) {
        let (name, expected) = (self.name, self.expected);
        let by_sdk = self.preset.fixture.kind == FixtureKind::Sdk;
        assert_eq!(expected["sdk"].is_string(), by_sdk, "{name}: names an SDK exactly when pinned Fixture::sdk");
        match &expected["sdk_verified"] {
            Value::Bool(verified) => assert_eq!(*verified, by_sdk, "{name}: sdk_verified against its pin"),
            Value::Object(cases) => {
                assert!(cases.values().all(|v| *v == by_sdk), "{name}: sdk_verified against its pin");
                // One verdict per recorded header, the rotation header's too.
                assert!(cases.keys().all(|k| expected[k].is_string()), "{name}: sdk_verified names a recorded header");
                for rotation in ["rotation_header", "rotated_header"].iter().filter(|k| expected[**k].is_string()) {
                    assert!(cases.contains_key(*rotation), "{name}: sdk_verified says nothing of {rotation}");
                }
            }
            other => panic!("{name}: sdk_verified is {other}: true or false (or one per case)"),
        }
    }
}

/// Whether `preset`'s fixture is of another form, tested in its module.
fn own(preset: &PresetInfo) -> bool {
    matches!(preset.fixture.kind, FixtureKind::Own(_))
}

#[test]
fn every_preset_reproduces_its_fixture() {
    let failed: Vec<&str> = REGISTRY
        .iter()
        .filter(|p| !own(p))
        .filter(|p| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(p))).is_err())
        .map(|p| p.name)
        .collect();
    assert!(failed.is_empty(), "fixtures not reproduced (see each panic above): {failed:?}");
}

/// A preset is checked here or says why not; one that says why not has no
/// fixture of the common form (else it would be checked here), and one read
/// from another preset's directory names a preset.
#[test]
fn every_preset_has_its_fixture_checked() {
    for preset in REGISTRY {
        assert_eq!(has_common_fixture(preset), !own(preset), "{}: Fixture::own, or a common fixture", preset.name);
        if let (Some(dir), true) = (preset.fixture.dir, cfg!(feature = "full")) {
            assert!(crate::providers::find(dir).is_some(), "{}: its fixture's {dir} is not a preset", preset.name);
        }
    }
}
