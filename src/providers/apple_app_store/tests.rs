//! The App Store preset against Apple's root, a real Apple-signed JWS,
//! Apple's library's test notification, and chains made here with rcgen
//! (each check of the chain broken once).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use p256::pkcs8::DecodePrivateKey as _;
use rcgen::{BasicConstraints, CertificateParams, CustomExtension, IsCa, Issuer, KeyPair};

use super::*;

const REAL_APPLE_JWS: &str =
    include_str!("../../../tests/fixtures/providers/apple-app-store/vectors/go-iap-real-apple-renewal-info.jws");
const APPLE_TEST_NOTIFICATION: &str =
    include_str!("../../../tests/fixtures/providers/apple-app-store/vectors/apple-library-testNotification.jws");
const APPLE_WRONG_BUNDLE: &str =
    include_str!("../../../tests/fixtures/providers/apple-app-store/vectors/apple-library-wrongBundleId.jws");
const APPLE_TEST_CA: &[u8] =
    include_bytes!("../../../tests/fixtures/providers/apple-app-store/vectors/apple-library-testCA.der");
const FIXTURE_BODY: &[u8] = include_bytes!("../../../tests/fixtures/providers/apple-app-store/body.json");

/// 2024-01-01T00:00:00Z, in milliseconds: the signed date of the chains made here.
const SIGNED_MS: u64 = 1_704_067_200_000;

fn at_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn body_of(jws: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "signedPayload": jws })).unwrap()
}

/// Verifies `body` with `settings` at `now`, as the layer does.
fn check(settings: &AppleAppStore, body: &[u8], now: SystemTime) -> Result<(), VerifyErrorKind> {
    let (parts, ()) = http::Request::post("/apple").body(()).unwrap().into_parts();
    AppleVerifier(settings.clone()).verify(&Delivery::new(&parts, body, &[], now)).map_err(|e| e.kind())
}

fn identity(body: &[u8]) -> Result<EventIdentity, KeyErrorKind> {
    let (parts, ()) = http::Request::post("/apple").body(()).unwrap().into_parts();
    AppleKey.extract(&parts, body).map_err(|e| e.kind())
}

#[test]
fn the_shipped_root_is_apple_root_ca_g3() {
    use sha2::Digest as _;
    let fingerprint = hex::encode(sha2::Sha256::digest(APPLE_ROOT_CA_G3));
    assert_eq!(fingerprint, "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179");
    let root = chain::Root::parse(APPLE_ROOT_CA_G3).expect("parses");
    let text = format!("{root:?}");
    assert!(text.contains("P384"), "a P-384 key");
}

/// A JWS Apple signed with its real chain (WWDR G6, Apple Root CA - G3)
/// verifies at its signedDate with the shipped root alone, and fails changed
/// or against another root.
#[test]
fn a_real_apple_signature_verifies_with_the_shipped_root() {
    let apple = AppleAppStore::sandbox("x").roots;
    let verified = chain::verify(REAL_APPLE_JWS.trim(), &apple).expect("Apple's own chain and signature");
    assert_eq!(verified.signed_ms, 1_684_822_778_492);
    assert_eq!(verified.payload["originalTransactionId"], "2000000335310644");
    let [h, _, s] = chain::parts(REAL_APPLE_JWS.trim()).unwrap();
    let mut payload = verified.payload.clone();
    payload["autoRenewStatus"] = 0.into();
    let changed = format!("{h}.{}.{s}", base64_url(&payload.to_string()));
    assert_eq!(chain::verify(&changed, &apple).unwrap_err().kind(), VerifyErrorKind::NoMatchingSignature);
    let test_root = AppleAppStore::sandbox("x").with_roots([APPLE_TEST_CA]).unwrap().roots;
    let other = chain::verify(REAL_APPLE_JWS.trim(), &test_root).unwrap_err();
    assert_eq!(other.kind(), VerifyErrorKind::NoMatchingSignature, "another root");
}

