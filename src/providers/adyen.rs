//! Adyen (standard notification webhooks): the `hmacSignature` inside each
//! notification item of the JSON body.
//!
//! Scheme (Adyen, "Verify HMAC signatures",
//! <https://docs.adyen.com/development-resources/webhooks/secure-webhooks/verify-hmac-signatures>;
//! the official libraries' `HMACValidator`, e.g. `adyen-java-api-library`
//! `src/main/java/com/adyen/util/HMACValidator.java` and
//! `adyen-node-api-library` `src/utils/hmacValidator.ts`):
//! - the body is `{"live":"false","notificationItems":[{"NotificationRequestItem":{...}}]}`; no
//!   header is involved, so this verifier has no head-only precheck.
//! - each item carries `additionalData.hmacSignature`: the standard base64
//!   of HMAC-SHA256 over the item's `pspReference`, `originalReference`,
//!   `merchantAccountCode`, `merchantReference`, `amount.value`,
//!   `amount.currency`, `eventCode` and `success`, in that order, joined by
//!   `:` (a field that is absent or `null` is the empty text; no escaping,
//!   as the Java and Node libraries build it), as UTF-8.
//! - the key is the webhook's **HMAC key** as Adyen's Customer Area shows it
//!   (Developers > Webhooks > Security): hexadecimal text, **decoded** to
//!   its bytes (64 hex digits are a 32-byte key). Configure the text as
//!   shown; [`AdyenVerifier::check_secrets`] refuses text that is not hex.
//! - **every item must verify**: a body with one item whose signature
//!   matches no configured key is refused whole (401). Adyen's JSON
//!   webhooks carry one item ("JSON and HTTP POST webhooks contain only one
//!   NotificationRequestItem",
//!   <https://docs.adyen.com/development-resources/webhooks/webhook-types>);
//!   a body of more than [`MAX_ITEMS`] items is refused as malformed.
//! - Rotation: after generating a new HMAC key, Adyen may sign with the old
//!   one for a while; configure both (each item may match either).
//!
//! **Signed / not signed:** each item's eight fields above are signed; the
//! rest of the body is **not**: `additionalData` (but its signature),
//! `eventDate`, `reason`, `paymentMethod`, `operations`, `live`. The event
//! key (`pspReference`, `eventCode`, `success`) and the event type
//! (`eventCode`) are signed. Headers are not.
//!
//! **Limit of the scheme:** no time is signed, so a captured notification
//! verifies forever; its key is signed with it, so a replay is a duplicate
//! of the event it copies. Whoever holds one signed item can change the
//! unsigned fields (`reason`, `eventDate`, `additionalData` entries): read
//! business facts from the signed fields or from Adyen's API. Adyen also
//! offers HTTP Basic authentication of the webhook (username and password
//! in its settings); this preset does not check it: wrap its verifier with a
//! [`BasicAuthVerifier`](crate::verify::generic::BasicAuthVerifier) check
//! where you configure one, and declare `Authorization` with
//! [`Provider::credentials_in`](crate::Provider::credentials_in).
//!
//! **Event key.** Adyen has no event id. A notification is identified by the
//! item's `pspReference` (the payment's, or the modification's own for a
//! capture or refund), its `eventCode` and its `success`: Adyen resends the
//! same item on a retry, and the same `pspReference` and `eventCode` can come
//! twice with different outcomes (an `AUTHORISATION` with `success` `false`,
//! then `true`), which are two events. The key is
//! `{pspReference}:{eventCode}:{success}` (`7914073381342284:AUTHORISATION:true`),
//! the items' keys joined by `,` in a body of several; the event type is the
//! first item's `eventCode`.
//!
//! **The answer Adyen needs.** Adyen accepts a notification on any 2xx
//! status ("Accept the webhook message by responding with a successful HTTP
//! response status code, such as 200 or 202",
//! <https://docs.adyen.com/development-resources/webhooks/handle-webhook-events>);
//! older integrations were told to answer the body `[accepted]`, which the
//! handler may still send (`200`, `[accepted]`). The layer answers a
//! duplicate itself, 200 with `Idempotent-Replayed: true` and its own body:
//! a 2xx, so Adyen marks the retry delivered. In inbox mode set
//! [`inbox_ack`](crate::layer::WebhookLayerBuilder::inbox_ack) to
//! `(200, "[accepted]")` if an endpoint still expects that body.
//!
//! **Retries:** a notification not accepted is retried three times at once,
//! then from a retry queue for up to 30 days (2 minutes, ... 8 hours
//! between attempts; Adyen, "Troubleshoot webhooks",
//! <https://docs.adyen.com/development-resources/webhooks/troubleshoot>),
//! hence [`REPLAY_WINDOW`]. **Tolerance:** none; no time is signed.
//! **Handshake:** none (the Customer Area's "Test" sends an ordinary
//! notification).
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! item's `eventDate` (ISO 8601, not signed); Adyen does not promise the
//! order of notifications.

