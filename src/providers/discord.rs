//! Discord interactions: the `X-Signature-Ed25519` header.
//!
//! Scheme (Discord, "Overview of Interactions", setting up an endpoint,
//! validating security request headers,
//! <https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint>):
//! - `X-Signature-Ed25519` carries the hex Ed25519 signature (64 bytes,
//!   128 hex digits) of `{X-Signature-Timestamp}{raw body}`: the timestamp
//!   header's text immediately followed by the body, no separator.
//! - it verifies with the application's public key, shown in hex in the
//!   Developer Portal. That key is the endpoint's "secret" here: give it as
//!   [`SigningSecret::from`] of the 64 hex digits, or through
//!   [`public_key`], which checks it and keeps its 32 raw bytes. Anything
//!   else (a typo, the application's 32-character client secret, a bot
//!   token) is refused
//!   by [`DiscordVerifier`]'s [`Verifier::check_secrets`](crate::verify::Verifier::check_secrets) with
//!   [`KeyMaterialErrorKind::InvalidPublicKey`](crate::verify::KeyMaterialErrorKind::InvalidPublicKey) when the layer is built (or
//!   the resolver returns it), instead of failing every delivery as a
//!   signature mismatch; the verifier itself skips it. Each key is parsed
//!   once and cached on the secret ([`SigningSecret::parsed`]). Several
//!   configured keys are all tried (an endpoint shared by two applications,
//!   or a key being replaced).
//! - signatures are checked with `ed25519-dalek`'s `verify_strict`, which
//!   also refuses small-order keys and signature points; no secret is
//!   involved, so the check need not be constant-time.
//! - Discord documents no window for `X-Signature-Timestamp` (its own
//!   libraries check none). This crate refuses a timestamp more than
//!   [`DEFAULT_TOLERANCE`] (five minutes) from now in either direction, like
//!   the HMAC presets; configure it with [`DiscordVerifier::tolerance`].
//!
//! The signed bytes have no separator, so `{timestamp}{body}` splits
//! ambiguously: moving the timestamp's last digits to the front of the body
//! keeps the signature valid. The timestamp then shrinks at least tenfold
//! and falls far outside any window, and the body no longer parses as JSON;
//! this is one more reason the window is enforced by default.
//!
//! Discord sends invalid signatures on purpose from time to time and removes
//! the endpoint if they are not answered 401; the layer answers every failed
//! verification with 401.
//!
//! The event key is the interaction's `id` (`/id`, a snowflake) and the event
//! type its numeric `type` (`/type`: 2 command, 3 component, 4 autocomplete,
//! 5 modal submit), as decimal text (Discord, "Receiving and Responding",
//! interaction object,
//! <https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object>).
//! Discord does not redeliver interactions; the claim still stops a replayed
//! or duplicated request from running the handler twice.
//!
//! **Answering.** Discord expects an interaction response within 3 seconds
//! (for example `{"type":4,"data":{...}}` to reply, `{"type":5}` to defer),
//! so the handler returns one, not a bare `200`. A duplicate is answered with
//! the layer's replay answer (plain text by default), which Discord would not
//! take as a response; as it never resends, only a replayed request gets it.
//!
//! **Testing.** [`sign`] signs with a 32-byte private seed; the layer is
//! configured with that seed's public key,
//! `public_key(&public_key_of(&seed))` ([`public_key_of`]).
//!
//! **PING.** When the endpoint URL is saved, and from time to time after,
//! Discord sends a `PING` interaction (`"type": 1`). The preset's
//! [`Challenge`](crate::providers::Challenge) answers it after the signature check and
//! before any claim with `200`, `Content-Type: application/json`,
//! `{"type":1}` (`PONG`). Nothing is stored.
//!
//! **Not covered.** Discord's *Webhook Events* endpoint (app authorization,
//! entitlements) is signed the same way but its `PING` is `"type": 0`,
//! answered 204, and its payload has no top-level `id`: use
//! [`DiscordVerifier`] with your own key extractor and challenge there.
//!
//! Verifying needs the timestamp and the body in one buffer (the
//! `ed25519-dalek` API takes one message slice), so the body is copied once
//! per delivery; Ed25519 verification itself costs far more than the copy.
//!
//! **Signed / not signed**
//! (<https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint>):
//! `X-Signature-Timestamp` and the raw body are signed, so the event key (the
//! body's `id`) and the event type (the body's `type`) are signed. Other
//! headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): none:
//! interactions are requests answered once, not changes of an object.

