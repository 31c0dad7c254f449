//! What the service answers, with how the delivery ended: the outcome is
//! decided where the answer is made, and the metrics read it from there.

use http::Response;

use super::rejection::RejectionKind;
use super::ResponseBody;

/// How a delivery ended (`webhook_deliveries_total`'s `outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The handler succeeded and the claim committed with its writes.
    Committed,
    /// Inbox mode: stored as `pending`.
    Accepted,
    /// A duplicate, answered without running the handler.
    Duplicate,
    /// The handler did not succeed: rolled back, its answer passed on.
    Failed,
    /// The layer refused the delivery.
    Rejected(RejectionKind),
    /// A provider's endpoint-verification handshake, answered by the layer.
    Handshake,
}

impl Outcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Committed => "committed",
            Self::Accepted => "accepted",
            Self::Duplicate => "duplicate",
            Self::Failed => "failed",
            Self::Rejected(_) => "rejected",
            Self::Handshake => "handshake",
        }
    }
}

/// A response and the outcome it reports.
pub(crate) struct Answer<B> {
    pub(crate) outcome: Outcome,
    pub(crate) response: Response<ResponseBody<B>>,
}
