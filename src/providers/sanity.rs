//! Sanity (GROQ-powered webhooks): the `sanity-webhook-signature` header.
//!
//! Scheme (Sanity, "Webhooks", <https://www.sanity.io/docs/webhooks>; the
//! official `@sanity/webhook` toolkit, `src/signature.ts`, whose tests give
//! the vectors this module checks):
//! `sanity-webhook-signature: t=<Unix milliseconds>,v1=<signature>`, the
//! signature being the **unpadded base64url** (RFC 4648 §5) HMAC-SHA256 of
//! `{t}.{raw body}`, keyed with the webhook's secret (set when the webhook is
//! created) as its UTF-8 bytes. The toolkit accepts exactly one `t` entry and
//! one `v1` entry, separated by a comma and optional spaces; this preset reads
//! the same header with the crate's `t=..,v1=..` parser (entries under other
//! keys skipped, several `v1` accepted during a rotation).
//!
//! **Tolerance.** The toolkit checks no age at all, and Sanity documents that
//! deliveries may be delayed ("In rare circumstances there can be delays in
//! the delivery of webhooks", <https://www.sanity.io/docs/webhook-best-practices>);
//! the docs do not say whether a retry is signed afresh. A short tolerance
//! could refuse a genuine late retry for good, so the tolerance is the
//! replay window, 30 days either way: a replay within it is a duplicate of
//! the claim (the key is signed), and one older than what retention remembers
//! is refused as too old. Narrow it with
//! `sanity::FACTS.verifier().tolerance(d)`.
//!
//! **Event key.** The body is the webhook's GROQ projection, whose shape the
//! user chooses (by default the whole document), so no field names the event
//! in every body. Sanity also sends an `idempotency-key` header, but it is
//! **not signed** (only `{t}.{body}` is), so it is not used. The key is a
//! digest of the body in canonical JSON (RFC 8785), which a resend of the
//! same payload repeats. **Limit:** two events whose projections are equal are
//! one key: a projection without `_rev` or `_updatedAt` (say `{_id}`) makes
//! the second update of a document a duplicate of the first. Keep `_rev` in
//! the projection (the default projection has it). There is no event type
//! (the operation is a header Sanity does not sign).
//!
//! **Signed / not signed:** the signed time and the raw body; the event key
//! comes from the body. Headers (`idempotency-key`, `sanity-operation`,
//! `sanity-document-id`, ...) are not signed. One secret per webhook; to
//! rotate, configure the old and the new together.
//!
//! **Retries:** Sanity retries a delivery that fails
//! (<https://www.sanity.io/docs/webhook-best-practices>, "Idempotence"); the
//! span is not published, hence the crate's default window. **Handshake:** none.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! document's `_updatedAt` (ISO 8601) where the projection keeps it, as Sanity
//! advises against out-of-order deliveries.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset, KeyField};
use crate::verify::generic::{HmacScheme, TimestampFormat, Tolerance};
use crate::verify::Boundary;
use crate::verify::Encoding;

/// The facts of the sanity preset (the scheme is in the module docs).
///
/// **Replay window: 30 days.** Sanity retries failed deliveries
/// (<https://www.sanity.io/docs/webhook-best-practices>) for a span it does
/// not publish: the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "sanity",
    scheme: HmacScheme {
        encoding: Encoding::Base64Url,
        timestamp_format: TimestampFormat::UnixMilliseconds,
        tolerance: Some(Tolerance {
            duration: super::DEFAULT_REPLAY_WINDOW,
            evidence: "the replay window: @sanity/webhook checks no age and deliveries may be delayed \
                       (https://www.sanity.io/docs/webhook-best-practices)",
            boundary: Boundary::Inclusive,
        }),
        ..super::timestamped_entries("sanity-webhook-signature", ["t", "v1"], ',', ".")
    },
    event_key: EventKey::Derived { fields: &[KeyField::CanonicalBody], event_type: None },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "retries, span not published (https://www.sanity.io/docs/webhook-best-practices)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&["timestamp_ms"]),
};

impl Provider {
    /// Sanity (`sanity-webhook-signature` `t=<ms>,v1=<base64url>`, 30 days;
    /// key = digest of the canonical body). See [`crate::providers::sanity`].
    ///
    /// The Sanity GROQ-webhooks preset: [`sanity::FACTS`](FACTS).
    pub fn sanity() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{header_lines, NOW};
    use crate::verify::VerifyErrorKind::{self, MalformedHeader, MissingHeader, NoMatchingSignature};
    use crate::verify::{Delivery, SigningSecret, Verifier};
    use std::time::Duration;

    fn check(lines: &[&str], body: &[u8], secret: &str, now_ms: u64) -> Result<(), VerifyErrorKind> {
        let p = header_lines(FACTS.scheme.header, lines);
        let secrets = [SigningSecret::from(secret)];
        let clock = std::time::UNIX_EPOCH + Duration::from_millis(now_ms);
        FACTS.verifier().verify(&Delivery::new(&p, body, &secrets, clock)).map_err(|e| e.kind())
    }

