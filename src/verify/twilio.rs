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
//! ([`TwilioVerifier::new`], [`provider`]): `scheme://host[:port][/prefix]`
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
//! `MessageStatus`, with [`crate::Provider::key_extractor`]. There is no
//! event type.
//!
//! **Limit of the scheme:** no timestamp and no signed event id: whoever
//! captured a request can send it again (with a fresh idempotency token)
//! and it verifies. Make business writes idempotent on the parameters' own
//! identity (`MessageSid` + status, `CallSid` + status).

use std::borrow::Cow;

use sha2::Digest as _;
use subtle::ConstantTimeEq as _;

use super::{
    any_matches, header_values, hmac, single_header, Algorithm, Delivery, Encoding, SigningSecret, Verifier,
    VerifyError, VerifyErrorKind,
};

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
}

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
        Self { bases }
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

/// The decoded form parameters in signing order: sorted by name, then value,
/// each distinct pair once.
fn sorted_params(body: &[u8]) -> Vec<(Cow<'_, str>, Cow<'_, str>)> {
    let mut params: Vec<_> = form_urlencoded::parse(body).collect();
    params.sort_unstable();
    params.dedup();
    params
}

impl Verifier for TwilioVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        parse(parts).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let header = parse(delivery.parts)?;
        let params = if header.body_hash.is_some() || delivery.body.is_empty() {
            Vec::new()
        } else if is_form_post(delivery.parts) {
            sorted_params(delivery.body)
        } else {
            // A body the signature does not cover.
            return Err(VerifyErrorKind::NoMatchingSignature.into());
        };
        let path_and_query = delivery.parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let mut signed: Vec<&[u8]> = Vec::with_capacity(2 + 2 * params.len());
        signed.extend([&b""[..], path_and_query.as_bytes()]);
        for (name, value) in &params {
            signed.extend([name.as_bytes(), value.as_bytes()]);
        }
        let mut matched = false;
        for secret in delivery.require_secrets()? {
            for base in &self.bases {
                signed[0] = base.as_bytes();
                let expected = hmac(header.algorithm, secret, &signed);
                matched |= any_matches(expected.as_ref(), header.signatures.iter().map(Vec::as_slice));
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

/// The Twilio preset for requests reaching the service at `public_base_url`
/// (see [`TwilioVerifier::new`]): [`TwilioVerifier`], key the
/// `I-Twilio-Idempotency-Token` header, no event type.
pub fn provider(public_base_url: impl Into<String>) -> crate::Provider {
    crate::Provider::new(
        "twilio",
        TwilioVerifier::new(public_base_url),
        crate::key::HeaderKey::new(http::HeaderName::from_static(IDEMPOTENCY_HEADER)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use std::time::SystemTime;

    const FORM: &str = "application/x-www-form-urlencoded";

    fn request(method: &str, uri: &str, headers: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    fn check(
        base: &str,
        p: &http::request::Parts,
        body: &[u8],
        secrets: &[SigningSecret],
    ) -> Result<(), VerifyErrorKind> {
        TwilioVerifier::new(base).verify(&Delivery::new(p, body, secrets, SystemTime::now())).map_err(|e| e.kind())
    }

    fn form_post(uri: &str, sig: &str, body: &[u8], token: &str) -> Result<(), VerifyErrorKind> {
        let p = request("POST", uri, &[("content-type", FORM), (SIGNATURE_HEADER, sig)]);
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
            let p = request("POST", uri, &[("content-type", FORM), (SIGNATURE_HEADER, sig)]);
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
        let p = request(
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
        let f: Fixture = serde_json::from_str(include_str!("../../tests/fixtures/providers/twilio/sdk.json")).unwrap();
        let secrets = [SigningSecret::from(f.auth_token.as_str()), SigningSecret::from(f.shared_key_secret.as_str())];
        let cases =
            [("form", &f.form, FORM), ("json", &f.json, "application/json"), ("shared key", &f.shared_key, FORM)];
        for (name, case, content_type) in cases {
            let mut headers = vec![("content-type", content_type), (SIGNATURE_HEADER, case.signature.as_str())];
            if let Some(settings) = &case.settings_header {
                headers.push((SIGNATURE_SETTINGS_HEADER, settings));
            }
            let p = request("POST", &case.path_and_query, &headers);
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
        type Case<'a> = (
            &'a str,
            &'a str,
            &'a str,
            Vec<(&'a str, &'a str)>,
            &'a [u8],
            &'a [SigningSecret],
            Result<(), VerifyErrorKind>,
        );
        let cases: Vec<Case<'_>> = vec![
            ("valid", "POST", "/status?t=1", vec![("content-type", FORM), (s, &good)], body, current, Ok(())),
            (
                "charset in content type",
                "POST",
                "/status?t=1",
                vec![("content-type", "Application/X-WWW-Form-Urlencoded; charset=utf-8"), (s, &good)],
                body,
                current,
                Ok(()),
            ),
            (
                "params reordered",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &good)],
                b"MessageStatus=delivered&MessageSid=SM1",
                current,
                Ok(()),
            ),
            (
                "tampered param",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &good)],
                b"MessageSid=SM1&MessageStatus=failed",
                current,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            (
                "a repeated identical pair counts once",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &good)],
                b"MessageSid=SM1&MessageStatus=delivered&MessageSid=SM1",
                current,
                Ok(()),
            ),
            (
                "extra param",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &good)],
                b"MessageSid=SM1&MessageStatus=delivered&X=1",
                current,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            (
                "tampered query",
                "POST",
                "/status?t=2",
                vec![("content-type", FORM), (s, &good)],
                body,
                current,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            (
                "query encoding is signed",
                "POST",
                "/status?t=%31",
                vec![("content-type", FORM), (s, &good)],
                body,
                current,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            (
                "wrong token",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &by_old)],
                body,
                current,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            (
                "rotation: both tokens",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &by_old)],
                body,
                both,
                Ok(()),
            ),
            (
                "two lines, one good",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &by_old), (s, &good)],
                body,
                current,
                Ok(()),
            ),
            (
                "duplicate lines",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &good), (s, &good)],
                body,
                current,
                Ok(()),
            ),
            ("GET signs the URL", "GET", "/voice?CallSid=CA1&Digits=1", vec![(s, &get_sig)], b"", current, Ok(())),
            (
                "json with bodySHA256",
                "POST",
                &json_uri,
                vec![("content-type", "application/json"), (s, &json_sig)],
                json_body,
                current,
                Ok(()),
            ),
            (
                "bodySHA256 in upper case",
                "POST",
                &upper_json_uri,
                vec![("content-type", "application/json"), (s, &upper_json_sig)],
                json_body,
                current,
                Ok(()),
            ),
            (
                "json body changed",
                "POST",
                &json_uri,
                vec![("content-type", "application/json"), (s, &json_sig)],
                br#"{"a":2}"#,
                current,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            (
                "json without bodySHA256",
                "POST",
                "/status?t=1",
                vec![("content-type", "application/json"), (s, &url_only)],
                json_body,
                current,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            (
                "form body on a PUT",
                "PUT",
                "/status?t=1",
                vec![("content-type", FORM), (s, &good)],
                body,
                current,
                Err(VerifyErrorKind::NoMatchingSignature),
            ),
            (
                "bad bodySHA256",
                "POST",
                "/status?bodySHA256=xyz",
                vec![(s, &good)],
                json_body,
                current,
                Err(VerifyErrorKind::MalformedHeader),
            ),
            (
                "two bodySHA256",
                "POST",
                &two_hashes,
                vec![(s, &good)],
                json_body,
                current,
                Err(VerifyErrorKind::MalformedHeader),
            ),
            (
                "shared key sha256",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &sha256), (settings, "key=k1,algorithm=HMAC_SHA256")],
                body,
                current,
                Ok(()),
            ),
            (
                "settings without algorithm is sha1",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &good), (settings, "key=k1")],
                body,
                current,
                Ok(()),
            ),
            (
                "sha1 signature, sha256 announced",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &good), (settings, "algorithm=HMAC_SHA256")],
                body,
                current,
                Err(VerifyErrorKind::MalformedHeader),
            ),
            (
                "unknown algorithm",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &good), (settings, "algorithm=HMAC_SHA512")],
                body,
                current,
                Err(VerifyErrorKind::MalformedHeader),
            ),
            (
                "two settings",
                "POST",
                "/status?t=1",
                vec![
                    ("content-type", FORM),
                    (s, &good),
                    (settings, "algorithm=HMAC_SHA1"),
                    (settings, "algorithm=HMAC_SHA256"),
                ],
                body,
                current,
                Err(VerifyErrorKind::MalformedHeader),
            ),
            (
                "missing",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM)],
                body,
                current,
                Err(VerifyErrorKind::MissingHeader),
            ),
            (
                "malformed",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, "!!!!!!!!!!!!!!!!!!!!!!!!!!!!")],
                body,
                current,
                Err(VerifyErrorKind::MalformedHeader),
            ),
            (
                "wrong length",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &sha256)],
                body,
                current,
                Err(VerifyErrorKind::MalformedHeader),
            ),
            (
                "long header",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &long)],
                body,
                current,
                Err(VerifyErrorKind::MalformedHeader),
            ),
            (
                "no secret",
                "POST",
                "/status?t=1",
                vec![("content-type", FORM), (s, &good)],
                body,
                &[],
                Err(VerifyErrorKind::NoSecret),
            ),
        ];
        for (name, method, uri, headers, body, secrets, want) in cases {
            let p = request(method, uri, &headers);
            assert_eq!(check(base, &p, body, secrets), want, "{name}");
        }
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
        assert!(v.precheck(&request("GET", "/", &[(SIGNATURE_HEADER, &sig)])).is_ok());
        assert_eq!(v.precheck(&request("GET", "/", &[])).unwrap_err().kind(), VerifyErrorKind::MissingHeader);
        assert_eq!(
            v.precheck(&request("GET", "/?bodySHA256=1", &[(SIGNATURE_HEADER, &sig)])).unwrap_err().kind(),
            VerifyErrorKind::MalformedHeader
        );
        let x = provider("https://example.com");
        assert_eq!(x.name(), "twilio");
        let got = x.extractor_ref().extract(&request("POST", "/", &[(IDEMPOTENCY_HEADER, "tok-1")]), b"").unwrap();
        assert_eq!((got.key.as_str(), got.event_type), ("tok-1", None));
        assert_eq!(
            x.extractor_ref().extract(&request("POST", "/", &[]), b"").unwrap_err().kind(),
            KeyErrorKind::Missing
        );
    }
}
