use super::*;
use crate::providers::SignErrorKind;
use crate::verify::Delivery as Signed;
use std::time::Duration;

/// A key of the preset's kind.
fn key(preset: &PresetInfo) -> &'static str {
    test_key(preset.name).expect("a key of its kind")
}

/// Whether `delivery`, signed at `at`, passes its provider's verifier.
fn verifies(signed: &Example, at: SystemTime) -> bool {
    signed.provider.verify(&Signed::new(&signed.parts, &signed.body, &signed.secrets, at)).is_ok()
}

/// Every fixture of every preset (the generic body for a preset without
/// any), signed with a key of the preset's kind: verified by the preset as
/// the receiver builds it, its event key read, the same key on a
/// redelivery and a new one for the next event; a tampered copy refused.
#[test]
fn every_preset_and_fixture_signs_what_the_preset_accepts() {
    let all = crate::providers::all();
    let failures: Vec<String> = all
        .iter()
        .filter(|preset| preset.test_key().is_some())
        .flat_map(|preset| {
            let mut names = fixtures(preset.name);
            if names.is_empty() {
                names.push(String::new());
            }
            names.into_iter().filter_map(move |fixture| check(preset, &fixture).err())
        })
        .collect();
    assert_eq!(failures, Vec::<String>::new());
}

/// The checks of [`every_preset_and_fixture_signs_what_the_preset_accepts`]
/// on one fixture (`""`: the default).
fn check(preset: &PresetInfo, fixture: &str) -> Result<(), String> {
    let now = SystemTime::now();
    let what = format!("{} {fixture}", preset.name);
    let mut event = Delivery::new(preset.name, key(preset)).unwrap().at(now);
    if !fixture.is_empty() {
        event = event.fixture(fixture).unwrap();
    }
    let fail = |why: String| Err(format!("{what}: {why}"));
    let first = match event.signed() {
        Ok(signed) => signed,
        Err(e) => return fail(e.to_string()),
    };
    if !verifies(&first, now) {
        return fail("not verified".into());
    }
    let key_of = |ex: &Example| ex.provider.identify(&ex.parts, &ex.body).map(|id| id.key).map_err(|e| e.to_string());
    let later = now + Duration::from_secs(1);
    let again = event.clone().at(later).signed().unwrap();
    if !verifies(&again, later) {
        return fail("redelivery not verified".into());
    }
    let key = match key_of(&first) {
        Ok(key) => key,
        Err(e) => return fail(format!("no event key: {e}")),
    };
    if preset.dedupes {
        if key_of(&again) != Ok(key.clone()) {
            return fail("a redelivery changed the event key".into());
        }
        if key_of(&event.next_event().at(now).signed().unwrap()) == Ok(key) {
            return fail("the next event has the same key".into());
        }
    }
    if verifies(&event.clone().tampered().signed().unwrap(), now) {
        return fail("tampered copy verified".into());
    }
    Ok(())
}

#[test]
fn fixture_files_parse_and_name_compiled_presets() {
    for preset in presets_with_fixtures() {
        let file = fixture::file(preset).unwrap();
        assert!(file.source.starts_with("https://"), "{preset}: a source URL");
        assert!(!file.fixtures.is_empty(), "{preset}");
        for f in &file.fixtures {
            assert!(f.body.is_some() != f.form.is_some(), "{preset} {}: a body or a form", f.name);
        }
        assert!(crate::providers::REGISTRY.iter().any(|p| p.name == preset), "{preset}: a registry preset");
    }
}

#[test]
fn placeholders_are_rendered_and_numbers_stay_numbers() {
    let created = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
    let ids =
        EventIds { id: "AbC".into(), uuid: "u-1".into(), n: 42, object: "Obj".into(), seq: 2, created, sent: created };
    let value = serde_json::json!({"a": "evt_{{id}}", "b": "{{n}}", "c": "{{now_ms}}", "d": ["{{now_rfc3339}}", "{{seq}}"], "e": "x{{now}}", "f": "{{now_rfc3339_ms}}"});
    assert_eq!(
        fixture::render_json(&value, &ids),
        serde_json::json!({"a": "evt_AbC", "b": 42, "c": 1_700_000_000_123u64, "d": ["2023-11-14T22:13:20Z", 2], "e": "x1700000000", "f": "2023-11-14T22:13:20.123Z"})
    );
}

