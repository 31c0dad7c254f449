//! Vercel: the `x-vercel-signature` header.
//!
//! Scheme (Vercel, "Webhooks API", "Securing webhooks",
//! <https://vercel.com/docs/webhooks/webhooks-api#securing-webhooks>):
//! `x-vercel-signature: <hex HMAC-SHA1 of the raw body>`, no prefix, keyed
//! with the webhook's secret (shown once when an account or team webhook is
//! created) or, for an integration's webhooks, the integration's Client
//! Secret, as given. SHA-1 is what Vercel offers; its collision attacks do
//! not carry over to HMAC-SHA1 (RFC 6194). One signature; to rotate,
//! configure the old and new secrets together.
//!
//! The event key is the body's `id`, the event's id; the event type is
//! `type` (`deployment.succeeded`).
//!
//! **Limit of the scheme:** the signature covers only the body; the body's
//! `createdAt` (Unix milliseconds) is signed but is the event's time, and
//! Vercel sets no acceptance window on it. A captured delivery verifies
//! forever; the claim on `id` makes its replay a duplicate. Serve the
//! endpoint over TLS.
//!
//! **Signed / not signed**
//! (<https://vercel.com/docs/webhooks/webhooks-api#securing-webhooks>): only
//! the raw body is signed; the event key and type come from it. Headers are
//! not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! body's `createdAt` (Unix milliseconds).

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;
use crate::verify::Algorithm;

/// The facts of the vercel preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Vercel event can be sent again: 30 days.
///
/// Vercel's webhook pages (<https://vercel.com/docs/webhooks>) publish no
/// retry schedule or span that the research for this preset could confirm,
/// and no manual redelivery. With the span not stated, the window is the
/// crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "vercel",
    scheme: HmacScheme { algorithm: Algorithm::Sha1, strict: true, ..HmacScheme::new("x-vercel-signature") },
    event_key: EventKey::Json { id: "/id", event_type: Some("/type") },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://vercel.com/docs/webhooks)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Vercel (`x-vercel-signature`, hex HMAC-SHA1; key = body `id`). See [`crate::providers::vercel`].
    ///
    /// The Vercel preset: [`vercel::FACTS`](FACTS); key = the body's `id`, type =
    /// `type`.
    pub fn vercel() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::BodyOnly;
    use crate::verify::hmac_sha256;
    use crate::verify::VerifyErrorKind::MalformedHeader;

    /// The common cases, rotation and precheck, and Vercel's own: lower or
    /// upper-case hex of HMAC-SHA1, no prefix.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"id":"e1","type":"deployment.created"}"#;
        BodyOnly::of(&FACTS).check_cases("vercel_secret", body, b"{\"id\":\"e2\"}", "zz", |secret, good| {
            vec![
                ("upper-case hex", vec![good.to_uppercase()], Ok(())),
                ("sha1= prefix", vec![format!("sha1={good}")], Err(MalformedHeader)),
                ("SHA-256 instead", vec![hex::encode(hmac_sha256(secret, &[body]))], Err(MalformedHeader)),
                ("short hex", vec!["abcd".to_owned()], Err(MalformedHeader)),
            ]
        });
    }
}
