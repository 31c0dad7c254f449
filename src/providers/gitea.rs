//! Gitea: the `X-Gitea-Signature` header.
//!
//! Scheme (Gitea, "Webhooks", <https://docs.gitea.com/usage/repository/webhooks>,
//! and the sender, `services/webhook/deliver.go` in `go-gitea/gitea`, which
//! adds the signature headers): `X-Gitea-Signature: <hex HMAC-SHA256>`, no
//! prefix, keyed with the webhook's secret as UTF-8 bytes, over the **JSON
//! payload**. With the content type `application/json` (the default) that
//! is the raw body. With `application/x-www-form-urlencoded` the body is
//! `payload=<the JSON, URL-encoded>` and the HMAC still covers the JSON: for
//! a request of that content type this verifier decodes the `payload` field
//! and checks the HMAC over it (a form without exactly one `payload` is
//! [`VerifyErrorKind::MissingField`] or malformed); the handler gets the
//! form body as sent. Webhooks of the HTTP method `GET` (payload in the
//! query string) are not covered. Gitea sends one signature; rotating the
//! secret means configuring both here for the changeover. Gitea also sends
//! the same HMAC as `X-Hub-Signature-256: sha256=`, and `X-Gogs-Signature`;
//! this preset reads `X-Gitea-Signature`.
//!
//! **Signed / not signed:** only the JSON payload is signed. The event key
//! (`X-Gitea-Delivery`) and the event type (`X-Gitea-Event`) are headers
//! and **not signed**.
//!
//! The event key is `X-Gitea-Delivery`, the UUID of the hook task. Gitea
//! does not retry a failed delivery (the task is marked delivered and its
//! failure only logged), so the key stops concurrent copies; a "Redeliver"
//! from the webhook's recent deliveries creates a new task with a new UUID,
//! which this preset claims as a new event. The event type is
//! `X-Gitea-Event` (`push`, `pull_request`).
//!
//! **Retries:** none automatic; manual redelivery only, under a new
//! `X-Gitea-Delivery`, hence [`REPLAY_WINDOW`]. **Tolerance:** none; no
//! timestamp is sent. **Handshake:** none ("Test delivery" sends a push
//! payload).
//!
//! **Limit of the scheme:** only the payload is signed: whoever captured one
//! delivery can send it again under a fresh `X-Gitea-Delivery`, and it
//! verifies and is claimed as a new event; so is a manual redelivery. Make
//! the business write idempotent on the payload's own identity (for a push,
//! the repository id and `after`), and serve the endpoint over TLS.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! object's `updated_at` (pull requests, issues; RFC 3339); pushes carry
//! commit timestamps only.
//!
//! Forgejo, Gitea's fork, sends the same scheme under its own header names:
//! [`crate::providers::forgejo`].

use crate::verify::generic::HmacVerifier;
use crate::verify::{hmac_sha256, Delivery, SigningSecret, Verifier, VerifyError, VerifyErrorKind};

/// The header Gitea signs deliveries with.
pub const SIGNATURE_HEADER: &str = "x-gitea-signature";
/// The header carrying the hook task's UUID (the event key).
pub const DELIVERY_HEADER: &str = "x-gitea-delivery";
/// The header carrying the event name (the event type).
pub const EVENT_HEADER: &str = "x-gitea-event";

/// The CLI name of the preset and the `provider` column of its claims.
pub const NAME: &str = "gitea";
/// How long a Gitea delivery can be sent again: 1 day.
///
/// Gitea does not retry a failed delivery, and a manual redelivery from the
/// webhook's settings is a new hook task with a new `X-Gitea-Delivery`
/// (<https://docs.gitea.com/usage/repository/webhooks>; `ReplayHookTask` in
/// `services/webhook`), which the claim cannot recognise anyway: the key
/// only meets concurrent copies of one request. One day, the crate's
/// shortest window.
pub const REPLAY_WINDOW: std::time::Duration = super::days(1);

/// Verifies Gitea's (or Forgejo's) signature header over the JSON payload:
/// the raw body, or a form's `payload` field.
#[derive(Debug, Clone)]
#[must_use]
pub struct GiteaVerifier {
    inner: HmacVerifier,
}

impl Default for GiteaVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl GiteaVerifier {
    /// A verifier for `X-Gitea-Signature`.
    pub fn new() -> Self {
        Self::for_header(SIGNATURE_HEADER)
    }

    /// The same scheme under another signature header (Forgejo's).
    pub(crate) fn for_header(header: &str) -> Self {
        Self { inner: HmacVerifier::builder(header).strict().build().expect("a valid fixed configuration") }
    }
}

/// Whether the request's content type is `application/x-www-form-urlencoded`.
fn is_form(parts: &http::request::Parts) -> bool {
    parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
}

/// The single `payload` field of a form body, decoded.
fn form_payload(body: &[u8]) -> Result<String, VerifyError> {
    let mut found = None;
    for (name, value) in form_urlencoded::parse(body) {
        if name == "payload" && found.replace(value.into_owned()).is_some() {
            return Err(VerifyErrorKind::MalformedHeader.into());
        }
    }
    found.ok_or_else(|| VerifyErrorKind::MissingField.into())
}

impl Verifier for GiteaVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        self.inner.precheck(parts)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        if !is_form(delivery.parts) {
            return self.inner.verify(delivery);
        }
        self.inner.precheck(delivery.parts)?;
        let payload = form_payload(delivery.body)?;
        self.inner.verify(&Delivery { body: payload.as_bytes(), ..*delivery })
    }
}

