//! The handler's transaction, in one place: [`WebhookTx`], its errors
//! ([`TxError`], [`TxErrorKind`]) and everything a handler can do with it:
//! record an outbox effect ([`enqueue`](WebhookTx::enqueue)), claim a
//! business transition ([`claim_action`](WebhookTx::claim_action)), guard a
//! last-writer-wins update ([`apply_if_newer`](WebhookTx::apply_if_newer)),
//! and borrow the connection as the driver's own client (with the
//! `tokio-postgres` feature, [`client`](WebhookTx::client), defined with
//! that driver in [`postgres`](crate::postgres)).
//!
//! A `WebhookTx` is the transaction of a claim (the layers' synchronous
//! claim, [`ClaimedEvent::tx`]) or of a leased inbox row (the worker's): the
//! store opens it and ends it (the fenced commit, or the rollback); the
//! handler works inside it in between. What it is made of:
//! - the transaction's connection (`TxSlot`, the driver's), shared by every
//!   clone and by the claim or lease that ends it;
//! - the event it holds and where the crate's tables are, which the crate's
//!   statements through it are about.
//!
//! The SQL stays in the store: each method here asks the store module that
//! owns its statement for the text and parameters (`store::outbox`,
//! `store::actions`, `store::digest`), runs it through the transaction and
//! reads the answer with that module. The commit's wake-up of the outbox
//! workers is queued on the connection when an effect is added, and sent
//! with the fenced commit, only if it commits.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Cause;
use crate::event::ScopedEvent;
use crate::store::actions;
use crate::store::claim::ClaimedEvent;
use crate::store::digest::{self, BodyClaim};
use crate::store::driver::{Lent, Param, Row, TxSlot, Unlent};
use crate::store::outbox::{self as outbox_rows, Effect, Enqueued};
use crate::store::queue::{QueueKind, TxTables, WorkTx};
use crate::store::DEFAULT_DATABASE_TIMEOUT;

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
    slot: TxSlot,
    scope: Arc<TxScope>,
}

/// What the crate's own statements through a [`WebhookTx`] need besides the
/// connection: the event the transaction holds and where the tables are.
struct TxScope {
    event: ScopedEvent,
    tables: Arc<TxTables>,
    /// How long the crate's statements wait for a borrowed connection.
    lock_wait: Duration,
}

impl fmt::Debug for WebhookTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookTx").finish_non_exhaustive()
    }
}

impl ClaimedEvent {
    /// The transaction holding the claim: the event's writes go through it
    /// and commit with it. Clones are the same transaction.
    pub fn tx(&self) -> WebhookTx {
        let (slot, event, tables) = self.parts();
        WebhookTx::new(slot, event, tables)
    }
}

impl<K: QueueKind> WorkTx<K> {
    /// The transaction of the leased row's work, for its handler.
    pub(crate) fn tx(&self) -> WebhookTx {
        let (slot, event, tables) = self.parts();
        WebhookTx::new(slot, event, tables)
    }
}

impl WebhookTx {
    /// The transaction on `slot` holding `event`'s claim (or lease), with
    /// the tables `tables` names.
    fn new(slot: &TxSlot, event: &ScopedEvent, tables: &Arc<TxTables>) -> Self {
        let lock_wait = slot.step_deadline().unwrap_or(DEFAULT_DATABASE_TIMEOUT);
        let scope = TxScope { event: event.clone(), tables: Arc::clone(tables), lock_wait };
        Self { slot: slot.clone(), scope: Arc::new(scope) }
    }

    /// The transaction's connection, shared by every clone (for a driver's
    /// borrowed client: `client`, with the `tokio-postgres` feature).
    pub(crate) fn slot(&self) -> &TxSlot {
        &self.slot
    }

