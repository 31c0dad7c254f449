//! Box (webhooks V2): the `box-signature-primary` and
//! `box-signature-secondary` headers.
//!
//! Scheme (Box, "Signatures", <https://developer.box.com/guides/webhooks/v2/signatures-v2/>,
//! and the official SDK, `box-node-sdk` 10.12.0
//! `WebhooksManager.validateMessage`):
//! - `box-signature-primary` and `box-signature-secondary` each carry the
//!   base64 HMAC-SHA256 of `{raw body}{box-delivery-timestamp}`: the **body
//!   first**, then the timestamp header's text byte for byte, no separator.
//!   The primary one is keyed with the application's primary signature key,
//!   the secondary one with the secondary key, so a key can be rotated while
//!   the other keeps verifying. Configure both keys (or the one you keep);
//!   a delivery passes when any configured key matches either header. The
//!   SDK pairs primary with primary only: accepting the crossed pair here
//!   lets no key through that is not configured.
//! - `box-signature-version` must be `1` and `box-signature-algorithm`
//!   `HmacSHA256`, as the SDK requires (anything else is malformed: a later
//!   scheme this preset does not know).
//! - `box-delivery-timestamp` is RFC 3339 with an offset
//!   (`2020-01-01T00:00:00-07:00`), signed. Tolerance, as the SDK decides it
//!   (`validateMessage` in `box-typescript-sdk-gen`
//!   `src/managers/webhooks.generated.ts`, and `validate_message` in
//!   `box-python-sdk` `box_sdk_gen/managers/webhooks.py`: `currentEpoch -
//!   maxAge > timestamp || timestamp > currentEpoch` refused, whole seconds):
//!   a timestamp older than `maxAge`, 10 minutes by default, is refused,
//!   exactly 600 seconds old is accepted ([`DEFAULT_TOLERANCE`]); **any**
//!   timestamp in the future is refused ([`DEFAULT_FUTURE_SKEW`] is zero: the
//!   current second passes, the next one does not). A receiver whose clock
//!   runs behind Box's refuses deliveries until it is corrected, as the SDK
//!   does; [`BoxVerifier::future_skew`] allows some skew where that matters.
//! - **The escaped body, tried second.** The SDK verifies the body as
//!   received, and when no signature matches, verifies it again with its
//!   characters escaped as Box's PHP signer writes them
//!   (`jsonStringifyWithEscapedUnicode` in `box-typescript-sdk-gen`
//!   `src/internal/utilsNode.ts`, called by `computeWebhookSignature(..,
//!   escapeBody = true)`): every UTF-16 code unit from U+007F to U+FFFF as
//!   `\uxxxx` (four lower-case hex digits), so a character outside the BMP
//!   becomes its surrogate pair (`😀` → `\ud83d\ude00`), and every `/` not
//!   preceded by `\` as `\/`. This preset does the same, in the same order
//!   (each configured key against the raw body, then against the escaped
//!   one): a delivery whose body carries non-ASCII text raw but was signed
//!   over its escaped form verifies. A body that is not UTF-8, or that
//!   escaping leaves unchanged, has no second try; the escaped copy costs at
//!   most three times the body and is built only when the raw body fails.
//!   `box-python-sdk`'s `escape_unicode` escapes a decoded string instead
//!   (it also doubles every `\` not before `/`, writes control characters as
//!   `\n`, `\r`, `\t` or `\u00xx`, and leaves `/` alone); both SDKs share
//!   the same published vectors (checked in this module), and this preset
//!   follows the TypeScript SDK, which escapes the JSON text as received
//!   (the Python rule would double the backslash of every JSON escape such
//!   as `\"`).
//!
//! The event key is the body's `id`, the webhook event's id; the
//! `box-delivery-id` header names the delivery attempt instead and is not
//! signed. The event type is `trigger` (`FILE.UPLOADED`).
//!
//! **Signed / not signed**
//! (<https://developer.box.com/guides/webhooks/v2/signatures-v2/>): the raw
//! body and `box-delivery-timestamp` are signed, so the event key and type
//! (from the body) are signed. `box-delivery-id`, the version and algorithm
//! headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! body's `created_at` (RFC 3339), the time of the event.

use std::time::Duration;

