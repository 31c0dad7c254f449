//! Twilio: the `X-Twilio-Signature` header.
//!
//! Scheme (Twilio, "Secure webhooks",
//! <https://www.twilio.com/docs/usage/webhooks/webhooks-security>):
//! `X-Twilio-Signature: <base64 HMAC-SHA1>`, keyed with the account's auth
//! token as UTF-8 bytes, over
//! - the full URL Twilio requested (scheme, host, port if any, path, query,
//!   byte for byte as configured in Twilio), then
//! - for an `application/x-www-form-urlencoded` POST, every POST parameter
//!   (decoded) sorted by name, each written as name then value with no
//!   separator; a repeated name contributes each distinct value, sorted,
//!   as Twilio's SDKs do;
//! - for a JSON body, nothing more: the URL carries a `bodySHA256` query
//!   parameter, the hex SHA-256 of the raw body, which is checked against
//!   the body after the signature.
//!
//! A GET (or any request without a body) signs the URL alone. A body that is
//! neither form-encoded (on a POST) nor covered by `bodySHA256` is not
//! covered by the signature, and is refused
//! ([`VerifyErrorKind::NoMatchingSignature`]).
//!
//! **The URL:** the public base URL is configuration
//! ([`TwilioVerifier::new`], [`Provider::twilio`](crate::providers::Provider::twilio)): `scheme://host[:port][/prefix]`
//! as Twilio reaches the service (behind TLS termination and proxies), never
//! taken from `Host` or forwarding headers. The request's path and query are
//! appended exactly as received (not decoded, not re-encoded), so the path
//! the layer sees must be the one Twilio requested: if a router strips a
//! prefix before the layer, put that prefix in the base URL. Like Twilio's
//! SDKs, the base URL is also tried with its port removed, or with the
//! scheme's default port (`:443`, `:80`) added when it has none.
//!
//! **Rotation:** Twilio signs with the primary auth token; a secondary token
//! signs nothing until it is promoted. Configure both while promoting (any
//! one that matches passes). Webhooks
//! signed with a SharedKey (Webhooks configuration API, public beta,
//! <https://www.twilio.com/docs/usage/webhooks/webhook-shared-keys>) carry
//! `X-Twilio-Webhooks-Signature-Settings: key=...,algorithm=HMAC_SHA256`:
//! the same signed string with the algorithm the header names
//! (`HMAC_SHA1` or `HMAC_SHA256`; any other is refused), keyed with the
//! SharedKey secret, which is configured as one more secret. No timestamp:
//! there is no tolerance to set.
//!
//! **Event key:** the `I-Twilio-Idempotency-Token` header, which Twilio
//! sets on its webhook requests and repeats on its retries of one request.
//! Twilio's security page does not document it (this preset relies on it as
//! integrations commonly do) and it is not signed. A product that does not
//! send it gets a 400 (`key_missing`): give such an endpoint a key from the
//! signed parameters instead, for example a closure reading `MessageSid` and
//! `MessageStatus`, with [`crate::providers::Provider::key_extractor`]. There is no
//! event type.
//!
//! **Limit of the scheme:** no timestamp and no signed event id: whoever
//! captured a request can send it again (with a fresh idempotency token)
//! and it verifies. Make business writes idempotent on the parameters' own
//! identity (`MessageSid` + status, `CallSid` + status).
//!
//! **Size limits.** The form parameters must be decoded and sorted before
//! the HMAC, so an unsigned form body is work the sender makes us do. A form
//! body over [`MAX_FORM_BYTES`] (64 KiB) or [`MAX_FORM_PARAMS`] (1,000)
//! parameters is refused before any parameter is decoded
//! ([`VerifyErrorKind::MalformedHeader`]; a `Content-Length` over the byte
//! limit already from the head), and within the limits the parameters are
//! sorted as slices borrowed from the body and fed to the HMAC without
//! copies. Twilio's bodies are a few KB (see the constants for the
//! reasoning; Twilio documents no maximum); [`TwilioVerifier::form_limits`]
//! raises them. The preset also asks the layer for a body limit of
//! [`DEFAULT_BODY_LIMIT`] (64 KiB) when the application sets none.
//!
//! **Signed / not signed**
//! (<https://www.twilio.com/docs/usage/webhooks/webhooks-security>): the full
//! URL and the form parameters (or, for a JSON body, the URL whose
//! `bodySHA256` covers the body) are signed. The event key
//! (`I-Twilio-Idempotency-Token`) is a header and **not signed**; there is no
//! event type. No other header is signed.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! `SequenceNumber` parameter of a call's status callbacks (it orders the
//! callbacks of one call); message status callbacks have none: keep the
//! furthest state instead (`delivered` after `sent`).

use crate::providers::Provider;
use hmac::{Hmac, KeyInit, Mac as _};
use sha2::Digest as _;
use subtle::ConstantTimeEq as _;

use crate::verify::{
    any_matches, header_values, hmac, single_header, Algorithm, Delivery, Encoding, SigningSecret, Verifier,
    VerifyError, VerifyErrorKind,
};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "twilio";
/// How long a Twilio request can be sent again: 1 day.
///
/// Twilio retries a webhook request only on connection failures and
/// timeouts, as its connection overrides allow (`#rc=` retries, all within
/// the request's total timeout `#tt=`; Twilio, "Webhook connection
/// overrides",
/// <https://www.twilio.com/docs/usage/webhooks/webhooks-connection-overrides>),
/// so every copy of one request arrives within seconds; no later redelivery
/// and no manual replay are documented. A day is ample.
pub const REPLAY_WINDOW: std::time::Duration = super::days(1);

/// The header Twilio signs requests with.
pub const SIGNATURE_HEADER: &str = "x-twilio-signature";
/// The header naming a SharedKey signature's algorithm.
pub const SIGNATURE_SETTINGS_HEADER: &str = "x-twilio-webhooks-signature-settings";
/// The header carrying the idempotency token (the event key).
pub const IDEMPOTENCY_HEADER: &str = "i-twilio-idempotency-token";
/// The query parameter carrying the hex SHA-256 of a JSON body.
pub const BODY_HASH_PARAM: &str = "bodySHA256";

