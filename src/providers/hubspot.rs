//! HubSpot: the `X-HubSpot-Signature-v3` header.
//!
//! Scheme (HubSpot, "Validating requests", "Validate the v3 request
//! signature",
//! <https://developers.hubspot.com/docs/apps/developer-platform/build-apps/authentication/request-validation>):
//! `X-HubSpot-Signature-v3: <base64 HMAC-SHA256>`, keyed with the app's
//! client secret as UTF-8 bytes, over
//! `{method}{uri}{raw body}{X-HubSpot-Request-Timestamp}`, where
//! - `method` is the request method (`POST`);
//! - `uri` is the full URL HubSpot requested, in which the percent-encoded
//!   characters of HubSpot's table are decoded: `%3A` `:`, `%2F` `/`, `%3F`
//!   `?`, `%40` `@`, `%21` `!`, `%24` `$`, `%27` `'`, `%28` `(`, `%29` `)`,
//!   `%2A` `*`, `%2C` `,`, `%3B` `;` (hex digits in either case); every
//!   other escape (`%20`, `%2B`, `%3D`, `%25`, ...) stays as received;
//! - the timestamp is the header's text: Unix time in **milliseconds**.
//!
//! HubSpot rejects requests older than 5 minutes; this crate applies the
//! tolerance ([`DEFAULT_TOLERANCE`], [`HubSpotVerifier::tolerance`]) in both
//! directions, and not to an operator replay. **At exactly the tolerance**
//! the request is refused ([`BOUNDARY`]): HubSpot's Python SDK
//! (`hubspot-api-python`, `hubspot/utils/signature.py`,
//! `Signature._is_timestamp_valid`) accepts only `current_time - request_time
//! < timedelta(seconds=300)`. Its Node SDK (`hubspot-api-nodejs`,
//! `src/utils/signature.ts`) refuses only `currentTime - timestamp > 300000`,
//! so the two official SDKs differ by that one millisecond; this preset takes
//! the stricter one (299.999 s old passes, 300 s does not). Neither SDK checks
//! a timestamp in the future; this preset refuses one more than the
//! tolerance ahead, with the same boundary.
//!
//! **Older versions (v1, v2), off by default.** Workflow webhook actions and
//! older app subscriptions sign with `X-HubSpot-Signature` and
//! `X-HubSpot-Signature-Version: v1` or `v2` instead (HubSpot, "v1 request
//! validation", <https://developers.hubspot.com/docs/faq/v1-request-validation>,
//! and "v2 request validation",
//! <https://developers.hubspot.com/docs/faq/v2-request-validation>): the hex
//! SHA-256 (not an HMAC) of `{client secret}{body}` (v1) or
//! `{client secret}{method}{uri}{body}` (v2, the URL exactly as requested:
//! the base URL and the path and query as received, nothing decoded). They
//! carry **no timestamp**, so nothing bounds a captured request's age: only
//! the claim stops its replay. Accept them on an endpoint that receives them
//! with [`HubSpotVerifier::accept_v1_v2`]; a request carrying a v3 signature
//! is always verified by v3.
//!
//! **The URL:** the public base URL is configuration
//! ([`HubSpotVerifier::new`], [`Provider::hubspot`](crate::providers::Provider::hubspot)): `scheme://host[:port][/prefix]`
//! as HubSpot reaches the service, never taken from `Host` or forwarding
//! headers. The request's path and query are appended as received, so the
//! path the layer sees must be the one HubSpot requested: if a router strips
//! a prefix before the layer, put that prefix in the base URL.
//!
//! **Rotation:** when the app's client secret is rotated, configure the old
//! and the new secret until requests signed with the old one stop (any one
//! that matches passes).
//!
//! **Event key** ([`HubSpotBatchKey`]): a Webhooks API request carries a
//! JSON array of events (a batch), each with an `attemptNumber` ("which
//! number attempt this is to notify your service of this event"), so a retry
//! resends the events with `attemptNumber` incremented, under a new timestamp
//! and signature. So
//! neither the signature nor a hash of the raw body is equal across
//! deliveries of a batch, and `eventId` alone is "not guaranteed to be
//! unique" (HubSpot, webhook payload fields). The key is
//! `sha256:<hex>` of the batch's event identities, each
//! `[portalId,subscriptionId,eventId,occurredAt,objectId]` (an absent
//! `objectId` is `null`), sorted and joined by `\n`: equal for every
//! attempt of the same events, whatever their order or `attemptNumber`. The
//! event type is the `subscriptionType` shared by every event of the batch
//! (none when they differ). If HubSpot ever retries events in a different
//! grouping, the new batch gets a new key: handle events idempotently by
//! their own identity as well. A body that is not such a batch (a workflow
//! webhook action, a CRM card fetch) has no key (400): give those endpoints
//! their own [`KeyExtractor`] with [`crate::providers::Provider::key_extractor`].
//!
//! **Signed / not signed**
//! (<https://developers.hubspot.com/docs/apps/developer-platform/build-apps/authentication/request-validation>):
//! the method, the full URI, the raw body and `X-HubSpot-Request-Timestamp`
//! are signed, so the event key (derived from the body's events) and the
//! event type (their common `subscriptionType`) are signed. Other headers are
//! not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): each
//! event's `occurredAt` (Unix milliseconds).