use crate::providers::Provider;
use std::time::Duration;

use bytes::Bytes;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};

use super::public_key::{Scheme, Signed};
use crate::verify::{parse_unix_seconds, single_header, Delivery, SigningSecret, VerifyError, VerifyErrorKind};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "discord";
/// How long a Discord interaction can be sent again: 1 day.
///
/// Discord does not retry or redeliver an interaction: it waits 3 seconds
/// for the initial answer, and the interaction's token is valid for 15
/// minutes (Discord, "Receiving and Responding",
/// <https://discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction>);
/// no manual replay exists. A second copy of one interaction can only be a
/// duplicated or replayed request arriving within seconds, so the shortest
/// window any preset uses, a day, is ample.
pub const REPLAY_WINDOW: std::time::Duration = super::days(1);

/// The header carrying the hex Ed25519 signature.
pub const SIGNATURE_HEADER: &str = "x-signature-ed25519";
/// The header carrying the signed timestamp (Unix seconds).
pub const TIMESTAMP_HEADER: &str = "x-signature-timestamp";

/// This crate's default window for `X-Signature-Timestamp` (Discord
/// documents none): five minutes.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

timed_verifier! {
    /// Verifies Discord's `X-Signature-Ed25519` header.
    pub struct DiscordVerifier;
    /// A verifier with the default tolerance of five minutes.
    fn new();
    /// Sets how far (both directions) `X-Signature-Timestamp` may be from now.
    fn tolerance();
    scheme: Ed25519;
}

/// Discord's scheme: Ed25519 (`verify_strict`) over `timestamp || body`,
/// the signature in hex in `X-Signature-Ed25519`.
#[derive(Debug)]
pub(crate) struct Ed25519;

impl Scheme for Ed25519 {
    type Key = VerifyingKey;
    type Signature = Signature;
    // `ed25519-dalek` takes one message slice: the body is copied once.
    type Message<'m> = Vec<u8>;
    const KEY_HINT: &'static str = "a Discord public key is the application's 64 hex digits from the Developer Portal";

    /// 32 raw bytes or 64 hex digits; `None` when it is no valid, non-weak key.
    fn parse_key(raw: &[u8]) -> Option<VerifyingKey> {
        let mut bytes = [0u8; 32];
        match raw.len() {
            // 32 printable ASCII characters are text (the application's client
            // secret is 32 such characters), not raw key bytes: a real key is
            // all printable with probability about (95/256)^32, 1e-14.
            32 if raw.iter().all(|b| b.is_ascii_graphic()) => return None,
            32 => bytes.copy_from_slice(raw),
            64 => hex::decode_to_slice(raw, &mut bytes).ok()?,
            _ => return None,
        }
        VerifyingKey::from_bytes(&bytes).ok().filter(|key| !key.is_weak())
    }

    fn signed(parts: &http::request::Parts) -> Result<Signed<'_, Signature>, VerifyError> {
        let signature = single_header(parts, SIGNATURE_HEADER)?.trim();
        let timestamp = single_header(parts, TIMESTAMP_HEADER)?.trim();
        let seconds = parse_unix_seconds(timestamp)?;
        let mut bytes = [0u8; 64];
        hex::decode_to_slice(signature, &mut bytes).map_err(|_| VerifyErrorKind::MalformedHeader)?;
        Ok(Signed { timestamp, seconds, signatures: vec![Signature::from_bytes(&bytes)] })
    }

    fn message<'m>(timestamp: &'m [u8], body: &'m [u8]) -> Vec<u8> {
        [timestamp, body].concat()
    }

    fn verifies(key: &VerifyingKey, message: &Vec<u8>, signature: &Signature) -> bool {
        key.verify_strict(message, signature).is_ok()
    }
}

