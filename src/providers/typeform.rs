//! Typeform: the `Typeform-Signature` header.
//!
//! Scheme (Typeform, "Secure your webhooks",
//! <https://www.typeform.com/developers/webhooks/secure-your-webhooks/>):
//! `Typeform-Signature: sha256=<base64 HMAC-SHA256 of the raw body>`: the
//! digest is standard base64 with padding (not hex), keyed with the secret
//! set on the webhook (`secret` in the Webhooks API) as given. Typeform sends
//! one signature; rotating the secret means configuring both here for the
//! changeover. Each header line is one candidate.
//!
//! The event key is the body's `event_id` and the event type its
//! `event_type` (`form_response`, `form_response_partial`), from Typeform's
//! webhook payload ("Example webhook payload",
//! <https://www.typeform.com/developers/webhooks/example-payload/>).
//!
//! **Limit of the scheme:** like GitHub's, the signature covers only the
//! body, with no timestamp: a captured delivery verifies forever. The claim
//! on `event_id` turns a replay into a duplicate; serve the endpoint over TLS.
//!
//! **Signed / not signed**
//! (<https://www.typeform.com/developers/webhooks/secure-your-webhooks/>):
//! only the raw body is signed (no timestamp); the event key (`event_id`) and
//! the event type (`event_type`) come from it and are signed. Headers are
//! not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): none
//! needed: each form response is submitted once (`form_response.submitted_at`),
//! an insert rather than an update.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;
use crate::verify::Encoding;

/// The facts of the typeform preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Typeform event can be sent again: 30 days.
///
/// Typeform's webhook pages (<https://www.typeform.com/developers/webhooks/>)
/// document the signature and the payload but no retry schedule and no
/// manual redelivery. With the span not stated, the window is the crate's
/// default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "typeform",
    scheme: HmacScheme {
        encoding: Encoding::Base64,
        prefix: "sha256=",
        strict: true,
        ..HmacScheme::new("typeform-signature")
    },
    event_key: EventKey::Json { id: "/event_id", event_type: Some("/event_type") },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://www.typeform.com/developers/webhooks/)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&["extra_vectors"]),
};

impl Provider {
    /// Typeform (`Typeform-Signature` `sha256=` base64; key = `event_id`). See [`crate::providers::typeform`].
    ///
    /// The Typeform preset: [`typeform::FACTS`](FACTS); key = the body's `event_id`,
    /// type = `event_type`.
    pub fn typeform() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::BodyOnly;
    use crate::verify::hmac_sha256;
    use crate::verify::VerifyErrorKind::MalformedHeader;

    /// The common cases, rotation and precheck, and Typeform's own:
    /// `sha256=` and standard padded base64 of HMAC-SHA256.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"event_id":"01H","event_type":"form_response"}"#;
        let tampered = b"{\"event_id\":\"02H\"}";
        BodyOnly::of(&FACTS).check_cases("tf_secret", body, tampered, "sha256=short", |secret, good| {
            let hexed = format!("sha256={}", hex::encode(hmac_sha256(secret, &[body])));
            let url_safe = format!("sha256={}", good[7..].replace('+', "-").replace('/', "_"));
            let mut cases = vec![
                ("surrounding spaces", vec![format!(" {good} ")], Ok(())),
                ("no prefix", vec![good[7..].to_owned()], Err(MalformedHeader)),
                ("sha1 prefix", vec![format!("sha1={}", &good[7..])], Err(MalformedHeader)),
                ("hex instead of base64", vec![hexed], Err(MalformedHeader)),
                ("padding missing", vec![good.trim_end_matches('=').to_owned()], Err(MalformedHeader)),
                ("not base64", vec![format!("sha256={}", "!".repeat(44))], Err(MalformedHeader)),
                ("one bad line", vec![good.to_owned(), "sha256=abc".to_owned()], Err(MalformedHeader)),
            ];
            // URL-safe alphabet: only matters when the digest has '+' or '/'.
            if url_safe != good {
                cases.push(("url-safe alphabet", vec![url_safe], Err(MalformedHeader)));
            }
            cases
        });
    }
}
