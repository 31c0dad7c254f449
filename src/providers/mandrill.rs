//! Mandrill (Mailchimp Transactional): the `X-Mandrill-Signature` header.
//!
//! Scheme (Mailchimp Transactional, "Webhooks", "Authenticating webhook
//! requests", <https://mailchimp.com/developer/transactional/guides/track-respond-activity-webhooks/#authenticating-webhook-requests>):
//! `X-Mandrill-Signature: <base64 HMAC-SHA1>`, keyed with the webhook's
//! **key** (shown beside the webhook on the Webhooks page, not the API key)
//! as its bytes, over the webhook URL **exactly as entered in Mandrill**,
//! then every POST parameter (form-decoded) sorted by name, each written as
//! name then value with no separator. The body is
//! `application/x-www-form-urlencoded` with one parameter, `mandrill_events`:
//! a JSON array of up to 1,000 events
//! (<https://mailchimp.com/developer/transactional/docs/webhooks/>). A
//! repeated parameter name is refused (which value the receiver reads
//! would be ambiguous). One key per webhook; after resetting it, configure
//! the old and the new key together for the changeover.
//!
//! The URL is configuration ([`MandrillVerifier::new`],
//! [`Provider::mandrill`](crate::Provider)), never rebuilt from the request,
//! whose `Host` and path a proxy may rewrite and an attacker may choose.
//!
//! **Signed / not signed:** the configured URL and the form parameters, so
//! the whole `mandrill_events` batch, its event key and type, are signed.
//! Headers are not.
//!
//! **Event key.** A delivery is a batch of events, and Mandrill retries a
//! failed batch whole. No id names an event: an event's `_id` is its
//! *message's* id, shared by that message's `send`, `open` and `click`
//! events. The key is therefore a digest of the batch, `sha256:` and the hex
//! SHA-256 of `mandrill_events` in canonical JSON (RFC 8785), which a retry
//! of the batch repeats. **Limit:** two batches of byte-for-byte equal
//! events are one key (events carry their `ts` and ids, so this does not
//! happen in practice); process each event of a batch idempotently on its
//! own identity (`_id`, `event`, `ts`). The event type is the events'
//! `event` when every event of the batch has the same one (`send`,
//! `inbound`), else none.
//!
//! **Handshake.** When a webhook is added, Mandrill checks the URL with a
//! `HEAD` request, unsigned; if that does not answer 200 it falls back to a
//! POST of an empty `mandrill_events` array signed with the key
//! `test-webhook` (Mandrill, "Why can't my webhook or inbound route URL be
//! verified?",
//! <https://mandrill.zendesk.com/hc/en-us/articles/360038740014-Why-can-t-my-webhook-or-inbound-route-URL-be-verified>).
//! The `HEAD` check cannot be authenticated, and answering it is harmless:
//! the verifier lets through exactly a `HEAD` with an empty body (the
//! provider allows `POST` and `HEAD`), and the preset's
//! [`Challenge`] answers every such request
//! `200` with no body, nothing claimed. A verified POST of an empty batch
//! is answered `200` too, nothing claimed. Any other request without a valid
//! signature, an unsigned POST included, is refused (401).
//!
//! **Limit of the scheme:** no time is signed, so a captured batch verifies
//! forever; the claim on its digest makes a replay a duplicate. Serve the
//! endpoint over TLS.
//!
//! **Retries:** a batch that does not get a 2xx is retried with back-off
//! until it succeeds or is given up by hand in the Webhooks page (Mandrill,
//! "Can I stop a failed webhook batch from retrying?",
//! <https://mandrill.zendesk.com/hc/en-us/articles/205583277-Can-I-stop-a-failed-webhook-batch-from-retrying->);
//! the span is not published, hence [`REPLAY_WINDOW`]. **Tolerance:** none.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): each
//! event's `ts` (Unix seconds); a batch is not ordered across batches.

use std::borrow::Cow;

use bytes::Bytes;
use sha2::Digest as _;

use crate::key::json;
use crate::key::{EventIdentity, KeyError, KeyErrorKind, KeyExtractor};
use crate::providers::{Challenge, Provider};
use crate::verify::{
    any_matches, hmac, single_header, Algorithm, Delivery, Encoding, SigningSecret, Verifier, VerifyError,
    VerifyErrorKind,
};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "mandrill";

/// How long a Mandrill batch can be sent again: 30 days.
///
/// Mandrill retries a failed batch with back-off until it succeeds or is
/// given up by hand (<https://mandrill.zendesk.com/hc/en-us/articles/205583277-Can-I-stop-a-failed-webhook-batch-from-retrying->);
/// the span is not published
/// (<https://mailchimp.com/developer/transactional/docs/webhooks/>), so the
/// window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const REPLAY_WINDOW: std::time::Duration = super::DEFAULT_REPLAY_WINDOW;