/// What a [`PublicKeyError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PublicKeyErrorKind {
    /// Not 64 hexadecimal digits.
    NotHex,
    /// 64 hex digits that are not a valid Ed25519 public key.
    NotAKey,
}

impl std::fmt::Display for PublicKeyErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NotHex => "a Discord public key is 64 hexadecimal digits",
            Self::NotAKey => "not a valid Ed25519 public key",
        })
    }
}

kind_error! {
    /// An application public key [`public_key`] refused: see
    /// [`kind`](Self::kind).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct PublicKeyError(PublicKeyErrorKind);
    /// What is wrong.
    fn kind();
    display: |kind, f| kind.fmt(f);
}

/// The application's public key, as the Developer Portal shows it (64 hex
/// digits), checked and kept as its 32 raw bytes: the endpoint's secret.
///
/// # Errors
/// [`PublicKeyError`] when `hex_key` is not 64 hex digits or not a point of
/// the curve. Surrounding whitespace is not trimmed.
pub fn public_key(hex_key: &str) -> Result<SigningSecret, PublicKeyError> {
    let mut bytes = [0u8; 32];
    hex::decode_to_slice(hex_key, &mut bytes).map_err(|_| PublicKeyErrorKind::NotHex)?;
    let key = VerifyingKey::from_bytes(&bytes).map_err(|_| PublicKeyErrorKind::NotAKey)?;
    if key.is_weak() {
        return Err(PublicKeyErrorKind::NotAKey.into());
    }
    Ok(SigningSecret::new(bytes.to_vec()))
}

/// The public key (64 hex digits, as the Developer Portal shows it) of the
/// Ed25519 key with this 32-byte seed. For tests and fixtures.
pub fn public_key_of(seed: &[u8; 32]) -> String {
    hex::encode(SigningKey::from_bytes(seed).verifying_key().as_bytes())
}

/// The `X-Signature-Ed25519` value Discord would send for `body` at
/// `timestamp` (Unix seconds, sent as `X-Signature-Timestamp`), signed with
/// the Ed25519 key whose 32-byte seed is `seed`: 128 hex digits. Only
/// Discord holds an application's real private key; this is for tests and
/// fixtures.
pub fn sign(seed: &[u8; 32], timestamp: u64, body: &[u8]) -> String {
    let mut message = timestamp.to_string().into_bytes();
    message.extend_from_slice(body);
    hex::encode(SigningKey::from_bytes(seed).sign(&message).to_bytes())
}

impl crate::providers::Provider {
    /// Discord interactions (Ed25519; key = the interaction `id`; answers PING). See [`crate::providers::discord`].
    ///
    /// Discord's interactions preset: [`DiscordVerifier`] (five minutes), key =
    /// `/id`, type = `/type`, and `PING` answered with `PONG`. Name: `discord`.
    pub fn discord() -> Self {
        super::json_keyed(NAME, DiscordVerifier::new(), "/id", "/type").challenge(pong)
    }
}

