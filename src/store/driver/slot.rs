//! [`TxSlot`], the connection of an open transaction shared by every handle
//! on it (the handler's `WebhookTx` clones, the claim or lease that ends
//! it), lent one borrower at a time ([`Lent`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, OwnedMutexGuard};

use super::tx_conn::TxConn;

/// The transaction's connection, lent to one borrower (a driver's client
/// for the handler, or one of the crate's statements) until dropped.
pub(crate) struct Lent {
    guard: OwnedMutexGuard<Option<TxConn>>,
}

impl Lent {
    /// The transaction's connection.
    pub(crate) fn tx_conn(&mut self) -> &mut TxConn {
        self.guard.as_mut().expect("Lent exists only while the slot is full")
    }

    /// The transaction's connection, shared.
    pub(crate) fn tx(&self) -> &TxConn {
        self.guard.as_ref().expect("Lent exists only while the slot is full")
    }
}

/// The connection of an open transaction, shared by every handle on it (the
/// handler's `WebhookTx` clones, the claim or lease that ends it): borrowed
/// one at a time ([`Lent`]), taken out once by the end. Cheap to clone;
/// every clone is the same slot.
#[derive(Clone)]
pub(crate) struct TxSlot {
    slot: Arc<Mutex<Option<TxConn>>>,
    /// The connection's step deadline.
    deadline: Option<Duration>,
}

/// Why [`TxSlot::lend_within`] lent nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unlent {
    /// Another borrower held the connection for the whole wait.
    Busy,
    /// The transaction ended: its connection was taken.
    Ended,
}

impl TxSlot {
    /// The slot holding `conn`.
    pub(crate) fn new(conn: TxConn) -> Self {
        let deadline = conn.step_deadline();
        Self { slot: Arc::new(Mutex::new(Some(conn))), deadline }
    }

    /// The client-side deadline of each step on the connection.
    pub(crate) fn step_deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// Borrows the connection, waiting while another borrower holds it;
    /// `None` once the transaction ended.
    pub(crate) async fn lend(&self) -> Option<Lent> {
        let guard = Arc::clone(&self.slot).lock_owned().await;
        guard.is_some().then_some(Lent { guard })
    }

    /// [`lend`](Self::lend), waiting at most `wait`.
    ///
    /// # Errors
    /// [`Unlent`]: busy for the whole wait, or ended.
    pub(crate) async fn lend_within(&self, wait: Duration) -> Result<Lent, Unlent> {
        let Ok(guard) = tokio::time::timeout(wait, Arc::clone(&self.slot).lock_owned()).await else {
            return Err(Unlent::Busy);
        };
        if guard.is_some() {
            Ok(Lent { guard })
        } else {
            Err(Unlent::Ended)
        }
    }

    /// Takes the connection out to end the transaction: `None` when a
    /// borrower still holds it (a task the handler spawned, after the
    /// handler answered), or it was taken before.
    pub(crate) fn take(&self) -> Option<TxConn> {
        self.slot.try_lock().ok().and_then(|mut g| g.take())
    }

    /// The retryable conflict (40P01, 40001, 55P03) a statement on the
    /// connection met, when the connection is here and not borrowed.
    pub(crate) fn retryable(&self) -> Option<&'static str> {
        self.slot.try_lock().ok().and_then(|g| g.as_ref().and_then(TxConn::retryable))
    }
}
