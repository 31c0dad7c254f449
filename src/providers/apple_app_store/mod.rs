//! Apple App Store Server Notifications v2: the JWS `signedPayload`, its
//! `x5c` certificate chain checked offline up to Apple Root CA - G3.
//!
//! Scheme (Apple, "responseBodyV2",
//! <https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2>;
//! "JWSDecodedHeader",
//! <https://developer.apple.com/documentation/appstoreservernotifications/jwsdecodedheader>;
//! "responseBodyV2DecodedPayload",
//! <https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2decodedpayload>;
//! and the reference implementation, Apple's `app-store-server-library`,
//! `SignedDataVerifier`, read in its Python and Node versions): the body is
//! `{"signedPayload": "<JWS>"}`, a compact JWS (`header.payload.signature`,
//! each base64url). Its header names `alg` `ES256` and `x5c`, the
//! certificate chain, leaf first, in standard base64 DER. The signature is
//! ECDSA P-256 with SHA-256 over `header.payload`, in JWS's raw `r || s`
//! form, by the leaf's key. The preset checks what Apple's library checks
//! with `enable_online_checks` off:
//! - `alg` is `ES256` and `x5c` holds exactly 3 certificates;
//! - the intermediate (the second) is issued by a trusted root (its issuer
//!   is the root's subject and the root's key signed it) and is a CA (basic
//!   constraints); the leaf (the first) is issued by the intermediate;
//! - the leaf carries Apple's extension 1.2.840.113635.100.6.11.1 and the
//!   intermediate 1.2.840.113635.100.6.2.1;
//! - the leaf, the intermediate and the trusted root are valid at the
//!   payload's `signedDate` (the library's effective date when online checks
//!   are off);
//! - the JWS signature, by the leaf's P-256 key.
//!
//! The trusted root is [`APPLE_ROOT_CA_G3`], shipped in the crate (Apple
//! Root CA - G3, P-384, from <https://www.apple.com/certificateauthority/>;
//! SHA-256 fingerprint `63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79`;
//! valid to 2039-04-30). [`AppleAppStore::with_roots`] replaces the trusted
//! roots (a test root, or Apple's next root beside this one); there is no way
//! to skip the chain. The third `x5c` certificate is not a trust anchor:
//! Apple's Python and Node libraries never read it (the chain ends at a
//! trusted root), and neither does this preset beyond counting it.
//!
//! **Not checked: revocation.** Apple's library asks Apple's OCSP responders
//! whether the leaf and the intermediate are revoked only with
//! `enable_online_checks` on (and then checks validity at the current time);
//! this preset makes no network call, like the library with online checks
//! off. A revoked Apple signing key would be accepted until the crate's
//! check changes or you replace the roots.
//!
//! **The app.** Every app's notifications are signed by the same Apple keys:
//! a notification for another app verifies too. So the preset accepts only
//! the app and environment you name, as the library does after the
//! signature: [`AppleAppStore::production`] (the bundle id, and the app's
//! Apple ID, `appAppleId`, which production notifications carry) or
//! [`AppleAppStore::sandbox`] (the bundle id; sandbox notifications carry
//! no `appAppleId`). They are read from the payload's `data`, `summary`,
//! `externalPurchaseToken` or `appData` object, the first present (an
//! external purchase token's environment is Sandbox when its
//! `externalPurchaseId` starts `SANDBOX`). Anything else is refused (401)
//! before any claim. App Store Connect takes a production and a sandbox URL:
//! route each to its own layer. Xcode and StoreKit-testing data are not
//! signed by Apple and are refused.
//!
//! **Signed / not signed:** the whole payload (`notificationType`,
//! `subtype`, `notificationUUID`, `signedDate`, `data` with its own nested
//! `signedTransactionInfo` / `signedRenewalInfo` JWSs) is signed; the outer
//! JSON object is not (a body naming `signedPayload` twice is refused). No
//! header is read.
//!
//! **The event key** is the payload's `notificationUUID`, which Apple keeps
//! across the retries of a notification (an Apple engineer, "retries always
//! have the same notificationUUID",
//! <https://developer.apple.com/forums/thread/756151>); the **event type**
//! is `notificationType`, then `.` and `subtype` when there is one
//! (`DID_CHANGE_RENEWAL_STATUS.AUTO_RENEW_DISABLED`), since a subtype can
//! reverse the type's meaning. The handler gets the raw body unchanged;
//! [`decoded_payload`] decodes its payload (without checking it again:
//! the layer has).
//!
//! **Retries and replay window: 8 days.** Apple retries a v2 notification
//! five times, 1, 12, 24, 48 and 72 hours after the previous attempt
//! (157 hours, 6.5 days, in all; production only: a sandbox notification is
//! sent once), "Responding to App Store Server Notifications",
//! <https://developer.apple.com/documentation/appstoreservernotifications/responding-to-app-store-server-notifications>;
//! a day of margin, rounded up. Apple sends nothing again after that: for
//! missed notifications it points to the Get Notification History API
//! (<https://developer.apple.com/documentation/appstoreserverapi/get-notification-history>),
//! which returns the same signed payloads for the past 180 days (30 in the
//! sandbox) to your code, not to the endpoint. To run such a payload through
//! the layer, send it with the layer's operator-replay header (the chain and
//! the app are still checked, the age is not); its claim dedupes it against
//! the delivery that came only while retention keeps the key (8 days by
//! default: ask the API for `onlyFailures`, or set a longer
//! [`Retention`](crate::store::retention::Retention) window for this
//! provider).
//!
//! **Tolerance: 8 days**, the replay window, either way, on the signed
//! `signedDate` (Unix milliseconds, compared to the millisecond). Apple's
//! library checks no age, and the last retry comes 6.5 days after the first
//! attempt (Apple does not say whether a retry is signed afresh); a replay
//! within the window is a duplicate of its claim, and an older one is
//! refused as too old instead of running the handler again once retention
//! has forgotten its key. A payload without `signedDate` is refused (Apple's
//! library would check the chain at the current time instead; every
//! notification carries it).
//!
//! **Handshake:** none (Apple's "Request a Test Notification" sends an
//! ordinary signed `TEST` notification, verified and claimed like any other).
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! payload's signed `signedDate` (Unix milliseconds); a retry keeps the
//! notification's, so an old notification retried late does not look new.
//! For a subscription's state, Apple's nested `signedRenewalInfo` and
//! `signedTransactionInfo` carry their own `signedDate`.

