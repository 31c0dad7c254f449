//! The inbox's rows: accepting a verified delivery as a `pending` row of
//! `webhook_events` ([`Inbox::accept`]), and the row as the inbox worker
//! leases it (its queue kind: the generic lease, heartbeat and fenced ends
//! are in the crate's queue module, the worker in [`inbox`](crate::inbox)).
//!
//! One autocommit statement inserts the row as `pending` (`INSERT ... ON
//! CONFLICT`), and a second one, sent in the same flight, `pg_notify`s the
//! workers. Only the insert's confirmed commit lets the layer answer 2xx; a
//! conflict is a duplicate, in whatever state.

use std::fmt;

use bytes::Bytes;

use super::driver::{Db, Param, Row};
use super::queue::{self, QueueKind};
use super::StoreConfig;
use crate::error::{ConfigError, StoreError};
use crate::event::ScopedEvent;

/// Marks a request an [`InboxWorker`](crate::inbox::InboxWorker) rebuilt
/// from a stored row: a `WebhookLayer` that sees it was wrongly put in
/// front of the worker's handlers and says so. Here, below both, so neither
/// imports the other.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FromInbox;

/// The request head kept with a pending event, to rebuild the request for
/// the handler: method, URI and the headers the handler may read. Stored as
/// JSON in `request_head`: `{"method": "POST", "uri": "/x", "headers":
/// [["content-type", "application/json"], ...]}`.
///
/// Built by [`RequestHead::of`], which never keeps a header whose name
/// contains `signature` or `hmac`, nor `authorization`, `cookie` and
/// `proxy-authorization` (the signature was verified before the row was
/// written), nor values that are not visible ASCII or UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RequestHead {
    /// The request method (`POST`).
    pub method: String,
    /// The request URI as received (path and query).
    pub uri: String,
    /// The kept headers, in order, names in lower case.
    pub headers: Vec<(String, String)>,
}

/// The inbox store: accepting deliveries on one database and schema. Cheap
/// to clone. The layer in [`Mode::Inbox`](crate::layer::Mode::Inbox) runs it for
/// every verified delivery; anything else that receives events (a queue
/// consumer, a poller) can put them in the same inbox for the same
/// [`InboxWorker`](crate::inbox::InboxWorker)s.
#[derive(Clone)]
pub struct Inbox {
    db: Db,
    schema: std::sync::Arc<str>,
    accept: std::sync::Arc<str>,
    channel: std::sync::Arc<str>,
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox").field("channel", &self.channel).finish_non_exhaustive()
    }
}

/// The notification: the channel and the provider as its payload.
const NOTIFY: &str = "SELECT pg_notify($1, $2)";

impl Inbox {
    /// The inbox on `store`'s database (a [`StoreConfig`], or a bare pool
    /// for the defaults).
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid schema name.
    pub fn new(store: impl Into<StoreConfig>) -> Result<Self, ConfigError> {
        let store = store.into();
        let (db, schema) = store.open()?;
        Ok(Self::open(db, schema))
    }

    pub(crate) fn open(db: Db, schema: &str) -> Self {
        let accept = accept_sql(schema);
        let channel = queue::channel(InboxRows::NAME, schema);
        Self { db, schema: schema.into(), accept: accept.into(), channel: channel.into() }
    }