/// Verifies `X-Twilio-Signature` for requests reaching the service at one
/// public base URL.
#[derive(Debug, Clone)]
#[must_use]
pub struct TwilioVerifier {
    /// The configured base URL without trailing `/`, then its port variant.
    bases: Vec<String>,
    max_params: usize,
    max_form_bytes: usize,
}

/// Most form parameters verified in one request (default of
/// [`TwilioVerifier::form_limits`]). Twilio's largest documented parameter
/// sets are tens of entries: an incoming message has about 20 base
/// parameters, up to 10 media (`MediaUrl{N}` and `MediaContentType{N}`, 20
/// more) and about 10 geographic ones (Messaging, "Our request to your
/// webhook URL", <https://www.twilio.com/docs/messaging/guides/webhook-request>);
/// voice requests are of the same order. 1,000 is more than ten times that.
pub const MAX_FORM_PARAMS: usize = 1_000;

/// Most bytes of form body verified (default of
/// [`TwilioVerifier::form_limits`]): 64 KiB. Twilio documents no request
/// size; its bodies are a few KB (a message `Body` is at most 1,600
/// characters, at worst 6,400 UTF-8 bytes and 19,200 percent-encoded, and
/// media arrive as URLs, not content), so 64 KiB leaves three times the
/// worst message. Products that put JSON attributes in a parameter
/// (TaskRouter, Conversations) may send more: raise this and the layer's
/// `body_limit` for such endpoints.
pub const MAX_FORM_BYTES: usize = 64 * 1024;

/// The body limit the Twilio preset asks of the layer when the application
/// sets none ([`crate::providers::Provider::default_body_limit`]): [`MAX_FORM_BYTES`],
/// so an oversized body is answered 413 before it is buffered.
pub const DEFAULT_BODY_LIMIT: usize = MAX_FORM_BYTES;

impl TwilioVerifier {
    /// A verifier for requests Twilio sends to `public_base_url` (for example
    /// `https://hooks.example.com` or `https://example.com/twilio`): scheme,
    /// host, optional port and path prefix, no query. A trailing `/` is
    /// dropped; the request's path and query are appended to it.
    pub fn new(public_base_url: impl Into<String>) -> Self {
        let mut base: String = public_base_url.into();
        while base.ends_with('/') {
            base.pop();
        }
        let mut bases = vec![base];
        if let Some(variant) = port_variant(&bases[0]) {
            bases.push(variant);
        }
        Self { bases, max_params: MAX_FORM_PARAMS, max_form_bytes: MAX_FORM_BYTES }
    }

    /// Sets the most form parameters (default [`MAX_FORM_PARAMS`]) and the
    /// most bytes of form body (default [`MAX_FORM_BYTES`]) a request may
    /// have. A form body over either is refused
    /// ([`VerifyErrorKind::MalformedHeader`]) before any parameter is
    /// decoded, sorted or hashed; a `Content-Length` over the byte limit is
    /// refused from the head alone ([`Verifier::precheck`]). JSON bodies
    /// (`bodySHA256`) are hashed, not parsed, and are bounded only by the
    /// layer's body limit.
    pub fn form_limits(mut self, max_params: usize, max_bytes: usize) -> Self {
        self.max_params = max_params;
        self.max_form_bytes = max_bytes;
        self
    }

    /// The public base URL, as configured without its trailing `/`.
    pub fn public_base_url(&self) -> &str {
        &self.bases[0]
    }
}

/// `base` without its port, or with the scheme's default port when it has
/// none (what Twilio's SDKs also accept); `None` for an unknown scheme.
fn port_variant(base: &str) -> Option<String> {
    let (scheme, rest) = base.split_once("://")?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let host_start = authority.rfind('@').map_or(0, |i| i + 1);
    // A colon after an IPv6 literal's closing bracket starts the port.
    let after_bracket = authority[host_start..].rfind(']').map_or(host_start, |i| host_start + i + 1);
    match authority[after_bracket..].find(':') {
        Some(i) => Some(format!("{scheme}://{}{tail}", &authority[..after_bracket + i])),
        None => {
            let port = if scheme.eq_ignore_ascii_case("https") {
                "443"
            } else if scheme.eq_ignore_ascii_case("http") {
                "80"
            } else {
                return None;
            };
            Some(format!("{scheme}://{authority}:{port}{tail}"))
        }
    }
}

/// What the header and URL say about a request.
struct Header {
    algorithm: Algorithm,
    signatures: Vec<Vec<u8>>,
    /// The `bodySHA256` query parameter, decoded, when present.
    body_hash: Option<[u8; 32]>,
}

/// The algorithm named by `X-Twilio-Webhooks-Signature-Settings`: HMAC-SHA1
/// when the header is absent or names none.
fn algorithm(parts: &http::request::Parts) -> Result<Algorithm, VerifyError> {
    let settings = match single_header(parts, SIGNATURE_SETTINGS_HEADER) {
        Ok(value) => value,
        Err(e) if e.kind() == VerifyErrorKind::MissingHeader => return Ok(Algorithm::Sha1),
        Err(e) => return Err(e),
    };
    for item in settings.split(',') {
        let Some((key, value)) = item.split_once('=') else { continue };
        let value = value.trim();
        if key.trim() != "algorithm" || value.is_empty() {
            continue;
        }
        return if value.eq_ignore_ascii_case("HMAC_SHA1") {
            Ok(Algorithm::Sha1)
        } else if value.eq_ignore_ascii_case("HMAC_SHA256") {
            Ok(Algorithm::Sha256)
        } else {
            Err(VerifyErrorKind::MalformedHeader.into())
        };
    }
    Ok(Algorithm::Sha1)
}

