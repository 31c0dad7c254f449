//! Mailgun: the `signature` object inside the JSON body.
//!
//! Scheme (Mailgun, "Securing Webhooks",
//! <https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks>):
//! - the body is `{"signature":{"timestamp":"...","token":"...",
//!   "signature":"<hex HMAC-SHA256>"},"event-data":{...}}`; no header is
//!   involved, so this verifier has no head-only precheck.
//! - the signature is the hex HMAC-SHA256 of `timestamp` and `token`
//!   concatenated without a separator, keyed with the domain's **HTTP webhook
//!   signing key** (Sending, Webhooks) as its bytes.
//! - for a domain of a subaccount the object also carries
//!   `parent-signature`, the same HMAC keyed with the primary account's
//!   signing key: either value may match any configured key, so a receiver of
//!   many subaccounts can configure the parent's key alone.
//! - `timestamp` is Unix seconds (a string; an integer is accepted too).
//!   Mailgun: "optionally, you can check if the timestamp is not too far from
//!   the current time. There can be delays in webhook processing that are
//!   outside of Mailgun's control so you don't want to be too aggressive with
//!   this check." Mailgun's Python SDK (`mailgun` on PyPI,
//!   `SecurityGuard.verify_webhook`) allows 900 seconds either way; this
//!   crate's default is the same 900 seconds, configurable with
//!   [`MailgunVerifier::tolerance`].
//! - Rotation: Mailgun shows one signing key; after rotating it, configure
//!   the old and the new key until deliveries signed with the old one stop.
//!
//! **Limit of the scheme:** the signature covers `timestamp` and `token`
//! only, not `event-data`. Whoever captured one delivery can, within the
//! tolerance, send its `signature` object with any `event-data` (another
//! `id`, so it is claimed as a new event). Mailgun's advice is to remember
//! tokens and refuse one seen before; here the claim remembers event ids,
//! not tokens. Keep the tolerance short, serve the endpoint over TLS only
//! and, where it matters, check Mailgun's TLS client certificate or fetch
//! the event back from the Events API before acting on it.
//!
//! **Event key.** `event-data.id`, Mailgun's unique event id, which a retry
//! keeps; the event type is `event-data.event` (`delivered`, `opened`, ...).
//! (Mailgun, "Webhooks", payload and "Automatic Retries".)
//!
//! **Signed / not signed**
//! (<https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks>):
//! only the `signature` object's `timestamp` and `token` are signed. The rest
//! of the body is **not signed**: the event key (`event-data.id`) and the event
//! type (`event-data.event`) can be changed by whoever holds one signed
//! `signature` object (see the limit above). Headers are not signed.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): `event-
//! data.timestamp` (Unix seconds with a fraction: scale it to microseconds).

use crate::providers::Provider;
use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::verify::{
    hmac_sha256, match_any_secret, parse_unix_seconds, Delivery, SigningSecret, Verifier, VerifyError, VerifyErrorKind,
};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "mailgun";
/// How long a Mailgun event can be sent again: 1 day.
///
/// Mailgun retries a failed webhook POST (not the delivery notification)
/// during 8 hours, after 5, 10 and 15 minutes, then 1, 2 and 4 hours; a 406
/// answer stops the retries (Mailgun, "Automatic Retries",
/// <https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-retries>).
/// No manual redelivery is documented. A day covers the 8 hours with a
/// margin.
pub const REPLAY_WINDOW: std::time::Duration = super::days(1);

/// Default tolerance: 900 seconds, as Mailgun's Python SDK.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(900);

timed_verifier! {
    /// Verifies the `signature` object of a Mailgun webhook body.
    pub struct MailgunVerifier;
    /// A verifier with the default tolerance of 900 seconds.
    fn new();
    /// Sets how far (both directions) `signature.timestamp` may be from now.
    fn tolerance();
}

/// The fields of the `signature` object this scheme uses.
#[derive(Debug, Default, PartialEq, Eq)]
struct SignatureObject {
    timestamp: Option<String>,
    token: Option<String>,
    signature: Option<String>,
    parent_signature: Option<String>,
}

/// The body, reduced to its `signature` object; everything else is skipped
/// without being stored.
#[derive(Debug)]
struct Envelope {
    signature: Option<SignatureObject>,
}

/// A member name of either object (serde's field identifier: any other
/// name is `Other`, skipped).
#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "kebab-case")]
enum Field {
    Signature,
    ParentSignature,
    Timestamp,
    Token,
    #[serde(other)]
    Other,
}

