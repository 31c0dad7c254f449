//! The registry-wide tests (every preset's name, example, rotation,
//! tolerance and docs), and what the presets' own tests share:
//! [`support`] (the cases every scheme of a family answers alike),
//! [`fixtures`] (each preset's recorded fixture, checked from the registry)
//! and [`conformance`] (the original HMAC presets' answers to finer probes).

/// The test cases shared by the presets.
#[allow(dead_code)] // each preset's tests use what they need
pub(crate) mod support;

/// Each preset's recorded fixture checked from the registry: the delivery
/// verifies, a changed body does not, the example signs it alike, and the
/// provider reads its event id and type.
mod fixtures;

/// Each timed preset's boundary (a time exactly at its tolerance) as its
/// provider's SDK decides it.
mod boundary;

#[cfg(all(
    feature = "stripe",
    feature = "paddle",
    feature = "calendly",
    feature = "slack",
    feature = "zoom",
    feature = "twitch",
    feature = "github",
    feature = "intercom",
    feature = "typeform",
    feature = "shopify",
    feature = "pagerduty",
    feature = "square"
))]
mod conformance;

use super::*;
use crate::test_support::{at, NOW};
use crate::verify::{Delivery, VerifyErrorKind};

#[test]
fn every_preset_keeps_its_name() {
    for preset in REGISTRY {
        let name = preset.name;
        assert!(NAMES.contains(&name), "{name}: a new or renamed preset (a rename orphans its stored claims)");
    }
    if cfg!(feature = "full") {
        assert_eq!(REGISTRY.len(), NAMES.len(), "a preset of NAMES is gone");
    }
}

#[test]
fn names_are_unique_and_match_the_providers() {
    let mut names: Vec<_> = REGISTRY.iter().map(|p| p.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), REGISTRY.len());
    for preset in REGISTRY {
        let provider = preset.provider(Some("https://example.com/x")).unwrap();
        assert_eq!(provider.name(), preset.name);
        assert_eq!(find(preset.name).map(|p| p.name), Some(preset.name));
        let needs_url = preset.url != UrlArg::None;
        assert_eq!(preset.provider(None).is_err(), needs_url, "{}", preset.name);
        if matches!(preset.key, KeyKind::Secret | KeyKind::Base64Secret | KeyKind::HexSecret) {
            assert!(preset.public_key("x").is_err(), "{}: an HMAC preset takes no public key", preset.name);
        }
    }
    assert!(find("nope").is_none());
}