use crate::verify::{
    check_signature_header_size, check_tolerance, header_values, hmac_sha256, match_any_secret, single_header,
    Delivery, Encoding, SigningSecret, Verifier, VerifyError, VerifyErrorKind,
};

/// The header carrying the signature by the primary key.
pub const PRIMARY_HEADER: &str = "box-signature-primary";
/// The header carrying the signature by the secondary key.
pub const SECONDARY_HEADER: &str = "box-signature-secondary";
/// The header carrying the signed RFC 3339 delivery time.
pub const TIMESTAMP_HEADER: &str = "box-delivery-timestamp";
/// The header naming the signature scheme's version (`1`).
pub const VERSION_HEADER: &str = "box-signature-version";
/// The header naming the signature algorithm (`HmacSHA256`).
pub const ALGORITHM_HEADER: &str = "box-signature-algorithm";
/// The header carrying the delivery attempt's id (not signed, not the key).
pub const DELIVERY_ID_HEADER: &str = "box-delivery-id";

/// How old `box-delivery-timestamp` may be: 600 seconds (the SDK's `maxAge`).
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(600);
/// How far into the future `box-delivery-timestamp` may be: none, as Box's
/// SDK (`timestamp > currentEpoch` refused; see the module docs).
pub const DEFAULT_FUTURE_SKEW: Duration = Duration::ZERO;

/// The CLI name of the preset and the `provider` column of its claims.
pub const NAME: &str = "box";
/// How long a Box webhook event can be sent again: 30 days.
///
/// Box retries a delivery that gets no 2xx answer within 30 seconds, up to
/// 10 times (Box, "Webhooks", <https://developer.box.com/guides/webhooks/v2/>,
/// as read by the research for this preset; the spacing is not published),
/// and documents no manual redelivery. With the span not stated, the window
/// is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const REPLAY_WINDOW: Duration = super::DEFAULT_REPLAY_WINDOW;

/// Verifies Box's two signature headers and the signed delivery time.
#[derive(Debug, Clone)]
#[must_use]
pub struct BoxVerifier {
    tolerance: Duration,
    future_skew: Duration,
}

impl Default for BoxVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl BoxVerifier {
    /// A verifier accepting timestamps up to 600 seconds old and none ahead
    /// (the current second passes), as Box's SDK.
    pub fn new() -> Self {
        Self { tolerance: DEFAULT_TOLERANCE, future_skew: DEFAULT_FUTURE_SKEW }
    }

    setters! {
        /// Sets how old `box-delivery-timestamp` may be.
        pub fn tolerance(tolerance: Duration) => tolerance = tolerance;

        /// Sets how far ahead of now `box-delivery-timestamp` may be (zero: not
        /// at all, as Box's SDK).
        pub fn future_skew(skew: Duration) => future_skew = skew;
    }
}

/// A delivery's head, read.
struct Head<'a> {
    signatures: Vec<Vec<u8>>,
    timestamp: &'a str,
    unix_seconds: u64,
}

fn parse(parts: &http::request::Parts) -> Result<Head<'_>, VerifyError> {
    let mut signatures = Vec::new();
    let mut seen = false;
    for name in [PRIMARY_HEADER, SECONDARY_HEADER] {
        check_signature_header_size(parts, name)?;
        for value in header_values(parts, name) {
            seen = true;
            if signatures.len() == crate::verify::MAX_SIGNATURE_ENTRIES {
                return Err(VerifyErrorKind::MalformedHeader.into());
            }
            let sig = Encoding::Base64.decode(value?.trim()).filter(|s| s.len() == 32);
            signatures.push(sig.ok_or(VerifyErrorKind::MalformedHeader)?);
        }
    }
    if !seen {
        return Err(VerifyErrorKind::MissingHeader.into());
    }
    if single_header(parts, VERSION_HEADER)? != "1" || single_header(parts, ALGORITHM_HEADER)? != "HmacSHA256" {
        return Err(VerifyErrorKind::MalformedHeader.into());
    }
    let timestamp = single_header(parts, TIMESTAMP_HEADER)?;
    let seconds = super::rfc3339::parse(timestamp).ok_or(VerifyErrorKind::MalformedHeader)?;
    // Before 1970: as old as the check can tell.
    Ok(Head { signatures, timestamp, unix_seconds: u64::try_from(seconds).unwrap_or(0) })
}