    /// The notification channel of this inbox (`webhook_inbox_` and 16 hex
    /// digits of the schema name's SHA-256).
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Stores a verified delivery as `pending` and notifies the workers, in
    /// two autocommit statements sent in one flight. `Ok(true)`: accepted and
    /// committed (answer 2xx); `Ok(false)`: a row for the event exists
    /// already (a duplicate: nothing written), except a `failed` one a
    /// synchronous-mode delivery left, which is taken over (`Ok(true)`).
    ///
    /// # Errors
    /// [`StoreError`] when the database is unavailable or the statement
    /// failed: nothing is stored, and the sender must get a 5xx.
    pub async fn accept(&self, event: &ScopedEvent, payload: &[u8], head: &RequestHead) -> Result<bool, StoreError> {
        let step = "inbox accept";
        let head = serde_json::to_string(head).expect("a RequestHead serialises");
        let [scope, provider, key, event_type] = Param::event(event);
        let params = [scope, provider, key, event_type, Param::Bytes(payload), Param::Text(&head)];
        let notify = [Param::Text(&self.channel), Param::Text(event.provider())];
        let conn = self.db.connect(step).await?;
        // One flight: the insert, then the notification in a transaction of
        // its own (a spurious wake-up for a duplicate costs the workers one
        // empty lease).
        let result = conn.pair((&self.accept, &params), (NOTIFY, &notify)).await;
        conn.release();
        let (inserted, notified) = result.map_err(|e| {
            super::report_unmigrated(&self.schema, &e);
            self.db.error(&e, step)
        })?;
        if let Err(e) = notified {
            tracing::warn!(sqlstate = e.sqlstate(), "inbox: notification not sent; workers find the row by polling");
        }
        Ok(!inserted.is_empty())
    }
}

/// An inbox row as a worker leases it.
#[derive(Debug)]
pub(crate) struct InboxRow {
    /// The event type, when the sender said it.
    pub(crate) event_type: Option<String>,
    /// The raw body as received and verified.
    pub(crate) body: Bytes,
    /// The stored request head (absent for rows written without one, or
    /// with one that no longer parses).
    pub(crate) head: Option<RequestHead>,
}

/// The accept: a `pending` row with the delivery, unless the event has one.
///
/// The insert commits alone; the notification goes in a transaction of its
/// own, sent in the same flight: a transaction that notifies takes a
/// cluster-wide lock through its commit's WAL flush, so notifying inside the
/// accept would serialise every accept's durable commit.
pub(crate) fn accept_sql(schema: &str) -> String {
    format!(
        "INSERT INTO {schema}.webhook_events AS e (scope, provider, event_key, event_type, state, attempts, payload,
                                                  request_head, run_at)
         VALUES ($1, $2, $3, $4, 'pending', 0, $5, $6::text::jsonb, now())
         -- A row a synchronous-mode delivery left `failed` (a route switched
         -- to inbox mode) is taken over; any other row is a duplicate.
         ON CONFLICT (scope, provider, event_key) DO UPDATE
            SET state = 'pending', payload = excluded.payload, request_head = excluded.request_head,
                run_at = now(), event_type = coalesce(excluded.event_type, e.event_type)
          WHERE e.state = 'failed'
         RETURNING 1"
    )
}

/// The inbox as a queue kind: `webhook_events` rows, identified by
/// `(scope, provider, event_key)`.
pub(crate) struct InboxRows;

impl QueueKind for InboxRows {
    const NAME: &'static str = "inbox";
    const TABLE: &'static str = "webhook_events";
    const KEY: &'static [&'static str] = &["scope", "provider", "event_key"];
    const PAYLOAD_COLUMNS: &'static str = "e.event_type, e.payload, e.request_head::text";
    const DONE_SET: &'static str = "response_status = {status}, completed_at = now()";
    type Payload = InboxRow;

    fn payload(row: &Row, first: usize) -> InboxRow {
        let head: Option<String> = row.get(first + 2);
        InboxRow {
            event_type: row.get(first),
            body: row.get::<Option<Vec<u8>>>(first + 1).map(Bytes::from).unwrap_or_default(),
            head: head.and_then(|h| serde_json::from_str(&h).ok()),
        }
    }
}

impl queue::Leased<InboxRow> {
    /// The leased row's event.
    pub(crate) fn event(&self) -> ScopedEvent {
        ScopedEvent::new(self.provider(), self.scope(), self.event_key()).with_type(self.payload().event_type.clone())
    }
}