use std::borrow::Cow;
use std::time::Duration;

use crate::key::json::{self, Node};
use crate::key::{EventIdentity, KeyError, KeyErrorKind, KeyExtractor};
use crate::providers::Provider;
use crate::verify::{
    any_matches, check_key_material, hmac_sha256, Delivery, Encoding, KeyMaterialError, KeyMaterialErrorKind,
    SigningSecret, Verifier, VerifyError, VerifyErrorKind,
};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "adyen";

/// How long an Adyen notification can be sent again: 31 days.
///
/// Adyen retries a notification that is not accepted three times at once,
/// then from its retry queue for up to 30 days (Adyen, "Troubleshoot
/// webhooks", <https://docs.adyen.com/development-resources/webhooks/troubleshoot>);
/// the Customer Area can also resend queued ones within that time. The 30
/// days plus a day of margin.
pub const REPLAY_WINDOW: Duration = super::days(31);

/// The most notification items one body may carry: 64. Adyen's JSON
/// webhooks carry one; the cap bounds the HMACs one request costs.
pub const MAX_ITEMS: usize = 64;

/// Verifies every `NotificationRequestItem`'s `additionalData.hmacSignature`
/// with the configured HMAC keys (hex text, decoded).
#[derive(Debug, Clone, Copy, Default)]
#[must_use]
pub struct AdyenVerifier;

impl AdyenVerifier {
    /// The verifier (no setting: no time is signed).
    pub fn new() -> Self {
        Self
    }
}

/// One item: the eight signed fields, each as Adyen's libraries write it,
/// and its signature's bytes (`None` when absent).
struct Item<'a> {
    fields: [Cow<'a, str>; 8],
    signature: Option<Vec<u8>>,
}

/// A member of an object, if the node is one.
fn member<'n, 'a>(node: &'n Node<'a>, name: &str) -> Option<&'n Node<'a>> {
    match node {
        Node::Object(members) => members.iter().find(|(n, _)| n == name).map(|(_, v)| v),
        _ => None,
    }
}

/// A text field: a JSON string, or the empty text when absent or `null`.
fn text<'a>(node: Option<&Node<'a>>) -> Result<Cow<'a, str>, VerifyError> {
    match node {
        None | Some(Node::Null) => Ok(Cow::Borrowed("")),
        Some(Node::String(s)) => Ok(s.clone()),
        Some(_) => Err(VerifyErrorKind::MalformedHeader.into()),
    }
}

/// `amount.value`: an integer literal (minor units) or its text.
fn value<'a>(node: Option<&Node<'a>>) -> Result<Cow<'a, str>, VerifyError> {
    match node {
        Some(Node::Number(n)) => {
            let digits = n.strip_prefix('-').unwrap_or(n);
            if digits.bytes().all(|b| b.is_ascii_digit()) {
                Ok(Cow::Borrowed(*n))
            } else {
                Err(VerifyErrorKind::MalformedHeader.into())
            }
        }
        other => text(other),
    }
}

/// `success`: `"true"` / `"false"` (Adyen sends text; a JSON boolean is read
/// as the same text, as the Java library's `String.valueOf` writes it).
fn success<'a>(node: Option<&Node<'a>>) -> Result<Cow<'a, str>, VerifyError> {
    match node {
        Some(Node::Bool(b)) => Ok(Cow::Borrowed(if *b { "true" } else { "false" })),
        other => text(other),
    }
}