/// The `bodySHA256` query parameter: absent, or exactly one 64-digit hex
/// value (anything else is [`VerifyErrorKind::MalformedHeader`]).
fn body_hash_param(parts: &http::request::Parts) -> Result<Option<[u8; 32]>, VerifyError> {
    let Some(query) = parts.uri.query() else { return Ok(None) };
    let mut found = None;
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        if name != BODY_HASH_PARAM {
            continue;
        }
        let mut hash = [0u8; 32];
        hex::decode_to_slice(value.as_bytes(), &mut hash).map_err(|_| VerifyErrorKind::MalformedHeader)?;
        if found.replace(hash).is_some() {
            return Err(VerifyErrorKind::MalformedHeader.into());
        }
    }
    Ok(found)
}

fn parse(parts: &http::request::Parts) -> Result<Header, VerifyError> {
    let algorithm = algorithm(parts)?;
    let encoded_len = if algorithm == Algorithm::Sha1 { 28 } else { 44 };
    let mut signatures = Vec::new();
    for value in header_values(parts, SIGNATURE_HEADER) {
        let value = value?.trim();
        // Checked before decoding so a long header allocates nothing.
        if value.len() != encoded_len {
            return Err(VerifyErrorKind::MalformedHeader.into());
        }
        signatures.push(Encoding::Base64.decode(value).ok_or(VerifyErrorKind::MalformedHeader)?);
    }
    if signatures.is_empty() {
        return Err(VerifyErrorKind::MissingHeader.into());
    }
    Ok(Header { algorithm, signatures, body_hash: body_hash_param(parts)? })
}

/// True for a POST whose `Content-Type` is `application/x-www-form-urlencoded`
/// (parameters such as `; charset=utf-8` allowed).
fn is_form_post(parts: &http::request::Parts) -> bool {
    parts.method == http::Method::POST
        && parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
}

/// The bytes of a form-encoded name or value as `form_urlencoded` decodes
/// them (`+` is a space, `%XX` a byte, a `%` without two hex digits stays),
/// produced lazily from the raw slice so nothing is allocated.
#[derive(Clone)]
struct Decoded<'a> {
    rest: &'a [u8],
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

impl Iterator for Decoded<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        let (byte, rest) = match *self.rest {
            [] => return None,
            [b'+', ref rest @ ..] => (b' ', rest),
            [b'%', hi, lo, ref rest @ ..] if hex_digit(hi).is_some() && hex_digit(lo).is_some() => {
                (hex_digit(hi)? << 4 | hex_digit(lo)?, rest)
            }
            [b, ref rest @ ..] => (b, rest),
        };
        self.rest = rest;
        Some(byte)
    }
}

fn decoded(raw: &[u8]) -> Decoded<'_> {
    Decoded { rest: raw }
}

/// One form parameter: its raw (still encoded) name and value, borrowed
/// from the body.
type RawParam<'a> = (&'a [u8], &'a [u8]);

/// The form parameters in signing order, borrowed from the body: split on
/// `&` (empty pieces skipped) and at the first `=`, sorted by decoded name
/// then decoded value, each distinct pair once (as Twilio's SDKs sign a
/// repeated name). At most `max_params` are collected; the decoded bytes are
/// compared lazily, never copied.
///
/// Decoded bytes are signed as they are: Twilio sends UTF-8, and a body that
/// does not decode to UTF-8 is not one Twilio signed.
///
/// # Errors
/// [`VerifyErrorKind::MalformedHeader`] past `max_params` parameters.
fn sorted_params(body: &[u8], max_params: usize) -> Result<Vec<RawParam<'_>>, VerifyError> {
    let mut params = Vec::new();
    for piece in body.split(|b| *b == b'&').filter(|p| !p.is_empty()) {
        if params.len() == max_params {
            return Err(VerifyErrorKind::MalformedHeader.into());
        }
        params.push(match piece.iter().position(|b| *b == b'=') {
            Some(i) => (&piece[..i], &piece[i + 1..]),
            None => (piece, &b""[..]),
        });
    }
    let order = |a: &RawParam<'_>, b: &RawParam<'_>| {
        decoded(a.0).cmp(decoded(b.0)).then_with(|| decoded(a.1).cmp(decoded(b.1)))
    };
    params.sort_unstable_by(order);
    params.dedup_by(|a, b| order(a, b).is_eq());
    Ok(params)
}

/// An HMAC fed piece by piece.
enum Mac {
    Sha1(Hmac<sha1::Sha1>),
    Sha256(Hmac<sha2::Sha256>),
}

impl Mac {
    fn new(algorithm: Algorithm, key: &[u8]) -> Self {
        // HMAC accepts keys of any length; `algorithm()` gives only SHA-1
        // or SHA-256.
        match algorithm {
            Algorithm::Sha256 => Self::Sha256(KeyInit::new_from_slice(key).expect("any key length")),
            _ => Self::Sha1(KeyInit::new_from_slice(key).expect("any key length")),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha1(m) => m.update(bytes),
            Self::Sha256(m) => m.update(bytes),
        }
    }

    /// Feeds decoded bytes through a small buffer.
    fn update_decoded(&mut self, bytes: Decoded<'_>) {
        let mut buf = [0u8; 256];
        let mut len = 0;
        for byte in bytes {
            buf[len] = byte;
            len += 1;
            if len == buf.len() {
                self.update(&buf);
                len = 0;
            }
        }
        self.update(&buf[..len]);
    }

    fn matches(self, candidates: &[Vec<u8>]) -> bool {
        let tag = match self {
            Self::Sha1(m) => m.finalize().into_bytes().to_vec(),
            Self::Sha256(m) => m.finalize().into_bytes().to_vec(),
        };
        any_matches(&tag, candidates.iter().map(Vec::as_slice))
    }
}

