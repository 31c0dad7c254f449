//! Telegram Bot API: the `X-Telegram-Bot-Api-Secret-Token` header.
//!
//! Scheme (Telegram Bot API, `setWebhook`, parameter `secret_token`,
//! <https://core.telegram.org/bots/api#setwebhook>): a bot that sets a
//! webhook with a `secret_token` (1 to 256 characters `A-Z`, `a-z`, `0-9`,
//! `_` and `-`) gets it back as it is in `X-Telegram-Bot-Api-Secret-Token`
//! on every webhook request. It is a shared token, not a signature:
//! [`TelegramVerifier`] compares it with the configured secrets in constant
//! time ([`TokenHeaderVerifier`]) and refuses, when the layer is built, a
//! configured secret Telegram would not accept, and one shorter than 16
//! bytes ([`MIN_CREDENTIAL_BYTES`](crate::verify::generic::MIN_CREDENTIAL_BYTES)):
//! Telegram allows 1 to 256 characters, so a bot whose token is shorter
//! opts out explicitly with [`TelegramVerifier::allow_short_tokens`] (or,
//! better, calls `setWebhook` again with a longer one). The token's header is
//! removed from the request once verified: the handler never sees it and
//! inbox mode never stores it. A webhook set without a
//! `secret_token` sends no header and this preset refuses its requests
//! (401). `setWebhook` with a new token switches at once; configure both
//! tokens here before calling it.
//!
//! **Signed / not signed:** nothing is signed. The token authenticates the
//! sender; the body (the `Update`), its `update_id` (the event key) and the
//! event type are **not signed**.
//!
//! The event key is the body's `update_id`, an integer (stored as
//! `#int:<n>`, see [`JsonPointerKey`]): "the
//! update's unique identifier", and a failed request is repeated with the
//! same `Update` (Bot API, "Update" and `setWebhook`). Update ids are unique
//! per bot, so scope the layer per bot when one endpoint serves several.
//! The event type is the name of the `Update`'s one other member
//! (`message`, `edited_message`, `callback_query`, `inline_query`, ...).
//!
//! **Retries:** "In case of an unsuccessful request, we will give up after a
//! reasonable number of attempts" (`setWebhook`); incoming updates are not
//! kept longer than 24 hours (`getUpdates`), hence [`REPLAY_WINDOW`].
//! **Tolerance:** none; no timestamp is signed (the message's `date` is in
//! the unsigned body). **Handshake:** none (the bot calls `setWebhook`).
//!
//! **Limit of the scheme:** whoever holds the token, or one captured
//! request, can send any `Update` under any `update_id` and it verifies; the
//! claim only stops Telegram's own repeats and concurrent copies. Serve the
//! endpoint over TLS only (Telegram requires HTTPS) and keep the token out of
//! logs. The webhook's answer may carry a Bot API method call; this preset
//! only concerns the request.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! `update_id`, which increases sequentially (Bot API, "Update"), or the
//! message's `date` (Unix seconds; `edit_date` for edits).

use crate::error::{KeyMaterialError, KeyMaterialErrorKind};
use crate::key::{EventIdentity, JsonPointerKey, KeyError, KeyExtractor};
use crate::providers::Provider;
use crate::verify::generic::TokenHeaderVerifier;
use crate::verify::{check_key_material, Delivery, SigningSecret, Verifier, VerifyError};

/// The header carrying the webhook's secret token.
pub const TOKEN_HEADER: &str = "x-telegram-bot-api-secret-token";

/// The CLI name of the preset and the `provider` column of its claims.
pub const NAME: &str = "telegram";
/// How long a Telegram update can be sent again: 2 days.
///
/// Telegram repeats a failed request and "will give up after a reasonable
/// number of attempts" (<https://core.telegram.org/bots/api#setwebhook>);
/// an incoming update is not kept longer than 24 hours
/// (<https://core.telegram.org/bots/api#getupdates>). The 24 hours plus a day
/// of margin.
pub const REPLAY_WINDOW: std::time::Duration = super::days(2);