/// The `X-Gitea-Signature` value Gitea would send for the JSON `payload`
/// with `secret`: the bare hex digest. For tests and fixtures.
pub fn sign(secret: &SigningSecret, payload: &[u8]) -> String {
    hex::encode(hmac_sha256(secret, &[payload]))
}

impl crate::providers::Provider {
    /// Gitea (`X-Gitea-Signature`; key = `X-Gitea-Delivery`). See [`crate::providers::gitea`].
    ///
    /// The Gitea preset: [`GiteaVerifier`], key = `X-Gitea-Delivery`, type =
    /// `X-Gitea-Event`.
    pub fn gitea() -> Self {
        super::header_keyed(NAME, GiteaVerifier::new(), DELIVERY_HEADER, EVENT_HEADER)
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER, DELIVERY_HEADER, EVENT_HEADER],
    |_| crate::providers::Provider::gitea(),
    super::ExampleOf::Signed(|s, d| vec![(SIGNATURE_HEADER, sign(s, d.body)), (DELIVERY_HEADER, d.id.to_owned())]),
)
.signs("`X-Gitea-Signature` hex HMAC-SHA256 of the JSON payload (the body, or a form's `payload` field)")
.key_from("the X-Gitea-Delivery header")
.fixture(super::Fixture::formula(&[]));

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::providers::tests::support::{fixture, BodyOnly};
    use crate::providers::Provider;
    use crate::test_support::{at, headers, request, NOW};

    /// The fixture's head (every header Gitea and Forgejo send) and the
    /// verdicts of `verifier` on the JSON body and on the form body, with the
    /// fixture's secret; see `scripts/fixtures/gitea.py` (the formula of
    /// Gitea's sender, no SDK). The rest of the fixture (the signature, the
    /// key and type read) is checked in `providers::fixtures`.
    pub(crate) fn check_fixture(provider: &Provider) {
        let body = include_bytes!("../../tests/fixtures/providers/gitea/body.json");
        let form = include_bytes!("../../tests/fixtures/providers/gitea/form_body.txt");
        let (expected, secret) = fixture(include_str!("../../tests/fixtures/providers/gitea/expected.json"));
        let sent: Vec<(&str, &str)> =
            expected["headers"].as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap())).collect();
        let secrets = [secret];
        let verify = |extra: &[(&str, &str)], b: &[u8]| {
            let all: Vec<(&str, &str)> = sent.iter().chain(extra).copied().collect();
            let p = request(&all);
            provider.verifier_ref().verify(&Delivery::new(&p, b, &secrets, at(NOW))).map_err(|e| e.kind())
        };
        let json = [("content-type", "application/json")];
        let form_type = [("content-type", "application/x-www-form-urlencoded")];
        assert_eq!(verify(&json, body), Ok(()));
        assert_eq!(verify(&form_type, form), Ok(()));
        // The form body as JSON, and the JSON as a form, do not verify.
        assert_eq!(verify(&json, form), Err(VerifyErrorKind::NoMatchingSignature));
        assert_eq!(verify(&form_type, body), Err(VerifyErrorKind::MissingField));
    }

    #[test]
    fn server_formula_fixture() {
        check_fixture(&Provider::gitea());
    }

    /// The common cases, rotation and precheck, and Gitea's own: bare hex.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"ref":"refs/heads/main"}"#;
        BodyOnly::preset(&PRESET, sign).check_cases("gitea_secret", body, b"{\"ref\":\"x\"}", "zz", |_, good| {
            vec![
                ("sha256= prefix", vec![format!("sha256={good}")], Err(VerifyErrorKind::MalformedHeader)),
                ("short hex", vec!["abcd".to_owned()], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
    }

    #[test]
    fn form_cases() {
        let secret = [SigningSecret::from("s")];
        let json = br#"{"a":"b+c d"}"#;
        let sig = sign(&secret[0], json);
        let encoded: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", std::str::from_utf8(json).unwrap())
            .finish();
        let twice = format!("{encoded}&{encoded}");
        let other_first = format!("x=1&{encoded}");
        let v = GiteaVerifier::new();
        let cases: &[(&str, &str, &[u8], Result<(), VerifyErrorKind>)] = &[
            ("form", "application/x-www-form-urlencoded", encoded.as_bytes(), Ok(())),
            ("charset parameter", "Application/X-WWW-Form-Urlencoded; charset=utf-8", encoded.as_bytes(), Ok(())),
            ("another field first", "application/x-www-form-urlencoded", other_first.as_bytes(), Ok(())),
            (
                "payload twice",
                "application/x-www-form-urlencoded",
                twice.as_bytes(),
                Err(VerifyErrorKind::MalformedHeader),
            ),
            ("no payload", "application/x-www-form-urlencoded", b"x=1", Err(VerifyErrorKind::MissingField)),
            ("JSON", "application/json", json, Ok(())),
            ("no content type", "", json, Ok(())),
        ];
        for (name, content_type, body, want) in cases {
            let mut list = vec![(SIGNATURE_HEADER, sig.as_str())];
            if !content_type.is_empty() {
                list.push(("content-type", content_type));
            }
            let p = headers(&list);
            let got = v.verify(&Delivery::new(&p, body, &secret, at(NOW))).map_err(|e| e.kind());
            assert_eq!(got, *want, "{name}");
        }
        // A form without the signature header fails before the body is read.
        let p = headers(&[("content-type", "application/x-www-form-urlencoded")]);
        let got = v.verify(&Delivery::new(&p, b"x=1", &secret, at(NOW))).map_err(|e| e.kind());
        assert_eq!(got, Err(VerifyErrorKind::MissingHeader));
    }
}