/// The items of a notification body.
///
/// # Errors
/// [`VerifyErrorKind::MalformedHeader`] for a body that is not strict JSON
/// (a repeated member included), items that are not objects, a signed field
/// of the wrong type, no item, or more than [`MAX_ITEMS`];
/// [`VerifyErrorKind::MissingField`] without `notificationItems`.
fn items<'a>(root: &Node<'a>) -> Result<Vec<Item<'a>>, VerifyError> {
    let malformed = || VerifyError::from(VerifyErrorKind::MalformedHeader);
    if !matches!(root, Node::Object(_)) {
        return Err(malformed());
    }
    let Some(list) = member(root, "notificationItems") else { return Err(VerifyErrorKind::MissingField.into()) };
    let Node::Array(list) = list else { return Err(malformed()) };
    if list.is_empty() || list.len() > MAX_ITEMS {
        return Err(malformed());
    }
    list.iter()
        .map(|entry| {
            let item = member(entry, "NotificationRequestItem").ok_or_else(malformed)?;
            if !matches!(item, Node::Object(_)) {
                return Err(malformed());
            }
            let amount = member(item, "amount");
            let field = |name| text(member(item, name));
            let fields = [
                field("pspReference")?,
                field("originalReference")?,
                field("merchantAccountCode")?,
                field("merchantReference")?,
                value(amount.and_then(|a| member(a, "value")))?,
                text(amount.and_then(|a| member(a, "currency")))?,
                field("eventCode")?,
                success(member(item, "success"))?,
            ];
            let signature = match member(item, "additionalData").and_then(|d| member(d, "hmacSignature")) {
                None | Some(Node::Null) => None,
                Some(Node::String(s)) => {
                    Some(Encoding::Base64.decode(s).filter(|t| t.len() == 32).ok_or_else(malformed)?)
                }
                Some(_) => return Err(malformed()),
            };
            Ok(Item { fields, signature })
        })
        .collect()
}

/// The signed text of an item: its eight fields joined by `:`.
fn signed_text(fields: &[impl AsRef<str>; 8]) -> String {
    fields.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(":")
}

/// The HMAC key a configured secret stands for: its hex text decoded
/// (cached on the secret); `None` when it is not hex.
fn key_of(secret: &SigningSecret) -> std::sync::Arc<Option<SigningSecret>> {
    secret.parsed(|text| hex::decode(text).ok().filter(|k| !k.is_empty()).map(SigningSecret::new))
}

impl Verifier for AdyenVerifier {
    /// Every secret must be the HMAC key's hex text (either case), as the
    /// Customer Area shows it.
    ///
    /// # Errors
    /// [`KeyMaterialErrorKind::NoSecret`], [`KeyMaterialErrorKind::Empty`],
    /// or [`KeyMaterialErrorKind::Malformed`] for text that is not hex
    /// (a trailing newline included).
    fn check_secrets(&self, secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        check_key_material(secrets)?;
        match secrets.iter().position(|s| key_of(s).is_none()) {
            Some(i) => Err(KeyMaterialError::new(
                KeyMaterialErrorKind::Malformed,
                Some(i),
                "the Adyen HMAC key is hexadecimal text: copy it as the Customer Area shows it",
            )),
            None => Ok(()),
        }
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let root = json::parse(delivery.body).map_err(|_| VerifyErrorKind::MalformedHeader)?;
        let items = items(&root)?;
        // A secret that is not hex is no key: it matches nothing (the layer
        // refuses it before, in `check_secrets`).
        let keys: Vec<_> = delivery.require_secrets()?.iter().map(key_of).collect();
        for item in &items {
            let signature = item.signature.as_deref().ok_or(VerifyErrorKind::MissingField)?;
            let text = signed_text(&item.fields);
            let mut matched = false;
            for key in keys.iter().filter_map(|k| k.as_ref().as_ref()) {
                matched |= any_matches(&hmac_sha256(key, &[text.as_bytes()]), [signature]);
            }
            if !matched {
                return Err(VerifyErrorKind::NoMatchingSignature.into());
            }
        }
        Ok(())
    }
}

/// The `hmacSignature` Adyen would send for an item of these eight fields
/// (`pspReference`, `originalReference`, `merchantAccountCode`,
/// `merchantReference`, `amount.value`, `amount.currency`, `eventCode`,
/// `success`), with the HMAC key `hex_key` (its hex text): standard base64.
/// For tests and fixtures.
///
/// # Panics
/// When `hex_key` is not hex.
pub fn sign(hex_key: &str, fields: &[&str; 8]) -> String {
    let key = SigningSecret::new(hex::decode(hex_key).expect("an Adyen HMAC key is hex"));
    Encoding::Base64.encode(&hmac_sha256(&key, &[signed_text(fields).as_bytes()]))
}