fn base64_url(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

/// Apple's library's own test notification (`testNotification`, signed by
/// its test chain, trusted through `testCA.der`), as its tests check it:
/// accepted for Sandbox `com.example`, refused for Production (environment)
/// and another bundle id; `wrongBundleId` refused.
#[test]
fn apples_library_test_notification() {
    let body = body_of(APPLE_TEST_NOTIFICATION.trim());
    let now = at_ms(1_681_314_324_000 + 1_000);
    let sandbox = |bundle: &str| AppleAppStore::sandbox(bundle).with_roots([APPLE_TEST_CA]).unwrap();
    assert_eq!(check(&sandbox("com.example"), &body, now), Ok(()));
    let id = identity(&body).unwrap();
    assert_eq!((id.key.as_str(), id.event_type.as_deref()), ("9ad56bd2-0bc6-42e0-af24-fd996d87a1e6", Some("TEST")));
    let production = AppleAppStore::production("com.example", 1234).with_roots([APPLE_TEST_CA]).unwrap();
    assert_eq!(check(&production, &body, now), Err(VerifyErrorKind::NoMatchingSignature), "the environment");
    assert_eq!(check(&sandbox("com.examplex"), &body, now), Err(VerifyErrorKind::NoMatchingSignature));
    // Shipped root only: Apple's test chain is not Apple's.
    assert_eq!(check(&AppleAppStore::sandbox("com.example"), &body, now), Err(VerifyErrorKind::NoMatchingSignature));
    // `wrongBundleId` has no signedDate: refused before its bundle id is read
    // (Apple's library checks its chain at the current time, then refuses the bundle id).
    let wrong = body_of(APPLE_WRONG_BUNDLE.trim());
    assert_eq!(check(&sandbox("com.examplex"), &wrong, now), Err(VerifyErrorKind::MissingField));
}

/// The fixture `body.json` (the crate's test chain, `scripts/fixtures/apple-app-store.py`).
#[test]
fn the_fixture_verifies_with_the_test_root() {
    let settings = AppleAppStore::sandbox("com.example.cafe").with_roots([TEST_ROOT]).unwrap();
    assert_eq!(check(&settings, FIXTURE_BODY, at_ms(1_700_000_000_000)), Ok(()));
    let id = identity(FIXTURE_BODY).unwrap();
    assert_eq!(id.key, "3f1c7e52-8a9b-4d2e-b6c1-0f9e8d7c6b5a");
    let shipped = check(&AppleAppStore::sandbox("com.example.cafe"), FIXTURE_BODY, at_ms(1_700_000_000_000));
    assert_eq!(shipped, Err(VerifyErrorKind::NoMatchingSignature), "the test root is not trusted by default");
}

/// A chain made here: which of Apple's properties it has.
struct Chain {
    leaf_marker: bool,
    intermediate_marker: bool,
    intermediate_ca: bool,
    /// The leaf's validity ends a day before [`SIGNED_MS`].
    leaf_expired: bool,
    /// The intermediate is signed by the root's key under another issuer name.
    misnamed_issuer: bool,
}

impl Default for Chain {
    fn default() -> Self {
        Self {
            leaf_marker: true,
            intermediate_marker: true,
            intermediate_ca: true,
            leaf_expired: false,
            misnamed_issuer: false,
        }
    }
}

/// A chain's certificates (root, intermediate, leaf: DER) and the leaf's signing key.
struct Made {
    root: Vec<u8>,
    intermediate: Vec<u8>,
    leaf: Vec<u8>,
    key: p256::ecdsa::SigningKey,
}

fn marker(oid: &[u64]) -> CustomExtension {
    CustomExtension::from_oid_content(oid, vec![0x05, 0x00])
}

impl Chain {
    fn make(&self) -> Made {
        let params = |cn: &str, ca: bool| {
            let mut p = CertificateParams::new(vec![]).unwrap();
            p.distinguished_name.push(rcgen::DnType::CommonName, cn);
            p.is_ca = if ca { IsCa::Ca(BasicConstraints::Unconstrained) } else { IsCa::NoCa };
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2030, 1, 1);
            p
        };
        let root_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
        let root_params = params("Test Root", true);
        let root = root_params.self_signed(&root_key).unwrap();
        let mid_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
        let mut mid_params = params("Test Intermediate", self.intermediate_ca);
        if self.intermediate_marker {
            mid_params.custom_extensions.push(marker(&[1, 2, 840, 113635, 100, 6, 2, 1]));
        }
        let misnamed = params("Not The Test Root", true);
        let issuer = Issuer::from_params(if self.misnamed_issuer { &misnamed } else { &root_params }, &root_key);
        let mid = mid_params.signed_by(&mid_key, &issuer).unwrap();
        let leaf_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut leaf_params = params("Test Leaf", false);
        if self.leaf_marker {
            leaf_params.custom_extensions.push(marker(&[1, 2, 840, 113635, 100, 6, 11, 1]));
        }
        if self.leaf_expired {
            leaf_params.not_after = rcgen::date_time_ymd(2023, 12, 31);
        }
        let leaf = leaf_params.signed_by(&leaf_key, &Issuer::from_params(&mid_params, &mid_key)).unwrap();
        Made {
            root: root.der().to_vec(),
            intermediate: mid.der().to_vec(),
            leaf: leaf.der().to_vec(),
            key: p256::ecdsa::SigningKey::from_pkcs8_der(&leaf_key.serialize_der()).unwrap(),
        }
    }
}

