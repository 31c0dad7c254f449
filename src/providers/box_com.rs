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
//!   (`2020-01-01T00:00:00-07:00`), signed. Tolerance: the SDK refuses a
//!   timestamp older than its `maxAge`, 10 minutes by default, and any
//!   timestamp in the future at all. [`DEFAULT_TOLERANCE`] is those 600
//!   seconds into the past; into the future this preset allows
//!   [`DEFAULT_FUTURE_SKEW`], 60 seconds, rather than the SDK's zero, so a
//!   receiver whose clock runs a few seconds behind Box's does not refuse
//!   every delivery (our choice; [`BoxVerifier::future_skew`] sets it, zero
//!   included).
//! - the SDK also retries a caller's re-serialised body in Java's escaping
//!   (`\uXXXX`, `\/`); this preset verifies the raw bytes Box sent, which
//!   are already in that form, so it needs no second try.
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
/// How far into the future `box-delivery-timestamp` may be: 60 seconds (the
/// SDK allows none; see the module docs).
pub const DEFAULT_FUTURE_SKEW: Duration = Duration::from_secs(60);

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
    /// A verifier accepting timestamps up to 600 seconds old and 60 seconds
    /// ahead.
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
        match_any_secret(delivery, head.signatures.iter().map(Vec::as_slice), |secret| {
            hmac_sha256(secret, &[delivery.body, ts])
        })
    }
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
    /// Box (`box-signature-primary` / `-secondary` of `{body}{timestamp}`, 600 s past, 60 s ahead; key = body `id`). See [`crate::providers::box_com`].
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
    super::ExampleOf::Signed(|s, _, at, b| signed_headers(s, super::unix_seconds(at), b)),
)
.signs("`box-signature-primary` / `-secondary` base64 HMAC-SHA256 of `{body}{box-delivery-timestamp}` (RFC 3339), one key each")
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
        // The SDK's time cases (600 s into the past; into the future the SDK
        // refuses even a second, this preset allows 60).
        let body = include_bytes!("../../tests/fixtures/providers/box/body.json");
        let h = |n: &str| expected["headers"][n].as_str().unwrap();
        let list: Vec<(&str, &str)> =
            [PRIMARY_HEADER, TIMESTAMP_HEADER, VERSION_HEADER, ALGORITHM_HEADER].iter().map(|n| (*n, h(n))).collect();
        let primary = [SigningSecret::from(expected["primary_key"].as_str().unwrap())];
        for case in expected["sdk_time_cases"].as_array().unwrap() {
            let now = case["now_s"].as_u64().unwrap();
            let ours = now + 60 >= 1_718_000_000 && now <= 1_718_000_600;
            assert_eq!(check(&list, body, &primary, now).is_ok(), ours, "{case}");
            if now >= 1_718_000_000 {
                assert_eq!(ours, case["sdk_accepts"].as_bool().unwrap(), "{case}");
            }
        }
        assert_body_identity(
            &Provider::box_com(),
            body,
            expected["event_id"].as_str().unwrap(),
            expected["event_type"].as_str(),
        );
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
            t.case("60 s ahead").at(NOW - 60),
            t.case("61 s ahead").at(NOW - 61).fails(TimestampInFuture),
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
        t.check(&[t.case("no skew: a second ahead").at(NOW - 1)]);
        assert_eq!((DEFAULT_TOLERANCE, DEFAULT_FUTURE_SKEW), (Duration::from_secs(600), Duration::from_secs(60)));
        let ts = super::super::rfc3339::format(NOW);
        let p = headers(&[
            (PRIMARY_HEADER, &sign(&SigningSecret::from("k"), &ts, body)),
            (TIMESTAMP_HEADER, &ts),
            (VERSION_HEADER, "1"),
            (ALGORITHM_HEADER, "HmacSHA256"),
        ]);
        let keys = [SigningSecret::from("k")];
        let zero = BoxVerifier::new().future_skew(Duration::ZERO);
        assert_eq!(zero.verify(&Delivery::new(&p, body, &keys, at(NOW))).map_err(|e| e.kind()), Ok(()));
        assert_eq!(
            zero.verify(&Delivery::new(&p, body, &keys, at(NOW - 1))).map_err(|e| e.kind()),
            Err(VerifyErrorKind::TimestampInFuture)
        );
    }
}