use std::sync::Arc;
use std::time::Duration;

use crate::key::{EventIdentity, KeyError, KeyErrorKind, KeyExtractor};
use crate::providers::Provider;
use crate::verify::{Delivery, KeyMaterialError, SigningSecret, Verifier, VerifyError, VerifyErrorKind};

mod chain;
#[cfg(test)]
mod tests;

/// The CLI name of the preset and the `provider` column of its claims.
pub const NAME: &str = "apple-app-store";

/// How long Apple can send a notification again: 8 days (retries over 157
/// hours, a day of margin, rounded up; see the module docs).
pub const REPLAY_WINDOW: Duration = super::days(8);

/// The signed `signedDate`'s tolerance, both ways: the replay window (see the
/// module docs).
pub const DEFAULT_TOLERANCE: Duration = REPLAY_WINDOW;

/// Apple Root CA - G3 (DER), the root Apple's notification chains end at:
/// <https://www.apple.com/certificateauthority/AppleRootCA-G3.cer>, SHA-256
/// `63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179`.
pub const APPLE_ROOT_CA_G3: &[u8] = include_bytes!("AppleRootCA-G3.cer");

/// The App Store environment a notification comes from
/// (`data.environment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Environment {
    /// `Production`.
    Production,
    /// `Sandbox`.
    Sandbox,
}

/// A trusted root that is not an X.509 certificate with a P-256 or P-384
/// key (DER), or no root at all ([`AppleAppStore::with_roots`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidRoot {
    /// The root's position in the list given; `None` for an empty list.
    pub index: Option<usize>,
}