/// The header Mandrill signs webhook requests with.
pub const SIGNATURE_HEADER: &str = "x-mandrill-signature";

/// The form parameter carrying the batch of events.
pub const EVENTS_PARAM: &str = "mandrill_events";

/// Verifies `X-Mandrill-Signature` for one webhook URL; lets through the
/// unsigned `HEAD` URL check (answered by the preset's challenge).
#[derive(Debug, Clone)]
#[must_use]
pub struct MandrillVerifier {
    webhook_url: String,
}

impl MandrillVerifier {
    /// A verifier for the webhook whose URL is `webhook_url`, byte for byte
    /// as entered in Mandrill (`https://example.com/webhooks/mandrill`).
    pub fn new(webhook_url: impl Into<String>) -> Self {
        Self { webhook_url: webhook_url.into() }
    }

    /// The webhook URL the signature covers.
    pub fn webhook_url(&self) -> &str {
        &self.webhook_url
    }
}

/// Whether the request is Mandrill's unsigned URL check: a `HEAD`.
fn is_url_check(parts: &http::request::Parts) -> bool {
    parts.method == http::Method::HEAD
}

/// The signature header's tag: standard base64 of 20 bytes.
fn signature(parts: &http::request::Parts) -> Result<[u8; 20], VerifyError> {
    let text = single_header(parts, SIGNATURE_HEADER)?;
    let tag = Encoding::Base64.decode(text).ok_or(VerifyErrorKind::MalformedHeader)?;
    tag.try_into().map_err(|_| VerifyErrorKind::MalformedHeader.into())
}

/// The form parameters, sorted by name.
///
/// # Errors
/// [`VerifyErrorKind::MalformedHeader`] for a repeated name.
fn sorted_params(body: &[u8]) -> Result<Vec<(Cow<'_, str>, Cow<'_, str>)>, VerifyError> {
    let mut params: Vec<_> = form_urlencoded::parse(body).collect();
    params.sort_by(|a, b| a.0.cmp(&b.0));
    if params.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(VerifyErrorKind::MalformedHeader.into());
    }
    Ok(params)
}

/// The signed bytes: the URL, then each parameter's name and value.
fn signed_parts<'p>(url: &'p str, params: &'p [(Cow<'_, str>, Cow<'_, str>)]) -> Vec<&'p [u8]> {
    let mut parts = vec![url.as_bytes()];
    for (name, value) in params {
        parts.push(name.as_bytes());
        parts.push(value.as_bytes());
    }
    parts
}

impl Verifier for MandrillVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        if is_url_check(parts) {
            return Ok(());
        }
        signature(parts).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        if is_url_check(delivery.parts) {
            // Mandrill's unsigned URL check, answered by the challenge with
            // no claim; a HEAD carrying a body is no such check.
            delivery.require_secrets()?;
            return if delivery.body.is_empty() { Ok(()) } else { Err(VerifyErrorKind::MalformedHeader.into()) };
        }
        let tag = signature(delivery.parts)?;
        let params = sorted_params(delivery.body)?;
        let signed = signed_parts(&self.webhook_url, &params);
        let mut matched = false;
        for secret in delivery.require_secrets()? {
            matched |= any_matches(hmac(Algorithm::Sha1, secret, &signed).as_ref(), [&tag[..]]);
        }
        if matched {
            Ok(())
        } else {
            Err(VerifyErrorKind::NoMatchingSignature.into())
        }
    }
}

/// The `X-Mandrill-Signature` Mandrill would send for the form parameters
/// `params` posted to `webhook_url` with the webhook key `secret`: standard
/// base64. For tests and fixtures.
pub fn sign(secret: &SigningSecret, webhook_url: &str, params: &[(&str, &str)]) -> String {
    let mut params: Vec<(Cow<'_, str>, Cow<'_, str>)> =
        params.iter().map(|(k, v)| (Cow::Borrowed(*k), Cow::Borrowed(*v))).collect();
    params.sort_by(|a, b| a.0.cmp(&b.0));
    Encoding::Base64.encode(hmac(Algorithm::Sha1, secret, &signed_parts(webhook_url, &params)).as_ref())
}

/// The `mandrill_events` value of a form body, parsed strictly.
fn events(body: &[u8]) -> Result<Vec<u8>, KeyError> {
    let params = sorted_params(body).map_err(|_| KeyErrorKind::Invalid)?;
    let (_, value) = params.into_iter().find(|(k, _)| k == EVENTS_PARAM).ok_or(KeyErrorKind::Missing)?;
    Ok(value.into_owned().into_bytes())
}

