//! Forgejo: the `X-Forgejo-Signature` header.
//!
//! Scheme (Forgejo, "Webhooks", <https://forgejo.org/docs/latest/user/webhooks/>,
//! and the sender, `services/webhook/deliver.go` in Forgejo, which adds the
//! headers): Gitea's scheme, which Forgejo keeps as a fork of Gitea:
//! `X-Forgejo-Signature: <hex HMAC-SHA256 of the JSON payload>`, keyed with
//! the webhook's secret as UTF-8 bytes, the same value Forgejo also sends as
//! `X-Gitea-Signature`. The verifier is [`GiteaVerifier`] on Forgejo's
//! header: the raw body for `application/json`, the decoded `payload` field
//! for `application/x-www-form-urlencoded`; `GET` webhooks are not covered.
//! See [`crate::providers::gitea`] for the details, which apply here word
//! for word with `X-Forgejo-*` for `X-Gitea-*`. The `forgejo` feature
//! enables `gitea`, whose verifier it shares, and whose
//! [`sign`] makes a Forgejo signature too.
//!
//! **Signed / not signed:** only the JSON payload is signed. The event key
//! (`X-Forgejo-Delivery`) and the event type (`X-Forgejo-Event`) are headers
//! and **not signed**.
//!
//! The event key is `X-Forgejo-Delivery`, the hook task's UUID (equal to
//! `X-Gitea-Delivery`); the event type is `X-Forgejo-Event` (`push`).
//!
//! **Retries:** none automatic; a manual redelivery is a new task with a new
//! UUID, hence [`REPLAY_WINDOW`]. **Tolerance:** none. **Handshake:** none.
//!
//! **Limit of the scheme:** as Gitea's: a captured delivery re-sent under a
//! fresh `X-Forgejo-Delivery` verifies and is claimed as a new event, and so
//! is a manual redelivery; make business writes idempotent on the payload's
//! own identity and serve the endpoint over TLS.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! object's `updated_at` (pull requests, issues; RFC 3339); pushes carry
//! commit timestamps only.

use crate::providers::gitea::GiteaVerifier;

use crate::providers::gitea::sign;

/// The header Forgejo signs deliveries with.
pub const SIGNATURE_HEADER: &str = "x-forgejo-signature";
/// The header carrying the hook task's UUID (the event key).
pub const DELIVERY_HEADER: &str = "x-forgejo-delivery";
/// The header carrying the event name (the event type).
pub const EVENT_HEADER: &str = "x-forgejo-event";

/// The CLI name of the preset and the `provider` column of its claims.
pub const NAME: &str = "forgejo";
/// How long a Forgejo delivery can be sent again: 1 day, as Gitea's
/// ([`gitea::REPLAY_WINDOW`](crate::providers::gitea::REPLAY_WINDOW)): no
/// automatic retry, and a manual redelivery carries a new UUID.
pub const REPLAY_WINDOW: std::time::Duration = super::days(1);

/// The verifier of the Forgejo preset: [`GiteaVerifier`] on
/// `X-Forgejo-Signature`.
pub fn verifier() -> GiteaVerifier {
    GiteaVerifier::for_header(SIGNATURE_HEADER)
}

impl crate::providers::Provider {
    /// Forgejo (`X-Forgejo-Signature`; key = `X-Forgejo-Delivery`). See [`crate::providers::forgejo`].
    ///
    /// The Forgejo preset: [`verifier`], key = `X-Forgejo-Delivery`, type =
    /// `X-Forgejo-Event`.
    pub fn forgejo() -> Self {
        super::header_keyed(NAME, verifier(), DELIVERY_HEADER, EVENT_HEADER)
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER, DELIVERY_HEADER, EVENT_HEADER],
    |_| crate::providers::Provider::forgejo(),
    super::ExampleOf::Signed(|s, d| vec![(SIGNATURE_HEADER, sign(s, d.body)), (DELIVERY_HEADER, d.id.to_owned())]),
)
.signs("`X-Forgejo-Signature`, the same as Gitea's")
.key_from("the X-Forgejo-Delivery header")
.fixture(super::Fixture::formula(&[]).of("gitea"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::BodyOnly;
    use crate::providers::Provider;
    use crate::verify::{SigningSecret, Verifier as _, VerifyErrorKind};

    /// Gitea's fixture: Forgejo's headers carry the same signature and UUID.
    #[test]
    fn server_formula_fixture() {
        crate::providers::gitea::tests::check_fixture(&Provider::forgejo());
    }

    /// The common cases, rotation and precheck, and Forgejo's own: bare hex,
    /// in Forgejo's header only.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"ref":"refs/heads/main"}"#;
        BodyOnly::preset(&PRESET, sign).check_cases("forgejo_secret", body, b"{}", "zz", |_, _| {
            vec![("short hex", vec!["abcd".to_owned()], Err(VerifyErrorKind::MalformedHeader))]
        });
        // Gitea's header alone is not read.
        let good = sign(&SigningSecret::from("forgejo_secret"), body);
        let p = crate::test_support::headers(&[(crate::providers::gitea::SIGNATURE_HEADER, &good)]);
        assert_eq!(verifier().precheck(&p).map_err(|e| e.kind()), Err(VerifyErrorKind::MissingHeader));
    }
}
