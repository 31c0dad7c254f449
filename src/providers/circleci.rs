//! CircleCI (outbound webhooks): the `circleci-signature` header.
//!
//! Scheme (CircleCI, "Outbound webhooks", "Payload signature",
//! <https://circleci.com/docs/outbound-webhooks/>):
//! `circleci-signature: v1=<hex HMAC-SHA256 of the raw body>`, keyed with
//! the webhook's secret token (API field `signing-secret`) as given. The
//! header "contains a comma-separated list of versioned signatures"; only
//! `v1` exists today, so every `v1=` entry is tried (any may match) and
//! other versions are ignored. A `v1` value that is not 64 hex digits is
//! skipped like an unknown version.
//!
//! The event key is the body's `id`: CircleCI's docs say webhooks may be
//! duplicated and to "use the `id` property in the webhook payload to
//! identify duplicates". The event type is `type` (`workflow-completed`,
//! `job-completed`), also sent, unsigned, as `circleci-event-type`.
//!
//! **Limit of the scheme:** the signature covers only the body; the body's
//! `happened_at` is signed but is the event's time, with no acceptance
//! window. A captured delivery verifies forever; the claim on `id` makes its
//! replay a duplicate. Serve the endpoint over TLS.
//!
//! **Signed / not signed** (<https://circleci.com/docs/outbound-webhooks/>):
//! only the raw body is signed; the event key and type come from it. Headers
//! (`circleci-event-type`) are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! body's `happened_at` (RFC 3339).

use crate::verify::generic::HmacVerifier;
use crate::verify::{hmac_sha256, SigningSecret};

/// The header CircleCI signs deliveries with.
pub const SIGNATURE_HEADER: &str = "circleci-signature";
/// The header carrying the event type (not signed).
pub const EVENT_TYPE_HEADER: &str = "circleci-event-type";

/// The CLI name of the preset and the `provider` column of its claims.
pub const NAME: &str = "circleci";
/// How long a CircleCI event can be sent again: 30 days.
///
/// CircleCI retries a delivery that gets no 2xx within 5 seconds, but "the
/// exact details of the retry policy are not currently documented"
/// (<https://circleci.com/docs/outbound-webhooks/>); no manual redelivery is
/// documented. With the span not stated, the window is the crate's default
/// for an unknown span, [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const REPLAY_WINDOW: std::time::Duration = super::DEFAULT_REPLAY_WINDOW;

hmac_verifier! {
    /// Verifies the `circleci-signature` header.
    pub struct CircleCiVerifier = HmacVerifier::builder(SIGNATURE_HEADER).key_value("v1").signature_separator(',');
    /// A verifier for `circleci-signature`.
    fn new();
}

/// The `circleci-signature` value CircleCI would send for `body` with
/// `secret`: `v1={hex}`. For tests and fixtures.
pub fn sign(secret: &SigningSecret, body: &[u8]) -> String {
    format!("v1={}", hex::encode(hmac_sha256(secret, &[body])))
}

preset! {
    /// CircleCI (`circleci-signature: v1=`, hex HMAC-SHA256; key = body `id`). See [`crate::providers::circleci`].
    ///
    /// The CircleCI outbound-webhooks preset: [`CircleCiVerifier`]; key = the
    /// body's `id`, type = `type`.
    fn circleci() = super::json_keyed(NAME, CircleCiVerifier::new(), "/id", "/type");
    headers: [SIGNATURE_HEADER, EVENT_TYPE_HEADER],
    signed: |s, _, _, b| vec![(SIGNATURE_HEADER, sign(s, b))],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Provider;
    use crate::providers::testing::{assert_fixture_identity, fixture, OneHeader};
    use crate::test_support::NOW;
    use crate::verify::VerifyErrorKind;

    /// Hand-computed from the documented formula with Python's `hmac`
    /// (CircleCI publishes no verifying SDK); see `scripts/fixtures/circleci.py`.
    #[test]
    fn hand_computed_fixture() {
        let body = include_bytes!("../../tests/fixtures/providers/circleci/body.json");
        let (expected, secret) = fixture(include_str!("../../tests/fixtures/providers/circleci/expected.json"));
        let header = expected["headers"]["circleci-signature"].as_str().unwrap();
        assert_eq!(sign(&secret, body), header);
        let secrets = [secret];
        assert_eq!(OneHeader::preset(&PRESET).check(&[header], body, &secrets, NOW), Ok(()));
        assert_eq!(
            OneHeader::preset(&PRESET).check(&[header], b"{}", &secrets, NOW),
            Err(VerifyErrorKind::NoMatchingSignature)
        );
        assert_fixture_identity(&Provider::circleci(), body, &expected);
    }

    #[test]
    fn verifies_and_rejects() {
        let secret = SigningSecret::from("circleci_secret");
        let body = br#"{"id":"e1","type":"job-completed"}"#;
        let good = sign(&secret, body);
        let from_other = sign(&SigningSecret::from("circleci_other"), body);
        let listed = format!("{from_other},{good}");
        let with_v2 = format!("v2={},{good}", "a".repeat(64));
        let spaced = format!("{from_other}, {good}");
        let mut cases = OneHeader::body_only_common(&good, &from_other, body, b"{\"id\":\"e2\"}");
        cases.extend([
            ("two v1 in one line", vec![listed.as_str()], &body[..], Ok(())),
            ("unknown version ignored", vec![&with_v2], body, Ok(())),
            ("space after comma", vec![&spaced], body, Ok(())),
            ("only another version", vec!["v2=00"], body, Err(VerifyErrorKind::NoMatchingSignature)),
            ("short v1 skipped", vec!["v1=abcd"], body, Err(VerifyErrorKind::NoMatchingSignature)),
            ("bare hex", vec![&good[3..]], body, Err(VerifyErrorKind::MalformedHeader)),
        ]);
        OneHeader::preset(&PRESET).check_cases(&secret, &cases);
    }

    #[test]
    fn rotation_precheck_and_secrets() {
        let (old, new) = (SigningSecret::from("old"), SigningSecret::from("new"));
        OneHeader::preset(&PRESET).check_rotation_and_precheck([&old, &new], &sign(&new, b"{}"), b"{}", NOW, "v1");
        assert_eq!(Provider::circleci().name(), "circleci");
    }
}