    /// Records `effect` for this transaction's event, in the transaction: it
    /// commits with the claim and the handler's writes, or rolls back with
    /// them (a rolled-back handler leaves no effect behind). The commit
    /// wakes the outbox workers (`NOTIFY`, sent in the same flight as
    /// `COMMIT`); an [`OutboxWorker`](crate::outbox::OutboxWorker) delivers
    /// it at least once, with a downstream key that is the same on every
    /// attempt ([`downstream_key`](crate::outbox::downstream_key)). One
    /// statement, one round trip.
    ///
    /// It borrows the transaction's connection as [`client`](Self::client)
    /// does: drop a [`TxClient`](crate::postgres::TxClient) you hold before calling it, or it waits for
    /// that client up to the store's database timeout, then fails
    /// ([`TxErrorKind::InUse`]).
    ///
    /// # Errors
    /// [`TxErrorKind::Invalid`] for an empty name, one over
    /// [`MAX_EFFECT_BYTES`](crate::outbox::MAX_EFFECT_BYTES) or with NUL, an ordinal over `i32::MAX`
    /// (2,147,483,647), a `not_before` before 1970 or after the year 9999, a
    /// `delay` over 253,402,300,799 s, or an ordering key that is empty, over
    /// [`MAX_ORDERING_KEY_BYTES`](crate::outbox::MAX_ORDERING_KEY_BYTES) or with NUL; [`TxErrorKind::Database`] when
    /// the statement failed (the outbox table missing: run the migrations);
    /// [`TxErrorKind::InUse`] as above; and [`TxErrorKind::Finished`] after
    /// the handler answered.
    pub async fn enqueue(&self, effect: Effect) -> Result<Enqueued, TxError> {
        let scope = &self.scope;
        let (sql, params) =
            outbox_rows::enqueue_statement(&scope.tables.schema, &scope.event, &effect).ok_or_else(TxError::invalid)?;
        let mut client = self.lend().await?;
        let enqueued = outbox_rows::enqueued(&run(&mut client, &sql, &params).await?);
        if enqueued == Enqueued::Added {
            // The commit wakes the outbox workers, only if it commits.
            client.tx_conn().notify_after_commit(&scope.tables.outbox_channel);
        }
        Ok(enqueued)
    }

    /// Claims the business transition `(action, business_key)` in this
    /// transaction's scope: `Ok(true)` when this transaction got it (perform
    /// the transition: it commits with the claim), `Ok(false)` when another
    /// event already performed it (committed). Repeated legitimate updates
    /// are never suppressed unless you claim them: choose an action whose
    /// business key names one transition (`("fulfil_order", order_id)`, not
    /// `("order_updated", order_id)`).
    ///
    /// A transition another delivery is performing right now (its
    /// transaction holds the row uncommitted) is waited for (PostgreSQL docs,
    /// "INSERT", "ON CONFLICT Clause": in READ COMMITTED the insert waits for
    /// that transaction): `false` once it commits, `true` when it rolled
    /// back. Two handlers claiming two actions in opposite orders can
    /// deadlock; PostgreSQL ends one (40P01) and the layer answers it 503,
    /// so its sender retries.
    ///
    /// Like [`enqueue`](Self::enqueue), it borrows the transaction's
    /// connection: drop a [`TxClient`](crate::postgres::TxClient) you hold first.
    ///
    /// # Errors
    /// [`TxErrorKind::Invalid`] for an empty or too long action (over
    /// [`MAX_ACTION_BYTES`](crate::store::actions::MAX_ACTION_BYTES)) or business key (over
    /// [`MAX_BUSINESS_KEY_BYTES`](crate::store::actions::MAX_BUSINESS_KEY_BYTES)); as [`enqueue`](Self::enqueue) otherwise.
    pub async fn claim_action(&self, action: &str, business_key: &str) -> Result<bool, TxError> {
        let scope = &self.scope;
        let statement = actions::claim_action_statement(&scope.tables.schema, &scope.event, action, business_key);
        let (sql, params) = statement.ok_or_else(TxError::invalid)?;
        Ok(actions::taken(&self.run(&sql, &params).await?))
    }

    /// The ordering guard of a last-writer-wins update: records `version` as
    /// the newest applied to the object `(object_kind, object_id)` in this
    /// transaction's scope and returns `Ok(true)` when it is newer than the
    /// one stored (or none is): apply the change. `Ok(false)`: an event
    /// carrying a newer (or the same) version was applied before; leave the
    /// object as it is. The record commits with the change.
    ///
    /// `version` is what the provider orders the object's changes by: the
    /// object's own version or `updated_at` where it has one (Shopify's
    /// `updated_at`, in Unix milliseconds), else the event's time (Stripe's
    /// event `created`, Unix seconds: two changes in the same second are
    /// then equal, and the second is not applied). Each preset's module
    /// docs say which field it is.
    ///
    /// # Errors
    /// As [`claim_action`](Self::claim_action) (the object kind bounded as
    /// an action, the object id as a business key).
    pub async fn apply_if_newer(&self, object_kind: &str, object_id: &str, version: i64) -> Result<bool, TxError> {
        let scope = &self.scope;
        let statement =
            actions::apply_if_newer_statement(&scope.tables.schema, &scope.event, object_kind, object_id, version);
        let (sql, params) = statement.ok_or_else(TxError::invalid)?;
        Ok(actions::taken(&self.run(&sql, &params).await?))
    }

