//! Buildkite (webhooks): the `X-Buildkite-Signature` header (signature mode)
//! or the `X-Buildkite-Token` header (token mode).
//!
//! Scheme (Buildkite, "Webhooks", "Webhook signature" and "Verifying HMAC
//! signatures", <https://buildkite.com/docs/apis/webhooks>):
//! - `X-Buildkite-Signature: timestamp=<unix seconds>,signature=<hex>`, the
//!   hex HMAC-SHA256 of `{timestamp}.{raw body}` keyed with the webhook's
//!   token as given (the docs' Ruby: `OpenSSL::HMAC.hexdigest("sha256",
//!   secret, "#{timestamp}.#{webhook_request_body}")`). Buildkite sends one
//!   `signature`; several are accepted (any may match), unknown keys are
//!   ignored.
//! - tolerance: the timestamp "is part of the signed payload" and the docs
//!   suggest rejecting old ones, "for example, 5 minutes" ("Defending against
//!   replay attacks"). [`FACTS`]' tolerance is those 300 seconds, in both
//!   directions.
//!
//! **Token mode.** A Buildkite notification service sends either the
//! signature above or, by default, the token itself in `X-Buildkite-Token`
//! ("Webhook token": "By default, Buildkite will send a token with each
//! webhook in the `X-Buildkite-Token` header ... The token is passed in clear
//! text"), as its "Token" setting says. [`BuildkiteVerifier`] takes both
//! with the one configured token: a delivery carrying
//! `X-Buildkite-Signature` is verified by the signature alone (it must pass,
//! whatever else it carries); any other by comparing `X-Buildkite-Token`
//! with the configured tokens in constant time
//! ([`TokenHeaderVerifier`]). The token is a credential header: the layer
//! strips it, whatever verifier the provider is given, and never stores it.
//! Accepting token mode weakens nothing for a service in signature mode:
//! that service never sends its token, and whoever holds the token can sign
//! with it anyway. In token mode **nothing is signed**: whoever holds the
//! token, or saw one request, can send any body at any time (no timestamp),
//! so prefer "Signature" in the service's settings.
//!
//! **Event key.** Buildkite sends no event or delivery id. The key is a
//! [`DerivedKey`](crate::key::DerivedKey) over the whole body in canonical
//! JSON: the body is the event (`event`, and the `build`, `job` or `agent`
//! in the state it was in), so two events differ in it (another `event`, a
//! build's `state` or `finished_at`), and Buildkite documents no retry that
//! would change it. The docs warn that a payload may show a later state than
//! its event; a build that changes between two events of the same name gives
//! two keys, as it should. The event type is `event` (`build.finished`,
//! `ping` when the settings are saved).
//!
//! **Signed / not signed** (<https://buildkite.com/docs/apis/webhooks>): in
//! signature mode the `timestamp=` and the raw body are signed, so the key
//! and type are; in token mode nothing is. The `X-Buildkite-Event` header is
//! never signed.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! build's (or job's) `finished_at` / `started_at` / `scheduled_at`, or its
//! `number` within a pipeline.

use std::time::Duration;

use http::HeaderName;

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset, KeyField};
use crate::verify::generic::{HmacScheme, Tolerance};
use crate::verify::generic::{HmacVerifier, TokenHeaderVerifier};
use crate::verify::Boundary;
use crate::verify::{Delivery, KeyMaterialError, SigningSecret, Verifier, VerifyError};

/// The header carrying the event name (not signed).
const EVENT_HEADER: &str = "x-buildkite-event";
/// The signature header of signature mode.
pub const SIGNATURE_HEADER: &str = "x-buildkite-signature";
/// The header carrying the webhook's token in token mode (a credential).
pub const TOKEN_HEADER: &str = "x-buildkite-token";
/// The CLI name of the preset and the `provider` column of its claims.
pub const NAME: &str = "buildkite";

/// The facts of the buildkite preset's signature mode (the scheme is in the
/// module docs); [`BuildkiteVerifier`] adds the token mode.
///
/// **Replay window.** How long a Buildkite event can be sent again: 30 days.
///
/// Buildkite documents no retry schedule and no manual redelivery for
/// webhooks (<https://buildkite.com/docs/apis/webhooks>; the service's
/// request log keeps the last 20 requests). With the span not stated, the
/// window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "buildkite",
    scheme: HmacScheme {
        tolerance: Some(Tolerance {
            duration: Duration::from_secs(300),
            evidence: "the docs suggest refusing old timestamps, \"for example, 5 minutes\" (https://buildkite.com/docs/apis/webhooks)",
            boundary: Boundary::Inclusive,
        }),
        ..super::timestamped_entries(SIGNATURE_HEADER, ["timestamp", "signature"], ',', ".")
    },
    event_key: EventKey::Derived { fields: &[KeyField::CanonicalBody], event_type: Some(KeyField::Json("/event")) },
    headers: &[EVENT_HEADER],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://buildkite.com/docs/apis/webhooks)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