/// Answers a `PING` interaction (`"type": 1`) with `{"type":1}`.
fn pong(delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
    let doc: serde_json::Value = serde_json::from_slice(delivery.body).ok()?;
    if doc.get("type")?.as_u64()? != 1 {
        return None;
    }
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Bytes::from_static(br#"{"type":1}"#))
        .ok()
}

/// [`PresetInfo::sign`](super::PresetInfo::sign) for Discord: `key` is the
/// Ed25519 seed (32 bytes, hexadecimal); the receiver verifies with its
/// public key.
fn send(key: &str, d: &super::Signing<'_>) -> Result<super::Example, super::SignError> {
    let seed: [u8; 32] = hex::decode(key.trim())
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| super::key_error("discord: the private key is a 32-byte Ed25519 seed in hexadecimal"))?;
    let ts = super::unix_seconds(d.at);
    let headers = super::signature_and_time(SIGNATURE_HEADER, TIMESTAMP_HEADER, ts, |ts| sign(&seed, ts, d.body));
    let public = SigningSecret::from(public_key_of(&seed));
    super::signed_delivery(Provider::discord(), public, d, headers, d.body.to_vec())
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    "discord",
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER, TIMESTAMP_HEADER],
    |_| Provider::discord(),
    super::ExampleOf::Whole(|_, at, body| {
        const SEED: [u8; 32] = [7; 32];
        let headers = super::signature_and_time(SIGNATURE_HEADER, TIMESTAMP_HEADER, super::unix_seconds(at), |ts| {
            sign(&SEED, ts, body)
        });
        super::asymmetric_example(Provider::discord(), public_key_of(&SEED), headers, body)
    }),
)
.sends(send)
.keys(super::KeyKind::PublicKey, super::raw_secret, Some(|text| public_key(text).map_err(super::key_error)))
.signs("`X-Signature-Ed25519` over `{timestamp}{body}`, application public key")
.key_from("the body's id (JSON)")
.fixture(super::Fixture::own("Ed25519 public key, the interactions' vectors (`interactions.json`)"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::TwoHeaders;
    use crate::test_support::fixture_json;
    use crate::test_support::{at, headers as parts, NOW};
    use crate::verify::Verifier as _;
    use crate::verify::VerifyErrorKind::{MalformedHeader, NoMatchingSignature, TimestampTooOld};

    const SEED: [u8; 32] = *b"a deterministic test seed, 32 b.";
    const OTHER_SEED: [u8; 32] = [7; 32];

    /// Interactions signed with tweetnacl 1.0.3 and accepted by the official
    /// `discord-interactions` 4.4.0 `verifyKey`; see
    /// `scripts/fixtures/discord.js`.
    #[test]
    fn discord_interactions_fixture() {
        let fixture: serde_json::Value = fixture_json("discord/interactions.json");
        let key_hex = fixture["public_key"].as_str().unwrap();
        let timestamp = fixture["timestamp"].as_str().unwrap();
        let secrets = [public_key(key_hex).unwrap()];
        // The hex text works as the secret too.
        let as_text = [SigningSecret::from(key_hex)];
        for (name, want_key, want_type) in
            [("ping", "1180000000000000001", "1"), ("command", "1180000000000000005", "2")]
        {
            let body = fixture[name]["body"].as_str().unwrap().as_bytes();
            let signature = fixture[name]["signature"].as_str().unwrap();
            let p = parts(&[(SIGNATURE_HEADER, signature), (TIMESTAMP_HEADER, timestamp)]);
            let v = DiscordVerifier::new();
            assert!(v.verify(&Delivery::new(&p, body, &secrets, at(NOW))).is_ok(), "{name}");
            assert!(v.verify(&Delivery::new(&p, body, &as_text, at(NOW))).is_ok(), "{name} as text");
            let mut tampered = body.to_vec();
            tampered.push(b' ');
            assert_eq!(
                v.verify(&Delivery::new(&p, &tampered, &secrets, at(NOW))).unwrap_err().kind(),
                VerifyErrorKind::NoMatchingSignature,
                "{name} tampered"
            );
            let id = crate::test_support::identity(&crate::providers::Provider::discord(), &p, body);
            assert_eq!((id.key.as_str(), id.event_type.as_deref()), (want_key, Some(want_type)), "{name}");
        }
        // Ed25519 is deterministic: the fixture's seed gives the same signature here.
        let seed: [u8; 32] = *b"discord interactions fixture key";
        assert_eq!(public_key_of(&seed), key_hex);
        let ping = fixture["ping"]["body"].as_str().unwrap().as_bytes();
        assert_eq!(sign(&seed, NOW, ping), fixture["ping"]["signature"].as_str().unwrap());
    }

    /// The deliveries of `body` signed with `SEED` (or `OTHER_SEED`),
    /// checked against the public key of `SEED` as `key` gives it.
    fn scheme(body: &[u8], key: impl Fn(&[u8; 32]) -> SigningSecret) -> TwoHeaders<'_> {
        let headers = [SIGNATURE_HEADER, TIMESTAMP_HEADER];
        let seeds = [SEED, OTHER_SEED];
        TwoHeaders::new(DiscordVerifier::new(), headers, body, seeds.map(|s| key(&s)), |i, b| sign(&seeds[i], NOW, b))
    }

    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"id":"1","type":2,"data":{"name":"hi"}}"#;
        let s = scheme(body, |seed| SigningSecret::from(public_key_of(seed)));
        let shifted = [b"0".as_slice(), body].concat();
        s.check_with_common(&[
            s.case("upper-case hex").signature(&s.good.to_uppercase()),
            s.case("same header twice").signatures(&[&s.good, &s.good]),
            // No separator: the same bytes split elsewhere still verify,
            // and only the window refuses the shifted timestamp.
            s.case("last timestamp digit moved into the body")
                .timestamp("170000000")
                .body(&shifted)
                .fails(TimestampTooOld),
            s.case("signature over the timestamp alone").signature(&sign(&SEED, NOW, b"")).fails(NoMatchingSignature),
            s.case("two different signatures").signatures(&[&s.good, &s.by_other]).fails(MalformedHeader),
            s.case("short signature").signature(&s.good[..126]).fails(MalformedHeader),
            s.case("not hex").signature(&"g".repeat(128)).fails(MalformedHeader),
            s.case("timestamp with fraction").timestamp("1700000000.5").fails(MalformedHeader),
            s.case("non-ASCII header").signature("é").fails(MalformedHeader),
        ]);
    }

    #[test]
    fn keys_rotation_tolerance_and_replay() {
        let s = scheme(br#"{"id":"9","type":3}"#, |seed| public_key(&public_key_of(seed)).unwrap());
        s.check_rotation_tolerance_and_replay(DiscordVerifier::new().tolerance(Duration::from_secs(600)));
        // Secrets that are no key at all are skipped, not fatal.
        let p = parts(&[(SIGNATURE_HEADER, &s.good), (TIMESTAMP_HEADER, &s.timestamp)]);
        let v = DiscordVerifier::new();
        let d =
            |secrets: &[SigningSecret]| v.verify(&Delivery::new(&p, s.body, secrets, at(NOW))).map_err(|e| e.kind());
        assert_eq!(d(&[SigningSecret::from("not a key"), s.key.clone()]), Ok(()));
        assert_eq!(d(&[SigningSecret::from("not a key")]), Err(VerifyErrorKind::NoMatchingSignature));
    }

    #[test]
    fn check_secrets_cases() {
        use crate::verify::KeyMaterialErrorKind as K;
        let good = public_key_of(&SEED);
        let raw = public_key(&good).unwrap();
        // Printable text whose 32 bytes happen to be a valid curve point
        // (about half of all texts are): refused as text all the same.
        let printable_point = (0u64..)
            .map(|n| format!("client-secret-{n:018}"))
            .find(|t| VerifyingKey::from_bytes(t.as_bytes().try_into().unwrap()).is_ok_and(|k| !k.is_weak()))
            .unwrap();
        let cases: Vec<(&str, Vec<SigningSecret>, Result<(), (K, Option<usize>)>)> = vec![
            ("hex key", vec![SigningSecret::from(good.as_str())], Ok(())),
            ("upper-case hex key", vec![SigningSecret::from(good.to_uppercase())], Ok(())),
            ("raw 32 bytes", vec![raw.clone()], Ok(())),
            ("two keys", vec![raw.clone(), SigningSecret::from(public_key_of(&OTHER_SEED))], Ok(())),
            ("no secret", vec![], Err((K::NoSecret, None))),
            ("empty", vec![SigningSecret::from("")], Err((K::Empty, Some(0)))),
            ("not hex", vec![SigningSecret::from("z".repeat(64))], Err((K::InvalidPublicKey, Some(0)))),
            ("short", vec![SigningSecret::from(&good[..62])], Err((K::InvalidPublicKey, Some(0)))),
            (
                "32-character client secret",
                vec![SigningSecret::from("aBcDeFgHiJkLmNoPqRsTuVwXyZ012345")],
                Err((K::InvalidPublicKey, Some(0))),
            ),
            (
                "not a curve point",
                vec![SigningSecret::from(format!("02{}", "0".repeat(62)))],
                Err((K::InvalidPublicKey, Some(0))),
            ),
            (
                "small order",
                vec![SigningSecret::from(format!("01{}", "0".repeat(62)))],
                Err((K::InvalidPublicKey, Some(0))),
            ),
            ("trailing newline", vec![SigningSecret::from(format!("{good}\n"))], Err((K::InvalidPublicKey, Some(0)))),
            (
                "printable text that is a point",
                vec![SigningSecret::from(printable_point)],
                Err((K::InvalidPublicKey, Some(0))),
            ),
            ("second key bad", vec![raw.clone(), SigningSecret::from("nope")], Err((K::InvalidPublicKey, Some(1)))),
        ];
        for (name, secrets, want) in &cases {
            let got = DiscordVerifier::new().check_secrets(secrets).map_err(|e| (e.kind(), e.index()));
            assert_eq!(got, *want, "{name}");
        }
        // Parsed once, shared by clones.
        let secret = SigningSecret::from(good.as_str());
        DiscordVerifier::new().check_secrets(std::slice::from_ref(&secret)).unwrap();
        let cached = secret.clone().parsed::<Option<VerifyingKey>>(|_| panic!("parsed a second time"));
        assert_eq!(cached.as_ref().map(|k| hex::encode(k.as_bytes())), Some(good));
    }

    #[test]
    fn public_key_parsing() {
        let good = public_key_of(&SEED);
        assert_eq!(public_key(&good).unwrap().expose(), hex::decode(&good).unwrap());
        assert_eq!(public_key(&good.to_uppercase()).unwrap().expose(), hex::decode(&good).unwrap());
        let cases = [
            ("short", good[..62].to_owned(), PublicKeyErrorKind::NotHex),
            ("not hex", "z".repeat(64), PublicKeyErrorKind::NotHex),
            ("trailing newline", format!("{good}\n"), PublicKeyErrorKind::NotHex),
            // y = 2 is not on the curve (no x satisfies the equation).
            ("not a point", format!("02{}", "0".repeat(62)), PublicKeyErrorKind::NotAKey),
            // The identity point: small order, refused.
            ("weak", format!("01{}", "0".repeat(62)), PublicKeyErrorKind::NotAKey),
        ];
        for (name, text, want) in cases {
            assert_eq!(public_key(&text).unwrap_err().kind(), want, "{name}");
        }
    }

    #[test]
    fn ping_is_answered_with_pong() {
        // Through the preset's challenge, which is `pong`.
        let provider = crate::providers::Provider::discord();
        let respond = |d: &Delivery<'_>| provider.challenge_ref().expect("a challenge").respond(d);
        let p = parts(&[]);
        let answer =
            respond(&Delivery::new(&p, br#"{"id":"1","type":1,"version":1}"#, &[], at(NOW))).expect("answered");
        assert_eq!(answer.status(), http::StatusCode::OK);
        assert_eq!(answer.headers()[http::header::CONTENT_TYPE], "application/json");
        assert_eq!(answer.body().as_ref(), br#"{"type":1}"#);
        let not_pings: &[(&str, &[u8])] = &[
            ("command", br#"{"id":"1","type":2,"data":{"type":1}}"#),
            ("webhook event ping", br#"{"version":1,"application_id":"1","type":0}"#),
            ("type as text", br#"{"id":"1","type":"1"}"#),
            ("not json", b"type=1"),
        ];
        for (name, body) in not_pings {
            assert!(respond(&Delivery::new(&p, body, &[], at(NOW))).is_none(), "{name}");
        }
    }
}
