//! The inbox's rows: accepting a verified delivery as a `pending` row of
//! `webhook_events` ([`Inbox::accept`]), and the row as the inbox worker
//! leases it (its queue kind: the generic lease, heartbeat and fenced ends
//! are in the crate's queue module, the worker in [`inbox`](crate::inbox)).
//!
//! One autocommit statement inserts the row as `pending` (`INSERT ... ON
//! CONFLICT`); only its confirmed commit lets the layer answer 2xx; a
//! conflict is a duplicate, in whatever state. Past the database timeout its
//! connection is closed without a cancel request: its implicit `COMMIT` may
//! be waiting for a synchronous standby, and PostgreSQL commits a cancelled
//! wait on the primary alone. Under synchronous replication a duplicate is
//! answered only once the standby confirmed the stored row: the statement's
//! `ON CONFLICT DO UPDATE` locks the stored row even when its `WHERE` leaves
//! it unchanged (PostgreSQL docs, "INSERT": "all rows will be locked when the
//! ON CONFLICT DO UPDATE action is taken"), which takes a transaction id, so
//! its own commit waits for the standby, after the row's. The workers are woken by a
//! `pg_notify` that follows, coalesced per process: at most one notification
//! in flight, and one more after it when accepts committed meanwhile.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

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
/// Built by [`RequestHead::of`], which keeps only a keep-list of headers
/// (`content-type`, `user-agent`, the provider's declared headers and the
/// layer's [`keep_headers`](crate::layer::WebhookLayerBuilder::keep_headers)),
/// never one whose name contains `signature` or `hmac`, nor
/// `authorization`, `cookie` and `proxy-authorization` (the signature was
/// verified before the row was written), nor values that are not visible
/// ASCII.
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
    accept_guarded: std::sync::Arc<str>,
    channel: std::sync::Arc<str>,
    integrity: Option<IntegrityKey>,
    notifier: std::sync::Arc<Notifier>,
}

/// The workers' wake-ups for one process's accepts, coalesced: at most one
/// `pg_notify` in flight, and one more after it when accepts committed
/// meanwhile, so every accepted row is followed by a notification sent after
/// its commit (a wake-up is never lost), while concurrent accepts share one.
///
/// Each notification is a transaction of its own that PostgreSQL commits
/// durably (`PreCommit_Notify` assigns it a transaction id, and it takes the
/// cluster-wide notification lock through its commit); one per accept
/// doubled the durable commits of the accept path. A failed notification is
/// logged; the workers then find the rows by polling (their poll interval
/// bounds the delay).
pub(crate) struct Notifier {
    db: Db,
    channel: std::sync::Arc<str>,
    /// [`IDLE`], [`SENDING`] or [`AGAIN`].
    state: AtomicU8,
}

/// No notification in flight.
const IDLE: u8 = 0;
/// One in flight; nothing committed since it was sent.
const SENDING: u8 = 1;
/// One in flight, and an accept committed after it was sent: send again.
const AGAIN: u8 = 2;

impl Notifier {
    /// An accept committed: make sure a notification follows it.
    fn poke(self: &std::sync::Arc<Self>) {
        let before = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| Some(if s == IDLE { SENDING } else { AGAIN }));
        if before == Ok(IDLE) {
            let me = std::sync::Arc::clone(self);
            tokio::spawn(async move { me.run().await });
        }
    }

    async fn run(&self) {
        loop {
            let notify = [Param::Text(&self.channel), Param::Text("")];
            if let Err(e) = self.db.query("inbox notify", NOTIFY, &notify).await {
                tracing::warn!(error = %e, "inbox: notification not sent; workers find the rows by polling");
            }
            // SENDING → IDLE: nothing committed meanwhile. AGAIN: once more.
            if self.state.compare_exchange(SENDING, IDLE, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return;
            }
            self.state.store(SENDING, Ordering::Release);
        }
    }
}

/// A server-side key for inbox rows' integrity tags: HMAC-SHA256 over a
/// row's identity (scope, provider, event key), event type, request head and
/// payload. Give the same key to the layer
/// ([`WebhookLayerBuilder::inbox_integrity_key`](crate::layer::WebhookLayerBuilder::inbox_integrity_key),
/// or [`Inbox::with_integrity_key`]) and to the workers
/// ([`InboxWorkerBuilder::integrity_key`](crate::inbox::InboxWorkerBuilder::integrity_key)):
/// a worker then runs only rows whose tag verifies, so a row written by
/// someone who can write to the table but does not hold the key is not run
/// as if it had been signed (SECURITY.md). Keep it out of the database (an
/// environment variable or a secret store, not a table). `Debug` never shows it.
#[derive(Clone)]
pub struct IntegrityKey(std::sync::Arc<[u8]>);

impl fmt::Debug for IntegrityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IntegrityKey(..)")
    }
}

/// The shortest integrity key accepted, in bytes (HMAC-SHA256's block of
/// security: 256 bits).
pub const MIN_INTEGRITY_KEY_BYTES: usize = 32;

