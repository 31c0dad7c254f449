//! DocuSign Connect: the `X-DocuSign-Signature-1` .. `-N` headers, one per
//! active HMAC key.
//!
//! Scheme (DocuSign, "How to validate an HMAC signature",
//! <https://developers.docusign.com/platform/webhooks/connect/validate>;
//! "HMAC security", <https://developers.docusign.com/platform/webhooks/connect/hmac>):
//! each Connect message carries `X-DocuSign-Signature-1: <base64
//! HMAC-SHA256 of the raw body>`, keyed with a Connect HMAC secret key
//! (Admin, Connect, Connect Keys; shown in full once) as its UTF-8 bytes,
//! and one more numbered header per further active key
//! (`X-DocuSign-Signature-2`, ...). The whole body is signed, line endings
//! included. The preset reads the headers numbered 1 to
//! [`MAX_SIGNATURE_HEADERS`] (100; the validate page states no limit on
//! the keys an account holds, and a rotation needs two or three);
//! any one that matches any configured key passes, so a key rotation needs
//! no coordination: configure the keys you hold, DocuSign signs with every
//! active one. Each header line must be exactly one padded base64 tag of
//! 32 bytes (44 characters, checked before decoding), else the delivery is
//! malformed. HMAC must be switched on in the Connect configuration
//! ("Include HMAC Signature"); without it nothing is signed and every
//! delivery is refused (401).
//!
//! **Event key.** The JSON SIM message ("JSON SIM event model",
//! <https://developers.docusign.com/platform/webhooks/connect/json-sim-event-model>)
//! is `{"event", "apiVersion", "uri", "retryCount", "configurationId",
//! "generatedDateTime", "data": {"accountId", "envelopeId", ...}}`: no event
//! id, and `retryCount` changes with every retry, so neither the body's
//! digest nor any single field names the event. The key is a
//! [`DerivedKey`](crate::key::DerivedKey) over `event`, `data.envelopeId`
//! and `generatedDateTime` (when Connect generated the message, to the 100
//! nanoseconds), all signed; the event type is `event`
//! (`envelope-completed`, `recipient-signed`, ...). A retry resends the
//! generated message with its `retryCount` raised, so it is a duplicate; the
//! same event sent by two Connect configurations to one endpoint is one
//! claim too (`configurationId` is left out). **Limits:** DocuSign does not
//! document that a retry keeps `generatedDateTime`; a manual republish
//! (`retry_queue`) may generate the message afresh, which is then a new key.
//! Two events of one envelope and type generated in the same 100 ns (two
//! recipients) would share a key. Apply the envelope's state with
//! `WebhookTx::apply_if_newer` (see **Ordering**) so that a second copy
//! changes nothing. Messages in the legacy XML or aggregate JSON formats
//! have no such fields and are refused 400 (`missing`): use JSON SIM.
//!
//! **Limit of the scheme:** only the body is signed, with no time DocuSign
//! asks the receiver to check: a captured message verifies forever (the
//! claim makes its replay a duplicate while it is kept). Serve the endpoint
//! over TLS.
//!
//! **Handshake:** none.
//!
//! **Signed / not signed**
//! (<https://developers.docusign.com/platform/webhooks/connect/validate>):
//! the raw body is signed, so the key's fields and the type are. Headers are
//! not (`X-DocuSign-AccountId` and the like included).
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! message's `generatedDateTime` (an ISO 8601 UTC time with seven fraction
//! digits, which orders as text), per `data.envelopeId`.

use crate::providers::Provider;
use crate::verify::VerifyErrorKind;
use crate::verify::{hmac_sha256, match_any_secret, Delivery, Encoding, SigningSecret, Verifier, VerifyError};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "docusign";

/// The first signature header; the others are numbered on
/// (`x-docusign-signature-2`, ...).
pub const SIGNATURE_HEADER: &str = "x-docusign-signature-1";

/// The numbered signature headers read: `x-docusign-signature-1` to
/// `x-docusign-signature-100`, one per active Connect HMAC key.
pub const MAX_SIGNATURE_HEADERS: usize = 100;

