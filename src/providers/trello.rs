//! Trello: the `X-Trello-Webhook` header, over the body and the callback
//! URL, and the `HEAD` request that checks the URL when a webhook is created.
//!
//! Scheme (Trello REST API, "Webhooks", "Webhook Signatures",
//! <https://developer.atlassian.com/cloud/trello/guides/rest-api/webhooks/>):
//! `X-Trello-Webhook: <base64 HMAC-SHA1>` of the full request body followed
//! by the webhook's `callbackURL` "exactly as it was provided during webhook
//! creation", keyed with the application's secret (the OAuth secret on the
//! Power-Up's API key page, not an API token) as its UTF-8 bytes. The
//! callback URL is configuration ([`TrelloVerifier::new`],
//! [`Provider::trello`]), never rebuilt from the request. One signature; a
//! new application secret invalidates the old one at once (configure both
//! while switching).
//!
//! **The signed bytes.** The same page says Trello signs the content "as
//! binary strings, not utf-8" (a Node default): each UTF-16 code unit of
//! body and URL is reduced to its low 8 bits (`–`, U+2013, is signed as the
//! byte 0x13). For ASCII that is the text itself. Its example code, run on
//! today's Node, hashes UTF-8 instead; the preset accepts either reading
//! (both are HMACs under the secret of the same text), the documented one
//! first, and computes one HMAC when body and URL are ASCII. **Limit:** in
//! the documented reading, a character outside ASCII is authenticated only
//! by its low byte, so someone holding a genuine delivery can swap it for
//! another with the same low byte (`ē`, U+0113, for `–`) and it still
//! verifies. The event key (`action.id`) and type are ASCII and unaffected;
//! treat other non-ASCII text of the body (names, comments) as
//! unauthenticated where that matters, or read it back from the API.
//!
//! **The event key** is the `action.id` of the body (every delivery is one
//! action, `{"action": {...}, "model": {...}, "webhook": {...}}`), the id of
//! the action in Trello, which a retry repeats; the event type is
//! `action.type` (`updateCard`, `commentCard`, ...).
//!
//! **Limit of the scheme:** no time is signed, and the body's `action.date`
//! is the action's time: a captured delivery verifies forever (its replay is
//! a duplicate while the claim is kept). Serve the endpoint over TLS.
//!
//! **Handshake.** When a webhook is created, Trello sends a `HEAD` request to
//! the callback URL and creates the webhook only if it answers 200
//! (<https://developer.atlassian.com/cloud/trello/guides/rest-api/webhooks/>).
//! That request carries no signature, so it cannot be told from anyone
//! else's; answering it is a harmless empty 200 with no side effect.
//! [`Provider::trello`] allows `POST` and `HEAD`; its verifier lets through
//! a `HEAD` with an empty body and nothing else unsigned, and its
//! [`Challenge`] answers every such request `200` with an empty
//! `text/plain` body and `X-Content-Type-Options: nosniff`, before any
//! claim: nothing of a `HEAD` is claimed or reaches the handler. A `POST`
//! without a valid signature is refused (401) as always. Route `HEAD` to the
//! webhook's handler too (axum: `post(handler).head(handler)`), so that the
//! request reaches the layer instead of the router's 405.
//!
//! **Signed / not signed**
//! (<https://developer.atlassian.com/cloud/trello/guides/rest-api/webhooks/>):
//! the raw body and the configured callback URL are signed (non-ASCII
//! characters by their low byte, see above), so the event key and type are.
//! Headers are not; the `HEAD` request is not signed at all.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! action's `date` (ISO 8601 UTC, milliseconds), per `model.id`; Trello's
//! action ids also begin with their creation time in seconds (a MongoDB
//! ObjectId).

use bytes::Bytes;

use crate::providers::{Challenge, Provider};
use crate::verify::{any_matches, hmac, Algorithm, Delivery, Encoding, SigningSecret, Verifier, VerifyError};
use crate::verify::{check_signature_header_size, single_header, VerifyErrorKind};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "trello";

/// The header Trello signs deliveries with.
pub const SIGNATURE_HEADER: &str = "x-trello-webhook";

/// How long a Trello action can be sent again: 30 days,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
///
/// Trello's webhooks guide
/// (<https://developer.atlassian.com/cloud/trello/guides/rest-api/webhooks/>)
/// states no retry span that the research for this preset could confirm,
/// and no manual redelivery: the crate's default for an unknown span.
pub const REPLAY_WINDOW: std::time::Duration = super::DEFAULT_REPLAY_WINDOW;

/// The signed content in the documented reading: each UTF-16 code unit of
/// `text` reduced to its low 8 bits (Node's `binary` encoding). `None` when
/// that is `text`'s own bytes (ASCII).
fn binary_string(text: &str) -> Option<Vec<u8>> {
    // Truncating to the low byte is the documented encoding.
    #[allow(clippy::cast_possible_truncation)]
    (!text.is_ascii()).then(|| text.encode_utf16().map(|unit| unit as u8).collect())
}