#[test]
fn unknown_preset_fixture_key_and_url_are_clear_errors() {
    assert_eq!(Delivery::new("nope", "k").unwrap_err().kind(), &DevErrorKind::UnknownPreset);
    let err = Delivery::new("stripe", "k").unwrap().fixture("nope").unwrap_err();
    assert_eq!(err.kind(), &DevErrorKind::UnknownFixture);
    assert!(err.to_string().contains("payment_intent.succeeded"), "{err}");
    let err = Delivery::new("stripe", "k").unwrap().url("/relative").signed().unwrap_err();
    assert_eq!(err.kind(), &DevErrorKind::Sign(SignErrorKind::Url));
    #[cfg(feature = "discord")]
    {
        let err = Delivery::new("discord", "not-hex").unwrap().signed().unwrap_err();
        assert_eq!(err.kind(), &DevErrorKind::Sign(SignErrorKind::Key));
        assert!(!err.to_string().contains("not-hex"), "no key material in {err}");
    }
}

#[test]
fn a_raw_body_is_sent_byte_for_byte_and_the_url_is_the_target() {
    let body = b"{\"id\":\"evt_raw\",  \"type\":\"x\"}\n".to_vec();
    let req = Delivery::new("stripe", "k")
        .unwrap()
        .body(body.clone())
        .url("http://127.0.0.1:9/hooks/s?x=1")
        .request()
        .unwrap();
    assert_eq!(req.uri(), "/hooks/s?x=1");
    assert_eq!(req.headers()["host"], "127.0.0.1:9");
    assert_eq!(&req.body()[..], &body[..]);
}

#[test]
fn an_out_of_order_pair_is_about_one_object() {
    let older = Delivery::new("stripe", "k").unwrap();
    let newer = older.next_of_object();
    let (a, b) = (older.signed().unwrap(), newer.signed().unwrap());
    let object =
        |ex: &Example| serde_json::from_slice::<serde_json::Value>(&ex.body).unwrap()["data"]["object"]["id"].clone();
    let id = |ex: &Example| serde_json::from_slice::<serde_json::Value>(&ex.body).unwrap()["id"].clone();
    assert_eq!(object(&a), object(&b));
    assert_ne!(id(&a), id(&b));
}

/// A rotated delivery verifies with either key alone where the scheme
/// carries several signatures (Stripe), and with the old key where it
/// carries one (GitHub).
#[test]
fn a_rotation_is_verified_by_the_keys_the_receiver_holds() {
    use crate::verify::SigningSecret;
    let now = SystemTime::now();
    let with = |ex: &Example, keys: &[&str]| {
        let keys: Vec<SigningSecret> = keys.iter().map(|k| SigningSecret::from(*k)).collect();
        ex.provider.verify(&Signed::new(&ex.parts, &ex.body, &keys, now)).is_ok()
    };
    let stripe = Delivery::new("stripe", "whsec_new").unwrap().rotated_from("whsec_old").at(now).signed().unwrap();
    let header = stripe.parts.headers["stripe-signature"].to_str().unwrap().to_owned();
    assert_eq!(header.matches("v1=").count(), 2, "{header}");
    assert!(with(&stripe, &["whsec_new"]) && with(&stripe, &["whsec_old"]));
    assert!(!with(&stripe, &["whsec_other"]));
    #[cfg(feature = "standard-webhooks")]
    {
        let old = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let new = "whsec_cXVpY2tzdGFydC10ZXN0LXNlY3JldC0yNA==";
        let svix = Delivery::new("svix", new).unwrap().rotated_from(old).at(now).signed().unwrap();
        assert!(with(&svix, &[new]) && with(&svix, &[old]));
    }
    let github = Delivery::new("github", "new").unwrap().rotated_from("old").at(now).signed().unwrap();
    assert!(with(&github, &["old"]) && !with(&github, &["new"]));
}

const REDELIVERY_START: &str = "<!-- generated: dev::tests::the_redelivery_table_is_what_the_presets_sign -->\n";
const REDELIVERY_END: &str = "<!-- end of the generated redelivery table -->";

