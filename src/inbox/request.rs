//! The request a worker hands the handler: rebuilt from the stored head and
//! body, with the transaction and the event in its extensions, as the layer
//! would have handed it in synchronous mode.

use bytes::Bytes;
use http::Request;

use super::InboxBody;
use crate::event::WebhookEvent;
use crate::store::inbox::{FromInbox, InboxRow, RequestHead, StoredDelivery};
use crate::store::queue::Leased;
use crate::tx::WebhookTx;

/// The headers a stored request head keeps whatever the provider: the body's
/// type and the sender's agent.
pub const DEFAULT_KEPT_HEADERS: &[&str] = &["content-type", "user-agent"];

impl RequestHead {
    /// The head of `parts` with only the headers worth keeping: those of
    /// [`DEFAULT_KEPT_HEADERS`] and of `keep` (the provider's
    /// [`read_headers`](crate::providers::read_headers) and the layer's
    /// [`keep_headers`](crate::layer::WebhookLayerBuilder::keep_headers)),
    /// never one that must not be stored (a name containing `signature` or
    /// `hmac`, `Authorization`, `Proxy-Authorization`, `Cookie`), nor those
    /// in `drop` (the layer's: the provider's
    /// [`credential_headers`](crate::providers::credential_headers) and
    /// [`WebhookLayerBuilder::inbox_drop_header`](crate::layer::WebhookLayerBuilder::inbox_drop_header)).
    /// The layer hands it `parts` without the provider's credential headers
    /// already (removed once the delivery was verified): `drop` holds them
    /// again so that no keep-list can bring one back.
    /// Every other header (`X-Api-Key`, `X-Amz-Security-Token`, a proxy's
    /// `X-Forwarded-Client-Cert`, ...) is left out.
    pub fn of(parts: &http::request::Parts, keep: &[http::HeaderName], drop: &[http::HeaderName]) -> Self {
        let headers = parts
            .headers
            .iter()
            .filter(|(name, _)| DEFAULT_KEPT_HEADERS.contains(&name.as_str()) || keep.contains(name))
            .filter(|(name, _)| storable(name.as_str()) && !drop.contains(name))
            .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
            .collect();
        Self { method: parts.method.to_string(), uri: parts.uri.to_string(), headers }
    }

    /// Rebuilds a request with this head and `body`.
    ///
    /// # Errors
    /// When the stored method, URI or a header no longer parses (a row
    /// written by hand).
    pub fn to_request<B>(&self, body: B) -> Result<Request<B>, http::Error> {
        let mut req = Request::builder().method(self.method.as_str()).uri(self.uri.as_str());
        for (name, value) in &self.headers {
            req = req.header(name.as_str(), value.as_str());
        }
        req.body(body)
    }
}

/// Whether a header may be stored at all: not a signature, nor a credential.
fn storable(name: &str) -> bool {
    !(name.contains("signature")
        || name.contains("hmac")
        || name == "authorization"
        || name == "proxy-authorization"
        || name == "cookie")
}

/// The request for `row`'s handler: the stored head (`POST /` for a row
/// written without one) and body, with [`FromInbox`], `tx` and the
/// [`WebhookEvent`] in the extensions.
///
/// # Errors
/// Why the stored head is no request head (not a head's JSON, or a method,
/// URI or header that does not parse: a row written or altered in the
/// database), without the head's content: the row must not run.
pub(crate) fn rebuild(
    row: &Leased<InboxRow>,
    stored: StoredDelivery,
    tx: WebhookTx,
) -> Result<Request<InboxBody>, String> {
    let body: Bytes = stored.body;
    let unreadable = |why: &dyn std::fmt::Display| format!("the stored request head does not parse ({why}): not run");
    let mut request = match stored.head.map_err(|why| unreadable(&why))? {
        Some(head) => head.to_request(InboxBody::new(body.clone())),
        None => Request::builder().method(http::Method::POST).uri("/").body(InboxBody::new(body.clone())),
    }
    .map_err(|e| unreadable(&e))?;
    // axum's body extractors read the stored body whatever its size (it was
    // accepted under the layer's limit), as they do in the layer.
    #[cfg(feature = "axum")]
    axum_core::extract::DefaultBodyLimit::max(body.len().max(1)).apply(&mut request);
    let extensions = request.extensions_mut();
    extensions.insert(FromInbox);
    extensions.insert(tx);
    extensions.insert(WebhookEvent::new(row.event(), row.attempt(), body));
    Ok(request)
}