/// Verifies `X-Trello-Webhook` for one callback URL, and lets the creation
/// `HEAD` request through (see the module docs).
#[derive(Debug, Clone)]
#[must_use]
pub struct TrelloVerifier {
    callback_url: String,
}

impl TrelloVerifier {
    /// A verifier for the webhook whose `callbackURL` is `callback_url`, byte
    /// for byte as given to Trello (query included).
    pub fn new(callback_url: impl Into<String>) -> Self {
        Self { callback_url: callback_url.into() }
    }

    /// The callback URL the signature covers.
    pub fn callback_url(&self) -> &str {
        &self.callback_url
    }

    /// The signature, decoded.
    fn signature(parts: &http::request::Parts) -> Result<[u8; 20], VerifyError> {
        check_signature_header_size(parts, SIGNATURE_HEADER)?;
        let text = single_header(parts, SIGNATURE_HEADER)?.trim();
        // Padded base64 of 20 bytes is 28 characters: checked before decoding.
        let tag = (text.len() == 28).then(|| Encoding::Base64.decode(text)).flatten();
        tag.and_then(|tag| <[u8; 20]>::try_from(tag).ok()).ok_or_else(|| VerifyErrorKind::MalformedHeader.into())
    }
}

/// Whether `parts` is Trello's creation check: a `HEAD` request.
fn is_check(parts: &http::request::Parts) -> bool {
    parts.method == http::Method::HEAD
}

impl Verifier for TrelloVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        if is_check(parts) {
            return Ok(());
        }
        Self::signature(parts).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        if is_check(delivery.parts) {
            // Only the empty creation check passes unsigned; the challenge answers it.
            return if delivery.body.is_empty() { Ok(()) } else { Err(VerifyErrorKind::MalformedHeader.into()) };
        }
        let signature = Self::signature(delivery.parts)?;
        let candidates = [&signature[..]];
        let url = self.callback_url.as_bytes();
        // The documented reading, where it differs from the UTF-8 bytes.
        let ascii = delivery.body.is_ascii() && self.callback_url.is_ascii();
        let documented = (!ascii)
            .then(|| binary_string(&format!("{}{}", String::from_utf8_lossy(delivery.body), self.callback_url)))
            .flatten();
        let mut matched = false;
        for secret in delivery.require_secrets()? {
            matched |= any_matches(hmac(Algorithm::Sha1, secret, &[delivery.body, url]).as_ref(), candidates);
            if let Some(content) = &documented {
                matched |= any_matches(hmac(Algorithm::Sha1, secret, &[content]).as_ref(), candidates);
            }
        }
        if matched {
            Ok(())
        } else {
            Err(VerifyErrorKind::NoMatchingSignature.into())
        }
    }
}

/// The `X-Trello-Webhook` value Trello would send for `body` posted to
/// `callback_url` with the application secret `secret`, in the documented
/// reading (see the module docs; `body` as UTF-8 text). For tests and
/// fixtures.
pub fn sign(secret: &SigningSecret, callback_url: &str, body: &[u8]) -> String {
    let content = format!("{}{callback_url}", String::from_utf8_lossy(body));
    let bytes = binary_string(&content).unwrap_or_else(|| content.clone().into_bytes());
    Encoding::Base64.encode(hmac(Algorithm::Sha1, secret, &[&bytes]).as_ref())
}

/// Answers every request [`TrelloVerifier`] let through unsigned, the
/// creation `HEAD` check: `200`, empty, `text/plain` (`nosniff`); `None`
/// for every other delivery.
#[derive(Debug, Clone, Copy)]
struct CreationCheck;

impl Challenge for CreationCheck {
    fn respond(&self, delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
        if !is_check(delivery.parts) {
            return None;
        }
        let mut res = http::Response::new(Bytes::new());
        let headers = res.headers_mut();
        headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
        headers.insert(http::header::X_CONTENT_TYPE_OPTIONS, http::HeaderValue::from_static("nosniff"));
        Some(res)
    }
}