/// `timestamp` as its decimal text, from a JSON string or a non-negative
/// integer.
struct Timestamp(String);

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TimestampVisitor;
        impl Visitor<'_> for TimestampVisitor {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("Unix seconds as a string or an integer")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Timestamp, E> {
                Ok(Timestamp(v.to_owned()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Timestamp, E> {
                Ok(Timestamp(v.to_string()))
            }
        }
        deserializer.deserialize_any(TimestampVisitor)
    }
}

fn set<T, E: de::Error>(slot: &mut Option<T>, value: T, name: &'static str) -> Result<(), E> {
    // A repeated member makes the object ambiguous.
    if slot.replace(value).is_some() {
        return Err(E::duplicate_field(name));
    }
    Ok(())
}

// Both objects are read by hand, not by serde's derive: a derived struct is
// also read from a JSON array by position (serde_json's `deserialize_struct`),
// so `{"signature":["<ts>","<token>","<hex>",null]}` and a body of `[{...}]`
// would verify, and a derived `Option` takes a `null` member as absent. Here
// only objects are read, and a repeated member is refused.
impl<'de> Deserialize<'de> for SignatureObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = SignatureObject;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the signature object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SignatureObject, A::Error> {
                let mut out = SignatureObject::default();
                while let Some(field) = map.next_key::<Field>()? {
                    match field {
                        Field::Timestamp => set(&mut out.timestamp, map.next_value::<Timestamp>()?.0, "timestamp")?,
                        Field::Token => set(&mut out.token, map.next_value::<String>()?, "token")?,
                        Field::Signature => set(&mut out.signature, map.next_value::<String>()?, "signature")?,
                        Field::ParentSignature => {
                            if let Some(sig) = map.next_value::<Option<String>>()? {
                                set(&mut out.parent_signature, sig, "parent-signature")?;
                            }
                        }
                        Field::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(ObjectVisitor)
    }
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EnvelopeVisitor;
        impl<'de> Visitor<'de> for EnvelopeVisitor {
            type Value = Envelope;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Mailgun webhook object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
                let mut signature = None;
                while let Some(field) = map.next_key::<Field>()? {
                    if let Field::Signature = field {
                        set(&mut signature, map.next_value::<SignatureObject>()?, "signature")?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Envelope { signature })
            }
        }
        deserializer.deserialize_map(EnvelopeVisitor)
    }
}

/// The signed fields and every decodable signature (`signature`,
/// `parent-signature`).
#[derive(Debug, PartialEq, Eq)]
struct Signed {
    timestamp: String,
    seconds: u64,
    token: String,
    signatures: Vec<[u8; 32]>,
}

fn parse(body: &[u8]) -> Result<Signed, VerifyError> {
    let envelope: Envelope = serde_json::from_slice(body).map_err(|_| VerifyErrorKind::MalformedHeader)?;
    let object = envelope.signature.ok_or(VerifyErrorKind::MissingField)?;
    let (Some(timestamp), Some(token)) = (object.timestamp, object.token) else {
        return Err(VerifyErrorKind::MalformedHeader.into());
    };
    let seconds = parse_unix_seconds(&timestamp)?;
    let signatures: Vec<[u8; 32]> = [object.signature, object.parent_signature]
        .into_iter()
        .flatten()
        .filter_map(|text| {
            let mut sig = [0u8; 32];
            hex::decode_to_slice(&text, &mut sig).ok().map(|()| sig)
        })
        .collect();
    if signatures.is_empty() {
        return Err(VerifyErrorKind::MalformedHeader.into());
    }
    Ok(Signed { timestamp, seconds, token, signatures })
}

impl Verifier for MailgunVerifier {
    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let signed = parse(delivery.body)?;
        delivery.check_time(signed.seconds, self.tolerance)?;
        match_any_secret(delivery, signed.signatures.iter().map(|s| &s[..]), |secret| {
            hmac_sha256(secret, &[signed.timestamp.as_bytes(), signed.token.as_bytes()])
        })
    }
}

/// The `signature.signature` value Mailgun would send for `timestamp` (Unix
/// seconds) and `token` with `secret`: lower-case hex. For tests and fixtures.
pub fn sign(secret: &SigningSecret, timestamp: u64, token: &str) -> String {
    hex::encode(hmac_sha256(secret, &[timestamp.to_string().as_bytes(), token.as_bytes()]))
}