use crate::providers::Provider;
use std::time::Duration;

use sha2::Digest as _;

use crate::key::{EventIdentity, KeyError, KeyErrorKind, KeyExtractor};

use crate::verify::{
    header_values, hmac_sha256, match_any_secret, parse_unix_millis, single_header, Boundary, Delivery, Encoding,
    SigningSecret, Verifier, VerifyError, VerifyErrorKind,
};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "hubspot";
/// How long a HubSpot event can be sent again: 3 days.
///
/// HubSpot's Webhooks API retries a failed batch up to 10 times with an
/// exponential back-off: 2 minutes, then 4, 8, ... (HubSpot, "Webhooks API",
/// retries, <https://developers.hubspot.com/docs/methods/webhooks/webhooks-overview>,
/// quoted at <https://integrate.hubspot.com/t/what-does-will-retry-mean-when/3953>);
/// ten doublings from 2 minutes end about 34 hours after the first attempt
/// (later descriptions spread the 10 retries over 24 hours). No manual
/// redelivery is documented. 3 days covers either reading with a margin.
pub const REPLAY_WINDOW: std::time::Duration = super::days(3);

/// The header HubSpot signs requests with (v3).
pub const SIGNATURE_HEADER: &str = "x-hubspot-signature-v3";
/// The v1 and v2 signature header (hex SHA-256), when accepted
/// ([`HubSpotVerifier::accept_v1_v2`]).
pub const LEGACY_SIGNATURE_HEADER: &str = "x-hubspot-signature";
/// The header naming the v1 / v2 scheme of [`LEGACY_SIGNATURE_HEADER`].
pub const SIGNATURE_VERSION_HEADER: &str = "x-hubspot-signature-version";

/// The header carrying the signed timestamp, Unix milliseconds.
pub const TIMESTAMP_HEADER: &str = "x-hubspot-request-timestamp";

/// HubSpot's tolerance: requests older than 5 minutes are rejected.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// A timestamp exactly [`DEFAULT_TOLERANCE`] (or the configured tolerance)
/// old is refused, as HubSpot's Python SDK decides it (`current_time -
/// request_time < timedelta(seconds=300)` is valid, `hubspot/utils/signature.py`);
/// see the module docs for the Node SDK's `>`.
pub const BOUNDARY: Boundary = Boundary::Exclusive;

/// Verifies `X-HubSpot-Signature-v3` for requests reaching the service at
/// one public base URL.
#[derive(Debug, Clone)]
#[must_use]
pub struct HubSpotVerifier {
    base: String,
    tolerance: Duration,
    legacy: bool,
}

impl HubSpotVerifier {
    /// A verifier for requests HubSpot sends to `public_base_url` (for
    /// example `https://hooks.example.com`): scheme, host, optional port and
    /// path prefix, no query. A trailing `/` is dropped; the request's path
    /// and query are appended to it. Tolerance: 300 seconds.
    pub fn new(public_base_url: impl Into<String>) -> Self {
        let mut base: String = public_base_url.into();
        while base.ends_with('/') {
            base.pop();
        }
        Self { base, tolerance: DEFAULT_TOLERANCE, legacy: false }
    }

    setters! {
        /// Also accepts the v1 and v2 signatures (`X-HubSpot-Signature` with
        /// `X-HubSpot-Signature-Version`) on requests without a v3 one: see the
        /// [module docs](self) (no timestamp is signed). Default: off.
        pub fn accept_v1_v2(accept: bool) => legacy = accept;

        /// Sets how far (both directions) the timestamp may be from now.
        pub fn tolerance(tolerance: Duration) => tolerance = tolerance;
    }

    /// The public base URL, as configured without its trailing `/`.
    pub fn public_base_url(&self) -> &str {
        &self.base
    }
}

/// The characters HubSpot's table decodes: an escape of any other byte is
/// left as it is.
const RESERVED: &[u8] = b":/?@!$'()*,;";

/// The character of the escape `%` `high` `low` (hex digits, either case)
/// when HubSpot's table decodes it.
fn reserved(high: u8, low: u8) -> Option<char> {
    let digit = |d: u8| char::from(d).to_digit(16);
    let byte = u8::try_from(digit(high)? * 16 + digit(low)?).ok()?;
    RESERVED.contains(&byte).then_some(char::from(byte))
}

/// `uri` with HubSpot's table of escapes decoded, in one left-to-right pass
/// (so `%253A` stays `%253A`).
fn decode_reserved(uri: &str) -> String {
    let bytes = uri.as_bytes();
    let mut out = String::with_capacity(uri.len());
    let (mut i, mut copied) = (0, 0);
    while i < bytes.len() {
        if bytes[i] == b'%' {
            if let (Some(&high), Some(&low)) = (bytes.get(i + 1), bytes.get(i + 2)) {
                if let Some(c) = reserved(high, low) {
                    // `i` and `i + 3` sit next to ASCII bytes: char boundaries.
                    out.push_str(&uri[copied..i]);
                    out.push(c);
                    i += 3;
                    copied = i;
                    continue;
                }
            }
        }
        i += 1;
    }
    out.push_str(&uri[copied..]);
    out
}