impl IntegrityKey {
    /// A key of `bytes` (at least [`MIN_INTEGRITY_KEY_BYTES`], 32; for
    /// example 32 random bytes, or a 64-hex-digit string used as its bytes).
    ///
    /// # Errors
    /// [`ConfigError`] of kind [`WeakIntegrityKey`](crate::error::ConfigErrorKind::WeakIntegrityKey)
    /// for a shorter key (the message never contains the key).
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        let bytes = bytes.as_ref();
        if bytes.len() < MIN_INTEGRITY_KEY_BYTES {
            return Err(ConfigError::of(
                crate::error::ConfigErrorKind::WeakIntegrityKey,
                format!("the inbox integrity key must be at least {MIN_INTEGRITY_KEY_BYTES} bytes"),
            ));
        }
        Ok(Self(bytes.into()))
    }

    /// The tag of a row: HMAC-SHA256 over a versioned, length-prefixed
    /// encoding of the identity, the type, the head (as stored, re-serialised
    /// canonically) and the payload.
    pub(crate) fn tag(&self, event: &ScopedEvent, head: Option<&RequestHead>, payload: &[u8]) -> [u8; 32] {
        use hmac::{KeyInit, Mac as _};
        let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&self.0).expect("any key length");
        let head = head.map(|h| serde_json::to_string(h).expect("a RequestHead serialises")).unwrap_or_default();
        mac.update(b"webhook-idempotency inbox row v1\0");
        let event_type = event.get_event_type();
        let parts: [&[u8]; 6] = [
            event.scope().as_bytes(),
            event.provider().as_bytes(),
            event.key().as_bytes(),
            event_type.map_or(&b"\xff"[..], str::as_bytes),
            head.as_bytes(),
            payload,
        ];
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is the tag of the row (in constant time).
    pub(crate) fn verifies(&self, tag: &[u8], event: &ScopedEvent, head: Option<&RequestHead>, payload: &[u8]) -> bool {
        use subtle::ConstantTimeEq as _;
        let expected = self.tag(event, head, payload);
        tag.len() == expected.len() && bool::from(expected.ct_eq(tag))
    }
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox").field("channel", &self.channel).finish_non_exhaustive()
    }
}

/// The notification: the channel and an empty payload (the workers read
/// none).
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
        // The insert commits alone; the notification goes in a transaction of
        // its own, sent in the same flight: a transaction that notifies takes a
        // cluster-wide lock through its commit's WAL flush, so notifying inside
        // the accept would serialise every accept's durable commit.
        let accept = accept_sql(schema);
        // With the body-digest guard: the digest's claim and the insert in one
        // statement; a body another event key holds inserts nothing.
        let guarded = format!(
            "WITH body AS ({})
             {}",
            super::digest::claim_sql(schema).replace("$4::bytea", "$8::bytea"),
            accept.replace(
                "VALUES ($1, $2, $3, $4, 'pending', 0, $5, $6::text::jsonb, $7, now())",
                "SELECT $1::text, $2::text, $3::text, $4::text, 'pending', 0, $5::bytea, $6::text::jsonb, \
                     $7::bytea, now() WHERE EXISTS (SELECT 1 FROM body)"
            )
        );
        debug_assert!(guarded.contains("FROM body"));
        let channel: std::sync::Arc<str> = queue::channel(InboxRows::NAME, schema).into();
        let notifier =
            std::sync::Arc::new(Notifier { db: db.clone(), channel: channel.clone(), state: AtomicU8::new(IDLE) });
        Self {
            db,
            schema: schema.into(),
            accept: accept.into(),
            accept_guarded: guarded.into(),
            channel,
            integrity: None,
            notifier,
        }
    }

    setters! {
        /// Tags every accepted row with `key` (see [`IntegrityKey`]), for
        /// workers configured with the same key.
        #[must_use]
        pub fn with_integrity_key(key: IntegrityKey) => integrity = Some(key);
    }

    /// The notification channel of this inbox (`webhook_inbox_` and 16 hex
    /// digits of the schema name's SHA-256).
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Stores a verified delivery as `pending` (one autocommit statement) and
    /// has the workers notified after its commit (coalesced with other
    /// accepts of this process, see the module docs). `Ok(true)`: accepted and
    /// committed (answer 2xx); `Ok(false)`: a row for the event exists
    /// already (a duplicate: nothing written), except a `failed` one a
    /// synchronous-mode delivery left, which is taken over (`Ok(true)`).
    ///
    /// # Errors
    /// [`StoreError`] when the database is unavailable or the statement
    /// failed: nothing is stored, and the sender must get a 5xx. Past the
    /// database timeout ([`StoreErrorKind::Timeout`](crate::error::StoreErrorKind::Timeout))
    /// the outcome is unknown: the statement is not cancelled (its commit
    /// may be waiting for a synchronous standby) and may still commit; the
    /// sender's retry then finds the row.
    pub async fn accept(&self, event: &ScopedEvent, payload: &[u8], head: &RequestHead) -> Result<bool, StoreError> {
        self.accept_digest(event, payload, head, None).await
    }

    /// [`accept`](Self::accept), and with `digest` (the body's SHA-256) the
    /// body-digest guard in the same statement: `Ok(false)` also when
    /// another event key holds a byte-identical body.
    pub(crate) async fn accept_digest(
        &self,
        event: &ScopedEvent,
        payload: &[u8],
        head: &RequestHead,
        digest: Option<&[u8; 32]>,
    ) -> Result<bool, StoreError> {
        let step = "inbox accept";
        let tag = self.integrity.as_ref().map(|k| k.tag(event, Some(head), payload));
        let head = serde_json::to_string(head).expect("a RequestHead serialises");
        let [scope, provider, key, event_type] = Param::event(event);
        let tag = tag.as_ref().map(|t| &t[..]);
        let mut params =
            vec![scope, provider, key, event_type, Param::Bytes(payload), Param::Text(&head), Param::OptBytes(tag)];
        let sql = match digest {
            Some(d) => {
                params.push(Param::Bytes(&d[..]));
                &self.accept_guarded
            }
            None => &self.accept,
        };
        let conn = self.db.connect(step).await?;
        // Never cancelled: its commit may be waiting for a synchronous standby.
        let result = conn.query_commit(sql, &params).await;
        conn.release();
        let inserted = result.map_err(|e| {
            super::report_unmigrated(&self.schema, &e);
            self.db.error(&e, step)
        })?;
        if !inserted.is_empty() {
            self.notifier.poke();
        }
        Ok(!inserted.is_empty())
    }
}

