//! GitHub: the `X-Hub-Signature-256` header.
//!
//! Scheme (GitHub, "Validating webhook deliveries",
//! <https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries>):
//! `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>`, keyed with
//! the webhook's secret as UTF-8 bytes.
//!
//! The event key is the `X-GitHub-Delivery` GUID, which a redelivery keeps,
//! and the event type the `X-GitHub-Event` header (GitHub, "Webhook events
//! and payloads", delivery headers).
//!
//! **Limit of the scheme:** GitHub signs only the body: no timestamp, and
//! neither `X-GitHub-Delivery` nor `X-GitHub-Event`. Whoever captured one
//! delivery (body and signature) can send it again under a fresh delivery
//! GUID and another event name, and it verifies and is claimed as a new
//! event. The claim stops redeliveries and concurrent copies, not a replay
//! by someone holding a captured request. Where that matters, make the
//! business write idempotent on the payload's own identity (for a `push`,
//! `repository.id` + `after`; see the design's "business key"), serve the
//! endpoint over TLS only, and accept only GitHub's hook source addresses
//! (the `hooks` list of `GET /meta`).
//!
//! **Signed / not signed**
//! (<https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries>):
//! only the raw body is signed. The event key (`X-GitHub-Delivery`) and the
//! event type (`X-GitHub-Event`) are headers and **not signed**: a captured
//! body re-sent with another delivery GUID is a new event, and with another
//! `X-GitHub-Event` it is stored under that type (the body does not name its
//! event). Route on the body's content, not on the stored type, where it
//! matters.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! object's `updated_at` (ISO 8601, for example `issue.updated_at` or
//! `pull_request.updated_at`) as Unix seconds; deliveries carry no event time
//! of their own, and GitHub does not promise their order.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;

/// The GitHub preset's facts: `X-Hub-Signature-256: sha256=<hex>` (strict)
/// over the body; key = `X-GitHub-Delivery`, type = `X-GitHub-Event`.
///
/// **Replay window: 3 days.** GitHub does not retry a failed delivery; a
/// delivery of the last 3 days can be redelivered from the webhook's
/// settings or through the REST API, with its `X-GitHub-Delivery`
/// (<https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks>).
pub const FACTS: HmacPreset = HmacPreset {
    name: "github",
    scheme: HmacScheme { prefix: "sha256=", strict: true, ..HmacScheme::new("x-hub-signature-256") },
    event_key: EventKey::Header { id: "x-github-delivery", event_type: "x-github-event" },
    headers: &[],
    replay_window: super::days(3),
    replay_evidence: "no retries; manual redelivery of the last 3 days (https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::own("GitHub's documented example, in `github_docs_vector`"),
};

impl Provider {
    /// GitHub (`X-Hub-Signature-256`; key = `X-GitHub-Delivery`, type =
    /// `X-GitHub-Event`): [`github::FACTS`](FACTS). The
    /// CLI name is `github`.
    pub fn github() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::sign;
    use crate::test_support::header_lines;
    use crate::verify::SigningSecret;
    use crate::verify::VerifyErrorKind;
    use crate::verify::{Delivery, Verifier as _};
    use std::time::SystemTime;

    /// The worked example in GitHub's "Validating webhook deliveries":
    /// secret `It's a Secret to Everybody`, payload `Hello, World!`.
    #[test]
    fn github_docs_vector() {
        let secret = SigningSecret::from("It's a Secret to Everybody");
        let expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(sign(&FACTS, &secret, b"Hello, World!"), expected);
        let v = FACTS.verifier();
        let p = header_lines(FACTS.scheme.header, &[expected]);
        let secrets = [secret];
        assert!(v.verify(&Delivery::new(&p, b"Hello, World!", &secrets, SystemTime::now())).is_ok());
        assert_eq!(
            v.verify(&Delivery::new(&p, b"Hello, World?", &secrets, SystemTime::now())).unwrap_err().kind(),
            VerifyErrorKind::NoMatchingSignature
        );
    }

    #[test]
    fn rejects_bad_headers() {
        let secret = SigningSecret::from("s");
        let cases: &[(&str, Vec<&str>, VerifyErrorKind)] = &[
            ("missing", vec![], VerifyErrorKind::MissingHeader),
            ("sha1 prefix", vec!["sha1=abcd"], VerifyErrorKind::MalformedHeader),
            ("short hex", vec!["sha256=abcd"], VerifyErrorKind::MalformedHeader),
            ("not hex", vec!["sha256=zz"], VerifyErrorKind::MalformedHeader),
        ];
        for (name, headers, want) in cases {
            let p = header_lines(FACTS.scheme.header, headers);
            let got =
                FACTS.verifier().verify(&Delivery::new(&p, b"x", std::slice::from_ref(&secret), SystemTime::now()));
            assert_eq!(got.unwrap_err().kind(), *want, "{name}");
        }
    }
}