/// Verifies `X-Telegram-Bot-Api-Secret-Token` ([`TokenHeaderVerifier`]);
/// the configured secrets must be tokens `setWebhook` accepts.
#[derive(Debug, Clone)]
#[must_use]
pub struct TelegramVerifier {
    inner: TokenHeaderVerifier,
}

impl Default for TelegramVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl TelegramVerifier {
    /// A verifier for `X-Telegram-Bot-Api-Secret-Token`.
    pub fn new() -> Self {
        Self { inner: TokenHeaderVerifier::new(http::HeaderName::from_static(TOKEN_HEADER)) }
    }

    /// Accepts configured tokens shorter than 16 bytes
    /// ([`MIN_CREDENTIAL_BYTES`](crate::verify::generic::MIN_CREDENTIAL_BYTES)),
    /// down to the 1 character Telegram allows (`setWebhook`, `secret_token`:
    /// "1-256 characters", <https://core.telegram.org/bots/api#setwebhook>):
    /// `Provider::telegram().verifier(TelegramVerifier::new().allow_short_tokens())`.
    /// A short token can be guessed by anyone who can reach the endpoint;
    /// prefer calling `setWebhook` with a token of 16 characters or more.
    pub fn allow_short_tokens(self) -> Self {
        Self { inner: self.inner.allow_short_tokens() }
    }
}

/// A `secret_token` `setWebhook` accepts: 1 to 256 of `A-Z a-z 0-9 _ -`.
fn is_token(secret: &SigningSecret) -> bool {
    let bytes = secret.expose();
    (1..=256).contains(&bytes.len()) && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

impl Verifier for TelegramVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        self.inner.precheck(parts)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        self.inner.verify(delivery)
    }

    fn check_secrets(&self, secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        check_key_material(secrets)?;
        if let Some(i) = secrets.iter().position(|s| !is_token(s)) {
            return Err(KeyMaterialError::new(
                KeyMaterialErrorKind::Malformed,
                Some(i),
                "a Telegram secret_token is 1 to 256 characters A-Z, a-z, 0-9, _ and -",
            ));
        }
        self.inner.check_secrets(secrets)
    }

    fn credential_headers(&self) -> &[http::HeaderName] {
        self.inner.credential_headers()
    }
}

/// The `X-Telegram-Bot-Api-Secret-Token` value Telegram sends for the
/// `secret_token` `secret`: the token itself. For tests and fixtures.
pub fn sign(secret: &SigningSecret) -> String {
    String::from_utf8_lossy(secret.expose()).into_owned()
}

/// Telegram's event identity: key = the body's `update_id`; type = the name
/// of the update's other member.
///
/// # Errors
/// As [`JsonPointerKey`] for `update_id`: missing, not a string or
/// integer, or a body that is not JSON.
pub fn event_identity(parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
    let mut identity = JsonPointerKey::new("/update_id").extract(parts, body)?;
    // An Update has `update_id` and at most one optional member.
    if let Ok(serde_json::Value::Object(members)) = serde_json::from_slice::<serde_json::Value>(body) {
        identity.event_type = members.keys().find(|k| *k != "update_id").cloned();
    }
    Ok(identity)
}

impl Provider {
    /// Telegram (`X-Telegram-Bot-Api-Secret-Token` shared token; key = `update_id`). See [`crate::providers::telegram`].
    ///
    /// The Telegram Bot API preset: [`TelegramVerifier`] (a shared token, no
    /// signature) and [`event_identity`].
    pub fn telegram() -> Self {
        Provider::new(NAME, TelegramVerifier::new(), event_identity).credentials_in(PRESET.credentials())
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[TOKEN_HEADER],
    |_| Provider::telegram(),
    super::ExampleOf::Signed(|s, _| vec![(TOKEN_HEADER, sign(s))]),
)
.shared_token(&[TOKEN_HEADER])
.signs("`X-Telegram-Bot-Api-Secret-Token`: the `setWebhook` `secret_token` as it is (a shared token, no signature; body not signed)")
.key_from("the body's update_id (JSON)")
.fixture(super::Fixture::formula(&[]));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::providers::tests::support::OneHeader;
    use crate::test_support::assert_body_identity;
    use crate::test_support::fixture_json;
    use crate::verify::VerifyErrorKind;