/// Reads the key `{pspReference}:{eventCode}:{success}` of each item
/// (joined by `,`) and the first item's `eventCode` as the type.
#[derive(Debug, Clone, Copy, Default)]
pub struct AdyenKey;

impl KeyExtractor for AdyenKey {
    /// # Errors
    /// [`KeyErrorKind::BodyNotJson`] for a body that is not strict JSON,
    /// [`KeyErrorKind::Missing`] without items or an item without
    /// `pspReference` or `eventCode`, [`KeyErrorKind::Invalid`] for fields of
    /// the wrong type.
    fn extract(&self, _parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let root = json::parse(body).map_err(KeyError::from)?;
        let items = items(&root).map_err(|e| match e.kind() {
            VerifyErrorKind::MissingField => KeyErrorKind::Missing,
            _ => KeyErrorKind::Invalid,
        })?;
        let mut keys = Vec::with_capacity(items.len());
        for item in &items {
            let [psp, _, _, _, _, _, code, success] = &item.fields;
            if psp.is_empty() || code.is_empty() {
                return Err(KeyErrorKind::Missing.into());
            }
            keys.push(format!("{psp}:{code}:{success}"));
        }
        let event_type = Some(items[0].fields[6].to_string());
        Ok(EventIdentity { key: keys.join(","), event_type })
    }
}

impl Provider {
    /// Adyen (`hmacSignature` of each notification item, hex HMAC key; key =
    /// `pspReference:eventCode:success`). See [`crate::providers::adyen`].
    ///
    /// The Adyen standard-notification preset: [`AdyenVerifier`] (every item
    /// verified), key [`AdyenKey`], type = `eventCode`.
    pub fn adyen() -> Self {
        Provider::new(NAME, AdyenVerifier::new(), AdyenKey)
    }
}

/// The example's HMAC key (hex), for [`PRESET`]'s signed example.
const EXAMPLE_HEX_KEY: &str = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";

