//! The verification the public-key presets share: Discord (Ed25519) and
//! SendGrid (ECDSA P-256) each sign the timestamp header's text followed by
//! the raw body, and send the timestamp in a header of its own. What differs
//! is the signature algorithm, the key's text and the signature header's
//! form; each preset states those as a [`Scheme`], and
//! [`timed_verifier!`]'s `scheme:` fact implements
//! [`Verifier`](crate::verify::Verifier) for the preset's verifier from it.

use std::time::Duration;

use crate::verify::{check_public_keys, Delivery, KeyMaterialError, SigningSecret, VerifyError, VerifyErrorKind};

/// What a delivery's headers carry: the timestamp as sent (the signed text),
/// its value in Unix seconds, and the signatures.
#[derive(Debug)]
pub(crate) struct Signed<'a, S> {
    pub(crate) timestamp: &'a str,
    pub(crate) seconds: u64,
    pub(crate) signatures: Vec<S>,
}

/// One public-key signature scheme over `timestamp || body`.
pub(crate) trait Scheme {
    /// A parsed verification key.
    type Key: Send + Sync + 'static;
    /// A parsed signature.
    type Signature;
    /// The signed message, `timestamp || body`, in the form the algorithm's
    /// crate takes it (parts, or one copy when it takes a single slice).
    type Message<'m>;
    /// What the operator is told when a configured secret is no such key.
    const KEY_HINT: &'static str;
    /// The key a secret's bytes hold, or `None` when they are no valid key.
    fn parse_key(raw: &[u8]) -> Option<Self::Key>;
    /// The timestamp and signatures from the headers.
    ///
    /// # Errors
    /// `MissingHeader` or `MalformedHeader`.
    fn signed(parts: &http::request::Parts) -> Result<Signed<'_, Self::Signature>, VerifyError>;
    /// The signed message: the timestamp's text, then the body.
    fn message<'m>(timestamp: &'m [u8], body: &'m [u8]) -> Self::Message<'m>;
    /// Whether `signature` is `key`'s over `message`.
    fn verifies(key: &Self::Key, message: &Self::Message<'_>, signature: &Self::Signature) -> bool;
}

/// The key a secret holds, parsed on first use and cached on the secret
/// ([`SigningSecret::parsed`]).
fn key<S: Scheme>(secret: &SigningSecret) -> std::sync::Arc<Option<S::Key>> {
    secret.parsed(S::parse_key)
}

/// Every secret must be a key of the scheme: a wrong one would otherwise fail
/// every delivery as a signature mismatch.
pub(crate) fn check_secrets<S: Scheme>(secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
    check_public_keys(secrets, |s| key::<S>(s).is_some(), S::KEY_HINT)
}

/// The headers, then the time within `tolerance`, then the cost cap, then
/// the cryptography: cheap checks first.
pub(crate) fn verify<S: Scheme>(delivery: &Delivery<'_>, tolerance: Duration) -> Result<(), VerifyError> {
    let signed = S::signed(delivery.parts)?;
    delivery.check_time(signed.seconds, tolerance)?;
    let secrets = delivery.require_secrets()?;
    crate::verify::check_verifications(signed.signatures.len(), secrets.len())?;
    let message = S::message(signed.timestamp.as_bytes(), delivery.body);
    let matched = secrets.iter().any(|secret| {
        key::<S>(secret)
            .as_ref()
            .as_ref()
            .is_some_and(|key| signed.signatures.iter().any(|sig| S::verifies(key, &message, sig)))
    });
    if !matched {
        return Err(VerifyErrorKind::NoMatchingSignature.into());
    }
    Ok(())
}