/// The parsed head: the timestamp header's text and every v3 signature.
struct Header<'a> {
    timestamp: &'a str,
    millis: u64,
    signatures: Vec<[u8; 32]>,
}

/// A base64 HMAC-SHA256 tag: exactly 32 bytes, nothing else.
fn decode_tag(text: &str) -> Option<[u8; 32]> {
    // 32 bytes are 44 base64 characters with padding; refuse anything longer
    // before decoding so a long header allocates nothing.
    if text.len() != 44 {
        return None;
    }
    Encoding::Base64.decode(text)?.try_into().ok()
}

fn parse(parts: &http::request::Parts) -> Result<Header<'_>, VerifyError> {
    let mut signatures = Vec::new();
    crate::verify::check_signature_header_size(parts, SIGNATURE_HEADER)?;
    let mut entries = 0;
    for value in header_values(parts, SIGNATURE_HEADER) {
        crate::verify::count_entry(&mut entries)?;
        signatures.push(decode_tag(value?.trim()).ok_or(VerifyErrorKind::MalformedHeader)?);
    }
    if signatures.is_empty() {
        return Err(VerifyErrorKind::MissingHeader.into());
    }
    let timestamp = single_header(parts, TIMESTAMP_HEADER)?;
    let millis = parse_unix_millis(timestamp)?;
    Ok(Header { timestamp, millis, signatures })
}

/// A v1 or v2 signature: the version and the decoded hex SHA-256.
fn parse_legacy(parts: &http::request::Parts) -> Result<(bool, [u8; 32]), VerifyError> {
    let version = single_header(parts, SIGNATURE_VERSION_HEADER)?;
    let v2 = match version.trim() {
        "v1" => false,
        "v2" => true,
        _ => return Err(VerifyErrorKind::MalformedHeader.into()),
    };
    let text = single_header(parts, LEGACY_SIGNATURE_HEADER)?.trim();
    let mut sig = [0u8; 32];
    hex::decode_to_slice(text, &mut sig).map_err(|_| VerifyErrorKind::MalformedHeader)?;
    Ok((v2, sig))
}

impl HubSpotVerifier {
    /// Whether this request is checked by v1/v2: accepted, and no v3 header.
    fn legacy_request(&self, parts: &http::request::Parts) -> bool {
        self.legacy
            && !parts.headers.contains_key(SIGNATURE_HEADER)
            && parts.headers.contains_key(LEGACY_SIGNATURE_HEADER)
    }

    fn verify_legacy(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let (v2, sig) = parse_legacy(delivery.parts)?;
        let path_and_query = delivery.parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let uri = format!("{}{path_and_query}", self.base);
        let method = delivery.parts.method.as_str();
        match_any_secret(delivery, [&sig[..]], |secret| -> [u8; 32] {
            let mut h = sha2::Sha256::new();
            h.update(secret.expose());
            if v2 {
                h.update(method.as_bytes());
                h.update(uri.as_bytes());
            }
            h.update(delivery.body);
            h.finalize().into()
        })
    }
}

/// The `X-HubSpot-Signature` value of version `v1` (`v2 == false`) or `v2`
/// HubSpot would send for a `method` request to `uri` (the full URL as
/// requested) with `body`, with client secret `secret`: hex SHA-256. For
/// tests and fixtures.
pub fn sign_legacy(secret: &SigningSecret, v2: bool, method: &str, uri: &str, body: &[u8]) -> String {
    let mut h = sha2::Sha256::new();
    h.update(secret.expose());
    if v2 {
        h.update(method.as_bytes());
        h.update(uri.as_bytes());
    }
    h.update(body);
    hex::encode(h.finalize())
}

impl Verifier for HubSpotVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        if self.legacy_request(parts) {
            return parse_legacy(parts).map(drop);
        }
        parse(parts).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        if self.legacy_request(delivery.parts) {
            return self.verify_legacy(delivery);
        }
        let header = parse(delivery.parts)?;
        // Cheap checks first: the timestamp's age before any HMAC over the body.
        delivery.check_time_millis_with(header.millis, self.tolerance, BOUNDARY)?;
        let path_and_query = delivery.parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let uri = decode_reserved(&format!("{}{path_and_query}", self.base));
        let method = delivery.parts.method.as_str().as_bytes();
        match_any_secret(delivery, header.signatures.iter().map(|s| &s[..]), |secret| {
            hmac_sha256(secret, &[method, uri.as_bytes(), delivery.body, header.timestamp.as_bytes()])
        })
    }
}

/// The `X-HubSpot-Signature-v3` value HubSpot would send for a `method`
/// request to `uri` (the full URL as requested, escapes and all; the table's
/// escapes are decoded here as HubSpot does) with `body`, at
/// `timestamp_millis`, with client secret `secret`. For tests and fixtures.
pub fn sign(secret: &SigningSecret, method: &str, uri: &str, body: &[u8], timestamp_millis: u64) -> String {
    let uri = decode_reserved(uri);
    let ts = timestamp_millis.to_string();
    Encoding::Base64.encode(&hmac_sha256(secret, &[method.as_bytes(), uri.as_bytes(), body, ts.as_bytes()]))
}