/// Every preset's example through rotation and an operator replay: with
/// an unrelated secret configured before the right one it verifies, with
/// the unrelated one alone it finds no match; a request without the
/// preset's headers fails the precheck as missing (where the signature is
/// in a header). A scheme that signs a
/// time fails its example 400 days late as too old, and an operator replay
/// (`without_timestamp_check`) then accepts it but still refuses a changed
/// body. Public-key presets (another key would have to be a valid key of
/// theirs) rotate in their modules' tests.
#[test]
fn every_example_rotates_and_replays() {
    let body = format!(r#"{{"id":"evt_1","type":"t","webhookTimestamp":{}}}"#, NOW * 1000);
    let late = NOW + 400 * 86_400;
    for preset in REGISTRY {
        let name = preset.name;
        let ex = preset.example("delivery-1", at(NOW), body.as_bytes());
        let verifier = ex.provider.verifier_ref();
        let verify = |body: &[u8], secrets: &[crate::verify::SigningSecret], now: u64, replay: bool| {
            let d = Delivery::new(&ex.parts, body, secrets, at(now));
            verifier.verify(&if replay { d.without_timestamp_check() } else { d }).map_err(|e| e.kind())
        };
        // Mailgun signs in the body: its example sends none of its headers.
        if preset.headers().iter().any(|h| ex.parts.headers.contains_key(*h)) {
            let bare = http::Request::post("/").body(()).unwrap().into_parts().0;
            let got = verifier.precheck(&bare).map_err(|e| e.kind());
            assert_eq!(got, Err(VerifyErrorKind::MissingHeader), "{name}: the precheck without its headers");
        }
        if !matches!(preset.key, KeyKind::PublicKey | KeyKind::Fetched | KeyKind::ShippedRoot) {
            let unrelated = preset.secret(match preset.key {
                KeyKind::Whsec => "whsec_dW5yZWxhdGVkLXVucmVsYXRlZC11bnJlbGF0ZWQ=",
                KeyKind::Base64Secret => "YW4tdW5yZWxhdGVkLXNlY3JldA==",
                KeyKind::HexSecret => "616e2d756e72656c617465642d736563726574",
                _ => "an-unrelated-secret",
            });
            let unrelated = unrelated.unwrap_or_else(|e| panic!("{name}: {e}"));
            let both = [unrelated.clone(), ex.secrets[0].clone()];
            assert_eq!(verify(&ex.body, &both, NOW, false), Ok(()), "{name}: rotation");
            let only = std::slice::from_ref(&unrelated);
            let got = verify(&ex.body, only, NOW, false);
            assert_eq!(got, Err(VerifyErrorKind::NoMatchingSignature), "{name}: the unrelated secret alone");
        }
        if verify(&ex.body, &ex.secrets, late, false) == Err(VerifyErrorKind::TimestampTooOld) {
            assert_eq!(verify(&ex.body, &ex.secrets, late, true), Ok(()), "{name}: an operator replay");
            let mut changed = ex.body.clone();
            let last = changed.len() - 2;
            changed[last] ^= 1;
            let got = verify(&changed, &ex.secrets, late, true).is_err();
            assert_eq!(got, preset.signs_body, "{name}: an operator replay of a changed body");
        } else {
            assert_eq!(verify(&ex.body, &ex.secrets, late, false), Ok(()), "{name}: no time signed");
        }
    }
}

/// The longest a signed time is checked against: 400 days.
const NO_LIMIT: u64 = 400 * 86_400;

/// How far from its signing time a preset's example still verifies, in
/// whole seconds: `Some((into the past, into the future))`, each found by
/// bisection up to [`NO_LIMIT`]; `None` when it verifies that far both
/// ways (the scheme signs no time).
fn tolerance(preset: &PresetInfo) -> Option<(u64, u64)> {
    let body = format!(r#"{{"id":"evt_1","type":"t","webhookTimestamp":{}}}"#, NOW * 1000);
    let ex = preset.example("delivery-1", at(NOW), body.as_bytes());
    let verifies =
        |now: u64| ex.provider.verifier_ref().verify(&Delivery::new(&ex.parts, &ex.body, &ex.secrets, at(now))).is_ok();
    assert!(verifies(NOW), "{}: its example verifies when signed", preset.name);
    let widest = |toward: &dyn Fn(u64) -> u64| {
        if verifies(toward(NO_LIMIT)) {
            return NO_LIMIT;
        }
        let (mut ok, mut late) = (0, NO_LIMIT);
        while late - ok > 1 {
            let mid = ok + (late - ok) / 2;
            *(if verifies(toward(mid)) { &mut ok } else { &mut late }) = mid;
        }
        ok
    };
    let past = widest(&|d| NOW + d);
    let ahead = widest(&|d| NOW - d);
    (past != NO_LIMIT || ahead != NO_LIMIT).then_some((past, ahead))
}

/// A tolerance as the table gives it: `none signed`, `300 s`, `600 s past,
/// 0 s ahead`, or `under 300 s` for a scheme that refuses a time exactly at
/// its limit (found by a probe half a second past the last whole second
/// [`tolerance`] accepts: it passes only below an exclusive limit).
fn tolerance_text(preset: &PresetInfo, tolerance: Option<(u64, u64)>) -> String {
    let Some((past, ahead)) = tolerance else { return "none signed".to_owned() };
    let body = format!(r#"{{"id":"evt_1","type":"t","webhookTimestamp":{}}}"#, NOW * 1000);
    let ex = preset.example("delivery-1", at(NOW), body.as_bytes());
    let verifies =
        |now| ex.provider.verifier_ref().verify(&Delivery::new(&ex.parts, &ex.body, &ex.secrets, now)).is_ok();
    let half = std::time::Duration::from_millis(500);
    let side = |last: u64, probe| if verifies(probe) { format!("under {} s", last + 1) } else { format!("{last} s") };
    let (past, ahead) = (side(past, at(NOW + past) + half), side(ahead, at(NOW - ahead) - half));
    if past == ahead {
        past
    } else {
        format!("{past} past, {ahead} ahead")
    }
}

/// The table of every preset compiled in, one row each from the registry:
/// the scheme ([`PresetInfo::signature`]), the tolerance its verifier
/// applies ([`tolerance`]: found by verifying its example, not read from a
/// constant), where the key is read, whether a handshake is answered, and
/// the replay window.
fn presets_table() -> String {
    let mut table = String::from(
        "| preset (`--provider`) | signature | tolerance | event key | handshake | replay window |\n\
         |---|---|---|---|---|---|\n",
    );
    for preset in REGISTRY {
        let provider = preset.provider(Some("https://example.com/webhooks/x")).expect("a URL is given");
        let days = preset.replay_window.as_secs() / 86_400;
        table.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {days} day{} |\n",
            preset.name,
            preset.signature(),
            tolerance_text(preset, tolerance(preset)),
            preset.key_source(),
            if provider.challenge_ref().is_some() { "answered" } else { "" },
            if days == 1 { "" } else { "s" },
        ));
    }
    table
}

/// The marks around the generated table in docs/providers.md.
const TABLE_START: &str = "<!-- generated: providers::tests::the_presets_table_is_the_registry_s -->\n";
const TABLE_END: &str = "<!-- end of the generated table -->";

/// docs/providers.md lists every preset as the registry and the verifiers
/// say: its signature, the tolerance its example shows into the past and
/// the future, its event key, its handshake and its replay window. The
/// table is generated (`UPDATE_DOCS=1 cargo test --all-features --lib
/// providers::tests::the_presets_table` rewrites it), so a new preset adds
/// no row by hand, and a tolerance the docs state is the verifier's.
#[cfg(feature = "full")]
#[test]
fn the_presets_table_is_the_registry_s() {
    crate::test_support::generated_section("docs/providers.md", TABLE_START, TABLE_END, &presets_table());
}

/// Each preset's module docs say which field orders its objects' changes
/// (the `version` of `WebhookTx::apply_if_newer`).
#[test]
fn every_preset_documents_its_ordering_field() {
    for preset in REGISTRY {
        // Svix sends the Standard Webhooks scheme; its preset lives there.
        let module = if preset.name == "svix" { "standard-webhooks" } else { preset.name }.replace('-', "_");
        // The module's file: `<name>.rs`, `<name>/mod.rs`, or `box_com.rs` for `box` (a keyword).
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/providers");
        let source = [format!("{module}.rs"), format!("{module}/mod.rs"), format!("{module}_com.rs")]
            .iter()
            .find_map(|file| std::fs::read_to_string(dir.join(file)).ok());
        let docs: String = source
            .unwrap_or_else(|| panic!("{}: no module file found under src/providers", preset.name))
            .lines()
            .take_while(|l| l.starts_with("//!") || l.is_empty())
            .collect();
        assert!(docs.contains("**Ordering**"), "{}: no ordering paragraph in its module docs", preset.name);
    }
}

#[test]
fn every_example_verifies_and_tampering_fails() {
    let body = format!(r#"{{"id":"evt_1","type":"t","webhookTimestamp":{}}}"#, NOW * 1000);
    let body = body.as_bytes();
    for preset in REGISTRY {
        let ex = preset.example("delivery-1", at(NOW), body);
        assert_eq!(ex.provider.name(), preset.name);
        let verifier = ex.provider.verifier_ref();
        let d = Delivery::new(&ex.parts, &ex.body, &ex.secrets, at(NOW));
        assert_eq!(verifier.check_secrets(&ex.secrets), Ok(()), "{}", preset.name);
        assert_eq!(verifier.precheck(&ex.parts), Ok(()), "{}", preset.name);
        assert_eq!(verifier.verify(&d), Ok(()), "{}", preset.name);
        let mut tampered = ex.body.clone();
        let last = tampered.len() - 2;
        tampered[last] ^= 1;
        let d = Delivery::new(&ex.parts, &tampered, &ex.secrets, at(NOW));
        // A shared-token scheme signs no body: the limit its module documents.
        assert_eq!(verifier.verify(&d).is_err(), preset.signs_body, "{}", preset.name);
        // Every header the example sends is one the preset declares.
        for name in ex.parts.headers.keys() {
            assert!(
                preset.headers().contains(&name.as_str()) || name == "content-type",
                "{}: {name} not in headers",
                preset.name
            );
        }
        // Without key material nothing verifies; a fetched key (SNS) or a shipped root (Apple) needs none configured.
        let d = Delivery::new(&ex.parts, &ex.body, &[], at(NOW));
        let none_needed = matches!(preset.key, KeyKind::Fetched | KeyKind::ShippedRoot);
        let want = if none_needed { Ok(()) } else { Err(VerifyErrorKind::NoSecret) };
        assert_eq!(verifier.verify(&d).map_err(|e| e.kind()), want, "{}", preset.name);
    }
}

/// The HMAC presets compiled in, with their facts.
fn hmac_presets() -> impl Iterator<Item = (&'static PresetInfo, &'static HmacPreset)> {
    REGISTRY.iter().filter_map(|p| p.facts().map(|facts| (p, facts)))
}

/// Every HMAC preset's facts make a valid verifier (what
/// [`HmacPreset::verifier`] relies on), name each header once in lower case
/// (a header name `from_static` accepts), and state a tolerance with its
/// source exactly when the scheme signs a time.
#[test]
fn every_hmac_preset_builds() {
    for (preset, facts) in hmac_presets() {
        let name = preset.name;
        assert_eq!(facts.name, name);
        let built = crate::verify::generic::HmacVerifier::try_from(&facts.scheme);
        assert!(built.is_ok(), "{name}: {:?}", built.err());
        for header in facts.read_headers().into_iter().chain(facts.example_headers.iter().map(|(h, _)| *h)) {
            let parsed = http::HeaderName::from_bytes(header.as_bytes());
            assert!(parsed.is_ok_and(|h| h.as_str() == header), "{name}: {header:?} is not a lower-case header name");
        }
        if let Some(tolerance) = facts.scheme.tolerance {
            assert!(tolerance.evidence.contains("https://"), "{name}: the tolerance's evidence cites a page");
        }
        assert!(facts.replay_evidence.contains("https://"), "{name}: the replay window's evidence cites a page");
    }
}

/// A fact is stated once: an HMAC preset's `headers` names only headers its
/// scheme and event key do not already read (those are derived), each once.
#[test]
fn hmac_facts_list_no_derived_header() {
    for (preset, facts) in hmac_presets() {
        let s = &facts.scheme;
        let derived = [Some(s.header), s.also_header, s.timestamp_header, s.id_header];
        let mut derived: Vec<&str> = derived.into_iter().flatten().collect();
        derived.extend(HmacPreset { headers: &[], ..facts.clone() }.read_headers());
        for (i, header) in facts.headers.iter().enumerate() {
            assert!(!derived.contains(header), "{}: {header} is derived from the scheme or the key", preset.name);
            assert!(!facts.headers[..i].contains(header), "{}: {header} twice", preset.name);
        }
    }
}

/// A preset's credential headers are a fact of its entry and of its
/// provider, not of its verifier object: they are among the headers it
/// reads, never among those inbox mode keeps, they include every header its
/// verifier declares, and a provider whose verifier was replaced by a
/// closure still names them. GitLab, Telegram and Postmark are the presets
/// that have one (pinned, so the test cannot pass on none).
#[test]
fn a_preset_s_credential_headers_survive_a_wrapped_verifier_and_are_never_kept() {
    let mut with_credentials = Vec::new();
    for preset in REGISTRY {
        let provider = preset.provider(Some("https://example.com/hook")).unwrap();
        let declared: Vec<http::HeaderName> = header_names(preset.credential_headers).collect();
        for name in preset.credential_headers {
            assert!(preset.headers().contains(name), "{}: {name} not among its headers", preset.name);
        }
        for name in provider.verifier_ref().credential_headers() {
            assert!(declared.contains(name), "{}: its verifier's {name} not in its entry", preset.name);
        }
        assert_eq!(provider.declared_credentials(), &declared[..], "{}: the provider declares them", preset.name);
        let inner = provider.clone();
        let wrapped = provider.verifier(move |d: &Delivery<'_>| inner.verify(d));
        assert!(wrapped.verifier_ref().credential_headers().is_empty(), "a closure declares none");
        for p in [&wrapped, &Provider::new(preset.name, |_: &Delivery<'_>| Ok(()), crate::key::DerivedKey::new())] {
            let stripped = credential_headers(p);
            assert!(declared.iter().all(|n| stripped.contains(n)), "{}: {stripped:?}", preset.name);
            let kept = read_headers(p);
            assert!(!kept.iter().any(|n| declared.contains(n)), "{}: a credential kept: {kept:?}", preset.name);
        }
        if !declared.is_empty() {
            with_credentials.push(preset.name);
        }
    }
    // The presets with one, of those compiled in (all of them with `full`).
    let pinned: Vec<&str> =
        ["gitlab", "telegram", "buildkite", "postmark"].into_iter().filter(|name| find(name).is_some()).collect();
    assert_eq!(with_credentials, pinned);
}
