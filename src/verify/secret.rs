//! [`SigningSecret`]: key material as the provider shows it, never printed.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};

use subtle::ConstantTimeEq;

/// A signing secret, as the provider shows it (for example Stripe's
/// `whsec_...` string, used as the HMAC key byte for byte).
///
/// `Debug` prints `SigningSecret(<redacted>)`: secrets never reach logs.
///
/// A verifier that must decode or parse the secret (a base64 `whsec_` key, an
/// Ed25519 or P-256 public key) does it once per secret with
/// [`SigningSecret::parsed`]; clones share that cache, so a secret fixed on
/// the layer is decoded when the layer is built (by
/// [`Verifier::check_secrets`](crate::verify::Verifier::check_secrets)), never per delivery.
#[derive(Clone)]
pub struct SigningSecret {
    bytes: Vec<u8>,
    parsed: Arc<OnceLock<Arc<dyn Any + Send + Sync>>>,
}

impl SigningSecret {
    /// A secret from its bytes, used as given (no trimming, no decoding).
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        Self { bytes: secret.into(), parsed: Arc::default() }
    }

    /// The secret's bytes, to key an HMAC.
    pub fn expose(&self) -> &[u8] {
        &self.bytes
    }

    /// The secret parsed by `parse` (a decoded key, a public key), computed
    /// on the first call and cached for this secret and its clones. When the
    /// cache already holds another type (two verifiers parsing one secret
    /// differently), the result is computed again and not cached.
    pub fn parsed<T: Any + Send + Sync>(&self, parse: impl FnOnce(&[u8]) -> T) -> Arc<T> {
        if let Some(cached) = self.parsed.get() {
            return Arc::clone(cached).downcast::<T>().unwrap_or_else(|_| Arc::new(parse(&self.bytes)));
        }
        let value = Arc::new(parse(&self.bytes));
        let _ = self.parsed.set(Arc::clone(&value) as Arc<dyn Any + Send + Sync>);
        value
    }

    /// True when the secret starts or ends with ASCII whitespace, almost
    /// always a configuration mistake (a trailing newline from a file or an
    /// environment variable). The layer refuses such fixed secrets at build.
    pub fn has_surrounding_whitespace(&self) -> bool {
        let ws = |b: &u8| b.is_ascii_whitespace();
        self.bytes.first().is_some_and(ws) || self.bytes.last().is_some_and(ws)
    }

    /// Constant-time comparison of the secret with `candidate` (for senders
    /// that send a shared token instead of a signature).
    pub fn matches(&self, candidate: &[u8]) -> bool {
        self.bytes.ct_eq(candidate).into()
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(<redacted>)")
    }
}

/// Redacted, like `Debug`.
impl fmt::Display for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<&str> for SigningSecret {
    fn from(s: &str) -> Self {
        Self::new(s.as_bytes())
    }
}

impl From<String> for SigningSecret {
    fn from(s: String) -> Self {
        Self::new(s.into_bytes())
    }
}