    /// The header `setWebhook(secret_token=...)` makes Telegram send, from
    /// `scripts/fixtures/telegram.py` (Telegram publishes no SDK): a token
    /// the verifier accepts, and the key read from its `update_id`.
    /// The rest of the fixture is checked in `providers::fixtures`.
    #[test]
    fn formula_fixture() {
        let expected: serde_json::Value = fixture_json("telegram/expected.json");
        let secret = SigningSecret::from(expected["secret_token"].as_str().unwrap());
        assert_eq!(TelegramVerifier::new().check_secrets(std::slice::from_ref(&secret)), Ok(()));
        let key = format!("#int:{}", expected["event_id"].as_u64().unwrap());
        assert_eq!(expected["read_event_id"].as_str(), Some(key.as_str()), "the key the central check reads");
    }

    /// The shared-token cases, rotation and precheck, and Telegram's own: the
    /// token is compared byte for byte.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"update_id":1,"message":{"text":"hi"}}"#;
        OneHeader::preset(&PRESET).check_shared_token(
            sign,
            "bot_Secret-1",
            [body, b"{\"update_id\":2}"],
            &[("case differs", vec!["bot_secret-1"], body, Err(VerifyErrorKind::NoMatchingSignature))],
        );
    }

    /// Telegram's charset and length (1 to 256), and the crate's 16-byte
    /// minimum, which `allow_short_tokens` lifts down to Telegram's 1.
    #[test]
    fn secrets() {
        use KeyMaterialErrorKind::{Malformed, NoSecret, WeakCredential};
        let (v, short_ok) = (TelegramVerifier::new(), TelegramVerifier::new().allow_short_tokens());
        let (long, max, sixteen) = ("a".repeat(257), "a".repeat(256), "A-z_0123456789ab");
        let cases: &[(&str, Result<(), KeyMaterialErrorKind>, Result<(), KeyMaterialErrorKind>)] = &[
            ("a", Err(WeakCredential), Ok(())),
            ("A-z_09", Err(WeakCredential), Ok(())),
            (&sixteen[..15], Err(WeakCredential), Ok(())),
            (sixteen, Ok(()), Ok(())),
            (&max, Ok(()), Ok(())),
            (&long, Err(Malformed), Err(Malformed)),
        ];
        for (secret, strict, allowed) in cases {
            let check = |v: &TelegramVerifier| v.check_secrets(&[SigningSecret::from(*secret)]).map_err(|e| e.kind());
            assert_eq!((check(&v), check(&short_ok)), (*strict, *allowed), "{secret}");
        }
        for bad in ["with space", "dot.ted", "zoë"] {
            let err = short_ok.check_secrets(&[SigningSecret::from("ok"), SigningSecret::from(bad)]).unwrap_err();
            assert_eq!((err.kind(), err.index()), (Malformed, Some(1)), "{bad}");
        }
        assert_eq!(v.check_secrets(&[]).unwrap_err().kind(), NoSecret);
        assert_eq!(v.credential_headers(), [http::HeaderName::from_static(TOKEN_HEADER)]);
    }

    #[test]
    fn key_cases() {
        let t = Provider::telegram();
        assert_body_identity(&t, br#"{"update_id":5,"callback_query":{"id":"q"}}"#, "#int:5", Some("callback_query"));
        assert_body_identity(&t, br#"{"update_id":6}"#, "#int:6", None);
        let p = crate::test_support::headers(&[]);
        let kind = |body: &[u8]| t.extractor_ref().extract(&p, body).unwrap_err().kind();
        assert_eq!(kind(br#"{"message":{}}"#), KeyErrorKind::Missing);
        assert_eq!(kind(b"not json"), KeyErrorKind::BodyNotJson);
        assert_eq!(kind(br#"{"update_id":1.5}"#), KeyErrorKind::Invalid);
        assert_eq!(t.name(), "telegram");
    }
}