impl Verifier for BoxVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        parse(parts).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let head = parse(delivery.parts)?;
        if delivery.check_timestamp {
            // Past: `tolerance`; future: `future_skew` (each checked on its own side).
            match check_tolerance(head.unix_seconds, delivery.now, self.tolerance) {
                Err(e) if e.kind() == VerifyErrorKind::TimestampTooOld => return Err(e),
                _ => {}
            }
            match check_tolerance(head.unix_seconds, delivery.now, self.future_skew) {
                Err(e) if e.kind() == VerifyErrorKind::TimestampInFuture => return Err(e),
                _ => {}
            }
        }
        let ts = head.timestamp.as_bytes();
        let signatures = || head.signatures.iter().map(Vec::as_slice);
        let raw = match_any_secret(delivery, signatures(), |secret| hmac_sha256(secret, &[delivery.body, ts]));
        match (raw, escaped_body(delivery.body)) {
            // The SDK's second try: the body as Box's signer escapes it.
            (Err(e), Some(escaped)) if e.kind() == VerifyErrorKind::NoMatchingSignature => {
                match_any_secret(delivery, signatures(), |secret| hmac_sha256(secret, &[&escaped, ts]))
            }
            (raw, _) => raw,
        }
    }
}

/// `body` as Box's SDK escapes it before its second try
/// (`jsonStringifyWithEscapedUnicode`, `box-typescript-sdk-gen`
/// `src/internal/utilsNode.ts`): each UTF-16 code unit from U+007F to U+FFFF
/// as `\uxxxx` (lower-case hex; a character outside the BMP as its surrogate
/// pair), each `/` not preceded by `\` as `\/`. `None` when `body` is not
/// UTF-8 or escaping changes nothing (no second try is needed). At most three
/// times the body's length.
pub fn escaped_body(body: &[u8]) -> Option<Vec<u8>> {
    use std::fmt::Write as _;
    let text = std::str::from_utf8(body).ok()?;
    if !text.bytes().any(|b| b == b'/' || b >= 0x7f) {
        return None;
    }
    let mut out = String::with_capacity(body.len() * 2);
    let mut after_backslash = false;
    for c in text.chars() {
        match c {
            '/' if !after_backslash => out.push_str("\\/"),
            c if u32::from(c) >= 0x7f => {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
        after_backslash = c == '\\';
    }
    (out.as_bytes() != body).then(|| out.into_bytes())
}

/// The value Box would send in `box-signature-primary` (or `-secondary`,
/// with the secondary key) for `body` with `box-delivery-timestamp:
/// {timestamp}` (RFC 3339 text, used byte for byte): base64 HMAC-SHA256 of
/// `{body}{timestamp}`. For tests and fixtures.
pub fn sign(secret: &SigningSecret, timestamp: &str, body: &[u8]) -> String {
    Encoding::Base64.encode(&hmac_sha256(secret, &[body, timestamp.as_bytes()]))
}

/// The headers of a Box delivery at `unix_seconds`, signed with `secret` as
/// the primary key: the primary signature, the timestamp, the version and
/// the algorithm.
fn signed_headers(secret: &SigningSecret, unix_seconds: u64, body: &[u8]) -> Vec<(&'static str, String)> {
    let timestamp = super::rfc3339::format(unix_seconds);
    vec![
        (PRIMARY_HEADER, sign(secret, &timestamp, body)),
        (TIMESTAMP_HEADER, timestamp),
        (VERSION_HEADER, "1".into()),
        (ALGORITHM_HEADER, "HmacSHA256".into()),
    ]
}

impl crate::providers::Provider {
    /// Box (`box-signature-primary` / `-secondary` of `{body}{timestamp}`, raw then escaped, 600 s past, none ahead; key = body `id`). See [`crate::providers::box_com`].
    ///
    /// The Box webhooks V2 preset: [`BoxVerifier`]; key = the body's `id`
    /// (the webhook event), type = `trigger`.
    pub fn box_com() -> Self {
        super::json_keyed(NAME, BoxVerifier::new(), "/id", "/trigger")
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[PRIMARY_HEADER, SECONDARY_HEADER, TIMESTAMP_HEADER, VERSION_HEADER, ALGORITHM_HEADER, DELIVERY_ID_HEADER],
    |_| crate::providers::Provider::box_com(),
    super::ExampleOf::Signed(|s, d| signed_headers(s, super::unix_seconds(d.at), d.body)),
)
.signs("`box-signature-primary` / `-secondary` base64 HMAC-SHA256 of `{body}{box-delivery-timestamp}` (RFC 3339), one key each; then of the body `\\u`-escaped as Box's SDK retries")
.key_from("the body's id (JSON)")
.fixture(super::Fixture::own("a primary and a secondary key, and Box's own vector"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::TwoHeaders;
    use crate::providers::Provider;
    use crate::test_support::fixture_json;
    use crate::test_support::{assert_body_identity, at, headers, NOW};

    fn check(list: &[(&str, &str)], body: &[u8], secrets: &[SigningSecret], now: u64) -> Result<(), VerifyErrorKind> {
        let p = headers(list);
        BoxVerifier::new().verify(&Delivery::new(&p, body, secrets, at(now))).map_err(|e| e.kind())
    }

    /// A delivery signed with the documented formula and accepted by
    /// `box-node-sdk`'s `validateMessage` with either key, and the SDK's own
    /// test vector (`box-typescript-sdk-gen` 1.19.1,
    /// `webhooks.generated.test.js`); see `scripts/fixtures/box.js`.
    #[test]
    fn box_node_sdk_fixture_and_vector() {
        let expected: serde_json::Value = fixture_json("box/expected.json");
        assert_eq!(expected["sdk_verified"], serde_json::json!(true));
        let cases: [(&serde_json::Value, &[u8], &str); 2] = [
            (&expected, include_bytes!("../../tests/fixtures/providers/box/body.json"), "fixture"),
            (
                &expected["official_vector"],
                include_bytes!("../../tests/fixtures/providers/box/official_vector_body.json"),
                "sdk vector",
            ),
        ];
        for (case, body, name) in cases {
            let h = |n: &str| case["headers"][n].as_str().unwrap();
            let primary = SigningSecret::from(case["primary_key"].as_str().unwrap());
            let secondary = SigningSecret::from(case["secondary_key"].as_str().unwrap());
            assert_eq!(sign(&primary, h(TIMESTAMP_HEADER), body), h(PRIMARY_HEADER), "{name}");
            assert_eq!(sign(&secondary, h(TIMESTAMP_HEADER), body), h(SECONDARY_HEADER), "{name}");
            let list: Vec<(&str, &str)> = [
                PRIMARY_HEADER,
                SECONDARY_HEADER,
                TIMESTAMP_HEADER,
                VERSION_HEADER,
                ALGORITHM_HEADER,
                DELIVERY_ID_HEADER,
            ]
            .iter()
            .map(|n| (*n, h(n)))
            .collect();
            let now = u64::try_from(super::super::rfc3339::parse(h(TIMESTAMP_HEADER)).unwrap()).unwrap();
            for keys in [vec![primary.clone()], vec![secondary.clone()], vec![primary.clone(), secondary.clone()]] {
                assert_eq!(check(&list, body, &keys, now), Ok(()), "{name}");
            }
            assert_eq!(
                check(&list, body, &[SigningSecret::from("other")], now),
                Err(VerifyErrorKind::NoMatchingSignature),
                "{name}"
            );
            assert_eq!(check(&list, b"{}", &[primary], now), Err(VerifyErrorKind::NoMatchingSignature), "{name}");
        }
        // The SDK's time cases (600 s into the past, none into the future), as the SDK.
        let body = include_bytes!("../../tests/fixtures/providers/box/body.json");
        let h = |n: &str| expected["headers"][n].as_str().unwrap();
        let list: Vec<(&str, &str)> =
            [PRIMARY_HEADER, TIMESTAMP_HEADER, VERSION_HEADER, ALGORITHM_HEADER].iter().map(|n| (*n, h(n))).collect();
        let primary = [SigningSecret::from(expected["primary_key"].as_str().unwrap())];
        for case in expected["sdk_time_cases"].as_array().unwrap() {
            let now = case["now_s"].as_u64().unwrap();
            let ours = (1_718_000_000..=1_718_000_600).contains(&now);
            assert_eq!(check(&list, body, &primary, now).is_ok(), ours, "{case}");
            assert_eq!(ours, case["sdk_accepts"].as_bool().unwrap(), "{case}");
        }
        assert_body_identity(
            &Provider::box_com(),
            body,
            expected["event_id"].as_str().unwrap(),
            expected["event_type"].as_str(),
        );
    }

    /// The escaped second try, on the vectors of Box's SDK tests
    /// (`box-typescript-sdk-gen` `src/test/webhooks.generated.test.ts` and
    /// `box-python-sdk` `test/webhooks.py`, `testWebhookValidation`: key
    /// `SamplePrimaryKey`, `box-delivery-timestamp:
    /// 2020-01-01T00:00:00-07:00`), each body as the JSON text Box sends: the
    /// Japanese and emoji names arrive raw and verify only through the
    /// escaped form (the emoji as a surrogate pair); the `\r`, `\/` and
    /// `\\` bodies are already escaped and verify as they are.
    #[test]
    fn escaped_second_try_on_box_s_vectors() {
        let ts = "2020-01-01T00:00:00-07:00";
        let name = |n: &str| {
            format!(
                r#"{{"webhook":{{"id":"1234567890"}},"trigger":"FILE.UPLOADED","source":{{"id":"1234567890","type":"file","name":"{n}"}}}}"#
            )
        };
        let cases = [
            (name("スクリーンショット 2020-08-05.txt"), "LV2uCu+5NJtIHrCXDYgZ0v/PP5THGRuegw3RtdnEyuE=", true),
            (name("😀 2020-08-05.txt"), "xF/SDZosX4le+v4A0Qn59sZhuD1RqY5KRUKzVMSbh0E=", true),
            (name(r"test \r"), "SVkbKgy3dEEf2PbbzpNu2lDZS7zZ/aboU7HOZgBGrJk=", false),
            (name(r"\/"), "t41PWT5ZB6OcysnD6SDy9Ud+p9hdXxIdXqcdweyZv/Q=", false),
            (name(r"\\"), "ERpMZwUQsGDTfj82ehdX6VvDZfvOhK5ULNfVmwVAGe0=", false),
        ];
        let key = SigningSecret::from("SamplePrimaryKey");
        let keys = [key.clone()];
        let now = u64::try_from(super::super::rfc3339::parse(ts).unwrap()).unwrap();
        for (body, sig, needs_escape) in &cases {
            let list = [
                (PRIMARY_HEADER, *sig),
                (TIMESTAMP_HEADER, ts),
                (VERSION_HEADER, "1"),
                (ALGORITHM_HEADER, "HmacSHA256"),
            ];
            assert_eq!(check(&list, body.as_bytes(), &keys, now), Ok(()), "{body}");
            assert_eq!(sign(&key, ts, body.as_bytes()) != *sig, *needs_escape, "{body}: the raw formula alone");
            let wrong = [SigningSecret::from("IncorrectKey")];
            assert_eq!(check(&list, body.as_bytes(), &wrong, now), Err(VerifyErrorKind::NoMatchingSignature), "{body}");
            let tampered = body.replace("FILE.UPLOADED", "FILE.DELETED");
            assert_eq!(
                check(&list, tampered.as_bytes(), &keys, now),
                Err(VerifyErrorKind::NoMatchingSignature),
                "{body}"
            );
        }
        // The escaped forms, as the SDK writes them.
        let esc = |b: &str| escaped_body(b.as_bytes()).map(|e| String::from_utf8(e).unwrap());
        assert_eq!(esc("😀"), Some(r"\ud83d\ude00".to_owned()));
        assert_eq!(esc("スク"), Some(r"\u30b9\u30af".to_owned()));
        assert_eq!(esc("é\u{7f}"), Some(r"\u00e9\u007f".to_owned()));
        assert_eq!(esc(r"a/b\/c//"), Some(r"a\/b\/c\/\/".to_owned()));
        assert_eq!(esc(r#"{"a":"\/ plain"}"#), None, "already escaped: no second try");
        assert_eq!(esc("{}"), None);
        assert_eq!(escaped_body(b"\xff/"), None, "not UTF-8: no second try");
        assert_eq!(escaped_body(&[0xe2, 0x98, 0x95].repeat(100)).map(|e| e.len()), Some(600));
    }

    /// A delivery whose raw body is non-ASCII, signed over its escaped form,
    /// with either key; the escaped form of another body does not verify,
    /// and a raw signature still verifies first.
    #[test]
    fn non_ascii_body_signed_escaped() {
        let body = "{\"id\":\"e1\",\"trigger\":\"FILE.UPLOADED\",\"source\":{\"name\":\"Café ☕ 😀 a/b.pdf\"}}";
        let escaped = escaped_body(body.as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(escaped.clone()).unwrap(),
            r#"{"id":"e1","trigger":"FILE.UPLOADED","source":{"name":"Caf\u00e9 \u2615 \ud83d\ude00 a\/b.pdf"}}"#
        );
        let ts = super::super::rfc3339::format(NOW);
        let (primary, secondary) = (SigningSecret::from("p-key"), SigningSecret::from("s-key"));
        let list = |sig: &str, header: &'static str| {
            [
                (header, sig.to_owned()),
                (TIMESTAMP_HEADER, ts.clone()),
                (VERSION_HEADER, "1".into()),
                (ALGORITHM_HEADER, "HmacSHA256".into()),
            ]
        };
        let run = |owned: &[(&'static str, String); 4], body: &[u8], keys: &[SigningSecret]| {
            let l: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
            check(&l, body, keys, NOW)
        };
        let by_primary = list(&sign(&primary, &ts, &escaped), PRIMARY_HEADER);
        let by_secondary = list(&sign(&secondary, &ts, &escaped), SECONDARY_HEADER);
        assert_eq!(run(&by_primary, body.as_bytes(), std::slice::from_ref(&primary)), Ok(()));
        assert_eq!(run(&by_secondary, body.as_bytes(), &[primary.clone(), secondary.clone()]), Ok(()));
        assert_eq!(
            run(&by_primary, body.as_bytes(), std::slice::from_ref(&secondary)),
            Err(VerifyErrorKind::NoMatchingSignature)
        );
        let other = body.replace("e1", "e2");
        assert_eq!(
            run(&by_primary, other.as_bytes(), std::slice::from_ref(&primary)),
            Err(VerifyErrorKind::NoMatchingSignature)
        );
        // The escaped text itself, sent as the body, verifies on the first try.
        assert_eq!(run(&by_primary, &escaped, std::slice::from_ref(&primary)), Ok(()));
        let raw = list(&sign(&primary, &ts, body.as_bytes()), PRIMARY_HEADER);
        assert_eq!(run(&raw, body.as_bytes(), std::slice::from_ref(&primary)), Ok(()));
        // The time is checked before either try.
        let l: Vec<(&str, &str)> = by_primary.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(check(&l, body.as_bytes(), &[primary], NOW + 601), Err(VerifyErrorKind::TimestampTooOld));
    }

    #[test]
    fn verifies_and_rejects() {
        use VerifyErrorKind::{
            MalformedHeader, MissingHeader, NoMatchingSignature, TimestampInFuture, TimestampTooOld,
        };
        let body = br#"{"type":"webhook_event","id":"e1","trigger":"FILE.UPLOADED"}"#;
        let mut t = TwoHeaders::hmac(BoxVerifier::new(), [PRIMARY_HEADER, TIMESTAMP_HEADER], body, |s, ts, b| {
            sign(s, &super::super::rfc3339::format(ts), b)
        });
        t.timestamp = super::super::rfc3339::format(NOW);
        t.fixed = vec![(VERSION_HEADER, "1".into()), (ALGORITHM_HEADER, "HmacSHA256".into())];
        let offset = "2023-11-14T15:13:20-07:00";
        let by_offset = sign(&t.key, offset, body);
        let tampered = [&body[..], b" "].concat();
        let not_b64 = "!".repeat(44);
        let short = Encoding::Base64.encode(&[0u8; 20]);
        t.check(&[
            t.case("valid"),
            t.case("offset timestamp").timestamp(offset).signature(&by_offset),
            t.case("oldest accepted").at(NOW + 600),
            t.case("too old").at(NOW + 601).fails(TimestampTooOld),
            t.case("a second ahead").at(NOW - 1).fails(TimestampInFuture),
            t.case("60 s ahead").at(NOW - 60).fails(TimestampInFuture),
            t.case("rotation: other line first").signatures(&[&t.by_other, &t.good]),
            t.case("tampered body").body(&tampered).fails(NoMatchingSignature),
            t.case("other key").signature(&t.by_other).fails(NoMatchingSignature),
            t.case("no signature").signatures(&[]).fails(MissingHeader),
            t.case("no timestamp").timestamps(&[]).fails(MissingHeader),
            t.case("unix timestamp").timestamp("1700000000").fails(MalformedHeader),
            t.case("two timestamps").timestamps(&[&t.timestamp, offset]).fails(MalformedHeader),
            t.case("not base64").signature(&not_b64).fails(MalformedHeader),
            t.case("SHA-1 length").signature(&short).fails(MalformedHeader),
        ]);
        // The version and algorithm headers.
        let ts = super::super::rfc3339::format(NOW);
        let good = sign(&t.key, &ts, body);
        let keys = [t.key.clone()];
        let with = |version: Option<&str>, algorithm: Option<&str>| {
            let mut list = vec![(PRIMARY_HEADER, good.as_str()), (TIMESTAMP_HEADER, ts.as_str())];
            list.extend(version.map(|v| (VERSION_HEADER, v)));
            list.extend(algorithm.map(|a| (ALGORITHM_HEADER, a)));
            check(&list, body, &keys, NOW)
        };
        assert_eq!(with(Some("1"), Some("HmacSHA256")), Ok(()));
        assert_eq!(with(Some("2"), Some("HmacSHA256")), Err(MalformedHeader));
        assert_eq!(with(Some("1"), Some("HmacSHA512")), Err(MalformedHeader));
        assert_eq!(with(None, Some("HmacSHA256")), Err(MissingHeader));
        assert_eq!(with(Some("1"), None), Err(MissingHeader));
        // The secondary header alone verifies too.
        let list = [
            (SECONDARY_HEADER, good.as_str()),
            (TIMESTAMP_HEADER, ts.as_str()),
            (VERSION_HEADER, "1"),
            (ALGORITHM_HEADER, "HmacSHA256"),
        ];
        assert_eq!(check(&list, body, &keys, NOW), Ok(()));
        assert_eq!(BoxVerifier::new().precheck(&headers(&list)).map_err(|e| e.kind()), Ok(()));
        assert_eq!(BoxVerifier::new().precheck(&headers(&list[1..])).map_err(|e| e.kind()), Err(MissingHeader));
    }

    #[test]
    fn rotation_tolerance_skew_and_replay() {
        let body = br#"{"id":"e1"}"#;
        let mut t = TwoHeaders::hmac(BoxVerifier::new(), [PRIMARY_HEADER, TIMESTAMP_HEADER], body, |s, ts, b| {
            sign(s, &super::super::rfc3339::format(ts), b)
        });
        t.timestamp = super::super::rfc3339::format(NOW);
        t.fixed = vec![(VERSION_HEADER, "1".into()), (ALGORITHM_HEADER, "HmacSHA256".into())];
        t.tolerance = 600;
        t.check_rotation_tolerance_and_replay(BoxVerifier::new().tolerance(Duration::from_secs(1_200)));
        t.check(&[t.case("no skew: a second ahead").at(NOW - 1).fails(VerifyErrorKind::TimestampInFuture)]);
        assert_eq!((DEFAULT_TOLERANCE, DEFAULT_FUTURE_SKEW), (Duration::from_secs(600), Duration::ZERO));
        let ts = super::super::rfc3339::format(NOW);
        let p = headers(&[
            (PRIMARY_HEADER, &sign(&SigningSecret::from("k"), &ts, body)),
            (TIMESTAMP_HEADER, &ts),
            (VERSION_HEADER, "1"),
            (ALGORITHM_HEADER, "HmacSHA256"),
        ]);
        let keys = [SigningSecret::from("k")];
        let zero = BoxVerifier::new();
        assert_eq!(zero.verify(&Delivery::new(&p, body, &keys, at(NOW))).map_err(|e| e.kind()), Ok(()));
        assert_eq!(
            zero.verify(&Delivery::new(&p, body, &keys, at(NOW - 1))).map_err(|e| e.kind()),
            Err(VerifyErrorKind::TimestampInFuture)
        );
        // Some skew where a receiver's clock runs behind Box's.
        let skew = BoxVerifier::new().future_skew(Duration::from_secs(60));
        assert_eq!(skew.verify(&Delivery::new(&p, body, &keys, at(NOW - 60))).map_err(|e| e.kind()), Ok(()));
        assert_eq!(
            skew.verify(&Delivery::new(&p, body, &keys, at(NOW - 61))).map_err(|e| e.kind()),
            Err(VerifyErrorKind::TimestampInFuture)
        );
    }
}