impl Verifier for TwilioVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        let header = parse(parts)?;
        // A form body larger than the limit cannot be verified: refuse it
        // before it is read.
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let over = declared.is_some_and(|n| n > self.max_form_bytes as u64);
        if over && header.body_hash.is_none() && is_form_post(parts) {
            return Err(VerifyErrorKind::MalformedHeader.into());
        }
        Ok(())
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let header = parse(delivery.parts)?;
        let params = if header.body_hash.is_some() || delivery.body.is_empty() {
            Vec::new()
        } else if is_form_post(delivery.parts) {
            // Bounded before anything is decoded, sorted or hashed.
            if delivery.body.len() > self.max_form_bytes {
                return Err(VerifyErrorKind::MalformedHeader.into());
            }
            sorted_params(delivery.body, self.max_params)?
        } else {
            // A body the signature does not cover.
            return Err(VerifyErrorKind::NoMatchingSignature.into());
        };
        let path_and_query = delivery.parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let mut matched = false;
        for secret in delivery.require_secrets()? {
            for base in &self.bases {
                let mut mac = Mac::new(header.algorithm, secret.expose());
                mac.update(base.as_bytes());
                mac.update(path_and_query.as_bytes());
                for (name, value) in &params {
                    mac.update_decoded(decoded(name));
                    mac.update_decoded(decoded(value));
                }
                matched |= mac.matches(&header.signatures);
            }
        }
        if !matched {
            return Err(VerifyErrorKind::NoMatchingSignature.into());
        }
        if let Some(want) = header.body_hash {
            let got = sha2::Sha256::digest(delivery.body);
            if !bool::from(got[..].ct_eq(&want)) {
                return Err(VerifyErrorKind::NoMatchingSignature.into());
            }
        }
        Ok(())
    }
}

fn sign_with(algorithm: Algorithm, secret: &SigningSecret, url: &str, params: &[(&str, &str)]) -> String {
    let mut params = params.to_vec();
    params.sort_unstable();
    params.dedup();
    let mut signed: Vec<&[u8]> = vec![url.as_bytes()];
    for (name, value) in &params {
        signed.extend([name.as_bytes(), value.as_bytes()]);
    }
    Encoding::Base64.encode(hmac(algorithm, secret, &signed).as_ref())
}

/// The `X-Twilio-Signature` value Twilio would send, with auth token
/// `secret`, for a request to `url` (the full URL, query included) with the
/// decoded POST parameters `params` (empty for a GET or a JSON body). For
/// tests and fixtures.
pub fn sign(secret: &SigningSecret, url: &str, params: &[(&str, &str)]) -> String {
    sign_with(Algorithm::Sha1, secret, url, params)
}

/// As [`sign`], for a SharedKey signing with `HMAC_SHA256` (sent with
/// `X-Twilio-Webhooks-Signature-Settings: key=...,algorithm=HMAC_SHA256`).
pub fn sign_sha256(secret: &SigningSecret, url: &str, params: &[(&str, &str)]) -> String {
    sign_with(Algorithm::Sha256, secret, url, params)
}

/// The `bodySHA256` query parameter Twilio adds to a JSON webhook's URL: the
/// hex SHA-256 of `body`.
pub fn body_sha256(body: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(body))
}

impl crate::providers::Provider {
    /// Twilio (`X-Twilio-Signature`, HMAC-SHA1 over the URL + sorted POST
    /// parameters or `bodySHA256`; key = `I-Twilio-Idempotency-Token`).
    /// `public_base_url` is the scheme and host Twilio calls. See
    /// [`crate::providers::twilio`].
    ///
    /// The Twilio preset for requests reaching the service at `public_base_url`
    /// (see [`TwilioVerifier::new`]): [`TwilioVerifier`], key the
    /// `I-Twilio-Idempotency-Token` header, no event type, and a default body
    /// limit of [`DEFAULT_BODY_LIMIT`] bytes (used when the layer's
    /// `body_limit` is not set).
    pub fn twilio(public_base_url: impl Into<String>) -> Self {
        crate::providers::Provider::new(
            NAME,
            TwilioVerifier::new(public_base_url),
            crate::key::HeaderKey::new(http::HeaderName::from_static(IDEMPOTENCY_HEADER)),
        )
        .with_body_limit(DEFAULT_BODY_LIMIT)
        // Twilio sends GET when a webhook is configured for it; the signature
        // then covers the URL with its query.
        .methods([http::Method::POST, http::Method::GET])
    }
}