impl Provider {
    /// Trello (`X-Trello-Webhook`, base64 HMAC-SHA1 of the body followed by
    /// the callback URL; key = `action.id`, type = `action.type`) for the
    /// webhook created with `callback_url` (exactly as given to Trello).
    /// Methods `POST` and `HEAD`: the creation `HEAD` check is answered 200
    /// without a claim. See [`crate::providers::trello`].
    pub fn trello(callback_url: impl Into<String>) -> Self {
        super::json_keyed(NAME, TrelloVerifier::new(callback_url), "/action/id", "/action/type")
            .challenge(CreationCheck)
            .methods([http::Method::POST, http::Method::HEAD])
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER],
    |url| Provider::trello(url),
    super::ExampleOf::Signed(|s, d| vec![(SIGNATURE_HEADER, sign(s, d.url, d.body))]),
)
.signing(super::UrlArg::NotificationUrl)
.signs("`x-trello-webhook` base64 HMAC-SHA1 of `{body}{callback URL}`")
.key_from("the body's action.id (JSON)")
.fixture(super::Fixture::own("signs the callback URL: its formula fixture is checked in the module"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{at, fixture_json, request_to, NOW};

    const URL: &str = "https://example.com/trello/callback";

    fn check(method: &str, lines: &[&str], body: &[u8], secrets: &[&str]) -> Result<(), VerifyErrorKind> {
        let mut p = request_to(method, "/any/path?x=1", &[]);
        for line in lines {
            p.headers.append(SIGNATURE_HEADER, http::HeaderValue::from_str(line).unwrap());
        }
        let secrets: Vec<SigningSecret> = secrets.iter().map(|s| SigningSecret::from(*s)).collect();
        TrelloVerifier::new(URL).verify(&Delivery::new(&p, body, &secrets, at(NOW))).map_err(|e| e.kind())
    }

    #[derive(serde::Deserialize)]
    struct Fixture {
        secret: String,
        url: String,
        headers: std::collections::BTreeMap<String, String>,
        utf8_header: String,
        event_id: String,
        event_type: String,
    }

    /// The formula fixture (`scripts/fixtures/trello.js`, Node's crypto over
    /// the `binary` string as Trello's page describes): it verifies with its
    /// callback URL, [`sign`] reproduces it, the UTF-8 reading of the same
    /// body verifies too, and a changed body or another URL does not.
    #[test]
    fn formula_fixture() {
        let f: Fixture = fixture_json("trello/formula.json");
        let body =
            std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/providers/trello/body.json")).unwrap();
        let header = &f.headers["X-Trello-Webhook"];
        let secret = SigningSecret::from(f.secret.as_str());
        assert_eq!(&sign(&secret, &f.url, &body), header);
        let provider = Provider::trello(f.url.as_str());
        let secrets = [secret];
        let verify = |line: &str, body: &[u8], provider: &Provider| {
            let p = request_to("POST", "/trello", &[("X-Trello-Webhook", line)]);
            provider.verify(&Delivery::new(&p, body, &secrets, at(NOW))).map_err(|e| e.kind())
        };
        assert_eq!(verify(header, &body, &provider), Ok(()));
        assert_eq!(verify(&f.utf8_header, &body, &provider), Ok(()));
        let changed = [&body[..], b" "].concat();
        assert_eq!(verify(header, &changed, &provider), Err(VerifyErrorKind::NoMatchingSignature));
        let other_url = Provider::trello(format!("{}&x=1", f.url));
        assert_eq!(verify(header, &body, &other_url), Err(VerifyErrorKind::NoMatchingSignature));
        let p = request_to("POST", "/trello", &[("X-Trello-Webhook", header)]);
        let id = provider.identify(&p, &body).unwrap();
        assert_eq!((id.key.as_str(), id.event_type.as_deref()), (f.event_id.as_str(), Some(f.event_type.as_str())));
    }

    /// The documented reading keeps only the low byte of each UTF-16 code
    /// unit: the page's en-dash is the byte 0x13, and a character with the
    /// same low byte verifies in its place (the limit in the module docs).
    #[test]
    fn signs_the_binary_string() {
        assert_eq!(binary_string("a–b"), Some(vec![b'a', 0x13, b'b']));
        assert_eq!(binary_string("🎉"), Some(vec![0x3c, 0x89]));
        assert_eq!(binary_string("ascii"), None);
        let secret = SigningSecret::from("s");
        let body = r#"{"action":{"id":"a1","type":"t"},"note":"–"}"#.as_bytes();
        let good = sign(&secret, URL, body);
        assert_eq!(check("POST", &[&good], body, &["s"]), Ok(()));
        let swapped = r#"{"action":{"id":"a1","type":"t"},"note":"ē"}"#.as_bytes();
        assert_eq!(check("POST", &[&good], swapped, &["s"]), Ok(()));
        let other = r#"{"action":{"id":"a1","type":"t"},"note":"-"}"#.as_bytes();
        assert_eq!(check("POST", &[&good], other, &["s"]), Err(VerifyErrorKind::NoMatchingSignature));
    }

    #[test]
    fn verifies_and_rejects() {
        use VerifyErrorKind::{MalformedHeader, MissingHeader, NoMatchingSignature, NoSecret};
        let body = br#"{"action":{"id":"a1","type":"createCard"}}"#;
        let s = |key: &str, url: &str| sign(&SigningSecret::from(key), url, body);
        let (good, by_other, other_url) =
            (s("app-secret", URL), s("other", URL), s("app-secret", "https://example.com/x"));
        let body_alone =
            Encoding::Base64.encode(hmac(Algorithm::Sha1, &SigningSecret::from("app-secret"), &[body]).as_ref());
        let url_first = Encoding::Base64
            .encode(hmac(Algorithm::Sha1, &SigningSecret::from("app-secret"), &[URL.as_bytes(), body]).as_ref());
        let hex = hex::encode(Encoding::Base64.decode(&good).unwrap());
        let sha256 = Encoding::Base64.encode(&crate::verify::hmac_sha256(&SigningSecret::from("app-secret"), &[body]));
        let cases: &[(&str, Vec<&str>, &[u8], &[&str], Result<(), VerifyErrorKind>)] = &[
            ("valid", vec![&good], body, &["app-secret"], Ok(())),
            ("tampered body", vec![&good], b"{}", &["app-secret"], Err(NoMatchingSignature)),
            ("wrong secret", vec![&by_other], body, &["app-secret"], Err(NoMatchingSignature)),
            ("rotation: both secrets", vec![&by_other], body, &["app-secret", "other"], Ok(())),
            ("another callback URL", vec![&other_url], body, &["app-secret"], Err(NoMatchingSignature)),
            ("the body alone", vec![&body_alone], body, &["app-secret"], Err(NoMatchingSignature)),
            ("URL before body", vec![&url_first], body, &["app-secret"], Err(NoMatchingSignature)),
            ("missing", vec![], body, &["app-secret"], Err(MissingHeader)),
            ("hex", vec![&hex], body, &["app-secret"], Err(MalformedHeader)),
            ("an HMAC-SHA256", vec![&sha256], body, &["app-secret"], Err(MalformedHeader)),
            ("two different lines", vec![&good, &by_other], body, &["app-secret"], Err(MalformedHeader)),
            ("the same line twice", vec![&good, &good], body, &["app-secret"], Ok(())),
            ("empty", vec![""], body, &["app-secret"], Err(MalformedHeader)),
            ("no secret", vec![&good], body, &[], Err(NoSecret)),
        ];
        for (name, lines, body, secrets, want) in cases {
            assert_eq!(check("POST", lines, body, secrets), *want, "{name}");
        }
        let v = TrelloVerifier::new(URL);
        assert_eq!(v.callback_url(), URL);
        let precheck =
            |method: &str, lines: &[(&str, &str)]| v.precheck(&request_to(method, "/", lines)).map_err(|e| e.kind());
        assert_eq!(precheck("POST", &[(SIGNATURE_HEADER, &good)]), Ok(()));
        assert_eq!(precheck("POST", &[]), Err(MissingHeader));
        assert_eq!(precheck("POST", &[(SIGNATURE_HEADER, "x")]), Err(MalformedHeader));
    }

    /// Trello's creation check: an empty `HEAD` is let through unsigned and
    /// answered 200 without a claim; every request the verifier lets through
    /// that way is answered; an unsigned `POST` is still refused, and a
    /// signed one is not taken for the check.
    #[test]
    fn answers_the_creation_head_request() {
        let provider = Provider::trello(URL);
        assert_eq!(provider.allowed_methods(), [http::Method::POST, http::Method::HEAD]);
        let secrets = [SigningSecret::from("app-secret")];
        let ask = |method: &str, headers: &[(&str, &str)], body: &[u8]| {
            let p = request_to(method, "/trello/callback", headers);
            provider.handshake(&Delivery::new(&p, body, &secrets, at(NOW))).map_err(|e| e.kind())
        };
        let res = ask("HEAD", &[], b"").unwrap().expect("answered, never claimed");
        assert_eq!(res.status(), http::StatusCode::OK);
        assert!(res.body().is_empty());
        assert_eq!(res.headers()[http::header::CONTENT_TYPE], "text/plain; charset=utf-8");
        assert_eq!(res.headers()[http::header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        // A HEAD with a body is not the check.
        assert_eq!(ask("HEAD", &[], b"{}").unwrap_err(), VerifyErrorKind::MalformedHeader);
        // Unsigned POSTs (and GETs, which the layer answers 405 first) are refused.
        assert_eq!(ask("POST", &[], b"").unwrap_err(), VerifyErrorKind::MissingHeader);
        assert_eq!(ask("POST", &[], br#"{"action":{"id":"a"}}"#).unwrap_err(), VerifyErrorKind::MissingHeader);
        assert_eq!(ask("GET", &[], b"").unwrap_err(), VerifyErrorKind::MissingHeader);
        // A signed POST is a delivery, not the check.
        let body = br#"{"action":{"id":"a1","type":"createCard"}}"#;
        let good = sign(&secrets[0], URL, body);
        assert!(ask("POST", &[(SIGNATURE_HEADER, &good)], body).unwrap().is_none());
        assert_eq!(provider.name(), NAME);
    }
}