/// The length of one signature: padded base64 of a 32-byte tag.
const SIGNATURE_CHARS: usize = 44;

/// How long a DocuSign Connect message can be sent again: 30 days,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
///
/// With "Require Acknowledgement", a message that fails is retried, then
/// "not returned to the queue for sending until Connect receives a
/// successful acknowledgement and it has been at least 24 hours since the
/// previous retry", at most ten times (`requiresAcknowledgement`,
/// <https://developers.docusign.com/docs/esign-rest-api/reference/connect/connectconfigurations/create>):
/// at least ten days, with no upper bound stated; an administrator can also
/// republish an envelope's messages at any time (`retry_queue`,
/// <https://developers.docusign.com/docs/esign-rest-api/reference/connect/connectevents/retryforenvelope>).
/// With no published span, the crate's default for an unknown one.
pub const REPLAY_WINDOW: std::time::Duration = super::DEFAULT_REPLAY_WINDOW;

/// The JSON Pointers the event key is derived from, in order.
const KEY_FIELDS: [&str; 3] = ["/event", "/data/envelopeId", "/generatedDateTime"];

/// Verifies DocuSign Connect's numbered signature headers.
#[derive(Debug, Clone)]
#[must_use]
pub struct DocuSignVerifier {
    /// `x-docusign-signature-1` to `-100`.
    headers: Vec<http::HeaderName>,
}

impl Default for DocuSignVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl DocuSignVerifier {
    /// The verifier, reading headers 1 to [`MAX_SIGNATURE_HEADERS`].
    pub fn new() -> Self {
        let headers = (1..=MAX_SIGNATURE_HEADERS)
            .map(|n| http::HeaderName::try_from(format!("x-docusign-signature-{n}")).expect("a valid header name"))
            .collect();
        Self { headers }
    }

    /// Every signature of the numbered headers, decoded.
    ///
    /// # Errors
    /// [`VerifyErrorKind::MissingHeader`] without any;
    /// [`VerifyErrorKind::MalformedHeader`] for a line that is not exactly
    /// one padded base64 tag of 32 bytes.
    fn signatures(&self, parts: &http::request::Parts) -> Result<Vec<[u8; 32]>, VerifyError> {
        let mut found = Vec::new();
        for name in &self.headers {
            for value in parts.headers.get_all(name) {
                let text = value.to_str().map_err(|_| VerifyErrorKind::MalformedHeader)?.trim();
                // Checked before decoding: a longer line cannot be one tag.
                if text.len() != SIGNATURE_CHARS {
                    return Err(VerifyErrorKind::MalformedHeader.into());
                }
                let tag = Encoding::Base64.decode(text).and_then(|tag| <[u8; 32]>::try_from(tag).ok());
                found.push(tag.ok_or(VerifyErrorKind::MalformedHeader)?);
                // 100 keys at most: more lines than that are not DocuSign's.
                if found.len() > MAX_SIGNATURE_HEADERS {
                    return Err(VerifyErrorKind::MalformedHeader.into());
                }
            }
        }
        if found.is_empty() {
            return Err(VerifyErrorKind::MissingHeader.into());
        }
        Ok(found)
    }
}

impl Verifier for DocuSignVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        self.signatures(parts).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let signatures = self.signatures(delivery.parts)?;
        match_any_secret(delivery, signatures.iter().map(|s| &s[..]), |secret| hmac_sha256(secret, &[delivery.body]))
    }
}

/// One `X-DocuSign-Signature-N` value DocuSign would send for `body` with
/// the Connect key `secret`. For tests and fixtures.
pub fn sign(secret: &SigningSecret, body: &[u8]) -> String {
    Encoding::Base64.encode(&hmac_sha256(secret, &[body]))
}

