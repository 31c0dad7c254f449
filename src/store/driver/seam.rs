//! The seam as types: what a driver implements, and nothing else. The
//! protocol's rules (the connection typestate, the deadlines, the
//! statement mode and its switch, the fenced commit, the confirmation under
//! synchronous replication, the `LISTEN` checks) are written once above
//! these traits, in the driver-neutral modules of [`driver`](super); a
//! driver supplies the wire:
//! - [`Pool`]: a pooled connection, the pool's endpoint for errors, the
//!   closing of idle connections after a timeout, the pool's identity;
//! - [`Connection`]: a statement prepared and cached on the connection,
//!   one flight of statements sent without waiting for each answer
//!   (pipelined where the driver can), and the three ways a connection
//!   leaves a step: back to the pool, discarded (detached from the pool,
//!   its running statement cancelled, closed), or closed without a cancel
//!   (a `COMMIT` in flight);
//! - [`Columns`]: a result row's columns, as the types the protocol reads;
//! - [`Listener`]: a dedicated `LISTEN` session, and a `NOTIFY` from a
//!   session of its own;
//! - and every error as a [`DbError`], with the server's SQLSTATE.
//!
//! The traits are crate-internal: a driver is a module of this crate
//! behind its own feature (`postgres/` for tokio-postgres with deadpool),
//! and [`any`](super::any) dispatches over the compiled-in ones.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures_util::stream::BoxStream;

use super::column::{ColumnError, Timestamp};
use super::error::DbError;
use super::param::Param;
use crate::error::Cause;

/// A driver's connection pool.
pub(crate) trait Pool: Clone + Send + Sync + 'static {
    /// A connection checked out of this pool.
    type Conn: Connection;

    /// A pooled connection: an idle one, or a new one. The caller bounds
    /// the wait with the pool timeout (dropping the future gives up).
    ///
    /// # Errors
    /// [`AcquireError`]: no connection could be made, or the pool failed.
    fn acquire(&self) -> impl Future<Output = Result<Self::Conn, AcquireError>> + Send;

    /// `host:port` of the pool's configuration (comma-separated for
    /// several hosts), for connection errors; `None` when unknown.
    fn endpoint(&self) -> Option<String>;

    /// The server and database the pool connects to, as a key (the workers
    /// isolate crashes per process and database); `None` when unknown.
    fn database(&self) -> Option<String>;

    /// Closes the idle connections nobody checked out since `since` (after
    /// a step that timed out: they may be silenced the same way); how many.
    fn close_idle_since(&self, since: Instant) -> usize;

    /// The pool's identity, shared by every clone of it: what the crate
    /// keeps per pool (the statement mode's switch, the confirming commits)
    /// is found by it.
    fn identity(&self) -> PoolIdentity;
}

/// Which pool a [`Pool`] value is: equal for every clone of one pool, and
/// whether that pool still lives (a later pool may then reuse the `id`).
pub(crate) struct PoolIdentity {
    /// Unique among the pools alive at once.
    pub(crate) id: usize,
    /// Whether the pool still lives.
    pub(crate) alive: Box<dyn Fn() -> bool + Send>,
}

/// Why [`Pool::acquire`] gave no connection.
#[derive(Debug)]
pub(crate) enum AcquireError {
    /// Making a connection failed: refused, unreachable, TLS, or the
    /// server's answer (28P01, 3D000, ...).
    Connect(DbError),
    /// The pool itself failed (closed, a hook of its own): its causes.
    Pool(Option<Arc<Cause>>),
}

/// One statement of a flight ([`Connection::flight`]).
pub(crate) enum Step<'a, S> {
    /// A simple-query batch, no parameters, no rows read (`BEGIN ISOLATION
    /// LEVEL ...; SET LOCAL ...`, `COMMIT`, `NOTIFY "channel"`).
    Batch(&'a str),
    /// One statement with parameters: by its prepared statement when given
    /// (named, cached on the connection), else unnamed, sent with each
    /// parameter's type (behind a transaction-mode pooler, where a named
    /// statement may not exist on the next server session).
    Query {
        /// The statement's text.
        sql: &'a str,
        /// Its parameters.
        params: &'a [Param<'a>],
        /// Its prepared statement, from [`Connection::prepare`] on the same
        /// connection.
        prepared: Option<&'a S>,
    },
}

// Every field is a reference: a step copies whatever `S` is.
impl<S> Clone for Step<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Step<'_, S> {}