impl std::fmt::Display for InvalidRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(i) => write!(f, "trusted root #{}: not a DER X.509 certificate with a P-256 or P-384 key", i + 1),
            None => f.write_str("no trusted root given"),
        }
    }
}

impl std::error::Error for InvalidRoot {}

/// Which apps' notifications are accepted.
#[derive(Debug, Clone)]
enum Accept {
    /// None: the registry's provider (a receiver names its app).
    Nothing,
    /// Any app: the registry's example only.
    Anything,
    /// One app in one environment; `app_apple_id` for production.
    App { bundle_id: Arc<str>, environment: Environment, app_apple_id: Option<u64> },
}

/// The App Store preset's settings: the app and environment accepted, the
/// trusted roots, the tolerance.
#[derive(Debug, Clone)]
#[must_use]
pub struct AppleAppStore {
    accept: Accept,
    roots: Arc<[chain::Root]>,
    tolerance: Duration,
}

impl AppleAppStore {
    /// Production notifications of the app `bundle_id` (as App Store Connect
    /// shows it, `com.example.app`) whose Apple ID is `app_apple_id` (the
    /// number in its App Store URL), trusting [`APPLE_ROOT_CA_G3`].
    pub fn production(bundle_id: impl Into<String>, app_apple_id: u64) -> Self {
        Self::accepting(Accept::App {
            bundle_id: bundle_id.into().into(),
            environment: Environment::Production,
            app_apple_id: Some(app_apple_id),
        })
    }

    /// Sandbox notifications of the app `bundle_id`, trusting
    /// [`APPLE_ROOT_CA_G3`].
    pub fn sandbox(bundle_id: impl Into<String>) -> Self {
        Self::accepting(Accept::App {
            bundle_id: bundle_id.into().into(),
            environment: Environment::Sandbox,
            app_apple_id: None,
        })
    }

    fn accepting(accept: Accept) -> Self {
        let root = chain::Root::parse(APPLE_ROOT_CA_G3).expect("the shipped Apple Root CA - G3 parses");
        Self { accept, roots: Arc::new([root]), tolerance: DEFAULT_TOLERANCE }
    }

    /// The same, trusting `roots` (DER certificates) instead of
    /// [`APPLE_ROOT_CA_G3`]: a test chain's root, or Apple's next root with
    /// `APPLE_ROOT_CA_G3` beside it. Every notification's chain must still
    /// end at one of them.
    ///
    /// # Errors
    /// [`InvalidRoot`] for a root that is not a DER X.509 certificate with a
    /// P-256 or P-384 key, or for no root.
    pub fn with_roots(mut self, roots: impl IntoIterator<Item = impl AsRef<[u8]>>) -> Result<Self, InvalidRoot> {
        let parsed = roots
            .into_iter()
            .enumerate()
            .map(|(i, der)| chain::Root::parse(der.as_ref()).ok_or(InvalidRoot { index: Some(i) }))
            .collect::<Result<Vec<_>, _>>()?;
        if parsed.is_empty() {
            return Err(InvalidRoot { index: None });
        }
        self.roots = parsed.into();
        Ok(self)
    }

    setters! {
        /// The signed `signedDate`'s tolerance, both ways (default
        /// [`DEFAULT_TOLERANCE`]).
        pub fn tolerance(tolerance: Duration) => tolerance = tolerance;
    }

    /// Whether the verified `payload` is of the app and environment
    /// accepted (Apple's `_verify_notification`).
    fn accepts(&self, payload: &serde_json::Value) -> bool {
        let Accept::App { bundle_id, environment, app_apple_id } = &self.accept else {
            return matches!(self.accept, Accept::Anything);
        };
        let Some((object, is_token)) =
            ["data", "summary", "externalPurchaseToken", "appData"].iter().find_map(|name| {
                payload.get(name).filter(|v| v.is_object()).map(|v| (v, *name == "externalPurchaseToken"))
            })
        else {
            return false;
        };
        let text = |name: &str| object.get(name).and_then(serde_json::Value::as_str);
        let env = if is_token {
            Some(if text("externalPurchaseId").is_some_and(|id| id.starts_with("SANDBOX")) {
                Environment::Sandbox
            } else {
                Environment::Production
            })
        } else {
            match text("environment") {
                Some("Production") => Some(Environment::Production),
                Some("Sandbox") => Some(Environment::Sandbox),
                _ => None,
            }
        };
        let id = object.get("appAppleId").and_then(serde_json::Value::as_u64);
        text("bundleId") == Some(&**bundle_id)
            && (*environment != Environment::Production || id == *app_apple_id)
            && env == Some(*environment)
    }
}