/// An inbox row as a worker leases it: the identity is the lease's; only
/// the narrow columns come with it, the body is read per item
/// ([`StoredDelivery::read`]).
#[derive(Debug)]
pub(crate) struct InboxRow {
    /// The event type, when the sender said it.
    pub(crate) event_type: Option<String>,
}

/// A leased row's stored delivery, read in its work transaction's BEGIN
/// flight.
#[derive(Debug)]
pub(crate) struct StoredDelivery {
    /// The raw body as received and verified.
    pub(crate) body: Bytes,
    /// The stored request head: `Ok(None)` for a row written without one;
    /// `Err` with why (serde's error class and position, never the content)
    /// when the stored JSON is not a request head (written or altered in the
    /// database): such a row is not run.
    pub(crate) head: Result<Option<RequestHead>, String>,
    /// The integrity tag, when the row was written with a key.
    pub(crate) tag: Option<Vec<u8>>,
}

impl StoredDelivery {
    /// Reads the [`InboxRows`] body columns of `row`, from `first`.
    pub(crate) fn read(row: &Row, first: usize) -> Self {
        let head: Option<String> = row.get(first + 1);
        Self {
            body: row.get::<Option<Vec<u8>>>(first).map(Bytes::from).unwrap_or_default(),
            head: head.map(|h| serde_json::from_str(&h)).transpose().map_err(|e| {
                format!("{:?} error at line {} column {}", e.classify(), e.line(), e.column()).to_lowercase()
            }),
            tag: row.get(first + 2),
        }
    }
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
                                                  request_head, integrity_tag, run_at)
         VALUES ($1, $2, $3, $4, 'pending', 0, $5, $6::text::jsonb, $7, now())
         -- A row a synchronous-mode delivery left `failed` (a route switched
         -- to inbox mode) is taken over; any other row is a duplicate.
         ON CONFLICT (scope, provider, event_key) DO UPDATE
            SET state = 'pending', payload = excluded.payload, request_head = excluded.request_head,
                integrity_tag = excluded.integrity_tag,
                run_at = excluded.run_at, retry_from = excluded.run_at,
                event_type = coalesce(excluded.event_type, e.event_type)
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
    const BORN: &'static str = "received_at";
    const KEY: &'static [&'static str] = &["scope", "provider", "event_key"];
    const PAYLOAD_COLUMNS: &'static str = "e.event_type";
    const BODY_COLUMNS: &'static str = "e.payload, e.request_head::text, e.integrity_tag";
    // The commit's time, not the transaction's start (`now()`), which is the run's start.
    // The completing statement's start (`statement_timestamp()`, STABLE:
    // Citus refuses a VOLATILE clock_timestamp() in an UPDATE).
    const DONE_SET: &'static str = "response_status = {status}, completed_at = statement_timestamp()";
    type Payload = InboxRow;

    fn payload(row: &Row, first: usize) -> InboxRow {
        InboxRow { event_type: row.get(first) }
    }
}

impl queue::Leased<InboxRow> {
    /// The leased row's event.
    pub(crate) fn event(&self) -> ScopedEvent {
        ScopedEvent::new(self.provider(), self.scope(), self.event_key()).with_type(self.payload().event_type.clone())
    }
}