impl Made {
    fn settings(&self) -> AppleAppStore {
        AppleAppStore::production("com.example.app", 1_234_567_890).with_roots([&self.root]).unwrap()
    }

    fn x5c(&self) -> [&[u8]; 3] {
        [&self.leaf, &self.intermediate, &self.root]
    }

    fn body(&self, payload: &serde_json::Value) -> Vec<u8> {
        body_of(&sign_jws("ES256", &self.x5c(), payload, &self.key))
    }
}

fn notification() -> serde_json::Value {
    serde_json::json!({
        "notificationType": "DID_CHANGE_RENEWAL_STATUS", "subtype": "AUTO_RENEW_DISABLED",
        "notificationUUID": "002e14d5-51f5-4503-b5a8-c3a1af68eb20", "version": "2.0", "signedDate": SIGNED_MS,
        "data": {"appAppleId": 1_234_567_890u64, "bundleId": "com.example.app", "environment": "Production",
                 "signedTransactionInfo": "e30.e30.sig"},
    })
}

/// Each check of the chain, the signature and the JWS, broken once.
#[test]
fn verifies_and_refuses_each_broken_link() {
    let now = at_ms(SIGNED_MS + 60_000);
    let good = Chain::default().make();
    let settings = good.settings();
    let body = good.body(&notification());
    assert_eq!(check(&settings, &body, now), Ok(()));
    let id = identity(&body).unwrap();
    assert_eq!(id.key, "002e14d5-51f5-4503-b5a8-c3a1af68eb20");
    assert_eq!(id.event_type.as_deref(), Some("DID_CHANGE_RENEWAL_STATUS.AUTO_RENEW_DISABLED"));
    // The chain expired since (2030): it is checked at signedDate, as Apple's library does offline.
    let years = settings.clone().tolerance(Duration::from_secs(10 * 366 * 86_400));
    assert_eq!(check(&years, &body, at_ms(1_924_992_000_000)), Ok(()), "2031-01-01");

    let refused = Err(VerifyErrorKind::NoMatchingSignature);
    let malformed = Err(VerifyErrorKind::MalformedHeader);
    let jws = sign_jws("ES256", &good.x5c(), &notification(), &good.key);
    let [h, p, s] = chain::parts(&jws).unwrap();
    let mut tampered = notification();
    tampered["notificationUUID"] = "another".into();
    let other_key = p256::ecdsa::SigningKey::from_slice(&[7; 32]).unwrap();
    let other_root = Chain::default().make();
    let cases: Vec<(&str, Vec<u8>, AppleAppStore, Result<(), VerifyErrorKind>)> = vec![
        (
            "tampered payload",
            body_of(&format!("{h}.{}.{s}", base64_url(&tampered.to_string()))),
            settings.clone(),
            refused,
        ),
        (
            "signed by another key",
            body_of(&sign_jws("ES256", &good.x5c(), &notification(), &other_key)),
            settings.clone(),
            refused,
        ),
        ("another trusted root", body.clone(), other_root.settings(), refused),
        ("the shipped root only", body.clone(), AppleAppStore::production("com.example.app", 1_234_567_890), refused),
        ("alg ES384", body_of(&sign_jws("ES384", &good.x5c(), &notification(), &good.key)), settings.clone(), refused),
        ("alg none", body_of(&sign_jws("none", &good.x5c(), &notification(), &good.key)), settings.clone(), refused),
        (
            "a chain of 2",
            body_of(&sign_jws("ES256", &good.x5c()[..2], &notification(), &good.key)),
            settings.clone(),
            refused,
        ),
        (
            "a chain of 4",
            body_of(&sign_jws(
                "ES256",
                &[&good.leaf, &good.intermediate, &good.root, &good.root],
                &notification(),
                &good.key,
            )),
            settings.clone(),
            refused,
        ),
        (
            "leaf and intermediate swapped",
            body_of(&sign_jws("ES256", &[&good.intermediate, &good.leaf, &good.root], &notification(), &good.key)),
            settings.clone(),
            refused,
        ),
        ("not JSON", b"signedPayload=x".to_vec(), settings.clone(), malformed),
        ("two parts", body_of(&format!("{h}.{p}")), settings.clone(), malformed),
        ("four parts", body_of(&format!("{jws}.x")), settings.clone(), malformed),
        ("payload not base64url", body_of(&format!("{h}.{p}!.{s}")), settings.clone(), malformed),
        ("signature not 64 bytes", body_of(&format!("{h}.{p}.{}", &s[..40])), settings.clone(), malformed),
        (
            "x5c entry not base64",
            body_of(&format!("{}.{p}.{s}", base64_url(r#"{"alg":"ES256","x5c":["!!","!!","!!"]}"#))),
            settings.clone(),
            malformed,
        ),
        (
            "x5c entry not a certificate",
            body_of(&format!("{}.{p}.{s}", base64_url(r#"{"alg":"ES256","x5c":["YWJj","YWJj","YWJj"]}"#))),
            settings.clone(),
            malformed,
        ),
        ("no x5c", body_of(&format!("{}.{p}.{s}", base64_url(r#"{"alg":"ES256"}"#))), settings.clone(), malformed),
        ("no signedPayload", br#"{"signed":"x"}"#.to_vec(), settings.clone(), Err(VerifyErrorKind::MissingField)),
        (
            "signedPayload twice",
            format!(r#"{{"signedPayload":"x","signedPayload":{}}}"#, serde_json::to_string(&jws).unwrap()).into_bytes(),
            settings.clone(),
            malformed,
        ),
    ];
    for (name, body, settings, want) in cases {
        assert_eq!(check(&settings, &body, now), want, "{name}");
    }
}

/// Apple's marker extensions, the intermediate's CA bit and the dates, each
/// missing once, on a chain otherwise valid and trusted.
#[test]
fn each_certificate_property_is_required() {
    let now = at_ms(SIGNED_MS + 60_000);
    for (name, chain) in [
        ("leaf without 1.2.840.113635.100.6.11.1", Chain { leaf_marker: false, ..Chain::default() }),
        ("intermediate without 1.2.840.113635.100.6.2.1", Chain { intermediate_marker: false, ..Chain::default() }),
        ("intermediate not a CA", Chain { intermediate_ca: false, ..Chain::default() }),
        ("leaf expired at signedDate", Chain { leaf_expired: true, ..Chain::default() }),
        ("intermediate naming another issuer", Chain { misnamed_issuer: true, ..Chain::default() }),
    ] {
        let made = chain.make();
        let body = made.body(&notification());
        assert_eq!(check(&made.settings(), &body, now), Err(VerifyErrorKind::NoMatchingSignature), "{name}");
    }
    // Before the chain's validity (2020) at signedDate: refused too.
    let made = Chain::default().make();
    let mut early = notification();
    early["signedDate"] = 1_500_000_000_000u64.into();
    let body = made.body(&early);
    let settings = made.settings().tolerance(Duration::from_secs(400 * 86_400 * 10));
    assert_eq!(check(&settings, &body, now), Err(VerifyErrorKind::NoMatchingSignature));
}

/// The app, the environment and (in production) the app's Apple ID, read
/// where Apple's library reads them; `signedDate` within the tolerance.
#[test]
fn only_the_named_app_environment_and_age() {
    let made = Chain::default().make();
    let now = at_ms(SIGNED_MS + 60_000);
    let root = made.root.clone();
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut n = notification();
        f(&mut n);
        made.body(&n)
    };
    let prod = |bundle: &str, app: u64| AppleAppStore::production(bundle, app).with_roots([&root]).unwrap();
    let sandbox = |bundle: &str| AppleAppStore::sandbox(bundle).with_roots([&root]).unwrap();
    let ok = Ok(());
    let refused = Err(VerifyErrorKind::NoMatchingSignature);
    let cases: Vec<(&str, Vec<u8>, AppleAppStore, Result<(), VerifyErrorKind>)> = vec![
        ("production, named", with(&|_| {}), prod("com.example.app", 1_234_567_890), ok),
        ("another bundle id", with(&|_| {}), prod("com.example.other", 1_234_567_890), refused),
        ("another app Apple ID", with(&|_| {}), prod("com.example.app", 1), refused),
        ("production notification, sandbox endpoint", with(&|_| {}), sandbox("com.example.app"), refused),
        (
            "sandbox, no appAppleId",
            with(&|n| {
                n["data"]["environment"] = "Sandbox".into();
                n["data"].as_object_mut().unwrap().remove("appAppleId");
            }),
            sandbox("com.example.app"),
            ok,
        ),
        (
            "sandbox notification, production endpoint",
            with(&|n| n["data"]["environment"] = "Sandbox".into()),
            prod("com.example.app", 1_234_567_890),
            refused,
        ),
        (
            "no environment",
            with(&|n| {
                n["data"].as_object_mut().unwrap().remove("environment");
            }),
            prod("com.example.app", 1_234_567_890),
            refused,
        ),
        (
            "no data object",
            with(&|n| {
                n.as_object_mut().unwrap().remove("data");
            }),
            prod("com.example.app", 1_234_567_890),
            refused,
        ),
        (
            "summary instead of data",
            with(&|n| {
                let d = n["data"].take();
                n.as_object_mut().unwrap().remove("data");
                n["summary"] = d;
            }),
            prod("com.example.app", 1_234_567_890),
            ok,
        ),
        (
            "external purchase token, SANDBOX id",
            with(&|n| {
                n.as_object_mut().unwrap().remove("data");
                n["externalPurchaseToken"] =
                    serde_json::json!({"bundleId": "com.example.app", "externalPurchaseId": "SANDBOX_1"});
            }),
            sandbox("com.example.app"),
            ok,
        ),
        (
            "external purchase token, production id",
            with(&|n| {
                n.as_object_mut().unwrap().remove("data");
                n["externalPurchaseToken"] = serde_json::json!({"bundleId": "com.example.app", "appAppleId": 1_234_567_890u64, "externalPurchaseId": "4c3b"});
            }),
            sandbox("com.example.app"),
            refused,
        ),
        (
            "no signedDate",
            with(&|n| {
                n.as_object_mut().unwrap().remove("signedDate");
            }),
            prod("com.example.app", 1_234_567_890),
            Err(VerifyErrorKind::MissingField),
        ),
    ];
    for (name, body, settings, want) in cases {
        assert_eq!(check(&settings, &body, now), want, "{name}");
    }
    let settings = prod("com.example.app", 1_234_567_890);
    let body = with(&|_| {});
    let window = REPLAY_WINDOW.as_millis() as u64;
    assert_eq!(check(&settings, &body, at_ms(SIGNED_MS + window)), Ok(()), "at the tolerance");
    assert_eq!(check(&settings, &body, at_ms(SIGNED_MS + window + 1)), Err(VerifyErrorKind::TimestampTooOld));
    assert_eq!(check(&settings, &body, at_ms(SIGNED_MS - window - 1)), Err(VerifyErrorKind::TimestampInFuture));
    let narrow = settings.clone().tolerance(Duration::from_secs(60));
    assert_eq!(check(&narrow, &body, at_ms(SIGNED_MS + 61_000)), Err(VerifyErrorKind::TimestampTooOld));
    // The registry's provider accepts no app.
    let registry = AppleAppStore::accepting(Accept::Nothing).with_roots([&root]).unwrap();
    assert_eq!(check(&registry, &body, now), refused);
}

#[test]
fn roots_and_secrets() {
    assert_eq!(AppleAppStore::sandbox("a").with_roots(Vec::<Vec<u8>>::new()).unwrap_err(), InvalidRoot { index: None });
    let err = AppleAppStore::sandbox("a").with_roots([APPLE_ROOT_CA_G3, b"not a certificate"]).unwrap_err();
    assert_eq!(err, InvalidRoot { index: Some(1) });
    assert!(err.to_string().contains("#2"));
    let both = AppleAppStore::sandbox("a").with_roots([APPLE_ROOT_CA_G3, TEST_ROOT]).unwrap();
    assert_eq!(both.roots.len(), 2);
    let verifier = AppleVerifier(AppleAppStore::sandbox("a"));
    assert_eq!(verifier.check_secrets(&[]), Ok(()), "no key material: the root is shipped");
}

#[test]
fn decoded_payload_and_key_errors() {
    let payload = decoded_payload(FIXTURE_BODY).unwrap();
    assert_eq!(payload["notificationType"], "TEST");
    assert_eq!(payload["data"]["bundleId"], "com.example.cafe");
    assert_eq!(decoded_payload(b"[]").unwrap_err().kind(), VerifyErrorKind::MissingField);
    assert_eq!(decoded_payload(br#"{"signedPayload":"a.b"}"#).unwrap_err().kind(), VerifyErrorKind::MalformedHeader);
    let no_uuid = format!("e30.{}.e30", base64_url(r#"{"notificationType":"TEST"}"#));
    assert_eq!(identity(&body_of(&no_uuid)).unwrap_err(), KeyErrorKind::Missing);
    assert_eq!(identity(b"{}").unwrap_err(), KeyErrorKind::BodyNotJson);
    let no_subtype = format!("e30.{}.e30", base64_url(r#"{"notificationType":"TEST","notificationUUID":"u"}"#));
    assert_eq!(identity(&body_of(&no_subtype)).unwrap().event_type.as_deref(), Some("TEST"));
}