impl Provider {
    /// Apple App Store Server Notifications v2 (ES256 JWS `signedPayload`,
    /// `x5c` chain to Apple Root CA - G3, one app and environment; key =
    /// `notificationUUID`): see [`crate::providers::apple_app_store`]. It
    /// takes no signing secret (the layer's secrets are not used).
    pub fn apple_app_store(settings: AppleAppStore) -> Self {
        Provider::new(NAME, AppleVerifier(settings), AppleKey)
    }
}

/// The body's `signedPayload`. A body naming a member twice is refused:
/// serde keeps the last value, and a handler's parser might read the first.
fn signed_payload(body: &[u8]) -> Result<String, VerifyError> {
    crate::key::json::parse(body).map_err(|_| VerifyError::new(VerifyErrorKind::MalformedHeader))?;
    let doc: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| VerifyError::new(VerifyErrorKind::MalformedHeader))?;
    match doc.get("signedPayload") {
        Some(serde_json::Value::String(jws)) => Ok(jws.clone()),
        _ => Err(VerifyErrorKind::MissingField.into()),
    }
}

/// The JWS payload of the notification `body` (`{"signedPayload": "<JWS>"}`),
/// decoded: `notificationType`, `subtype`, `notificationUUID`,
/// `signedDate`, `data` (whose `signedTransactionInfo` and
/// `signedRenewalInfo` are JWSs of their own, inside the signed payload), as
/// Apple documents them
/// (<https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2decodedpayload>).
/// Decoding only: call it in the handler, after the layer verified the body.
///
/// # Errors
/// [`VerifyErrorKind::MalformedHeader`] for a body, JWS or payload that does
/// not parse, [`VerifyErrorKind::MissingField`] for a body without
/// `signedPayload`.
pub fn decoded_payload(body: &[u8]) -> Result<serde_json::Value, VerifyError> {
    let jws = signed_payload(body)?;
    let [_, payload, _] = chain::parts(&jws)?;
    serde_json::from_slice(&chain::base64url(payload)?).map_err(|_| VerifyErrorKind::MalformedHeader.into())
}

/// The verifier of [`Provider::apple_app_store`].
struct AppleVerifier(AppleAppStore);

impl Verifier for AppleVerifier {
    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let verified = chain::verify(&signed_payload(delivery.body)?, &self.0.roots)?;
        if !self.0.accepts(&verified.payload) {
            tracing::debug!("apple-app-store: a notification of another app or environment; refused");
            return Err(VerifyErrorKind::NoMatchingSignature.into());
        }
        delivery.check_time_millis(verified.signed_ms, self.0.tolerance)
    }

    /// Three ECDSA verifications: on the blocking pool.
    fn costly(&self, _parts: &http::request::Parts) -> bool {
        true
    }

    /// The preset takes no signing secret: any (or none) is accepted and
    /// unused; the trust anchor is the shipped root.
    fn check_secrets(&self, _secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        Ok(())
    }
}

/// `notificationUUID` as the key, `notificationType[.subtype]` as the type.
struct AppleKey;

impl KeyExtractor for AppleKey {
    fn extract(&self, _parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let payload = decoded_payload(body).map_err(|_| KeyErrorKind::BodyNotJson)?;
        let text = |name: &str| payload.get(name).and_then(serde_json::Value::as_str);
        let key = text("notificationUUID").filter(|k| !k.is_empty()).ok_or(KeyErrorKind::Missing)?.to_owned();
        let event_type = text("notificationType").map(|t| match text("subtype") {
            Some(sub) => format!("{t}.{sub}"),
            None => t.to_owned(),
        });
        Ok(EventIdentity { key, event_type })
    }
}