    /// Claims the body's digest in this transaction (the body-digest guard:
    /// it commits or rolls back with the claim), without waiting on another
    /// delivery.
    pub(crate) async fn claim_body(&self, body_digest: &[u8; 32]) -> Result<BodyClaim, TxError> {
        let (sql, params) = digest::claim_statement(&self.scope.tables.schema, &self.scope.event, body_digest);
        let mut lent = self.lend().await?;
        if lent.tx().citus() != Some(true) {
            return Ok(digest::body_claim(&run(&mut lent, &sql, &params).await?));
        }
        // On Citus: the lock, then the insert Citus routes (`digest::routed_lock_sql`).
        let lock = digest::routed_lock_params(&self.scope.event, body_digest);
        let locked = run(&mut lent, &digest::routed_lock_sql(), &lock).await?;
        let (taken, synchronous) = locked.first().map_or((false, true), |r| (r.get(0), r.try_get(1).unwrap_or(true)));
        if !taken {
            return Ok(BodyClaim::InFlight);
        }
        let claimed = run(&mut lent, &digest::claim_sql(&self.scope.tables.schema), &params).await?;
        Ok(if claimed.is_empty() { BodyClaim::Replayed { synchronous } } else { BodyClaim::Acquired })
    }

    /// Runs one of the crate's statements in the transaction; see
    /// [`lend`](Self::lend) and [`run`].
    async fn run(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, TxError> {
        run(&mut self.lend().await?, sql, params).await
    }

    /// The connection for one of the crate's statements (an enqueue, a
    /// business key, a version), waiting while a [`TxClient`](crate::postgres::TxClient) is borrowed,
    /// up to the store's database timeout.
    ///
    /// # Errors
    /// [`TxErrorKind::Finished`] once the transaction ended,
    /// [`TxErrorKind::InUse`] when the client stayed borrowed.
    async fn lend(&self) -> Result<Lent, TxError> {
        let wait = self.scope.lock_wait;
        match self.slot.lend_within(wait).await {
            Ok(client) => Ok(client),
            Err(Unlent::Ended) => Err(TxError::of(TxErrorKind::Finished)),
            Err(Unlent::Busy) => {
                tracing::warn!(
                    waited = ?wait,
                    "the webhook transaction's connection is still borrowed by a TxClient: drop it before enqueue, \
                     claim_action or apply_if_newer"
                );
                Err(TxError::of(TxErrorKind::InUse))
            }
        }
    }
}

/// Runs `sql` on the lent connection; a retryable conflict it meets is
/// noted as the handler's own are.
///
/// # Errors
/// [`TxErrorKind::Database`] when the statement failed.
async fn run(lent: &mut Lent, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, TxError> {
    let conn = lent.tx_conn();
    conn.query(sql, params).await.map_err(|e| {
        conn.note_error(&e);
        TxError { kind: TxErrorKind::Database, sqlstate: e.code().map(str::to_owned), source: e.cause() }
    })
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
    /// The transaction's connection stayed borrowed by a [`TxClient`](crate::postgres::TxClient) for
    /// longer than the store's database timeout while one of the crate's
    /// statements waited for it: most often the handler still holds the
    /// client it used before calling [`enqueue`](WebhookTx::enqueue) or
    /// [`claim_action`](WebhookTx::claim_action) (drop it first: `drop(db)`,
    /// or a block around its use). Waiting on would never end.
    InUse,
    /// The handler asked for one driver's borrowed connection
    /// ([`WebhookTx::client`] for tokio-postgres, [`WebhookTx::sqlx`] for
    /// sqlx) on a transaction of the other driver: the store was built from
    /// the other driver's pool. Nothing was borrowed; the transaction goes on.
    OtherDriver,
}

impl TxError {
    fn invalid() -> Self {
        Self::of(TxErrorKind::Invalid)
    }

    pub(crate) fn of(kind: TxErrorKind) -> Self {
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
            (TxErrorKind::OtherDriver, _) => f.write_str(
                "webhook transaction: it runs on the other driver's connection (the store was built from the other \
                 driver's pool): borrow it with that driver's method (WebhookTx::client or WebhookTx::sqlx)",
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