/// docs/providers.md's "What a redelivery keeps": for each preset, one
/// event of its default fixture signed twice, two seconds apart, compared.
fn redelivery_table() -> String {
    let mut table =
        String::from("| preset | event key | a redelivery keeps | a redelivery changes |\n|---|---|---|---|\n");
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for preset in crate::providers::all() {
        let Some(key) = test_key(preset.name) else { continue };
        let event = Delivery::new(preset.name, key).unwrap().url("https://example.com/webhooks/x");
        let (a, b) = (event.clone().at(at).signed().unwrap(), event.at(at + Duration::from_secs(2)).signed().unwrap());
        let mut names: Vec<&str> = a.parts.headers.keys().map(http::HeaderName::as_str).collect();
        names.retain(|n| *n != "content-type");
        names.sort_unstable();
        names.dedup();
        let (same, changed): (Vec<&str>, Vec<&str>) =
            names.into_iter().partition(|n| a.parts.headers.get_all(*n).iter().eq(b.parts.headers.get_all(*n).iter()));
        let code = |list: Vec<&str>| list.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        let mut keeps = if a.body == b.body { vec!["the body".to_owned()] } else { vec![] };
        keeps.extend((!same.is_empty()).then(|| code(same)));
        let mut changes = if a.body == b.body { vec![] } else { vec!["the body (its signature is inside)".to_owned()] };
        changes.extend((!changed.is_empty()).then(|| code(changed)));
        let key = if preset.dedupes { preset.key_source() } else { "new for each delivery".to_owned() };
        let or_nothing = |v: Vec<String>| if v.is_empty() { "nothing".to_owned() } else { v.join("; ") };
        table.push_str(&format!("| `{}` | {key} | {} | {} |\n", preset.name, or_nothing(keeps), or_nothing(changes)));
    }
    table
}

#[cfg(feature = "full")]
#[test]
fn the_redelivery_table_is_what_the_presets_sign() {
    crate::test_support::generated_section("docs/providers.md", REDELIVERY_START, REDELIVERY_END, &redelivery_table());
}

/// A tampered delivery of a scheme that signs inside the body is refused
/// whatever characters its signature has (a base64 `+` or `/` where the
/// two keys' signatures first differ included): many events each.
#[test]
fn tampering_inside_the_body_always_changes_the_signature() {
    for preset in ["adyen", "mailgun"] {
        let Some(key) = test_key(preset) else { continue };
        let now = SystemTime::now();
        let mut event = Delivery::new(preset, key).unwrap().at(now);
        for _ in 0..200 {
            let forged = event.clone().tampered().signed().unwrap();
            assert!(
                !verifies(&forged, now),
                "{preset}: a tampered copy verified: {}",
                String::from_utf8_lossy(&forged.body)
            );
            event = event.next_event().at(now);
        }
    }
}

/// `webhook-dev`'s argument errors (`crate::cli::usage_message`) name the
/// flag, never the value: a secret typed without `--secret`, or given to
/// the wrong flag, is not printed.
#[cfg(feature = "cli")]
#[test]
fn argument_errors_never_quote_the_value_given() {
    use clap::{Arg, Command};
    let command = || {
        Command::new("webhook-dev").subcommand(
            Command::new("send")
                .arg(Arg::new("preset").required(true))
                .arg(Arg::new("secret").long("secret"))
                .arg(Arg::new("repeat").long("repeat").value_parser(clap::value_parser!(u32))),
        )
    };
    for argv in [
        &["webhook-dev", "send", "stripe", "whsec_LEAKED"][..],
        &["webhook-dev", "send", "stripe", "--repeat", "whsec_LEAKED"],
        &["webhook-dev", "whsec_LEAKED"],
        &["webhook-dev", "send", "stripe", "--whsec_LEAKED"],
    ] {
        let e = command().try_get_matches_from(argv).unwrap_err();
        let message = crate::cli::usage_message(&e, &command());
        assert!(!message.contains("LEAKED"), "{argv:?}: {message}");
        assert!(!e.to_string().is_empty());
    }
    let e = command().try_get_matches_from(["webhook-dev", "send", "stripe", "--repeat", "x"]).unwrap_err();
    assert!(crate::cli::usage_message(&e, &command()).contains("--repeat"));
}

/// `--tamper` changes a body without a letter or digit (`{}`, binary, empty)
/// too: the receiver refuses it.
#[test]
fn a_body_without_letters_or_digits_is_tampered_too() {
    let now = SystemTime::now();
    for body in [&b""[..], b"{}", b"\xff\xfe[]"] {
        let event = Delivery::new("stripe", "whsec_k").unwrap().body(body.to_vec()).at(now);
        let tampered = event.clone().tampered().signed().unwrap();
        assert_ne!(tampered.body, body, "{body:?}");
        assert!(!verifies(&tampered, now), "{body:?}: a tampered copy verified");
        assert!(verifies(&event.signed().unwrap(), now));
    }
}

