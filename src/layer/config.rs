//! The built layer's configuration, shared by every service it wraps.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

use super::answer::{Answer, Outcome};
use super::rejection::{self, Rejection, RejectionKind};
use super::ReplayStatus;
use crate::handler::Success;
use crate::providers::Provider;
use crate::scope::ScopeResolver;
use crate::store::claim::ClaimStore;
use crate::store::inbox::Inbox;
use crate::verify::{Clock, SigningSecret};

/// Inbox mode: where accepted deliveries go, and the answer.
pub(crate) struct InboxMode {
    pub(crate) inbox: Inbox,
    pub(crate) status: StatusCode,
    pub(crate) body: bytes::Bytes,
    /// Headers never stored besides the built-in ones.
    pub(crate) drop_headers: Vec<http::HeaderName>,
    /// Headers stored besides the default ones: the provider's and the
    /// application's.
    pub(crate) keep_headers: Vec<http::HeaderName>,
}

pub(crate) struct Config {
    pub(crate) store: ClaimStore,
    pub(crate) inbox: Option<InboxMode>,
    pub(crate) provider: Provider,
    /// The headers a credential is read from, removed once verified
    /// ([`crate::providers::credential_headers`] of `provider`).
    pub(crate) credential_headers: Vec<http::HeaderName>,
    pub(crate) resolver: Arc<dyn ScopeResolver>,
    pub(crate) body_limit: usize,
    pub(crate) gzip_limit: Option<usize>,
    pub(crate) body_timeout: Duration,
    pub(crate) retry_after: http::HeaderValue,
    pub(crate) success: Success,
    pub(crate) replay_status: ReplayStatus,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) operator_replay: Option<(http::HeaderName, SigningSecret)>,
    pub(crate) rejection_responder: Option<rejection::RejectionResponder>,
    /// Claim the body's SHA-256 too (`body_digest_guard`).
    pub(crate) body_digest_guard: bool,
}

impl Config {
    /// True when the request carries the configured operator-replay header
    /// with the right token. The SHA-256 digests of the header value and the
    /// token are compared in constant time, so neither the token's content
    /// nor its length shows in the timing.
    pub(crate) fn is_operator_replay(&self, headers: &http::HeaderMap) -> bool {
        use sha2::{Digest as _, Sha256};
        use subtle::ConstantTimeEq as _;
        let Some((name, token)) = &self.operator_replay else { return false };
        let want = Sha256::digest(token.expose());
        let mut found = subtle::Choice::from(0);
        for value in headers.get_all(name) {
            found |= Sha256::digest(value.as_bytes()).ct_eq(&want);
        }
        found.into()
    }

    /// The layer's own answer for `kind` (see [`RejectionKind`] for the
    /// table), logged at the kind's level.
    pub(crate) fn refuse<B>(&self, kind: RejectionKind, reason: &'static str) -> Answer<B> {
        let response =
            rejection::respond(Rejection::new(kind, reason), self.rejection_responder.as_ref(), &self.retry_after);
        Answer { outcome: Outcome::Rejected(kind), response }
    }
}