/// Verifies a Buildkite delivery in either mode: `X-Buildkite-Signature`
/// when present ([`FACTS`]' HMAC scheme, 300 seconds), else
/// `X-Buildkite-Token` compared with the configured tokens.
#[derive(Debug, Clone)]
#[must_use]
pub struct BuildkiteVerifier {
    signature: HmacVerifier,
    token: TokenHeaderVerifier,
}

impl Default for BuildkiteVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl BuildkiteVerifier {
    /// Both modes, the signature's tolerance 300 seconds.
    pub fn new() -> Self {
        Self { signature: FACTS.verifier(), token: TokenHeaderVerifier::new(HeaderName::from_static(TOKEN_HEADER)) }
    }

    /// Sets how far (both directions) a signature's `timestamp=` may be from
    /// now (default 300 seconds).
    pub fn tolerance(mut self, tolerance: Duration) -> Self {
        self.signature = self.signature.tolerance(tolerance);
        self
    }

    /// The verifier of the delivery's mode: the signature's when it carries
    /// `X-Buildkite-Signature`, else the token's.
    fn mode(&self, parts: &http::request::Parts) -> &dyn Verifier {
        if parts.headers.contains_key(SIGNATURE_HEADER) {
            &self.signature
        } else {
            &self.token
        }
    }
}

impl Verifier for BuildkiteVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        self.mode(parts).precheck(parts)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        self.mode(delivery.parts).verify(delivery)
    }

    /// The token of either mode: a shared token of at least 16 bytes (it
    /// authenticates a token-mode delivery by itself).
    ///
    /// # Errors
    /// As [`TokenHeaderVerifier`]'s: [`KeyMaterialErrorKind::WeakCredential`](crate::verify::KeyMaterialErrorKind::WeakCredential)
    /// for a short token, and [`check_key_material`](crate::verify::check_key_material)'s.
    fn check_secrets(&self, secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        self.token.check_secrets(secrets)
    }

    /// `X-Buildkite-Token`, whichever mode a delivery uses.
    fn credential_headers(&self) -> &[HeaderName] {
        self.token.credential_headers()
    }
}