/// The crate's test chain (`tests/fixtures/providers/apple-app-store/`; not
/// Apple's): root, intermediate, leaf, and the leaf's P-256 key (PKCS #8).
const TEST_ROOT: &[u8] = include_bytes!("../../../tests/fixtures/providers/apple-app-store/test-root.der");
const TEST_INTERMEDIATE: &[u8] =
    include_bytes!("../../../tests/fixtures/providers/apple-app-store/test-intermediate.der");
const TEST_LEAF: &[u8] = include_bytes!("../../../tests/fixtures/providers/apple-app-store/test-leaf.der");
const TEST_LEAF_KEY: &[u8] = include_bytes!("../../../tests/fixtures/providers/apple-app-store/test-leaf-key.der");

/// The compact JWS of `payload` with the header `{"alg","x5c"}`, signed
/// (ES256) with `key`.
fn sign_jws(alg: &str, x5c: &[&[u8]], payload: &serde_json::Value, key: &p256::ecdsa::SigningKey) -> String {
    use base64::Engine as _;
    use p256::ecdsa::signature::Signer as _;
    let (std64, url) = (base64::engine::general_purpose::STANDARD, base64::engine::general_purpose::URL_SAFE_NO_PAD);
    let x5c: Vec<String> = x5c.iter().map(|c| std64.encode(c)).collect();
    let header = serde_json::json!({"alg": alg, "x5c": x5c});
    let input = format!("{}.{}", url.encode(header.to_string()), url.encode(payload.to_string()));
    let signature: p256::ecdsa::Signature = key.sign(input.as_bytes());
    format!("{input}.{}", url.encode(signature.to_bytes()))
}

/// The registry's example: a `TEST`-shaped notification `id` at `at`
/// (`notificationUUID` `id`, `signedDate` `at`; `body` as its `data.note`,
/// lossy UTF-8), signed with the crate's test chain, to a provider trusting
/// the test root and accepting any app.
fn example(id: &str, at: std::time::SystemTime, body: &[u8]) -> super::Example {
    use p256::pkcs8::DecodePrivateKey as _;
    let payload = serde_json::json!({
        "notificationType": "TEST", "notificationUUID": id, "version": "2.0",
        "signedDate": super::unix_millis(at),
        "data": {"bundleId": "com.example.app", "environment": "Sandbox", "note": String::from_utf8_lossy(body)},
    });
    let key = p256::ecdsa::SigningKey::from_pkcs8_der(TEST_LEAF_KEY).expect("the test key");
    let jws = sign_jws("ES256", &[TEST_LEAF, TEST_INTERMEDIATE, TEST_ROOT], &payload, &key);
    let settings = AppleAppStore::accepting(Accept::Anything).with_roots([TEST_ROOT]).expect("the test root");
    // No key material: the chain verifies.
    super::Example {
        provider: Provider::apple_app_store(settings),
        secrets: vec![],
        parts: super::example_parts("/", vec![("content-type", "application/json".to_owned())]),
        body: serde_json::to_vec(&serde_json::json!({ "signedPayload": jws })).expect("JSON"),
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)):
/// its provider accepts **no** app (a receiver names its own,
/// [`AppleAppStore::production`]; `webhook-verify` names the notification's
/// own).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[],
    |_| Provider::apple_app_store(AppleAppStore::accepting(Accept::Nothing)),
    super::ExampleOf::Whole(example),
)
.keys(super::KeyKind::ShippedRoot, super::raw_secret, None)
.signs("ES256 JWS `signedPayload`, `x5c` chain to the shipped Apple Root CA - G3, the app's bundle id and environment")
.key_from("the signed payload's notificationUUID (JWS in the body's signedPayload)")
.fixture(super::Fixture::own(
    "Apple's library's test notification, a real Apple-signed JWS, and the crate's test chain \
     (`tests/fixtures/providers/apple-app-store/`, its body.json accepted by Apple's library 1.9.0), in the \
     module's tests",
));
