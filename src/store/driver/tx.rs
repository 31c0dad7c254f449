//! [`WebhookTx`]: the claim's transaction, handed to the handler (and the
//! worker's, for the inbox): a shared slot holding the [`TxConn`] that the
//! layer or the worker takes back to end the transaction.

use std::fmt;
use std::sync::Arc;

use tokio::sync::Mutex;

use super::{TxClient, TxConn};

/// The transaction holding this delivery's claim. The handler's business
/// writes go through it, so they commit (or roll back) together with the
/// claim.
///
/// Cloneable; every clone is the same transaction. The layer takes it back
/// when the inner service returns its response: using it after that (from a
/// spawned task, say) is [`TxErrorKind::Finished`], not a hang. Do not send
/// `COMMIT` or `ROLLBACK` yourself: the layer ends the transaction.
///
/// With the `axum` feature it is an extractor; without axum, read it from the
/// request extensions: `req.extensions().get::<WebhookTx>()`.
///
/// ```no_run
/// # async fn handler(tx: webhook_idempotency::WebhookTx) -> Result<(), Box<dyn std::error::Error>> {
/// let client = tx.client().await?;
/// client.execute("INSERT INTO orders_paid (order_id) VALUES ($1)", &[&"ord_1"]).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct WebhookTx {
    slot: Arc<Mutex<Option<TxConn>>>,
}

impl fmt::Debug for WebhookTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookTx").finish_non_exhaustive()
    }
}

impl WebhookTx {
    pub(crate) fn new(conn: TxConn) -> Self {
        Self { slot: Arc::new(Mutex::new(Some(conn))) }
    }

    /// Borrows the connection inside the transaction. Waits while another
    /// clone holds it; statements on one connection run one at a time.
    ///
    /// # Errors
    /// [`TxError`] of kind [`TxErrorKind::Finished`] once the layer has
    /// committed or rolled back.
    pub async fn client(&self) -> Result<TxClient, TxError> {
        let guard = Arc::clone(&self.slot).lock_owned().await;
        if guard.is_some() {
            Ok(TxClient::new(guard))
        } else {
            Err(TxError { kind: TxErrorKind::Finished })
        }
    }

    /// Takes the connection back for the store: `None` when a clone still
    /// holds a [`TxClient`] after the work answered (or it was taken before).
    pub(crate) fn take_conn(&self) -> Option<TxConn> {
        self.slot.try_lock().ok().and_then(|mut g| g.take())
    }

    /// The retryable conflict (40P01, 40001, 55P03) a statement through a
    /// [`TxClient`] met, when the connection is here and not borrowed.
    pub(crate) fn retryable_conflict(&self) -> Option<&'static str> {
        self.slot.try_lock().ok().and_then(|g| g.as_ref().and_then(TxConn::retryable))
    }
}

/// Using a [`WebhookTx`] failed: see [`kind`](Self::kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxError {
    kind: TxErrorKind,
}

/// What a [`TxError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TxErrorKind {
    /// The layer (or the worker) already committed or rolled back this
    /// transaction: the handler had returned its response.
    Finished,
}

impl TxError {
    /// What went wrong.
    pub fn kind(&self) -> TxErrorKind {
        self.kind
    }
}

impl fmt::Display for TxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            TxErrorKind::Finished => f.write_str(
                "the webhook transaction is finished: WebhookTx is usable only until the handler returns its response",
            ),
        }
    }
}

impl std::error::Error for TxError {}