/// The event key of a HubSpot Webhooks API batch: `sha256:<hex>` of its
/// events' identities (see the [module docs](self)); the type is the shared
/// `subscriptionType`. A single event object is a batch of one.
#[derive(Debug, Clone, Copy, Default)]
#[must_use]
pub struct HubSpotBatchKey {
    _priv: (),
}

impl HubSpotBatchKey {
    /// The batch key extractor.
    pub fn new() -> Self {
        Self::default()
    }
}

/// The identity fields, in order; only `objectId` may be absent.
const IDENTITY: [(&str, bool); 5] =
    [("portalId", true), ("subscriptionId", true), ("eventId", true), ("occurredAt", true), ("objectId", false)];

/// Appends an integer or a string (JSON-quoted) identity field.
fn push_field(out: &mut String, value: Option<&serde_json::Value>, required: bool) -> Result<(), KeyError> {
    match value {
        None | Some(serde_json::Value::Null) if required => Err(KeyErrorKind::Missing.into()),
        None | Some(serde_json::Value::Null) => {
            out.push_str("null");
            Ok(())
        }
        Some(serde_json::Value::Number(n)) if n.is_u64() || n.is_i64() => {
            out.push_str(&n.to_string());
            Ok(())
        }
        Some(serde_json::Value::String(s)) if !s.is_empty() => {
            out.push_str(&serde_json::Value::String(s.clone()).to_string());
            Ok(())
        }
        Some(serde_json::Value::String(_)) if required => Err(KeyErrorKind::Missing.into()),
        Some(_) => Err(KeyErrorKind::Invalid.into()),
    }
}

impl KeyExtractor for HubSpotBatchKey {
    fn extract(&self, _parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let doc: serde_json::Value = serde_json::from_slice(body).map_err(|_| KeyErrorKind::BodyNotJson)?;
        let events = match &doc {
            serde_json::Value::Array(events) => events.as_slice(),
            serde_json::Value::Object(_) => std::slice::from_ref(&doc),
            _ => return Err(KeyErrorKind::Invalid.into()),
        };
        if events.is_empty() {
            return Err(KeyErrorKind::Missing.into());
        }
        let mut identities = Vec::with_capacity(events.len());
        let mut types = events.iter().map(|e| e.get("subscriptionType").and_then(serde_json::Value::as_str));
        let first_type = types.next().flatten();
        let event_type = if types.all(|t| t == first_type) { first_type.map(str::to_owned) } else { None };
        for event in events {
            let event = event.as_object().ok_or(KeyErrorKind::Invalid)?;
            let mut id = String::from("[");
            for (i, (field, required)) in IDENTITY.into_iter().enumerate() {
                if i > 0 {
                    id.push(',');
                }
                push_field(&mut id, event.get(field), required)?;
            }
            id.push(']');
            identities.push(id);
        }
        identities.sort_unstable();
        identities.dedup();
        let mut hash = sha2::Sha256::new();
        for (i, id) in identities.iter().enumerate() {
            if i > 0 {
                hash.update(b"\n");
            }
            hash.update(id.as_bytes());
        }
        Ok(EventIdentity { key: format!("sha256:{}", hex::encode(hash.finalize())), event_type })
    }
}

impl crate::providers::Provider {
    /// HubSpot signature v3 (`X-HubSpot-Signature-v3` over method + URI + body +
    /// timestamp, 300 s; derived batch key). `public_base_url` is the scheme
    /// and host HubSpot calls. See [`crate::providers::hubspot`].
    ///
    /// The HubSpot preset for requests reaching the service at `public_base_url`
    /// (see [`HubSpotVerifier::new`]): [`HubSpotVerifier`] with a 300 second
    /// tolerance, key [`HubSpotBatchKey`], type the batch's `subscriptionType`.
    pub fn hubspot(public_base_url: impl Into<String>) -> Self {
        crate::providers::Provider::new(NAME, HubSpotVerifier::new(public_base_url), HubSpotBatchKey::new())
    }
}