/// A whole webhook body as Mailgun would send it:
/// `{"signature":{"timestamp","token","signature"},"event-data":event_data}`.
/// For tests, fixtures and benches.
pub fn signed_body(secret: &SigningSecret, timestamp: u64, token: &str, event_data: &serde_json::Value) -> String {
    serde_json::json!({
        "signature": {
            "timestamp": timestamp.to_string(),
            "token": token,
            "signature": sign(secret, timestamp, token),
        },
        "event-data": event_data,
    })
    .to_string()
}

impl crate::providers::Provider {
    /// Mailgun (signature in the body, 900 s; key = `event-data.id`). See [`crate::providers::mailgun`].
    ///
    /// The Mailgun preset: [`MailgunVerifier`] (900 s), key = `event-data.id`,
    /// type = `event-data.event`. The CLI name is `mailgun`.
    pub fn mailgun() -> Self {
        super::json_keyed(NAME, MailgunVerifier::new(), "/event-data/id", "/event-data/event")
    }
}

/// [`PresetInfo::sign`](super::PresetInfo::sign) for Mailgun: the body
/// (a JSON object, Mailgun's `{"event-data": ...}`) gets a `signature`
/// object for the signing time and a token (the id, or one derived from the
/// body and the time); it is sent re-serialised.
fn send(key: &str, d: &super::Signing<'_>) -> Result<super::Example, super::SignError> {
    let mut body: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(d.body)
        .map_err(|_| super::SignError::body("mailgun: the body is a JSON object (Mailgun's event-data)"))?;
    let secret = SigningSecret::from(key);
    let ts = super::unix_seconds(d.at);
    let token = if d.id.is_empty() {
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest([d.body, ts.to_string().as_bytes()].concat()))[..50]
            .to_owned()
    } else {
        d.id.to_owned()
    };
    let signature =
        serde_json::json!({"timestamp": ts.to_string(), "token": token, "signature": sign(&secret, ts, &token)});
    body.insert("signature".to_owned(), signature);
    let headers = vec![("content-type", "application/json".to_owned())];
    let body = serde_json::Value::Object(body).to_string().into_bytes();
    super::signed_delivery(Provider::mailgun(), secret, d, headers, body)
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    "mailgun",
    REPLAY_WINDOW,
    &[],
    |_| Provider::mailgun(),
    super::ExampleOf::Whole(|id, at, body| {
        // The signature is in the body: the example's body is the signed one.
        let event = serde_json::json!({ "id": id, "pad": String::from_utf8_lossy(body) });
        let signed = signed_body(&super::example_secret(), super::unix_seconds(at), "token-0123456789", &event);
        let headers = vec![("content-type", "application/json".to_owned())];
        super::hmac_example(Provider::mailgun(), signed.as_bytes(), headers)
    }),
)
.sends(send)
.signs("body `signature`: hex HMAC-SHA256 of timestamp + token")
.key_from("the body's event-data.id (JSON)")
.fixture(super::Fixture::own("the signature is in the body (`sdk.json`)"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fixture_json;
    use crate::test_support::{at, NOW};

    fn head() -> http::request::Parts {
        http::Request::builder().header("content-type", "application/json").body(()).unwrap().into_parts().0
    }

    fn check(v: &MailgunVerifier, body: &[u8], secrets: &[SigningSecret], now: u64) -> Result<(), VerifyErrorKind> {
        let p = head();
        v.verify(&Delivery::new(&p, body, secrets, at(now))).map_err(|e| e.kind())
    }

    /// Fixture from `scripts/fixtures/mailgun.py`: signed as Mailgun's docs
    /// show and accepted by `SecurityGuard.verify_webhook` of the official
    /// `mailgun==1.10.0` Python SDK.
    #[test]
    fn sdk_fixture() {
        let doc: serde_json::Value = fixture_json("mailgun/sdk.json");
        let secret = SigningSecret::from(doc["signing_key"].as_str().unwrap());
        let parent = SigningSecret::from(doc["parent_signing_key"].as_str().unwrap());
        for name in ["delivered", "subaccount"] {
            let case = &doc[name];
            assert_eq!(case["sdk"], "valid", "{name}");
            let body = case["body"].as_str().unwrap().as_bytes();
            let sig = &serde_json::from_slice::<serde_json::Value>(body).unwrap()["signature"];
            let ts: u64 = sig["timestamp"].as_str().unwrap().parse().unwrap();
            assert_eq!(sign(&secret, ts, sig["token"].as_str().unwrap()), sig["signature"].as_str().unwrap());
            let v = MailgunVerifier::new();
            assert_eq!(check(&v, body, std::slice::from_ref(&secret), ts + 60), Ok(()), "{name}");
            let tampered = String::from_utf8(body.to_vec()).unwrap().replacen("\"token\": \"", "\"token\": \"x", 1);
            assert_eq!(
                check(&v, tampered.as_bytes(), std::slice::from_ref(&secret), ts),
                Err(VerifyErrorKind::NoMatchingSignature),
                "{name}"
            );
            let id = crate::test_support::identity(&crate::providers::Provider::mailgun(), &head(), body);
            assert_eq!(id.key, case["event_id"].as_str().unwrap());
            assert_eq!(id.event_type.as_deref(), Some(case["event"].as_str().unwrap()));
        }
        // The subaccount delivery also verifies with the parent's key alone.
        let body = doc["subaccount"]["body"].as_str().unwrap().as_bytes();
        let ts = NOW;
        assert_eq!(doc["subaccount"]["sdk_parent"], "valid");
        assert_eq!(check(&MailgunVerifier::new(), body, std::slice::from_ref(&parent), ts), Ok(()));
        assert_eq!(
            check(&MailgunVerifier::new(), doc["delivered"]["body"].as_str().unwrap().as_bytes(), &[parent], ts),
            Err(VerifyErrorKind::NoMatchingSignature)
        );
    }

    #[test]
    fn verifies_and_rejects() {
        let secret = SigningSecret::from("key-mailgun-signing-key");
        let other = SigningSecret::from("key-other");
        let token = "e0b5477167110d68991efc6b9f89f0a11066af27834600e123";
        let sig = sign(&secret, NOW, token);
        let data = serde_json::json!({"id": "CPgfbmQMTCKtHW6uIWtuVe", "event": "delivered"});
        let good = signed_body(&secret, NOW, token, &data);
        let with = |extra: &str| format!(r#"{{"signature":{{{extra}}},"event-data":{{"id":"x","event":"opened"}}}}"#);
        let numeric_ts = with(&format!(r#""timestamp":{NOW},"token":"{token}","signature":"{sig}""#));
        let upper = with(&format!(r#""timestamp":"{NOW}","token":"{token}","signature":"{}""#, sig.to_uppercase()));
        let parent_only_good = with(&format!(
            r#""timestamp":"{NOW}","token":"{token}","signature":"{}","parent-signature":"{sig}""#,
            "0".repeat(64)
        ));
        let null_parent =
            with(&format!(r#""timestamp":"{NOW}","token":"{token}","signature":"{sig}","parent-signature":null"#));
        let escaped_key = format!(
            r#"{{"signatur\u0065":{{"timestamp":"{NOW}","token":"{token}","signature":"{sig}"}},"event-data":{{}}}}"#
        );
        let event_data_first = format!(
            r#"{{"event-data":{{"id":"x","nested":[{{"signature":"not this one"}}]}},"signature":{{"timestamp":"{NOW}","token":"{token}","signature":"{sig}"}}}}"#
        );
        let bad_hex = with(&format!(r#""timestamp":"{NOW}","token":"{token}","signature":"zz""#));
        let no_token = with(&format!(r#""timestamp":"{NOW}","signature":"{sig}""#));
        let no_ts = with(&format!(r#""token":"{token}","signature":"{sig}""#));
        let no_sig = with(&format!(r#""timestamp":"{NOW}","token":"{token}""#));
        let neg_ts = with(&format!(r#""timestamp":-1,"token":"{token}","signature":"{sig}""#));
        let ms_ts = with(&format!(r#""timestamp":"{NOW}000","token":"{token}","signature":"{sig}""#));
        let dup_sig_member =
            with(&format!(r#""timestamp":"{NOW}","token":"{token}","signature":"{sig}","signature":"{sig}""#));
        let dup_object = r#"{"signature":{},"signature":{},"event-data":{}}"#;
        let by_position = format!(r#"{{"signature":["{NOW}","{token}","{sig}",null],"event-data":{{}}}}"#);
        let body_array = format!(r#"[{{"timestamp":"{NOW}","token":"{token}","signature":"{sig}"}}]"#);
        let null_signature_with_parent =
            with(&format!(r#""timestamp":"{NOW}","token":"{token}","signature":null,"parent-signature":"{sig}""#));
        let wrong_secret = signed_body(&other, NOW, token, &data);
        let trailing = [good.as_bytes(), b"x"].concat();
        let cases: &[(&str, &[u8], u64, Result<(), VerifyErrorKind>)] = &[
            ("valid", good.as_bytes(), NOW, Ok(())),
            ("integer timestamp", numeric_ts.as_bytes(), NOW, Ok(())),
            ("upper-case hex", upper.as_bytes(), NOW, Ok(())),
            ("parent-signature matches", parent_only_good.as_bytes(), NOW, Ok(())),
            ("null parent-signature", null_parent.as_bytes(), NOW, Ok(())),
            ("escaped member name", escaped_key.as_bytes(), NOW, Ok(())),
            ("event-data first", event_data_first.as_bytes(), NOW, Ok(())),
            ("14 minutes late", good.as_bytes(), NOW + 840, Ok(())),
            ("wrong secret", wrong_secret.as_bytes(), NOW, Err(VerifyErrorKind::NoMatchingSignature)),
            ("stale", good.as_bytes(), NOW + 901, Err(VerifyErrorKind::TimestampTooOld)),
            ("future", good.as_bytes(), NOW - 901, Err(VerifyErrorKind::TimestampInFuture)),
            // Read as seconds, far ahead: refused by the age check before any HMAC.
            ("ms timestamp", ms_ts.as_bytes(), NOW, Err(VerifyErrorKind::TimestampInFuture)),
            ("no signature object", br#"{"event-data":{"id":"x"}}"#, NOW, Err(VerifyErrorKind::MissingField)),
            ("bad hex", bad_hex.as_bytes(), NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("no token", no_token.as_bytes(), NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("no timestamp", no_ts.as_bytes(), NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("no signature", no_sig.as_bytes(), NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("negative timestamp", neg_ts.as_bytes(), NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("repeated member", dup_sig_member.as_bytes(), NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("repeated object", dup_object.as_bytes(), NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("signature not an object", br#"{"signature":"abc"}"#, NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("signature object as an array", by_position.as_bytes(), NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("body as an array", body_array.as_bytes(), NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("null signature object", br#"{"signature":null}"#, NOW, Err(VerifyErrorKind::MalformedHeader)),
            (
                "null signature member",
                null_signature_with_parent.as_bytes(),
                NOW,
                Err(VerifyErrorKind::MalformedHeader),
            ),
            ("array body", b"[]", NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("form body", b"timestamp=1&token=a&signature=b", NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("trailing garbage", &trailing, NOW, Err(VerifyErrorKind::MalformedHeader)),
            ("empty body", b"", NOW, Err(VerifyErrorKind::MalformedHeader)),
        ];
        let v = MailgunVerifier::new();
        for (name, body, now, want) in cases {
            assert_eq!(check(&v, body, std::slice::from_ref(&secret), *now), *want, "{name}");
        }
        assert_eq!(check(&v, good.as_bytes(), &[], NOW), Err(VerifyErrorKind::NoSecret));
        assert!(v.precheck(&head()).is_ok());
    }

    #[test]
    fn rotation_and_replay() {
        let old = SigningSecret::from("key-old");
        let new = SigningSecret::from("key-new");
        let body = signed_body(&new, NOW, "tok", &serde_json::json!({"id": "e1", "event": "opened"}));
        let v = MailgunVerifier::new();
        assert_eq!(check(&v, body.as_bytes(), &[old.clone(), new.clone()], NOW), Ok(()));
        assert_eq!(
            check(&v, body.as_bytes(), std::slice::from_ref(&old), NOW),
            Err(VerifyErrorKind::NoMatchingSignature)
        );
        let p = head();
        let only_new = [new];
        let late = at(NOW + 86_400);
        assert!(v.verify(&Delivery::new(&p, body.as_bytes(), &only_new, late)).is_err());
        assert!(v.verify(&Delivery::new(&p, body.as_bytes(), &only_new, late).without_timestamp_check()).is_ok());
        let short = MailgunVerifier::new().tolerance(Duration::from_secs(60));
        assert_eq!(check(&short, body.as_bytes(), &only_new, NOW + 61), Err(VerifyErrorKind::TimestampTooOld));
    }

    #[test]
    fn preset_wiring() {
        let provider = crate::providers::Provider::mailgun();
        assert_eq!(provider.name(), "mailgun");
        assert!(provider.challenge_ref().is_none());
        let secret = [SigningSecret::from("k")];
        let body = signed_body(&secret[0], NOW, "t", &serde_json::json!({"id": "evt-1", "event": "failed"}));
        let p = head();
        assert!(provider.verifier_ref().verify(&Delivery::new(&p, body.as_bytes(), &secret, at(NOW))).is_ok());
        let id = provider.extractor_ref().extract(&p, body.as_bytes()).unwrap();
        assert_eq!((id.key.as_str(), id.event_type.as_deref()), ("evt-1", Some("failed")));
    }
}