/// Reads the key `sha256:<hex SHA-256 of the canonical mandrill_events>` and
/// the events' shared `event` as the type.
#[derive(Debug, Clone, Copy, Default)]
pub struct MandrillKey;

impl KeyExtractor for MandrillKey {
    /// # Errors
    /// [`KeyErrorKind::Missing`] without `mandrill_events` or for an empty
    /// batch; [`KeyErrorKind::BodyNotJson`] when it is not strict JSON;
    /// [`KeyErrorKind::Invalid`] when it is not an array, or for a repeated
    /// parameter.
    fn extract(&self, _parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let text = events(body)?;
        let root = json::parse(&text)?;
        let json::Node::Array(items) = &root else { return Err(KeyErrorKind::Invalid.into()) };
        if items.is_empty() {
            return Err(KeyErrorKind::Missing.into());
        }
        let mut canonical = Vec::with_capacity(text.len());
        json::write_canonical(&root, &mut canonical)?;
        let key = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&canonical)));
        let kind = |item: &json::Node<'_>| match item.pointer("/event") {
            Some(json::Node::String(s)) => Some(s.to_string()),
            _ => None,
        };
        let first = kind(&items[0]);
        let event_type = first.filter(|t| items.iter().all(|i| kind(i).as_deref() == Some(t)));
        Ok(EventIdentity { key, event_type })
    }
}

/// Answers Mandrill's `HEAD` URL check (`200`, no body) and a verified POST
/// of an empty batch (`200`, no body); `None` otherwise. Nothing is claimed.
#[derive(Debug, Clone, Copy, Default)]
struct UrlCheck;

impl Challenge for UrlCheck {
    fn respond(&self, delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
        let empty_batch = || {
            events(delivery.body)
                .ok()
                .and_then(|e| json::parse(&e).ok().map(|n| matches!(n, json::Node::Array(a) if a.is_empty())))
        };
        if is_url_check(delivery.parts) || empty_batch() == Some(true) {
            return Some(http::Response::new(Bytes::new()));
        }
        None
    }
}

impl Provider {
    /// Mandrill (`X-Mandrill-Signature` over the webhook URL + sorted form
    /// parameters; key = digest of the batch; answers the `HEAD` URL check).
    /// `webhook_url` is the URL exactly as entered in Mandrill. See
    /// [`crate::providers::mandrill`].
    ///
    /// The Mandrill preset: [`MandrillVerifier`], key [`MandrillKey`],
    /// methods `POST` and `HEAD`, the URL check answered without a claim.
    pub fn mandrill(webhook_url: impl Into<String>) -> Self {
        Provider::new(NAME, MandrillVerifier::new(webhook_url), MandrillKey)
            .methods([http::Method::POST, http::Method::HEAD])
            .challenge(UrlCheck)
    }
}

/// The example's webhook URL.
const EXAMPLE_URL: &str = "https://example.com/webhooks/mandrill";

/// The form body of one `send` event whose message id is `id`, carrying
/// `pad` in its metadata.
fn example_body(id: &str, ts: u64, pad: &str) -> String {
    let events = serde_json::json!([{
        "event": "send", "_id": id, "ts": ts,
        "msg": { "_id": id, "ts": ts, "state": "sent", "email": "to@example.com", "metadata": { "pad": pad } },
    }]);
    form_urlencoded::Serializer::new(String::new()).append_pair(EVENTS_PARAM, &events.to_string()).finish()
}