/// [`PresetInfo::sign`](super::PresetInfo::sign) for HubSpot: the v3
/// signature of `POST`, the URL, the body and the millisecond timestamp.
fn send(key: &str, d: &super::Signing<'_>) -> Result<super::Example, super::SignError> {
    let secret = SigningSecret::from(key);
    let ms = super::unix_millis(d.at);
    let headers = super::signature_and_time(SIGNATURE_HEADER, TIMESTAMP_HEADER, ms, |ms| {
        sign(&secret, "POST", d.url, d.body, ms)
    });
    super::signed_delivery(Provider::hubspot(&d.origin()?), secret, d, headers, d.body.to_vec())
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    "hubspot",
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER, TIMESTAMP_HEADER],
    |url| Provider::hubspot(url),
    super::ExampleOf::Whole(|_, at, body| {
        // The signature covers the method, the URL and a millisecond timestamp.
        let url = format!("{}/hook", super::EXAMPLE_BASE);
        let headers = super::signature_and_time(SIGNATURE_HEADER, TIMESTAMP_HEADER, super::unix_millis(at), |ms| {
            sign(&super::example_secret(), "POST", &url, body, ms)
        });
        super::Example {
            provider: Provider::hubspot(super::EXAMPLE_BASE),
            secrets: vec![super::example_secret()],
            parts: super::example_parts("/hook", headers),
            body: body.to_vec(),
        }
    }),
)
.sends(send)
.signing(super::UrlArg::PublicBaseUrl)
.signs("`X-HubSpot-Signature-v3` base64 HMAC-SHA256 of method + URI + body + ms timestamp; with `HubSpotVerifier::accept_v1_v2(true)` also `X-HubSpot-Signature` v1 / v2 (hex SHA-256 of secret + body / secret + method + URI + body; no timestamp)")
.key_from("fields of the JSON body (a derived key)")
.fixture(super::Fixture::own("the SDK's vectors (`sdk.json`): v1, v2 and v3, a batch and its retry"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fixture_json;
    use crate::test_support::{request_to, UrlCase};
    use std::time::SystemTime;

    /// HubSpot's own examples ("v1 request validation", "v2 request
    /// validation"), through the verifier: accepted only when enabled, and
    /// never in place of a v3 signature.
    #[test]
    fn v1_and_v2_signatures_verify_hubspot_s_examples_when_accepted() {
        let secret = SigningSecret::from("yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy");
        let body = br#"[{"eventId":1,"subscriptionId":12345,"portalId":62515,"occurredAt":1564113600000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM","changeFlag":"NEW","appId":54321}]"#;
        let v1 = "232db2615f3d666fe21a8ec971ac7b5402d33b9a925784df3ca654d05f4817de";
        let v2_get = "eee2dddcc73c94d699f5e395f4b9d454a069a6855fbfa152e91e88823087200e";
        assert_eq!(sign_legacy(&secret, false, "POST", "", body), v1);
        assert_eq!(sign_legacy(&secret, true, "GET", "https://www.example.com/webhook_uri", b""), v2_get);
        let req = |method: &str, version: &str, sig: &str| {
            http::Request::builder()
                .method(method)
                .uri("/webhook_uri")
                .header(LEGACY_SIGNATURE_HEADER, sig)
                .header(SIGNATURE_VERSION_HEADER, version)
                .body(())
                .unwrap()
                .into_parts()
                .0
        };
        let now = SystemTime::now();
        let secrets = std::slice::from_ref(&secret);
        let on = HubSpotVerifier::new("https://www.example.com").accept_v1_v2(true);
        let off = HubSpotVerifier::new("https://www.example.com");
        let check = |v: &HubSpotVerifier, p: &http::request::Parts, b: &[u8]| {
            v.verify(&Delivery::new(p, b, secrets, now)).map_err(|e| e.kind())
        };
        assert_eq!(check(&on, &req("POST", "v1", v1), body), Ok(()));
        assert_eq!(check(&on, &req("GET", "v2", v2_get), b""), Ok(()));
        assert_eq!(check(&on, &req("POST", "v1", v1), b"[]"), Err(VerifyErrorKind::NoMatchingSignature));
        assert_eq!(check(&on, &req("POST", "v2", v2_get), b""), Err(VerifyErrorKind::NoMatchingSignature));
        assert_eq!(check(&on, &req("POST", "v9", v1), body), Err(VerifyErrorKind::MalformedHeader));
        assert_eq!(check(&on, &req("POST", "v1", "zz"), body), Err(VerifyErrorKind::MalformedHeader));
        // Off by default: the v3 header is required.
        assert_eq!(check(&off, &req("POST", "v1", v1), body), Err(VerifyErrorKind::MissingHeader));
        assert_eq!(off.precheck(&req("POST", "v1", v1)).map_err(|e| e.kind()), Err(VerifyErrorKind::MissingHeader));
        // A request with a v3 signature is verified by v3 even when v1/v2 are accepted.
        let mut with_v3 = req("POST", "v1", v1);
        with_v3.headers.insert(SIGNATURE_HEADER, http::HeaderValue::from_static("AAAA"));
        assert_eq!(check(&on, &with_v3, body), Err(VerifyErrorKind::MalformedHeader));
    }

    fn at_millis(ms: u64) -> SystemTime {
        std::time::UNIX_EPOCH + Duration::from_millis(ms)
    }

    /// The fixed v3 vector in HubSpot's Python SDK tests
    /// (`hubspot-api-python`, `tests/spec/utils/test_signature.py`): client
    /// secret `yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy`, `POST`
    /// `https://www.example.com/webhook_uri`, body
    /// `{'example_field':'example_value'}`, timestamp `15000000`.
    #[test]
    fn hubspot_sdk_test_vector() {
        let secret = SigningSecret::from("yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy");
        let body = b"{'example_field':'example_value'}";
        let sig = "HPW73RUtKmcYoEDADG0s6MmGFWUzWJKAW07r8RDgcQw=";
        assert_eq!(sign(&secret, "POST", "https://www.example.com/webhook_uri", body, 15_000_000), sig);
        let p = request_to("POST", "/webhook_uri", &[(SIGNATURE_HEADER, sig), (TIMESTAMP_HEADER, "15000000")]);
        let v = HubSpotVerifier::new("https://www.example.com");
        let secrets = [secret];
        assert!(v.verify(&Delivery::new(&p, body, &secrets, at_millis(15_000_000))).is_ok());
        assert_eq!(
            v.verify(&Delivery::new(&p, body, &secrets, at_millis(15_000_000 + 300_001))).unwrap_err().kind(),
            VerifyErrorKind::TimestampTooOld
        );
    }

    /// HubSpot's table, and only it, is decoded.
    #[test]
    fn uri_decoding_follows_the_table() {
        let cases = [
            ("%3A%2F%3F%40%21%24%27%28%29%2A%2C%3B", ":/?@!$'()*,;"),
            ("%3a%2f%3f%2a%2c%3b", ":/?*,;"),
            ("%20%2B%3D%25%26%23%5B", "%20%2B%3D%25%26%23%5B"),
            ("%253A", "%253A"),
            ("a%3", "a%3"),
            ("%", "%"),
            ("%%3A", "%:"),
            ("caf\u{e9}%3A", "caf\u{e9}:"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(decode_reserved(input), want, "{input}");
        }
        // Every byte's escape, in both cases: only the table's twelve decode.
        let table = ":/?@!$'()*,;";
        for byte in 0..=u8::MAX {
            for escape in [format!("%{byte:02X}"), format!("%{byte:02x}")] {
                let decoded = decode_reserved(&escape);
                if table.contains(char::from(byte)) {
                    assert_eq!(decoded, char::from(byte).to_string(), "{escape}");
                } else {
                    assert_eq!(decoded, escape);
                }
            }
        }
    }

    #[derive(serde::Deserialize)]
    struct Delivered {
        method: String,
        timestamp: String,
        body: String,
        signature: String,
    }

    #[derive(serde::Deserialize)]
    struct Fixture {
        client_secret: String,
        public_base_url: String,
        path_and_query: String,
        signed_uri: String,
        first: Delivered,
        retry: Delivered,
    }

    /// Signed by `@hubspot/api-client@13.5.0`'s `Signature.getSignature`
    /// (`scripts/fixtures/hubspot.js`): a batch and its retry.
    #[test]
    fn hubspot_sdk_fixture() {
        let f: Fixture = fixture_json("hubspot/sdk.json");
        let secrets = [SigningSecret::from(f.client_secret.as_str())];
        assert_eq!(decode_reserved(&format!("{}{}", f.public_base_url, f.path_and_query)), f.signed_uri);
        let v = HubSpotVerifier::new(format!("{}/", f.public_base_url));
        let mut keys = Vec::new();
        for d in [&f.first, &f.retry] {
            let ts: u64 = d.timestamp.parse().unwrap();
            let p = request_to(
                &d.method,
                &f.path_and_query,
                &[
                    (SIGNATURE_HEADER, &d.signature),
                    (TIMESTAMP_HEADER, &d.timestamp),
                    ("content-type", "application/json"),
                ],
            );
            assert_eq!(
                v.verify(&Delivery::new(&p, d.body.as_bytes(), &secrets, at_millis(ts + 1_000))).map_err(|e| e.kind()),
                Ok(())
            );
            assert_eq!(
                v.verify(&Delivery::new(&p, d.body.replace("Zo", "Jo").as_bytes(), &secrets, at_millis(ts)))
                    .unwrap_err()
                    .kind(),
                VerifyErrorKind::NoMatchingSignature
            );
            let uri = format!("{}{}", f.public_base_url, f.path_and_query);
            assert_eq!(sign(&secrets[0], &d.method, &uri, d.body.as_bytes(), ts), d.signature);
            let id = crate::providers::Provider::hubspot(f.public_base_url.as_str())
                .extractor_ref()
                .extract(&p, d.body.as_bytes())
                .unwrap();
            assert_eq!(id.event_type.as_deref(), Some("contact.propertyChange"));
            keys.push(id.key);
        }
        assert_ne!(f.first.body, f.retry.body);
        assert_eq!(keys[0], keys[1], "a retry (attemptNumber + 1) keeps the key");
        assert!(keys[0].starts_with("sha256:") && keys[0].len() == 71, "{}", keys[0]);
    }

    #[test]
    fn verifies_and_rejects() {
        const NOW: u64 = 1_751_371_260_000;
        let base = "https://hooks.example.com/hs";
        let secret = SigningSecret::from("client-secret-new");
        let old = SigningSecret::from("client-secret-old");
        let body = br#"[{"eventId":1,"subscriptionId":2,"portalId":3,"occurredAt":4}]"#;
        let pq = "/webhook?a=%3A%20";
        let uri = format!("{base}{pq}");
        let ts = NOW.to_string();
        let good = sign(&secret, "POST", &uri, body, NOW);
        let by_old = sign(&old, "POST", &uri, body, NOW);
        let as_get = sign(&secret, "GET", &uri, body, NOW);
        let future_ts = (NOW + 301_000).to_string();
        let future = sign(&secret, "POST", &uri, body, NOW + 301_000);
        let stale_ts = (NOW - 300_001).to_string();
        let stale = sign(&secret, "POST", &uri, body, NOW - 300_001);
        let edge_ts = (NOW - 299_999).to_string();
        let edge = sign(&secret, "POST", &uri, body, NOW - 299_999);
        let at_limit_ts = (NOW - 300_000).to_string();
        let at_limit = sign(&secret, "POST", &uri, body, NOW - 300_000);
        let ahead_ts = (NOW + 299_999).to_string();
        let ahead = sign(&secret, "POST", &uri, body, NOW + 299_999);
        let ahead_limit_ts = (NOW + 300_000).to_string();
        let ahead_limit = sign(&secret, "POST", &uri, body, NOW + 300_000);
        let max_ts = u64::MAX.to_string();
        let max = sign(&secret, "POST", &uri, body, u64::MAX);
        let long = "A".repeat(100_000);
        let v1 = "a".repeat(64);
        let both: &[SigningSecret] = &[secret.clone(), old.clone()];
        let current = std::slice::from_ref(&secret);
        let (s, t) = (SIGNATURE_HEADER, TIMESTAMP_HEADER);
        use VerifyErrorKind::{
            MalformedHeader, MissingHeader, NoMatchingSignature, NoSecret, TimestampInFuture, TimestampTooOld,
        };
        let valid = UrlCase::valid("POST", pq, vec![(s, &good), (t, &ts)], body, current);
        let cases = [
            valid.clone(),
            valid
                .case("header names case-insensitive")
                .headers(vec![("X-HubSpot-Signature-V3", &good), ("X-HubSpot-Request-Timestamp", &ts)]),
            valid.case("table escape received decoded").uri("/webhook?a=:%20"),
            valid.case("lower-case table escape").uri("/webhook?a=%3a%20"),
            valid.case("other escape decoded").uri("/webhook?a=%3A+").fails(NoMatchingSignature),
            valid.case("tampered body").body(b"[]").fails(NoMatchingSignature),
            valid.case("other path").uri("/webhook?a=%3A%21").fails(NoMatchingSignature),
            valid.case("method is signed").method("PUT").fails(NoMatchingSignature),
            valid.case("GET signature").method("GET").headers(vec![(s, &as_get), (t, &ts)]),
            valid.case("timestamp is signed").headers(vec![(s, &good), (t, &edge_ts)]).fails(NoMatchingSignature),
            valid.case("wrong secret").headers(vec![(s, &by_old), (t, &ts)]).fails(NoMatchingSignature),
            valid.case("rotation: both secrets").headers(vec![(s, &by_old), (t, &ts)]).secrets(both),
            valid.case("two signature lines, one good").headers(vec![(s, &by_old), (s, &good), (t, &ts)]),
            valid.case("duplicate lines").headers(vec![(s, &good), (s, &good), (t, &ts), (t, &ts)]),
            valid.case("stale").headers(vec![(s, &stale), (t, &stale_ts)]).fails(TimestampTooOld),
            valid.case("a millisecond inside the tolerance").headers(vec![(s, &edge), (t, &edge_ts)]),
            // HubSpot's Python SDK: `now - request_time < 300 s`, so exactly 300 s old is refused.
            valid
                .case("exactly at the tolerance")
                .headers(vec![(s, &at_limit), (t, &at_limit_ts)])
                .fails(TimestampTooOld),
            valid.case("a millisecond inside, ahead").headers(vec![(s, &ahead), (t, &ahead_ts)]),
            valid
                .case("exactly at the tolerance, ahead")
                .headers(vec![(s, &ahead_limit), (t, &ahead_limit_ts)])
                .fails(TimestampInFuture),
            valid.case("future").headers(vec![(s, &future), (t, &future_ts)]).fails(TimestampInFuture),
            valid.case("two timestamps").headers(vec![(s, &good), (t, &ts), (t, &edge_ts)]).fails(MalformedHeader),
            // Read as milliseconds: January 1970, refused by the age check before any HMAC.
            valid
                .case("timestamp in seconds is just another number")
                .headers(vec![(s, &good), (t, "1751371260")])
                .fails(TimestampTooOld),
            valid.case("non-numeric timestamp").headers(vec![(s, &good), (t, "-1")]).fails(MalformedHeader),
            valid
                .case("timestamp past u64")
                .headers(vec![(s, &good), (t, "99999999999999999999")])
                .fails(MalformedHeader),
            valid.case("timestamp u64::MAX").headers(vec![(s, &max), (t, &max_ts)]).fails(TimestampInFuture),
            valid.case("missing signature").headers(vec![(t, &ts)]).fails(MissingHeader),
            valid.case("missing timestamp").headers(vec![(s, &good)]).fails(MissingHeader),
            valid.case("v1 header only").headers(vec![("x-hubspot-signature", &v1), (t, &ts)]).fails(MissingHeader),
            valid.case("malformed signature").headers(vec![(s, "abc"), (t, &ts)]).fails(MalformedHeader),
            valid.case("long signature").headers(vec![(s, &long), (t, &ts)]).fails(MalformedHeader),
            valid.case("no secret").secrets(&[]).fails(NoSecret),
        ];
        let v = HubSpotVerifier::new(base);
        UrlCase::check_all(&cases, |p, body, secrets| {
            v.verify(&Delivery::new(p, body, secrets, at_millis(NOW))).map_err(|e| e.kind())
        });
        // An operator replay skips the age check, not the signature.
        let p = request_to("POST", pq, &[(s, &stale), (t, &stale_ts)]);
        assert!(v.verify(&Delivery::new(&p, body, current, at_millis(NOW)).without_timestamp_check()).is_ok());
        assert!(v.verify(&Delivery::new(&p, b"[ ]", current, at_millis(NOW)).without_timestamp_check()).is_err());
        // A wider tolerance accepts it.
        let wide = HubSpotVerifier::new(base).tolerance(Duration::from_secs(600));
        assert!(wide.verify(&Delivery::new(&p, body, current, at_millis(NOW))).is_ok());
    }

    #[test]
    fn precheck_needs_both_headers() {
        let v = HubSpotVerifier::new("https://x.example");
        let sig = sign(&SigningSecret::from("s"), "POST", "https://x.example/", b"", 1);
        assert!(v.precheck(&request_to("POST", "/", &[(SIGNATURE_HEADER, &sig), (TIMESTAMP_HEADER, "1")])).is_ok());
        assert_eq!(
            v.precheck(&request_to("POST", "/", &[(SIGNATURE_HEADER, &sig)])).unwrap_err().kind(),
            VerifyErrorKind::MissingHeader
        );
        assert_eq!(
            v.precheck(&request_to("POST", "/", &[(SIGNATURE_HEADER, "x"), (TIMESTAMP_HEADER, "1")]))
                .unwrap_err()
                .kind(),
            VerifyErrorKind::MalformedHeader
        );
        assert_eq!(v.public_base_url(), "https://x.example");
    }

    #[test]
    fn batch_keys() {
        let x = HubSpotBatchKey::new();
        let key = |body: &str| x.extract(&request_to("POST", "/", &[]), body.as_bytes()).map_err(|e| e.kind());
        let a = r#"{"eventId":1,"subscriptionId":2,"portalId":3,"occurredAt":4,"objectId":5,"subscriptionType":"contact.creation","attemptNumber":0}"#;
        let a_retry = a.replace(r#""attemptNumber":0"#, r#""attemptNumber":3"#);
        let b = r#"{"eventId":9,"subscriptionId":2,"portalId":3,"occurredAt":4,"subscriptionType":"deal.creation"}"#;
        let ab = key(&format!("[{a},{b}]")).unwrap();
        assert_eq!(ab.event_type, None, "mixed types");
        assert_eq!(key(&format!("[{b},{a_retry}]")).unwrap().key, ab.key, "order and attemptNumber do not matter");
        assert_eq!(key(&format!("[{a},{a}]")).unwrap().key, key(&format!("[{a}]")).unwrap().key, "duplicates collapse");
        let single = key(a).unwrap();
        assert_eq!(single, key(&format!("[{a}]")).unwrap(), "an object is a batch of one");
        assert_eq!(single.event_type.as_deref(), Some("contact.creation"));
        assert_ne!(single.key, ab.key);
        // Each identity field changes the key.
        for (from, to) in [
            (r#""eventId":1"#, r#""eventId":10"#),
            (r#""portalId":3"#, r#""portalId":30"#),
            (r#""subscriptionId":2"#, r#""subscriptionId":20"#),
            (r#""occurredAt":4"#, r#""occurredAt":40"#),
            (r#""objectId":5"#, r#""objectId":50"#),
        ] {
            assert_ne!(key(&a.replace(from, to)).unwrap().key, single.key, "{to}");
        }
        // A string id and the same digits as a number are different events.
        assert_ne!(key(&a.replace(r#""eventId":1"#, r#""eventId":"1""#)).unwrap().key, single.key);
        let cases: &[(&str, &str, KeyErrorKind)] = &[
            ("empty batch", "[]", KeyErrorKind::Missing),
            ("no eventId", r#"[{"subscriptionId":2,"portalId":3,"occurredAt":4}]"#, KeyErrorKind::Missing),
            (
                "null portalId",
                r#"[{"eventId":1,"subscriptionId":2,"portalId":null,"occurredAt":4}]"#,
                KeyErrorKind::Missing,
            ),
            (
                "empty string id",
                r#"[{"eventId":"","subscriptionId":2,"portalId":3,"occurredAt":4}]"#,
                KeyErrorKind::Missing,
            ),
            ("float id", r#"[{"eventId":1.5,"subscriptionId":2,"portalId":3,"occurredAt":4}]"#, KeyErrorKind::Invalid),
            ("object id", r#"[{"eventId":{},"subscriptionId":2,"portalId":3,"occurredAt":4}]"#, KeyErrorKind::Invalid),
            ("not an object", "[1]", KeyErrorKind::Invalid),
            ("scalar body", "42", KeyErrorKind::Invalid),
            ("workflow action body", r#"{"vid":1,"properties":{}}"#, KeyErrorKind::Missing),
            ("not json", "eventId=1", KeyErrorKind::BodyNotJson),
        ];
        for (name, body, want) in cases {
            assert_eq!(key(body).unwrap_err(), *want, "{name}");
        }
        assert_eq!(crate::providers::Provider::hubspot("https://x.example").name(), "hubspot");
    }
}