    /// `@sanity/webhook`'s own vectors (`test/signature.test.ts`): the valid
    /// one, a timestamp a millisecond off, a changed signature and payload,
    /// `v5` instead of `v1`, a space after the comma; and `encodeSignatureHeader`'s.
    #[test]
    fn toolkit_test_vectors() {
        let body = br#"{"_id":"resume"}"#;
        let good = "t=1633519811129,v1=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N0";
        let now = 1_633_519_811_129;
        let cases: &[(&str, &str, &[u8], Result<(), VerifyErrorKind>)] = &[
            ("valid", good, body, Ok(())),
            (
                "a space after the comma",
                "t=1633519811129, v1=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N0",
                body,
                Ok(()),
            ),
            (
                "timestamp",
                "t=1633519811128,v1=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N0",
                body,
                Err(NoMatchingSignature),
            ),
            ("hash", "t=1633519811129,v1=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N1", body, Err(NoMatchingSignature)),
            ("payload", good, br#"{"_id":"structure"}"#, Err(NoMatchingSignature)),
            (
                "v5, not v1",
                "t=1633519811129,v5=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N0",
                body,
                Err(NoMatchingSignature),
            ),
        ];
        for (name, header, body, want) in cases {
            assert_eq!(check(&[header], body, "test", now), *want, "{name}");
        }
        let secret = SigningSecret::from("try-me");
        let verifier = FACTS.verifier();
        let encoded = verifier.sign_text(&secret, "", "1633518820676", br#"{"title":"GROQ-Hooks are neat"}"#);
        assert_eq!(encoded, "t=1633518820676,v1=e7C9h2sfbFfc4V7TEz7PSOp4IoNzl0UdVsBV-1wgdeA");
    }

    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"_id":"movie_1","_rev":"r1","title":"Alien"}"#;
        let secret = SigningSecret::from("sanity-secret");
        let ms = NOW * 1000 + 123;
        let good = FACTS.verifier().sign_text(&secret, "", &ms.to_string(), body);
        let sig = &good[good.find("v1=").unwrap() + 3..];
        let std_b64 = format!(
            "t={ms},v1={}",
            crate::verify::Encoding::Base64.encode(&crate::verify::Encoding::Base64Url.decode(sig).unwrap())
        );
        let padded = format!("{good}=");
        let seconds = FACTS.verifier().sign_text(&secret, "", &NOW.to_string(), body);
        let window = 30 * 86_400 * 1000;
        let cases: Vec<(&str, Vec<&str>, &[u8], &str, u64, Result<(), VerifyErrorKind>)> = vec![
            ("valid", vec![&good], body, "sanity-secret", ms, Ok(())),
            ("wrong secret", vec![&good], body, "other", ms, Err(NoMatchingSignature)),
            ("tampered", vec![&good], b"{}", "sanity-secret", ms, Err(NoMatchingSignature)),
            ("edge of the window", vec![&good], body, "sanity-secret", ms + window, Ok(())),
            (
                "past the window",
                vec![&good],
                body,
                "sanity-secret",
                ms + window + 1,
                Err(VerifyErrorKind::TimestampTooOld),
            ),
            (
                "seconds, not milliseconds: 1970",
                vec![&seconds],
                body,
                "sanity-secret",
                ms,
                Err(VerifyErrorKind::TimestampTooOld),
            ),
            // A `v1` that is not unpadded base64url of 32 bytes matches nothing, as the toolkit's text compare.
            ("standard base64, padded", vec![&std_b64], body, "sanity-secret", ms, Err(NoMatchingSignature)),
            ("base64url with padding", vec![&padded], body, "sanity-secret", ms, Err(NoMatchingSignature)),
            ("no timestamp", vec!["v1=abc"], body, "sanity-secret", ms, Err(MalformedHeader)),
            ("missing", vec![], body, "sanity-secret", ms, Err(MissingHeader)),
        ];
        for (name, lines, body, secret, now, want) in cases {
            assert_eq!(check(&lines, body, secret, now), want, "{name}");
        }
    }

    /// The key is the canonical body's digest: a re-serialised body is the
    /// same event, another revision another; there is no type.
    #[test]
    fn key_is_the_canonical_body() {
        let p = Provider::sanity();
        let bare = crate::test_support::headers(&[]);
        let read = |body: &[u8]| crate::test_support::identity(&p, &bare, body);
        let a = read(br#"{"_id":"m1","_rev":"r1"}"#);
        assert_eq!(read(br#"{ "_rev": "r1", "_id": "m1" }"#), a);
        assert_ne!(read(br#"{"_id":"m1","_rev":"r2"}"#).key, a.key);
        assert!(a.key.starts_with("sha256:") && a.event_type.is_none(), "{a:?}");
    }
}