/// A notification body of one item with `psp` as its `pspReference` and
/// `reference` as its `merchantReference`, signed with `hex_key`.
fn example_body(hex_key: &str, psp: &str, reference: &str) -> Vec<u8> {
    let fields = [psp, "", "TestMerchant", reference, "1130", "EUR", "AUTHORISATION", "true"];
    let item = serde_json::json!({
        "pspReference": psp,
        "merchantAccountCode": "TestMerchant",
        "merchantReference": reference,
        "amount": { "value": 1130, "currency": "EUR" },
        "eventCode": "AUTHORISATION",
        "success": "true",
        "additionalData": { "hmacSignature": sign(hex_key, &fields) },
    });
    serde_json::json!({ "live": "false", "notificationItems": [{ "NotificationRequestItem": item }] })
        .to_string()
        .into_bytes()
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
/// [`PresetInfo::secret`](super::PresetInfo::secret) of this preset: the
/// HMAC key as the Customer Area shows it, checked to be hexadecimal.
fn hex_text(text: &str) -> Result<SigningSecret, super::KeyTextError> {
    match hex::decode(text) {
        Ok(key) if !key.is_empty() => Ok(SigningSecret::from(text)),
        _ => Err(super::key_error("adyen: the HMAC key is hexadecimal text, as the Customer Area shows it")),
    }
}

/// [`PresetInfo::sign`](super::PresetInfo::sign) for Adyen: each item of the
/// notification `body` (JSON, Adyen's shape) gets the `hmacSignature` of its
/// eight fields with the hex HMAC `key`; the body is sent re-serialised.
fn send(key: &str, d: &super::Signing<'_>) -> Result<super::Example, super::SignError> {
    let secret = hex_text(key)?;
    let not_adyen = || super::SignError::body("adyen: the body is not a notification (JSON with notificationItems)");
    let root = crate::key::json::parse(d.body).map_err(|_| super::SignError::body("adyen: the body is not JSON"))?;
    let fields: Vec<[String; 8]> =
        items(&root).map_err(|_| not_adyen())?.iter().map(|item| item.fields.clone().map(Cow::into_owned)).collect();
    let mut body: serde_json::Value = serde_json::from_slice(d.body).map_err(|_| not_adyen())?;
    let list = body["notificationItems"].as_array_mut().ok_or_else(not_adyen)?;
    for (entry, fields) in list.iter_mut().zip(&fields) {
        let fields: [&str; 8] = std::array::from_fn(|i| fields[i].as_str());
        entry["NotificationRequestItem"]["additionalData"]["hmacSignature"] = sign(key, &fields).into();
    }
    let headers = vec![("content-type", "application/json".to_owned())];
    super::signed_delivery(Provider::adyen(), secret, d, headers, body.to_string().into_bytes())
}

pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[],
    |_| Provider::adyen(),
    super::ExampleOf::Whole(|id, _, body| {
        // The signature is in the body: the example's body is the signed one.
        let psp = if id.is_empty() { "0000000000000000" } else { id };
        let signed = example_body(EXAMPLE_HEX_KEY, psp, &String::from_utf8_lossy(body));
        super::Example {
            provider: Provider::adyen(),
            secrets: vec![SigningSecret::from(EXAMPLE_HEX_KEY)],
            parts: super::example_parts("/", vec![("content-type", "application/json".to_owned())]),
            body: signed,
        }
    }),
)
.sends(send)
.signs("each item's `additionalData.hmacSignature`: base64 HMAC-SHA256 (hex key) of 8 fields joined by `:`")
.key_from("each item's pspReference:eventCode:success (JSON)")
.fixture(super::Fixture::own("the signature is in the body (`vectors.json`)"))
.keys(super::KeyKind::HexSecret, hex_text, None);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_body_identity, fixture_json, headers, NOW};
    use crate::verify::VerifyErrorKind::{MalformedHeader, MissingField, NoMatchingSignature, NoSecret};

    const KEY: &str = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00";

    fn check(body: &[u8], secrets: &[SigningSecret]) -> Result<(), VerifyErrorKind> {
        let p = headers(&[("content-type", "application/json")]);
        AdyenVerifier::new()
            .verify(&Delivery::new(&p, body, secrets, crate::test_support::at(NOW)))
            .map_err(|e| e.kind())
    }

    /// The item of Adyen's Node library test, as JSON, with `signature`.
    fn node_item(signature: &str) -> serde_json::Value {
        serde_json::json!({
            "pspReference": "pspReference", "originalReference": "originalReference",
            "merchantAccountCode": "merchantAccount", "merchantReference": "reference",
            "amount": { "currency": "EUR", "value": 1000 }, "eventCode": "CAPTURE",
            "eventDate": "1970-01-01T00:00:00.000Z", "paymentMethod": "VISA", "reason": "reason",
            "success": "true", "additionalData": { "hmacSignature": signature }
        })
    }

    fn body_of(items: &[serde_json::Value]) -> Vec<u8> {
        let items: Vec<_> = items.iter().map(|i| serde_json::json!({ "NotificationRequestItem": i })).collect();
        serde_json::json!({ "live": "false", "notificationItems": items }).to_string().into_bytes()
    }

    /// The vectors the official libraries' tests publish (Node, Ruby, PHP),
    /// from `vectors.json`: the signed text and the signature; and the Node
    /// test's item, as a whole body, verifies.
    #[test]
    fn sdk_test_vectors() {
        let doc: serde_json::Value = fixture_json("adyen/vectors.json");
        for v in doc["sdk_vectors"].as_array().unwrap() {
            let text = v["signed_text"].as_str().unwrap();
            let fields: Vec<&str> = text.split(':').collect();
            let fields: [&str; 8] = fields.try_into().expect("eight fields");
            assert_eq!(sign(v["key"].as_str().unwrap(), &fields), v["signature"].as_str().unwrap(), "{}", v["source"]);
        }
        let body = body_of(&[node_item("xhpHvYq2u2Np0rstbZ6QjLGu7JWhvf7Iwaa6EviJSX0=")]);
        assert_eq!(check(&body, &[SigningSecret::from(KEY)]), Ok(()));
        assert_eq!(
            check(&body_of(&[node_item("bm90VmFsaWRTaWdu")]), &[SigningSecret::from(KEY)]),
            Err(MalformedHeader)
        );
    }

    /// The formula fixture (`scripts/fixtures/adyen.py`): a whole body with
    /// unsigned fields and non-ASCII signed ones verifies, its key is read,
    /// and a signed field changed fails.
    #[test]
    fn formula_fixture() {
        let doc: serde_json::Value = fixture_json("adyen/vectors.json");
        assert_eq!(doc["sdk_verified"], serde_json::json!(false));
        let body = doc["body"].as_str().unwrap().as_bytes();
        let key = [SigningSecret::from(doc["hmac_key"].as_str().unwrap())];
        assert_eq!(check(body, &key), Ok(()));
        assert_key(body, doc["event_id"].as_str().unwrap(), doc["event_type"].as_str());
        let changed = String::from_utf8(body.to_vec()).unwrap().replace("order-ünïcödé-42", "order-ünïcödé-43");
        assert_eq!(check(changed.as_bytes(), &key), Err(NoMatchingSignature));
        let lower = [SigningSecret::from(doc["hmac_key"].as_str().unwrap().to_lowercase())];
        assert_eq!(check(body, &lower), Ok(()), "the key's hex in lower case");
    }

    fn assert_key(body: &[u8], key: &str, event_type: Option<&str>) {
        assert_body_identity(&Provider::adyen(), body, key, event_type);
    }

    #[test]
    fn verifies_and_rejects() {
        let good_sig = "xhpHvYq2u2Np0rstbZ6QjLGu7JWhvf7Iwaa6EviJSX0=";
        let good = node_item(good_sig);
        let with = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut item = good.clone();
            f(&mut item);
            body_of(&[item])
        };
        let other_item = {
            let mut item = good.clone();
            item["pspReference"] = "second".into();
            let fields =
                ["second", "originalReference", "merchantAccount", "reference", "1000", "EUR", "CAPTURE", "true"];
            item["additionalData"]["hmacSignature"] = sign(KEY, &fields).into();
            item
        };
        let valid = body_of(std::slice::from_ref(&good));
        let text = String::from_utf8(valid.clone()).unwrap();
        let key = [SigningSecret::from(KEY)];
        let cases: Vec<(&str, Vec<u8>, Vec<SigningSecret>, Result<(), VerifyErrorKind>)> = vec![
            ("valid", valid.clone(), key.to_vec(), Ok(())),
            ("rotation: another key first", valid.clone(), vec![SigningSecret::from("00ff"), key[0].clone()], Ok(())),
            ("wrong key", valid.clone(), vec![SigningSecret::from("00ff")], Err(NoMatchingSignature)),
            ("key as text, not decoded", valid.clone(), vec![SigningSecret::from("not hex")], Err(NoMatchingSignature)),
            ("no secret", valid.clone(), vec![], Err(NoSecret)),
            (
                "signed value changed",
                with(&|i| i["amount"]["value"] = 1001.into()),
                key.to_vec(),
                Err(NoMatchingSignature),
            ),
            (
                "signed success changed",
                with(&|i| i["success"] = "false".into()),
                key.to_vec(),
                Err(NoMatchingSignature),
            ),
            ("unsigned reason changed", with(&|i| i["reason"] = "other".into()), key.to_vec(), Ok(())),
            ("value as text", with(&|i| i["amount"]["value"] = "1000".into()), key.to_vec(), Ok(())),
            ("success as a boolean", with(&|i| i["success"] = true.into()), key.to_vec(), Ok(())),
            (
                "value with a fraction",
                with(&|i| i["amount"]["value"] = 1000.5.into()),
                key.to_vec(),
                Err(MalformedHeader),
            ),
            (
                "no originalReference: empty",
                with(&|i| i["originalReference"] = serde_json::Value::Null),
                key.to_vec(),
                Err(NoMatchingSignature),
            ),
            (
                "no hmacSignature",
                with(&|i| i["additionalData"] = serde_json::json!({})),
                key.to_vec(),
                Err(MissingField),
            ),
            (
                "signature not base64",
                with(&|i| i["additionalData"]["hmacSignature"] = "!!".into()),
                key.to_vec(),
                Err(MalformedHeader),
            ),
            (
                "signature of 20 bytes",
                with(&|i| i["additionalData"]["hmacSignature"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAA=".into()),
                key.to_vec(),
                Err(MalformedHeader),
            ),
            ("pspReference a number", with(&|i| i["pspReference"] = 7.into()), key.to_vec(), Err(MalformedHeader)),
            ("two items, both signed", body_of(&[good.clone(), other_item.clone()]), key.to_vec(), Ok(())),
            (
                "two items, the second forged",
                body_of(&[other_item.clone(), with_sig(&good, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")]),
                key.to_vec(),
                Err(NoMatchingSignature),
            ),
            ("no items", br#"{"live":"false","notificationItems":[]}"#.to_vec(), key.to_vec(), Err(MalformedHeader)),
            ("no notificationItems", br#"{"live":"false"}"#.to_vec(), key.to_vec(), Err(MissingField)),
            ("too many items", body_of(&vec![good.clone(); MAX_ITEMS + 1]), key.to_vec(), Err(MalformedHeader)),
            (
                "an item not wrapped",
                br#"{"notificationItems":[{"pspReference":"x"}]}"#.to_vec(),
                key.to_vec(),
                Err(MalformedHeader),
            ),
            (
                "repeated member",
                text.replacen("\"live\":\"false\"", "\"live\":\"false\",\"live\":\"true\"", 1).into_bytes(),
                key.to_vec(),
                Err(MalformedHeader),
            ),
            ("not JSON", b"pspReference=x".to_vec(), key.to_vec(), Err(MalformedHeader)),
            ("an array body", b"[]".to_vec(), key.to_vec(), Err(MalformedHeader)),
        ];
        for (name, body, secrets, want) in cases {
            assert_eq!(check(&body, &secrets), want, "{name}");
        }
    }

    fn with_sig(item: &serde_json::Value, signature: &str) -> serde_json::Value {
        let mut item = item.clone();
        item["additionalData"]["hmacSignature"] = signature.into();
        item
    }

    #[test]
    fn check_secrets_wants_hex() {
        use KeyMaterialErrorKind as K;
        let cases: Vec<(&str, Vec<SigningSecret>, Result<(), (K, Option<usize>)>)> = vec![
            ("hex", vec![SigningSecret::from(KEY)], Ok(())),
            ("lower-case hex", vec![SigningSecret::from(KEY.to_lowercase())], Ok(())),
            ("none", vec![], Err((K::NoSecret, None))),
            ("empty", vec![SigningSecret::from("")], Err((K::Empty, Some(0)))),
            ("a trailing newline", vec![SigningSecret::from(format!("{KEY}\n"))], Err((K::Malformed, Some(0)))),
            ("odd length", vec![SigningSecret::from(KEY), SigningSecret::from("abc")], Err((K::Malformed, Some(1)))),
            ("not hex", vec![SigningSecret::from("my-hmac-key")], Err((K::Malformed, Some(0)))),
        ];
        for (name, secrets, want) in cases {
            let got = AdyenVerifier::new().check_secrets(&secrets).map_err(|e| (e.kind(), e.index()));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn key_and_type() {
        let good = node_item("xhpHvYq2u2Np0rstbZ6QjLGu7JWhvf7Iwaa6EviJSX0=");
        assert_key(&body_of(std::slice::from_ref(&good)), "pspReference:CAPTURE:true", Some("CAPTURE"));
        let mut failed = good.clone();
        failed["success"] = "false".into();
        assert_key(&body_of(&[failed]), "pspReference:CAPTURE:false", Some("CAPTURE"));
        let mut second = good.clone();
        second["pspReference"] = "second".into();
        assert_key(&body_of(&[good.clone(), second]), "pspReference:CAPTURE:true,second:CAPTURE:true", Some("CAPTURE"));
        let p = headers(&[]);
        let mut no_psp = good.clone();
        no_psp["pspReference"] = serde_json::Value::Null;
        let cases: Vec<(&str, Vec<u8>, KeyErrorKind)> = vec![
            ("no pspReference", body_of(&[no_psp]), KeyErrorKind::Missing),
            ("no items member", br#"{"live":"false"}"#.to_vec(), KeyErrorKind::Missing),
            ("not JSON", b"x".to_vec(), KeyErrorKind::BodyNotJson),
            ("items not a list", br#"{"notificationItems":{}}"#.to_vec(), KeyErrorKind::Invalid),
        ];
        for (name, body, want) in cases {
            assert_eq!(AdyenKey.extract(&p, &body).map_err(|e| e.kind()).unwrap_err(), want, "{name}");
        }
        assert_eq!(Provider::adyen().name(), NAME);
    }
}