/// [`PresetInfo::sign`](super::PresetInfo::sign) for Twilio: a form body
/// (an SMS or voice webhook) signs the URL and its fields; a JSON body
/// (Event Streams, Conversations) signs the URL with `bodySHA256` added to
/// its query. The id is the `I-Twilio-Idempotency-Token`.
fn send(key: &str, d: &super::Signing<'_>) -> Result<super::Example, super::SignError> {
    let secret = SigningSecret::from(key);
    let json = serde_json::from_slice::<serde::de::IgnoredAny>(d.body).is_ok();
    let (url, signature, content_type) = if json {
        let sep = if d.url.contains('?') { '&' } else { '?' };
        let url = format!("{}{sep}bodySHA256={}", d.url, body_sha256(d.body));
        let signature = sign(&secret, &url, &[]);
        (url, signature, "application/json")
    } else {
        let fields: Vec<(String, String)> = form_urlencoded::parse(d.body).into_owned().collect();
        let params: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        (d.url.to_owned(), sign(&secret, d.url, &params), "application/x-www-form-urlencoded")
    };
    let mut headers = vec![(SIGNATURE_HEADER, signature), ("content-type", content_type.to_owned())];
    if !d.id.is_empty() {
        headers.push((IDEMPOTENCY_HEADER, d.id.to_owned()));
    }
    let signed = super::Signing { url: &url, ..*d };
    super::signed_delivery(Provider::twilio(&d.origin()?), secret, &signed, headers, d.body.to_vec())
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    "twilio",
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER, SIGNATURE_SETTINGS_HEADER, IDEMPOTENCY_HEADER, "content-type"],
    |url| Provider::twilio(url),
    super::ExampleOf::Whole(|id, _, body| {
        // A JSON body is signed through `bodySHA256` in the URL's query.
        let uri = format!("/hook?bodySHA256={}", body_sha256(body));
        let sig = sign(&super::example_secret(), &format!("{}{uri}", super::EXAMPLE_BASE), &[]);
        let headers = vec![
            (SIGNATURE_HEADER, sig),
            ("content-type", "application/json".to_owned()),
            (IDEMPOTENCY_HEADER, id.to_owned()),
        ];
        super::Example {
            provider: Provider::twilio(super::EXAMPLE_BASE),
            secrets: vec![super::example_secret()],
            parts: super::example_parts(&uri, headers),
            body: body.to_vec(),
        }
    }),
)
.sends(send)
.signing(super::UrlArg::PublicBaseUrl)
.signs("`X-Twilio-Signature` base64 HMAC-SHA1 of URL + sorted form params (at most 1,000 params, 64 KiB; body limit 64 KiB), or URL with `bodySHA256`")
.key_from("the I-Twilio-Idempotency-Token header")
.fixture(super::Fixture::own("the SDK's vectors (`sdk.json`): signs the URL and the form fields"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::test_support::fixture_json;
    use crate::test_support::{request_to, UrlCase};
    use std::time::SystemTime;

    const FORM: &str = "application/x-www-form-urlencoded";

    fn check(
        base: &str,
        p: &http::request::Parts,
        body: &[u8],
        secrets: &[SigningSecret],
    ) -> Result<(), VerifyErrorKind> {
        TwilioVerifier::new(base).verify(&Delivery::new(p, body, secrets, SystemTime::now())).map_err(|e| e.kind())
    }

    fn form_post(uri: &str, sig: &str, body: &[u8], token: &str) -> Result<(), VerifyErrorKind> {
        let p = request_to("POST", uri, &[("content-type", FORM), (SIGNATURE_HEADER, sig)]);
        check("https://mycompany.com", &p, body, &[SigningSecret::from(token)])
    }

    /// The worked example in Twilio's "Secure webhooks" page: auth token
    /// `12345`, `https://mycompany.com/myapp.php?foo=1&bar=2`, the `<Gather>`
    /// parameters below, signature `0/KCTR6DLpKmkAf8muzZqo1nDgQ=`.
    #[test]
    fn twilio_docs_vector() {
        let params = [
            ("CallSid", "CA1234567890ABCDE"),
            ("Caller", "+12349013030"),
            ("Digits", "1234"),
            ("From", "+12349013030"),
            ("To", "+18005551212"),
        ];
        let sig = "0/KCTR6DLpKmkAf8muzZqo1nDgQ=";
        let token = SigningSecret::from("12345");
        assert_eq!(sign(&token, "https://mycompany.com/myapp.php?foo=1&bar=2", &params), sig);
        // As Twilio posts it: encoded, in any order.
        let body = b"To=%2B18005551212&CallSid=CA1234567890ABCDE&Digits=1234&From=%2B12349013030&Caller=%2B12349013030";
        let uri = "/myapp.php?foo=1&bar=2";
        assert_eq!(form_post(uri, sig, body, "12345"), Ok(()));
        let tampered =
            b"To=%2B18005551212&CallSid=CA1234567890ABCDE&Digits=9999&From=%2B12349013030&Caller=%2B12349013030";
        assert_eq!(form_post(uri, sig, tampered, "12345"), Err(VerifyErrorKind::NoMatchingSignature));
        assert_eq!(form_post("/myapp.php?foo=1&bar=3", sig, body, "12345"), Err(VerifyErrorKind::NoMatchingSignature));
        assert_eq!(form_post(uri, sig, body, "54321"), Err(VerifyErrorKind::NoMatchingSignature));
    }

    /// The fixed vectors in Twilio's Python library tests
    /// (`twilio-python`, `tests/unit/test_request_validator.py`): the same
    /// URL with other caller numbers, a repeated parameter, the port
    /// variants, and a JSON body with `bodySHA256`.
    #[test]
    fn twilio_python_test_vectors() {
        let body = b"CallSid=CA1234567890ABCDE&Digits=1234&From=%2B14158675309&To=%2B18005551212&Caller=%2B14158675309";
        let token = [SigningSecret::from("12345")];
        let post = |base: &str, uri: &str, sig: &str, body: &[u8]| {
            let p = request_to("POST", uri, &[("content-type", FORM), (SIGNATURE_HEADER, sig)]);
            check(base, &p, body, &token)
        };
        let uri = "/myapp.php?foo=1&bar=2";
        let cases: &[(&str, &str, &str, &[u8])] = &[
            ("compute_signature", "https://mycompany.com", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", body),
            (
                "duplicate parameter",
                "https://mycompany.com",
                "IK+Dwps556ElfBT0I3Rgjkr1wJU=",
                b"Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234",
            ),
            ("removes port on https", "https://mycompany.com:1234", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", body),
            ("removes port on http", "http://mycompany.com:1234", "Zmvh+3yNM1Phv2jhDCwEM3q5ebU=", body),
            ("adds port on https", "https://mycompany.com", "kvajT1Ptam85bY51eRf/AJRuM3w=", body),
            ("adds port on http", "http://mycompany.com", "0ZXoZLH/DfblKGATFgpif+LLRf4=", body),
        ];
        for (name, base, sig, body) in cases {
            assert_eq!(post(base, uri, sig, body), Ok(()), "{name}");
        }
        let json = br#"{"property": "value", "boolean": true}"#;
        let hash = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620";
        assert_eq!(body_sha256(json), hash);
        let json_uri = format!("{uri}&bodySHA256={hash}");
        let p = request_to(
            "POST",
            &json_uri,
            &[("content-type", "application/json"), (SIGNATURE_HEADER, "a9nBmqA0ju/hNViExpshrM61xv4=")],
        );
        assert_eq!(check("https://mycompany.com", &p, json, &token), Ok(()));
        assert_eq!(
            check("https://mycompany.com", &p, br#"{"property": "value", "boolean": false}"#, &token),
            Err(VerifyErrorKind::NoMatchingSignature)
        );
    }

    #[derive(serde::Deserialize)]
    struct Case {
        path_and_query: String,
        body: String,
        signature: String,
        #[serde(default)]
        settings_header: Option<String>,
    }

    #[derive(serde::Deserialize)]
    struct Fixture {
        auth_token: String,
        shared_key_secret: String,
        public_base_url: String,
        form: Case,
        json: Case,
        shared_key: Case,
    }

    /// Signed by `twilio@6.3.1` and accepted by its `validateRequest` /
    /// `validateRequestWithBody` (`scripts/fixtures/twilio.js`).
    #[test]
    fn twilio_sdk_fixture() {
        let f: Fixture = fixture_json("twilio/sdk.json");
        let secrets = [SigningSecret::from(f.auth_token.as_str()), SigningSecret::from(f.shared_key_secret.as_str())];
        let cases =
            [("form", &f.form, FORM), ("json", &f.json, "application/json"), ("shared key", &f.shared_key, FORM)];
        for (name, case, content_type) in cases {
            let mut headers = vec![("content-type", content_type), (SIGNATURE_HEADER, case.signature.as_str())];
            if let Some(settings) = &case.settings_header {
                headers.push((SIGNATURE_SETTINGS_HEADER, settings));
            }
            let p = request_to("POST", &case.path_and_query, &headers);
            assert_eq!(check(&f.public_base_url, &p, case.body.as_bytes(), &secrets), Ok(()), "{name}");
            assert_eq!(
                check(&f.public_base_url, &p, format!("{}&x", case.body).as_bytes(), &secrets),
                Err(VerifyErrorKind::NoMatchingSignature),
                "{name} tampered"
            );
            assert_eq!(
                check("https://other.example.com", &p, case.body.as_bytes(), &secrets),
                Err(VerifyErrorKind::NoMatchingSignature),
                "{name} other base URL"
            );
        }
        // Our sign reproduces the SDK's signatures from the decoded parameters.
        let url = format!("{}{}", f.public_base_url, f.form.path_and_query);
        let params: Vec<(String, String)> = form_urlencoded::parse(f.form.body.as_bytes()).into_owned().collect();
        let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(sign(&secrets[0], &url, &params), f.form.signature);
        let url = format!("{}{}", f.public_base_url, f.json.path_and_query);
        assert_eq!(sign(&secrets[0], &url, &[]), f.json.signature);
        assert!(url.ends_with(&body_sha256(f.json.body.as_bytes())));
        let url = format!("{}{}", f.public_base_url, f.shared_key.path_and_query);
        let params: Vec<(String, String)> = form_urlencoded::parse(f.shared_key.body.as_bytes()).into_owned().collect();
        let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(sign_sha256(&secrets[1], &url, &params), f.shared_key.signature);
    }

    #[test]
    fn verifies_and_rejects() {
        let base = "https://hooks.example.com/twilio";
        let token = SigningSecret::from("token-new");
        let old = SigningSecret::from("token-old");
        let body = b"MessageSid=SM1&MessageStatus=delivered";
        let params = [("MessageSid", "SM1"), ("MessageStatus", "delivered")];
        let url = "https://hooks.example.com/twilio/status?t=1";
        let good = sign(&token, url, &params);
        let by_old = sign(&old, url, &params);
        let sha256 = sign_sha256(&token, url, &params);
        let get_sig = sign(&token, "https://hooks.example.com/twilio/voice?CallSid=CA1&Digits=1", &[]);
        let json_body = br#"{"a":1}"#;
        let json_uri = format!("/status?bodySHA256={}", body_sha256(json_body));
        let json_sig = sign(&token, &format!("https://hooks.example.com/twilio{json_uri}"), &[]);
        let upper_json_uri = json_uri.to_uppercase().replace("/STATUS?BODYSHA256", "/status?bodySHA256");
        let upper_json_sig = sign(&token, &format!("https://hooks.example.com/twilio{upper_json_uri}"), &[]);
        let url_only = sign(&token, url, &[]);
        let two_hashes = format!("{json_uri}&bodySHA256={}", body_sha256(b""));
        let long = "A".repeat(100_000);
        let both: &[SigningSecret] = &[token.clone(), old.clone()];
        let current = std::slice::from_ref(&token);
        let s = SIGNATURE_HEADER;
        let settings = SIGNATURE_SETTINGS_HEADER;
        use VerifyErrorKind::{MalformedHeader, MissingHeader, NoMatchingSignature, NoSecret};
        let ct = "content-type";
        let valid = UrlCase::valid("POST", "/status?t=1", vec![(ct, FORM), (s, &good)], body, current);
        let json = valid
            .case("json with bodySHA256")
            .uri(&json_uri)
            .headers(vec![(ct, "application/json"), (s, &json_sig)])
            .body(json_body);
        let charset = "Application/X-WWW-Form-Urlencoded; charset=utf-8";
        let cases = [
            valid.clone(),
            valid.case("charset in content type").headers(vec![(ct, charset), (s, &good)]),
            valid.case("params reordered").body(b"MessageStatus=delivered&MessageSid=SM1"),
            valid.case("tampered param").body(b"MessageSid=SM1&MessageStatus=failed").fails(NoMatchingSignature),
            valid
                .case("a repeated identical pair counts once")
                .body(b"MessageSid=SM1&MessageStatus=delivered&MessageSid=SM1"),
            valid.case("extra param").body(b"MessageSid=SM1&MessageStatus=delivered&X=1").fails(NoMatchingSignature),
            valid.case("tampered query").uri("/status?t=2").fails(NoMatchingSignature),
            valid.case("query encoding is signed").uri("/status?t=%31").fails(NoMatchingSignature),
            valid.case("wrong token").headers(vec![(ct, FORM), (s, &by_old)]).fails(NoMatchingSignature),
            valid.case("rotation: both tokens").headers(vec![(ct, FORM), (s, &by_old)]).secrets(both),
            valid.case("two lines, one good").headers(vec![(ct, FORM), (s, &by_old), (s, &good)]),
            valid.case("duplicate lines").headers(vec![(ct, FORM), (s, &good), (s, &good)]),
            valid
                .case("GET signs the URL")
                .method("GET")
                .uri("/voice?CallSid=CA1&Digits=1")
                .headers(vec![(s, &get_sig)])
                .body(b""),
            json.clone(),
            json.case("bodySHA256 in upper case")
                .uri(&upper_json_uri)
                .headers(vec![(ct, "application/json"), (s, &upper_json_sig)]),
            json.case("json body changed").body(br#"{"a":2}"#).fails(NoMatchingSignature),
            json.case("json without bodySHA256")
                .uri("/status?t=1")
                .headers(vec![(ct, "application/json"), (s, &url_only)])
                .fails(NoMatchingSignature),
            valid.case("form body on a PUT").method("PUT").fails(NoMatchingSignature),
            json.case("bad bodySHA256").uri("/status?bodySHA256=xyz").headers(vec![(s, &good)]).fails(MalformedHeader),
            json.case("two bodySHA256").uri(&two_hashes).headers(vec![(s, &good)]).fails(MalformedHeader),
            valid.case("shared key sha256").headers(vec![
                (ct, FORM),
                (s, &sha256),
                (settings, "key=k1,algorithm=HMAC_SHA256"),
            ]),
            valid.case("settings without algorithm is sha1").headers(vec![
                (ct, FORM),
                (s, &good),
                (settings, "key=k1"),
            ]),
            valid
                .case("sha1 signature, sha256 announced")
                .headers(vec![(ct, FORM), (s, &good), (settings, "algorithm=HMAC_SHA256")])
                .fails(MalformedHeader),
            valid
                .case("unknown algorithm")
                .headers(vec![(ct, FORM), (s, &good), (settings, "algorithm=HMAC_SHA512")])
                .fails(MalformedHeader),
            valid
                .case("two settings")
                .headers(vec![
                    (ct, FORM),
                    (s, &good),
                    (settings, "algorithm=HMAC_SHA1"),
                    (settings, "algorithm=HMAC_SHA256"),
                ])
                .fails(MalformedHeader),
            valid.case("missing").headers(vec![(ct, FORM)]).fails(MissingHeader),
            valid
                .case("malformed")
                .headers(vec![(ct, FORM), (s, "!!!!!!!!!!!!!!!!!!!!!!!!!!!!")])
                .fails(MalformedHeader),
            valid.case("wrong length").headers(vec![(ct, FORM), (s, &sha256)]).fails(MalformedHeader),
            valid.case("long header").headers(vec![(ct, FORM), (s, &long)]).fails(MalformedHeader),
            valid.case("no secret").secrets(&[]).fails(NoSecret),
        ];
        UrlCase::check_all(&cases, |p, body, secrets| check(base, p, body, secrets));
    }

    /// A form POST to `https://example.com/sms` signed with `token` over
    /// the decoded `params`, body as Twilio would encode it.
    fn signed_form(params: &[(String, String)]) -> (http::request::Parts, Vec<u8>) {
        let pairs: Vec<(&str, &str)> = params.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let sig = sign(&SigningSecret::from("token"), "https://example.com/sms", &pairs);
        let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(&pairs).finish().into_bytes();
        (request_to("POST", "/sms", &[("content-type", FORM), (SIGNATURE_HEADER, &sig)]), body)
    }

    fn params(n: usize) -> Vec<(String, String)> {
        (0..n).map(|i| (format!("P{i:04}"), format!("v {i}+%"))).collect()
    }

    #[test]
    fn form_limits() {
        let token = [SigningSecret::from("token")];
        let fake =
            request_to("POST", "/sms", &[("content-type", FORM), (SIGNATURE_HEADER, "AAAAAAAAAAAAAAAAAAAAAAAAAAA=")]);
        let big_value = vec![("Body".to_owned(), "x".repeat(MAX_FORM_BYTES - "Body=".len()))];
        let over_value = vec![("Body".to_owned(), "x".repeat(MAX_FORM_BYTES - "Body=".len() + 1))];
        let at_count = signed_form(&params(MAX_FORM_PARAMS));
        let over_count = signed_form(&params(MAX_FORM_PARAMS + 1));
        let at_bytes = signed_form(&big_value);
        let over_bytes = signed_form(&over_value);
        assert_eq!(at_bytes.1.len(), MAX_FORM_BYTES);
        let amp = b"a&".repeat(25 << 19);
        let amp_64k = b"a&".repeat(MAX_FORM_BYTES / 2);
        let empty_pieces = signed_form(&params(2));
        let padded = [b"&&&".as_slice(), &empty_pieces.1, b"&&"].concat();
        let cases: Vec<(&str, &http::request::Parts, &[u8], Result<(), VerifyErrorKind>)> = vec![
            ("1,000 parameters", &at_count.0, &at_count.1, Ok(())),
            ("1,001 parameters", &over_count.0, &over_count.1, Err(VerifyErrorKind::MalformedHeader)),
            ("64 KiB", &at_bytes.0, &at_bytes.1, Ok(())),
            ("64 KiB + 1", &over_bytes.0, &over_bytes.1, Err(VerifyErrorKind::MalformedHeader)),
            ("empty pieces are no parameters", &empty_pieces.0, &padded, Ok(())),
            ("25 MiB of a&, fake signature", &fake, &amp, Err(VerifyErrorKind::MalformedHeader)),
            ("64 KiB of a&, fake signature", &fake, &amp_64k, Err(VerifyErrorKind::MalformedHeader)),
        ];
        for (name, p, body, want) in cases {
            assert_eq!(check("https://example.com", p, body, &token), want, "{name}");
        }
        // Limits are configurable.
        let v = TwilioVerifier::new("https://example.com").form_limits(2, 1 << 20);
        let three = signed_form(&params(3));
        let got = v.verify(&Delivery::new(&three.0, &three.1, &token, SystemTime::now())).map_err(|e| e.kind());
        assert_eq!(got, Err(VerifyErrorKind::MalformedHeader));
        let v = v.form_limits(3, 1 << 20);
        assert!(v.verify(&Delivery::new(&three.0, &three.1, &token, SystemTime::now())).is_ok());
        // A declared length over the limit is refused from the head, for a
        // form POST only (a JSON body is hashed, not parsed).
        let with_length = |ct: &str, uri: &str, len: usize| {
            let sig = sign(&SigningSecret::from("token"), "https://example.com/sms", &[]);
            let len = len.to_string();
            let p =
                request_to("POST", uri, &[("content-type", ct), (SIGNATURE_HEADER, &sig), ("content-length", &len)]);
            TwilioVerifier::new("https://example.com").precheck(&p).map_err(|e| e.kind())
        };
        let json_uri = format!("/sms?bodySHA256={}", body_sha256(b"{}"));
        assert_eq!(with_length(FORM, "/sms", MAX_FORM_BYTES), Ok(()));
        assert_eq!(with_length(FORM, "/sms", MAX_FORM_BYTES + 1), Err(VerifyErrorKind::MalformedHeader));
        assert_eq!(with_length(FORM, "/sms", 25 << 20), Err(VerifyErrorKind::MalformedHeader));
        assert_eq!(with_length("application/json", &json_uri, 25 << 20), Ok(()));
        // The preset asks the layer for a matching body limit.
        assert_eq!(
            crate::providers::Provider::twilio("https://example.com").default_body_limit(),
            Some(DEFAULT_BODY_LIMIT)
        );
    }

    /// The unsigned 25 MiB `a&` body once took seconds and hundreds of MB
    /// (every parameter decoded, collected and sorted before the HMAC). Now
    /// it, and a 64 KiB `a&` body within the byte limit, are refused in less
    /// than 20 times what verifying a genuine form costs in the same run
    /// (best of several runs each, so one preempted run does not decide).
    #[test]
    fn oversized_forms_are_refused_quickly() {
        fn best(runs: usize, mut f: impl FnMut()) -> std::time::Duration {
            (0..runs)
                .map(|_| {
                    let start = std::time::Instant::now();
                    f();
                    start.elapsed()
                })
                .min()
                .unwrap()
        }
        let token = [SigningSecret::from("token")];
        let v = TwilioVerifier::new("https://example.com");
        let genuine: Vec<(String, String)> = [
            ("MessageSid", "SM0123456789abcdef0123456789abcdef"),
            ("AccountSid", "AC0123456789abcdef0123456789abcdef"),
            ("From", "+14155550100"),
            ("To", "+14155550101"),
            ("Body", "Hello from Twilio, a message of ordinary length."),
            ("NumMedia", "0"),
            ("NumSegments", "1"),
            ("SmsStatus", "received"),
            ("ApiVersion", "2010-04-01"),
            ("FromCity", "SAN FRANCISCO"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (p, body) = signed_form(&genuine);
        let verify_genuine =
            best(20, || assert!(v.verify(&Delivery::new(&p, &body, &token, SystemTime::now())).is_ok()));
        let fake =
            request_to("POST", "/sms", &[("content-type", FORM), (SIGNATURE_HEADER, "AAAAAAAAAAAAAAAAAAAAAAAAAAA=")]);
        for (name, attack) in [("25 MiB", b"a&".repeat(25 << 19)), ("64 KiB", b"a&".repeat(MAX_FORM_BYTES / 2))] {
            let refuse = best(20, || {
                let got = v.verify(&Delivery::new(&fake, &attack, &token, SystemTime::now()));
                assert_eq!(got.unwrap_err().kind(), VerifyErrorKind::MalformedHeader);
            });
            eprintln!("{name} of a&: refused in {refuse:?}; a genuine form verifies in {verify_genuine:?}");
            assert!(refuse < verify_genuine * 20, "{name}: {refuse:?} vs {verify_genuine:?}");
        }
    }

    /// Sorting the borrowed slices by their decoded bytes gives the order
    /// the SDKs sign in (decoded strings, then values).
    #[test]
    fn params_sorted_by_decoded_bytes() {
        let body = b"b=2&a%3D=1&a=z&a=%41&+c=3&a=z&%zz=4";
        let got: Vec<(Vec<u8>, Vec<u8>)> = sorted_params(body, 100)
            .unwrap()
            .into_iter()
            .map(|(n, v)| (decoded(n).collect(), decoded(v).collect()))
            .collect();
        let mut want: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
        want.sort_unstable();
        want.dedup();
        let want: Vec<(Vec<u8>, Vec<u8>)> = want.into_iter().map(|(n, v)| (n.into_bytes(), v.into_bytes())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn base_urls() {
        let cases = [
            ("https://example.com", Some("https://example.com:443")),
            ("https://example.com/", Some("https://example.com:443")),
            ("http://example.com/prefix", Some("http://example.com:80/prefix")),
            ("https://example.com:8443/p", Some("https://example.com/p")),
            ("https://user:pw@example.com", Some("https://user:pw@example.com:443")),
            ("https://[::1]:8443", Some("https://[::1]")),
            ("https://[::1]", Some("https://[::1]:443")),
            ("ftp://example.com", None),
            ("not a url", None),
        ];
        for (base, want) in cases {
            let v = TwilioVerifier::new(base);
            assert_eq!(v.bases.get(1).map(String::as_str), want, "{base}");
            assert!(!v.public_base_url().ends_with('/'), "{base}");
        }
    }

    #[test]
    fn precheck_and_key() {
        let v = TwilioVerifier::new("https://example.com");
        let sig = sign(&SigningSecret::from("t"), "https://example.com/", &[]);
        assert!(v.precheck(&request_to("GET", "/", &[(SIGNATURE_HEADER, &sig)])).is_ok());
        assert_eq!(v.precheck(&request_to("GET", "/", &[])).unwrap_err().kind(), VerifyErrorKind::MissingHeader);
        assert_eq!(
            v.precheck(&request_to("GET", "/?bodySHA256=1", &[(SIGNATURE_HEADER, &sig)])).unwrap_err().kind(),
            VerifyErrorKind::MalformedHeader
        );
        let x = crate::providers::Provider::twilio("https://example.com");
        assert_eq!(x.name(), "twilio");
        let got = x.extractor_ref().extract(&request_to("POST", "/", &[(IDEMPOTENCY_HEADER, "tok-1")]), b"").unwrap();
        assert_eq!((got.key.as_str(), got.event_type), ("tok-1", None));
        assert_eq!(
            x.extractor_ref().extract(&request_to("POST", "/", &[]), b"").unwrap_err().kind(),
            KeyErrorKind::Missing
        );
    }
}
