//! [`WebhookTx`]: the claim's transaction, handed to the handler (and the
//! worker's, for the inbox): a shared slot holding the [`TxConn`] that the
//! layer or the worker takes back to end the transaction.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use super::{Param, Row, TxClient, TxConn};
use crate::error::Cause;
use crate::event::ScopedEvent;

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
    scope: Arc<TxScope>,
}

/// Where the crate's tables are, for statements through a [`WebhookTx`]:
/// built once per store, shared by its transactions.
#[derive(Debug)]
pub(crate) struct TxTables {
    /// The checked schema name.
    pub(crate) schema: String,
    /// The channel a commit that enqueued effects notifies.
    pub(crate) outbox_channel: String,
}

/// What the crate's own statements through a [`WebhookTx`] need besides the
/// connection: the event the transaction holds, where the tables are, and
/// whether the commit must wake the outbox workers.
pub(crate) struct TxScope {
    pub(crate) event: ScopedEvent,
    pub(crate) tables: Arc<TxTables>,
    enqueued: AtomicBool,
    /// How long the crate's statements wait for a borrowed connection.
    lock_wait: Duration,
}

impl TxScope {
    /// Notes that an effect was enqueued in this transaction.
    pub(crate) fn note_enqueued(&self) {
        self.enqueued.store(true, Ordering::Relaxed);
    }

    /// The channel to notify with the commit: the outbox's, when an effect
    /// was enqueued.
    pub(crate) fn notify(&self) -> Option<&str> {
        self.enqueued.load(Ordering::Relaxed).then_some(self.tables.outbox_channel.as_str())
    }
}

impl fmt::Debug for WebhookTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookTx").finish_non_exhaustive()
    }
}

impl WebhookTx {
    /// The transaction on `conn` holding `event`'s claim (or lease), with
    /// the tables `tables` names.
    pub(crate) fn new(conn: TxConn, event: ScopedEvent, tables: Arc<TxTables>) -> Self {
        let lock_wait = conn.step_deadline().unwrap_or(crate::store::DEFAULT_DATABASE_TIMEOUT);
        let scope = TxScope { event, tables, enqueued: AtomicBool::new(false), lock_wait };
        Self { slot: Arc::new(Mutex::new(Some(conn))), scope: Arc::new(scope) }
    }

    /// The event, the schema and the enqueue flag of this transaction.
    pub(crate) fn scope(&self) -> &TxScope {
        &self.scope
    }

    /// Runs one of the crate's statements in the transaction (an enqueue, a
    /// business key, a version), waiting while a [`TxClient`] is borrowed (up
    /// to the store's database timeout); a retryable conflict it meets is
    /// noted as the handler's own are.
    ///
    /// # Errors
    /// [`TxErrorKind::Finished`] once the transaction ended,
    /// [`TxErrorKind::InUse`] when the client stayed borrowed,
    /// [`TxErrorKind::Database`] when the statement failed.
    pub(crate) async fn run(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, TxError> {
        let wait = self.scope.lock_wait;
        let Ok(guard) = tokio::time::timeout(wait, Arc::clone(&self.slot).lock_owned()).await else {
            tracing::warn!(
                waited = ?wait,
                "the webhook transaction's connection is still borrowed by a TxClient: drop it before enqueue, \
                 claim_action or apply_if_newer"
            );
            return Err(TxError::of(TxErrorKind::InUse));
        };
        let conn = guard.as_ref().ok_or(TxError::of(TxErrorKind::Finished))?;
        conn.query(sql, params).await.map_err(|e| {
            conn.note_error(&e);
            TxError { kind: TxErrorKind::Database, sqlstate: e.code().map(str::to_owned), source: e.cause() }
        })
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
            Err(TxError::of(TxErrorKind::Finished))
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxError {
    kind: TxErrorKind,
    sqlstate: Option<String>,
    source: Option<Arc<Cause>>,
}

/// What a [`TxError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TxErrorKind {
    /// The layer (or the worker) already committed or rolled back this
    /// transaction: the handler had returned its response.
    Finished,
    /// One of the crate's statements in the transaction failed (an enqueue,
    /// a business key, a version; see [`TxError::sqlstate`]). A deadlock,
    /// serialization failure or lock timeout (or a named statement missing
    /// behind a transaction-mode pooler, 26000 or 42P05, before the pool
    /// switched to unnamed ones) is answered 503 as the handler's own are;
    /// any other error leaves the transaction aborted: answer a non-success
    /// status.
    Database,
    /// An argument is out of its range (an effect name over 128 bytes, an
    /// action name, a business key or an object id over its bound).
    Invalid,
    /// The transaction's connection stayed borrowed by a [`TxClient`] for
    /// longer than the store's database timeout while one of the crate's
    /// statements waited for it: most often the handler still holds the
    /// client it used before calling [`enqueue`](WebhookTx::enqueue) or
    /// [`claim_action`](WebhookTx::claim_action) (drop it first: `drop(db)`,
    /// or a block around its use). Waiting on would never end.
    InUse,
}

impl TxError {
    pub(crate) fn invalid() -> Self {
        Self::of(TxErrorKind::Invalid)
    }

    fn of(kind: TxErrorKind) -> Self {
        Self { kind, sqlstate: None, source: None }
    }

    /// What went wrong.
    pub fn kind(&self) -> TxErrorKind {
        self.kind
    }

    /// The SQLSTATE of a failed statement ([`TxErrorKind::Database`]).
    pub fn sqlstate(&self) -> Option<&str> {
        self.sqlstate.as_deref()
    }
}

impl fmt::Display for TxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind, &self.sqlstate) {
            (TxErrorKind::Finished, _) => f.write_str(
                "the webhook transaction is finished: WebhookTx is usable only until the handler returns its response",
            ),
            (TxErrorKind::Database, _) if self.source.is_some() => {
                f.write_str("webhook transaction statement failed")?;
                Cause::write_chain(f, "", self.source.as_deref())
            }
            (TxErrorKind::Database, Some(code)) => write!(f, "webhook transaction statement failed: SQLSTATE {code}"),
            (TxErrorKind::Database, None) => f.write_str("webhook transaction statement failed: the connection broke"),
            (TxErrorKind::Invalid, _) => f.write_str("webhook transaction: an argument is out of its range"),
            (TxErrorKind::InUse, _) => f.write_str(
                "webhook transaction: its connection is still borrowed by a TxClient; drop the client before \
                 enqueue, claim_action or apply_if_newer",
            ),
        }
    }
}

/// A failed statement's error (the server's message and SQLSTATE, or the
/// connection's cause, as text), also written after the message.
impl std::error::Error for TxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Cause::as_source(&self.source)
    }
}