impl Provider {
    /// Buildkite (`X-Buildkite-Signature: timestamp=,signature=`, 300 s, or the `X-Buildkite-Token` shared token; derived key). See [`crate::providers::buildkite`].
    ///
    /// The Buildkite preset: [`BuildkiteVerifier`] (signature mode with the
    /// 300 second tolerance, or token mode); key derived from the canonical
    /// body, type = `event`.
    pub fn buildkite() -> Self {
        Provider::new(NAME, BuildkiteVerifier::new(), FACTS.event_key.extractor()).credentials_in(PRESET.credentials())
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)):
/// [`FACTS`]' window, example and fixture, the token as a credential header.
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    FACTS.replay_window,
    &[SIGNATURE_HEADER, TOKEN_HEADER, EVENT_HEADER],
    |_| Provider::buildkite(),
    super::ExampleOf::Signed(|s, d| FACTS.signed_headers(s, d.id, d.at, d.body)),
)
.token_mode(&[TOKEN_HEADER])
.signs("`x-buildkite-signature`: `timestamp=`, `signature=` entries (`,`), hex HMAC-SHA256 of `{timestamp}.{body}`; or the `X-Buildkite-Token` shared token (token mode: nothing signed)")
.key_from("a digest of the canonical JSON body (a derived key)")
.fixture(FACTS.fixture);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::KeyValueHeader;
    use crate::test_support::{headers, identity};
    use crate::verify::VerifyErrorKind;

    /// The family's cases, then Buildkite's own: another scheme's header,
    /// and the token mode's bare token, are malformed.
    #[test]
    fn verifies_and_rejects() {
        let wide = FACTS.verifier().tolerance(Duration::from_secs(600));
        KeyValueHeader::of(&FACTS, ["timestamp", "signature", "v2"]).check("signature", wide, |_| {
            vec![
                ("stripe-style header", vec!["t=1,v1=00".into()], Err(VerifyErrorKind::MalformedHeader)),
                ("a bare token", vec!["bk_token".into()], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
    }

    /// Token mode: the token in `X-Buildkite-Token` verifies (rotation,
    /// near misses and the precheck from the shared-token cases); a delivery
    /// carrying a signature is verified by the signature alone, a good token
    /// beside it does not rescue a bad one.
    #[test]
    fn token_mode() {
        use crate::test_support::{at, NOW};
        use VerifyErrorKind::{MissingHeader, NoMatchingSignature, TimestampTooOld};
        let body = br#"{"event":"build.finished","build":{"id":"b1"}}"#;
        let token = SigningSecret::from("bk-webhook-token-0123456789abcdef");
        let keys = [token.clone()];
        let sig = FACTS.verifier().sign(&token, "", NOW, body);
        let v = BuildkiteVerifier::new();
        let check = |list: &[(&str, &str)], now| {
            v.verify(&Delivery::new(&headers(list), body, &keys, at(now))).map_err(|e| e.kind())
        };
        let t = "bk-webhook-token-0123456789abcdef";
        assert_eq!(check(&[(SIGNATURE_HEADER, &sig)], NOW), Ok(()));
        assert_eq!(check(&[(SIGNATURE_HEADER, &sig), (TOKEN_HEADER, t)], NOW), Ok(()));
        assert_eq!(check(&[(SIGNATURE_HEADER, &sig), (TOKEN_HEADER, t)], NOW + 301), Err(TimestampTooOld));
        let bad = "timestamp=1700000000,signature=00";
        assert_eq!(check(&[(SIGNATURE_HEADER, bad), (TOKEN_HEADER, t)], NOW), Err(NoMatchingSignature));
        assert_eq!(check(&[(TOKEN_HEADER, t)], NOW + 86_400), Ok(()), "no time in token mode");
        assert_eq!(check(&[], NOW), Err(MissingHeader));
        assert_eq!(check(&[(TOKEN_HEADER, "bk-webhook-token")], NOW), Err(NoMatchingSignature), "a prefix");
        assert_eq!(check(&[(TOKEN_HEADER, "")], NOW), Err(VerifyErrorKind::MalformedHeader));
        assert_eq!(check(&[(TOKEN_HEADER, t), (TOKEN_HEADER, "other")], NOW), Err(VerifyErrorKind::MalformedHeader));
        // Rotation: the old and the new token; the old alone finds no match.
        let rotated = [SigningSecret::from("bk-old-token-0123456789abcdef"), token.clone()];
        let p = headers(&[(TOKEN_HEADER, t)]);
        assert!(v.verify(&Delivery::new(&p, body, &rotated, at(NOW))).is_ok());
        let old = &rotated[..1];
        let got = v.verify(&Delivery::new(&p, body, old, at(NOW))).map_err(|e| e.kind());
        assert_eq!(got, Err(NoMatchingSignature));
        // Nothing is signed in token mode: another body verifies too (the limit).
        assert!(v.verify(&Delivery::new(&p, b"{\"event\":\"ping\"}", &keys, at(NOW))).is_ok());
        assert_eq!(v.precheck(&headers(&[(SIGNATURE_HEADER, &sig)])).map_err(|e| e.kind()), Ok(()));
        assert_eq!(v.precheck(&headers(&[(TOKEN_HEADER, t)])).map_err(|e| e.kind()), Ok(()));
        let weak = v.check_secrets(&[SigningSecret::from("short")]).map_err(|e| e.kind());
        assert_eq!(weak, Err(crate::verify::KeyMaterialErrorKind::WeakCredential));
        assert_eq!(v.credential_headers(), [HeaderName::from_static(TOKEN_HEADER)]);
        assert_eq!(
            crate::providers::find(NAME).map(|p| (p.signs_body, p.credential_headers)),
            Some((true, &[TOKEN_HEADER][..]))
        );
    }

    #[test]
    fn key_from_the_canonical_body() {
        let p = Provider::buildkite();
        let a = identity(&p, &headers(&[]), br#"{"event":"build.started","build":{"id":"b1"}}"#);
        let b = identity(&p, &headers(&[]), br#"{"build":{"id":"b1"}, "event":"build.started"}"#);
        let c = identity(&p, &headers(&[]), br#"{"event":"build.finished","build":{"id":"b1"}}"#);
        assert_eq!(a.key, b.key);
        assert_ne!(a.key, c.key);
    }
}