/// A connection checked out of a [`Pool`]. The typestate above (`Conn`,
/// `TxConn`) ends every one with one of [`release`](Self::release),
/// [`discard`](Self::discard) or [`close_uncancelled`](Self::close_uncancelled),
/// and decides which: a driver's own drop (deadpool's gives the connection
/// back) is never relied on.
pub(crate) trait Connection: Send + Sync + Sized + 'static {
    /// A statement prepared on this connection.
    type Statement: Send + Sync;
    /// A result row.
    type Row: Columns;

    /// When the connection was checked out of its pool (opened, for a new
    /// one).
    fn checked_out(&self) -> Instant;

    /// Whether the connection keeps named statements of its own that a step
    /// asking for an unnamed one would still run by name (sqlx's statement
    /// cache is keyed by the text, whatever `persistent` says). Behind a
    /// transaction-mode pooler such a connection is not used
    /// ([`Db::connect`](super::db::Db) discards it).
    fn holds_named_statements(&self) -> bool {
        false
    }

    /// `sql` prepared as a named statement, cached on the connection: a
    /// round trip the first time on this connection, none after. Called
    /// before a flight, so the flight's requests leave in order.
    ///
    /// # Errors
    /// The statement does not parse, its name is taken (42P05), the
    /// transaction is aborted (25P02), or the connection failed.
    fn prepare(&self, sql: &str) -> impl Future<Output = Result<Self::Statement, DbError>> + Send;

    /// Sends `steps` in order in one flight, without waiting for each
    /// answer before sending the next (where the driver pipelines; one
    /// after the other where it cannot), and returns each step's answer in
    /// order: its rows (none for a [`Step::Batch`]) or its error. PostgreSQL
    /// runs them in order on the session; after a failed statement inside
    /// a transaction, the rest fail with 25P02 until `ROLLBACK`, and a
    /// `COMMIT` is answered as `ROLLBACK`.
    fn flight<'a>(
        &'a self,
        steps: &'a [Step<'a, Self::Statement>],
    ) -> impl Future<Output = Vec<Result<Vec<Self::Row>, DbError>>> + Send + 'a;

    /// Back to the pool: the session is idle, outside any transaction.
    fn release(self);

    /// Detached from the pool, its running statement cancelled, closed (so
    /// PostgreSQL rolls back an open transaction). A dropped request does
    /// not stop a statement on the server; the cancel request does.
    fn discard(self);

    /// Detached from the pool and closed without a cancel request: a
    /// `COMMIT` (or an autocommit statement that writes) went unanswered and
    /// must end on its own. A cancelled `COMMIT` that waits for a synchronous
    /// standby stays committed on the primary alone (PostgreSQL docs,
    /// "Synchronous Replication").
    fn close_uncancelled(self);
}

/// A result row's columns, read by position, as the types the protocol
/// reads (JSON columns cross as `text`: the statements cast them). `None`
/// is SQL NULL.
///
/// # Errors
/// Each method: [`ColumnError`] when the column does not exist or is of
/// another type.
pub(crate) trait Columns: Send + Sync {
    /// The number of columns.
    fn len(&self) -> usize;
    /// `text` (or `varchar`, `name`).
    fn text(&self, idx: usize) -> Result<Option<&str>, ColumnError>;
    /// `bytea`.
    fn bytes(&self, idx: usize) -> Result<Option<&[u8]>, ColumnError>;
    /// `boolean`.
    fn boolean(&self, idx: usize) -> Result<Option<bool>, ColumnError>;
    /// `smallint`.
    fn int2(&self, idx: usize) -> Result<Option<i16>, ColumnError>;
    /// `integer`.
    fn int4(&self, idx: usize) -> Result<Option<i32>, ColumnError>;
    /// `bigint`.
    fn int8(&self, idx: usize) -> Result<Option<i64>, ColumnError>;
    /// `double precision`.
    fn float8(&self, idx: usize) -> Result<Option<f64>, ColumnError>;
    /// `timestamptz`, as the crate's own [`Timestamp`].
    fn timestamp(&self, idx: usize) -> Result<Option<Timestamp>, ColumnError>;
    /// `text[]`, whose elements may be NULL.
    fn texts(&self, idx: usize) -> Result<Option<Vec<Option<String>>>, ColumnError>;
}

/// Calls `$each!` with every [`Columns`] reader but `len`, `name -> type;`
/// each: the one list a driver's implementation (and the dispatch) expands,
/// so a reader added to the trait is added to all of them.
macro_rules! column_readers {
    ($each:ident) => {
        $each! {
            text -> &str;
            bytes -> &[u8];
            boolean -> bool;
            int2 -> i16;
            int4 -> i32;
            int8 -> i64;
            float8 -> f64;
            timestamp -> Timestamp;
            texts -> Vec<Option<String>>;
        }
    };
}
pub(crate) use column_readers;

/// What a `LISTEN` session says ([`Listener::listen`]).
#[derive(Debug)]
pub(crate) enum ListenEvent {
    /// The `LISTEN` was answered (once, first): `Err` when the server
    /// refused it (a standby in recovery does).
    Listened(Result<(), DbError>),
    /// A notification on the channel, with its payload.
    Notification(String),
    /// The session is gone (its error, when it broke); nothing follows.
    Lost(Option<DbError>),
}

/// How a driver opens the workers' dedicated `LISTEN` session: configured
/// apart from the pool (it must reach PostgreSQL itself, not a
/// transaction-mode pooler).
pub(crate) trait Listener: Clone + Send + Sync + 'static {
    /// A new session `LISTEN`ing on `channel` (a checked identifier): its
    /// events, [`ListenEvent::Listened`] first, until it is lost or
    /// dropped.
    ///
    /// # Errors
    /// No session could be opened.
    fn listen(&self, channel: &str) -> impl Future<Output = Result<BoxStream<'static, ListenEvent>, DbError>> + Send;

    /// `NOTIFY channel, 'payload'` from a short session of its own (the
    /// check that notifications from other sessions arrive); `Ok` once
    /// committed.
    ///
    /// # Errors
    /// The session could not be opened or the statement failed.
    fn notify(&self, channel: &str, payload: &str) -> impl Future<Output = Result<(), DbError>> + Send;

    /// The hosts the session connects to, for logs.
    fn hosts(&self) -> String;
}