/// [`PresetInfo::sign`](super::PresetInfo::sign) for Mandrill: the URL and
/// the form fields of the body (`mandrill_events=...`, sorted by name).
fn send(key: &str, d: &super::Signing<'_>) -> Result<super::Example, super::SignError> {
    let secret = SigningSecret::from(key);
    let fields: Vec<(String, String)> = form_urlencoded::parse(d.body).into_owned().collect();
    let params: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let headers = vec![
        (SIGNATURE_HEADER, sign(&secret, d.url, &params)),
        ("content-type", "application/x-www-form-urlencoded".to_owned()),
    ];
    super::signed_delivery(Provider::mandrill(d.url), secret, d, headers, d.body.to_vec())
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER],
    |url| Provider::mandrill(url),
    super::ExampleOf::Whole(|id, at, body| {
        let id = if id.is_empty() { "message-1" } else { id };
        let form = example_body(id, super::unix_seconds(at), &String::from_utf8_lossy(body));
        let events: Vec<(String, String)> = form_urlencoded::parse(form.as_bytes()).into_owned().collect();
        let params: Vec<(&str, &str)> = events.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let secret = super::example_secret();
        let headers = vec![
            (SIGNATURE_HEADER, sign(&secret, EXAMPLE_URL, &params)),
            ("content-type", "application/x-www-form-urlencoded".to_owned()),
        ];
        super::hmac_example(Provider::mandrill(EXAMPLE_URL), form.as_bytes(), headers)
    }),
)
.sends(send)
.signing(super::UrlArg::NotificationUrl)
.signs("`X-Mandrill-Signature` base64 HMAC-SHA1 of `{webhook URL}` + sorted form `{name}{value}`")
.key_from("a digest of the mandrill_events batch (canonical JSON)")
.fixture(super::Fixture::formula(&[]));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{at, request_to, NOW};
    use crate::verify::VerifyErrorKind::{MalformedHeader, MissingHeader, NoMatchingSignature, NoSecret};

    const URL: &str = "https://example.com/webhooks/mandrill";

    fn form(events: &str) -> String {
        form_urlencoded::Serializer::new(String::new()).append_pair(EVENTS_PARAM, events).finish()
    }

    fn check(method: &str, sig: Option<&str>, body: &[u8], secrets: &[SigningSecret]) -> Result<(), VerifyErrorKind> {
        let headers: Vec<(&str, &str)> = sig.map(|s| (SIGNATURE_HEADER, s)).into_iter().collect();
        let p = request_to(method, "/other/path?x=1", &headers);
        MandrillVerifier::new(URL).verify(&Delivery::new(&p, body, secrets, at(NOW))).map_err(|e| e.kind())
    }

    /// The head alone fails a POST without a well-formed signature; a HEAD
    /// passes to the verifier (the URL check).
    #[test]
    fn precheck() {
        let v = MandrillVerifier::new(URL);
        let pre = |method: &str, headers: &[(&str, &str)]| {
            v.precheck(&request_to(method, "/", headers)).map_err(|e| e.kind())
        };
        assert_eq!(pre("POST", &[]), Err(MissingHeader));
        assert_eq!(pre("POST", &[(SIGNATURE_HEADER, "zz")]), Err(MalformedHeader));
        assert_eq!(pre("POST", &[(SIGNATURE_HEADER, "AAAAAAAAAAAAAAAAAAAAAAAAAAA=")]), Ok(()));
        assert_eq!(pre("HEAD", &[]), Ok(()));
    }

    #[test]
    fn verifies_and_rejects() {
        let key = SigningSecret::from("mandrill-webhook-key");
        let events = r#"[{"event":"send","_id":"m1","ts":1700000000}]"#;
        let body = form(events);
        let good = sign(&key, URL, &[(EVENTS_PARAM, events)]);
        let by_other = sign(&SigningSecret::from("other"), URL, &[(EVENTS_PARAM, events)]);
        let other_url = sign(&key, "https://example.com/webhooks/mandrill/", &[(EVENTS_PARAM, events)]);
        let two = format!("{body}&a=1");
        let two_sig = sign(&key, URL, &[(EVENTS_PARAM, events), ("a", "1")]);
        let repeated = format!("{body}&{body}");
        let hex = hex::encode(Encoding::Base64.decode(&good).unwrap());
        let k = std::slice::from_ref(&key);
        let tampered = form(&events.replace("m1", "m2"));
        let cases: &[(&str, &str, Option<&str>, &[u8], &[SigningSecret], Result<(), VerifyErrorKind>)] = &[
            ("valid", "POST", Some(&good), body.as_bytes(), k, Ok(())),
            ("rotation", "POST", Some(&good), body.as_bytes(), &[SigningSecret::from("other"), key.clone()], Ok(())),
            ("wrong key", "POST", Some(&by_other), body.as_bytes(), k, Err(NoMatchingSignature)),
            ("signed for another URL", "POST", Some(&other_url), body.as_bytes(), k, Err(NoMatchingSignature)),
            ("tampered batch", "POST", Some(&good), tampered.as_bytes(), k, Err(NoMatchingSignature)),
            ("params sorted by name", "POST", Some(&two_sig), two.as_bytes(), k, Ok(())),
            ("a parameter added", "POST", Some(&good), two.as_bytes(), k, Err(NoMatchingSignature)),
            ("a repeated parameter", "POST", Some(&good), repeated.as_bytes(), k, Err(MalformedHeader)),
            ("missing header", "POST", None, body.as_bytes(), k, Err(MissingHeader)),
            ("hex, not base64", "POST", Some(&hex), body.as_bytes(), k, Err(MalformedHeader)),
            (
                "SHA-256 sized",
                "POST",
                Some("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
                body.as_bytes(),
                k,
                Err(MalformedHeader),
            ),
            ("no secret", "POST", Some(&good), body.as_bytes(), &[], Err(NoSecret)),
            // The unsigned URL check: a HEAD with no body, and nothing else.
            ("HEAD URL check", "HEAD", None, b"", k, Ok(())),
            ("HEAD with a body", "HEAD", None, body.as_bytes(), k, Err(MalformedHeader)),
            ("HEAD without secrets", "HEAD", None, b"", &[], Err(NoSecret)),
            ("unsigned POST", "POST", None, b"", k, Err(MissingHeader)),
            ("GET", "GET", None, b"", k, Err(MissingHeader)),
        ];
        for (name, method, sig, body, secrets, want) in cases {
            assert_eq!(check(method, *sig, body, secrets), *want, "{name}");
        }
        assert_eq!(MandrillVerifier::new(URL).webhook_url(), URL);
    }

    /// The HEAD check is answered `200` with no body and nothing claimed; a
    /// verified empty batch too; an unsigned POST is refused before any
    /// answer; an event batch is not a handshake.
    #[test]
    fn answers_the_url_check_only() {
        let key = SigningSecret::from("mandrill-webhook-key");
        let provider = Provider::mandrill(URL);
        assert_eq!(provider.allowed_methods(), [http::Method::POST, http::Method::HEAD]);
        let secrets = [key.clone()];
        let handshake = |method: &str, headers: &[(&str, &str)], body: &[u8]| {
            let p = request_to(method, "/", headers);
            provider.handshake(&Delivery::new(&p, body, &secrets, at(NOW))).map_err(|e| e.kind())
        };
        let res = handshake("HEAD", &[], b"").unwrap().expect("answered");
        assert_eq!(res.status(), http::StatusCode::OK);
        assert!(res.body().is_empty());
        let empty = form("[]");
        let sig = sign(&key, URL, &[(EVENTS_PARAM, "[]")]);
        assert!(handshake("POST", &[(SIGNATURE_HEADER, &sig)], empty.as_bytes()).unwrap().is_some());
        assert_eq!(handshake("POST", &[], empty.as_bytes()).unwrap_err(), MissingHeader, "an unsigned POST");
        let test_key = sign(&SigningSecret::from("test-webhook"), URL, &[(EVENTS_PARAM, "[]")]);
        assert_eq!(
            handshake("POST", &[(SIGNATURE_HEADER, &test_key)], empty.as_bytes()).unwrap_err(),
            NoMatchingSignature,
            "the fallback POST signed with the generic key"
        );
        let events = r#"[{"event":"send","_id":"m1","ts":1}]"#;
        let sig = sign(&key, URL, &[(EVENTS_PARAM, events)]);
        assert!(handshake("POST", &[(SIGNATURE_HEADER, &sig)], form(events).as_bytes()).unwrap().is_none());
    }

    #[test]
    fn key_and_type() {
        let p = request_to("POST", "/", &[]);
        let read = |events: &str| MandrillKey.extract(&p, form(events).as_bytes()).map(|i| (i.key, i.event_type));
        let (key, t) = read(r#"[{"event":"send","_id":"m1","ts":1}]"#).unwrap();
        assert_eq!(t.as_deref(), Some("send"));
        let reordered = read(r#"[ {"ts":1, "_id":"m1", "event":"send"} ]"#).unwrap();
        assert_eq!(reordered.0, key, "the canonical form: a re-serialised batch is the same key");
        assert!(key.starts_with("sha256:") && key.len() == 71, "{key}");
        let mixed = read(r#"[{"event":"send","_id":"m1","ts":1},{"event":"open","_id":"m1","ts":2}]"#).unwrap();
        assert_ne!(mixed.0, key);
        assert_eq!(mixed.1, None, "a batch of several types has none");
        let cases: &[(&str, &[u8], KeyErrorKind)] = &[
            ("empty batch", b"mandrill_events=%5B%5D", KeyErrorKind::Missing),
            ("no mandrill_events", b"other=1", KeyErrorKind::Missing),
            ("not JSON", b"mandrill_events=x", KeyErrorKind::BodyNotJson),
            ("not an array", b"mandrill_events=%7B%7D", KeyErrorKind::Invalid),
            (
                "repeated member",
                b"mandrill_events=%5B%7B%22a%22%3A1%2C%22a%22%3A2%7D%5D",
                KeyErrorKind::DuplicateMember,
            ),
        ];
        for (name, body, want) in cases {
            assert_eq!(MandrillKey.extract(&p, body).unwrap_err().kind(), *want, "{name}");
        }
    }
}