impl Provider {
    /// DocuSign Connect (`X-DocuSign-Signature-1..100`, base64 HMAC-SHA256
    /// of the body, one per active key; key derived from `event`,
    /// `data.envelopeId` and `generatedDateTime`, type = `event`; JSON SIM
    /// messages). See [`crate::providers::docusign`].
    pub fn docusign() -> Self {
        let key = KEY_FIELDS.iter().fold(crate::key::DerivedKey::new(), |key, pointer| key.json(*pointer));
        Provider::new(NAME, DocuSignVerifier::new(), key.event_type_json("/event"))
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER],
    |_| Provider::docusign(),
    super::ExampleOf::Signed(|s, d| vec![(SIGNATURE_HEADER, sign(s, d.body))]),
)
.signs("`x-docusign-signature-1` (to `-100`, one per key) base64 HMAC-SHA256 of the body")
.key_from("fields of the JSON body (a derived key: event, data.envelopeId, generatedDateTime)")
.fixture(super::Fixture::formula(&["same_event"]));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::test_support::{at, headers, identity, request, NOW};
    use VerifyErrorKind::{MalformedHeader, MissingHeader, NoMatchingSignature, NoSecret};

    fn verify(lines: &[(&str, &str)], body: &[u8], secrets: &[&str]) -> Result<(), VerifyErrorKind> {
        let secrets: Vec<SigningSecret> = secrets.iter().map(|s| SigningSecret::from(*s)).collect();
        let p = request(lines);
        DocuSignVerifier::new().verify(&Delivery::new(&p, body, &secrets, at(NOW))).map_err(|e| e.kind())
    }

    /// DocuSign's own C# example (the validate page): `Convert.ToBase64String`
    /// of HMACSHA256 over the UTF-8 payload with the UTF-8 secret, that is
    /// [`sign`]; checked against an independent computation.
    #[test]
    fn the_documented_formula() {
        let body = "{\"event\":\"envelope-sent\",\"data\":{\"envelopeId\":\"e\"}}\r\n".as_bytes();
        let want = {
            use base64::Engine as _;
            use hmac::{KeyInit, Mac};
            let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(b"connect-key").unwrap();
            mac.update(body);
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
        };
        assert_eq!(sign(&SigningSecret::from("connect-key"), body), want);
        assert_eq!(verify(&[(SIGNATURE_HEADER, &want)], body, &["connect-key"]), Ok(()));
        // Line endings are signed: without the trailing CRLF it is another body.
        assert_eq!(
            verify(&[(SIGNATURE_HEADER, &want)], &body[..body.len() - 2], &["connect-key"]),
            Err(NoMatchingSignature)
        );
    }

    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"event":"envelope-completed","generatedDateTime":"2024-06-10T06:13:20.1234567Z","data":{"envelopeId":"e1"}}"#;
        let (key, other, third) = ("key-one", "key-two", "key-three");
        let s = |k: &str| sign(&SigningSecret::from(k), body);
        let (good, by_other, by_third) = (s(key), s(other), s(third));
        let h = |n: usize| format!("x-docusign-signature-{n}");
        let (h2, h3, h100, h101) = (h(2), h(3), h(100), h(101));
        let hex = hex::encode(Encoding::Base64.decode(&good).unwrap());
        let unpadded = good.trim_end_matches('=').to_owned();
        let long = format!("{good}{good}");
        let cases: &[(&str, Vec<(&str, &str)>, &[u8], &[&str], Result<(), VerifyErrorKind>)] = &[
            ("valid", vec![(SIGNATURE_HEADER, &good)], body, &[key], Ok(())),
            ("tampered body", vec![(SIGNATURE_HEADER, &good)], b"{}", &[key], Err(NoMatchingSignature)),
            ("wrong secret", vec![(SIGNATURE_HEADER, &by_other)], body, &[key], Err(NoMatchingSignature)),
            // Rotation: one header per active key; any may match any configured key.
            ("second header matches", vec![(SIGNATURE_HEADER, &by_other), (&h2, &good)], body, &[key], Ok(())),
            (
                "third header matches",
                vec![(SIGNATURE_HEADER, &by_other), (&h2, &by_third), (&h3, &good)],
                body,
                &[key],
                Ok(()),
            ),
            ("the second key configured", vec![(SIGNATURE_HEADER, &good)], body, &[other, key], Ok(())),
            ("only the hundredth header", vec![(&h100, &good)], body, &[key], Ok(())),
            ("only a 101st header", vec![(&h101, &good)], body, &[key], Err(MissingHeader)),
            ("missing", vec![], body, &[key], Err(MissingHeader)),
            ("hex instead of base64", vec![(SIGNATURE_HEADER, &hex)], body, &[key], Err(MalformedHeader)),
            ("unpadded base64", vec![(SIGNATURE_HEADER, &unpadded)], body, &[key], Err(MalformedHeader)),
            ("two tags in one line", vec![(SIGNATURE_HEADER, &long)], body, &[key], Err(MalformedHeader)),
            ("a bad second header", vec![(SIGNATURE_HEADER, &good), (&h2, "abc")], body, &[key], Err(MalformedHeader)),
            ("empty", vec![(SIGNATURE_HEADER, "")], body, &[key], Err(MalformedHeader)),
            ("no secret", vec![(SIGNATURE_HEADER, &good)], body, &[], Err(NoSecret)),
        ];
        for (name, lines, body, secrets, want) in cases {
            assert_eq!(verify(lines, body, secrets), *want, "{name}");
        }
        let v = DocuSignVerifier::new();
        assert_eq!(v.precheck(&request(&[(SIGNATURE_HEADER, &good)])).map_err(|e| e.kind()), Ok(()));
        assert_eq!(v.precheck(&request::<&str>(&[])).map_err(|e| e.kind()), Err(MissingHeader));
        assert_eq!(v.precheck(&request(&[(SIGNATURE_HEADER, "x")])).map_err(|e| e.kind()), Err(MalformedHeader));
    }

    /// A hundred keys are read; a hundred and one lines are not DocuSign's.
    #[test]
    fn at_most_a_hundred_signatures() {
        let body = b"{}";
        let good = sign(&SigningSecret::from("k"), body);
        let names: Vec<String> = (1..=MAX_SIGNATURE_HEADERS).map(|n| format!("x-docusign-signature-{n}")).collect();
        let mut lines: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), good.as_str())).collect();
        assert_eq!(verify(&lines, body, &["k"]), Ok(()));
        lines.push((SIGNATURE_HEADER, &good));
        assert_eq!(verify(&lines, body, &["k"]), Err(MalformedHeader));
    }

    /// The key: a retry (its `retryCount` raised) is the same event; another
    /// event, envelope or generation time is another; a message without the
    /// fields (a legacy format) has none.
    #[test]
    fn the_key_survives_a_retry() {
        let p = Provider::docusign();
        let h = headers(&[]);
        let msg = |event: &str, envelope: &str, retry: u32, at: &str| {
            format!(
                r#"{{"event":"{event}","apiVersion":"v2.1","retryCount":{retry},"configurationId":1,"generatedDateTime":"{at}","data":{{"accountId":"a","envelopeId":"{envelope}"}}}}"#
            )
        };
        let first = identity(&p, &h, msg("envelope-sent", "e1", 0, "2024-01-01T00:00:00.1234567Z").as_bytes());
        let retry = identity(&p, &h, msg("envelope-sent", "e1", 3, "2024-01-01T00:00:00.1234567Z").as_bytes());
        assert_eq!(first, retry);
        assert_eq!(first.event_type.as_deref(), Some("envelope-sent"));
        for other in [
            msg("envelope-completed", "e1", 0, "2024-01-01T00:00:00.1234567Z"),
            msg("envelope-sent", "e2", 0, "2024-01-01T00:00:00.1234567Z"),
            msg("envelope-sent", "e1", 0, "2024-01-01T00:00:00.1234568Z"),
        ] {
            assert_ne!(identity(&p, &h, other.as_bytes()).key, first.key, "{other}");
        }
        let legacy = p.identify(&h, br#"{"status":"sent","envelopeId":"e1"}"#).map_err(|e| e.kind());
        assert_eq!(legacy.unwrap_err(), KeyErrorKind::Missing);
        assert_eq!(p.name(), NAME);
    }
}