/// One seed gives the same event in every run, and two events for two
/// fixtures or two bodies: `--same-event s --fixture a` and `--same-event
/// s --fixture b` were one event id, the second dropped as a duplicate.
#[test]
fn a_seed_gives_one_event_per_fixture_and_body() {
    let key_of = |d: Delivery| {
        let ex = d.signed().unwrap();
        ex.provider.identify(&ex.parts, &ex.body).unwrap().key
    };
    let stripe = || Delivery::new("stripe", "whsec_k").unwrap();
    let a = key_of(stripe().seeded("s"));
    assert_eq!(a, key_of(stripe().seeded("s")));
    assert_eq!(a, key_of(stripe().seeded("s").fixture("payment_intent.succeeded").unwrap()));
    let b = key_of(stripe().fixture("charge.refunded").unwrap().seeded("s"));
    assert_eq!(b, key_of(stripe().seeded("s").fixture("charge.refunded").unwrap()));
    assert_ne!(a, b);
    assert_ne!(a, key_of(stripe().seeded("t")));
    let github = |body: &[u8]| key_of(Delivery::new("github", "k").unwrap().body(body.to_vec()).seeded("s"));
    assert_eq!(github(b"{}"), github(b"{}"));
    assert_ne!(github(b"{}"), github(b"[]"));
}

/// The two events of an out-of-order pair are two events for every preset
/// that dedupes: Lemon Squeezy, Cal.com and DocuSign key an event by its
/// object and a time in whole seconds, and the pair, made a millisecond
/// apart, was one event (the older dropped as a duplicate of the newer).
#[test]
fn an_out_of_order_pair_is_two_events_for_every_preset() {
    let at = SystemTime::now();
    let mut same = Vec::new();
    for preset in crate::providers::all().iter().filter(|p| p.dedupes) {
        let Some(key) = preset.test_key() else { continue };
        let mut names = fixtures(preset.name);
        if names.is_empty() {
            names.push(String::new());
        }
        for name in names {
            let mut older = Delivery::new(preset.name, key).unwrap();
            if !name.is_empty() {
                older = older.fixture(&name).unwrap();
            }
            let newer = older.next_of_object();
            let key_of = |d: &Delivery| {
                let ex = d.clone().at(at).signed().unwrap();
                ex.provider.identify(&ex.parts, &ex.body).map(|id| id.key).unwrap_or_default()
            };
            if key_of(&older) == key_of(&newer) {
                same.push(format!("{} {name}", preset.name));
            }
        }
    }
    assert_eq!(same, Vec::<String>::new());
}

/// Your own form-encoded bytes (a captured Slack slash command) go out as a
/// form, not as JSON; JSON and anything else as JSON.
#[test]
fn a_raw_form_body_is_sent_as_a_form() {
    let content_type = |body: &[u8]| {
        let req = Delivery::new("slack", "k").unwrap().body(body.to_vec()).request().unwrap();
        req.headers()["content-type"].to_str().unwrap().to_owned()
    };
    assert_eq!(content_type(b"token=x&team_id=T1&command=%2Fweather&text=94070"), "application/x-www-form-urlencoded");
    assert_eq!(content_type(br#"{"type":"event_callback","a":"b=c"}"#), "application/json");
    assert_eq!(content_type(b"\xff\xfe"), "application/json");
}

/// A receiver behind a proxy verifies a URL-signing scheme with its public
/// URL: signed for that URL, the request goes to the other address.
#[cfg(feature = "twilio")]
#[test]
fn a_signed_url_other_than_the_address_sent_to() {
    let now = SystemTime::now();
    let event = Delivery::new("twilio", test_key("twilio").unwrap())
        .unwrap()
        .at(now)
        .url("http://127.0.0.1:9/webhooks/twilio")
        .signed_url("https://hooks.example.com/webhooks/twilio");
    let signed = event.signed().unwrap();
    assert!(verifies(&signed, now), "verified by the receiver configured with its public URL");
    let req = event.request().unwrap();
    assert_eq!(req.headers()["host"], "127.0.0.1:9");
    assert_eq!(req.uri().path(), "/webhooks/twilio");
    let direct =
        event.clone().url("http://127.0.0.1:9/webhooks/twilio").signed_url("http://127.0.0.1:9/webhooks/twilio");
    let receiver = signed.provider;
    let sent = direct.signed().unwrap();
    let check = Signed::new(&sent.parts, &sent.body, &signed.secrets, now);
    assert!(receiver.verify(&check).is_err(), "signed for another URL: refused by the public URL's receiver");
}

/// `header` adds a header, replaces a fixture's of that name, and never
/// replaces one the scheme writes.
#[test]
fn added_headers_replace_the_fixture_s_not_the_scheme_s() {
    let event = Delivery::new("github", "k")
        .unwrap()
        .header("X-GitHub-Event", "issues")
        .header("x-extra", "1")
        .header("x-hub-signature-256", "sha256=00");
    let signed = event.signed().unwrap();
    assert_eq!(signed.parts.headers["x-github-event"], "issues");
    assert_eq!(signed.parts.headers["x-extra"], "1");
    assert_ne!(signed.parts.headers["x-hub-signature-256"], "sha256=00");
}
