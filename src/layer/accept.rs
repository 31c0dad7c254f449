//! Inbox mode's last step: store the verified delivery as `pending` and
//! answer once that insert committed.

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Response};

use super::answer::{Answer, Outcome};
use super::config::{Config, InboxMode};
use super::rejection::RejectionKind;
use super::{ResponseBody, IDEMPOTENT_REPLAYED};
use crate::event::ScopedEvent;
use crate::store::inbox::RequestHead;

/// Stores the delivery; the configured acknowledgement once committed
/// (with `Idempotent-Replayed: true` for a duplicate), 503 otherwise.
pub(crate) async fn accept<B>(
    config: &Config,
    mode: &InboxMode,
    parts: &Parts,
    event: &ScopedEvent,
    body: &Bytes,
    digest: Option<&[u8; 32]>,
) -> Answer<B> {
    let head = RequestHead::of(parts, &mode.keep_headers, &mode.drop_headers);
    let accepted = match mode.inbox.accept_digest(event, body, &head, digest).await {
        Ok(accepted) => accepted,
        Err(e) => {
            tracing::error!(error = %e, "inbox: the delivery could not be stored");
            return config.refuse(RejectionKind::StoreUnavailable, "inbox_accept");
        }
    };
    let mut response = Response::new(ResponseBody::bytes(mode.body.clone()));
    *response.status_mut() = mode.status;
    if accepted {
        tracing::info!(outcome = "accepted", "webhook event stored in the inbox");
        Answer { outcome: Outcome::Accepted, response }
    } else {
        tracing::info!(outcome = "duplicate", "webhook event already in the inbox; replayed");
        response.headers_mut().insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        Answer { outcome: Outcome::Duplicate, response }
    }
}
