//! The driver's error: the server's, the connection's, or a step past its
//! deadline.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::code;
use crate::error::{server_error, Cause, Chain, StoreError, StoreErrorKind};

/// A driver error: the server's, the connection's, or a step past its
/// deadline.
#[derive(Debug)]
pub(crate) struct DbError {
    kind: DbErrorKind,
}

#[derive(Debug)]
enum DbErrorKind {
    Pg(tokio_postgres::Error),
    /// The step did not finish within the deadline: its connection is
    /// discarded.
    Timeout,
}

/// SQLSTATEs after which a session must not serve another step: 25006 (the
/// server is read-only: a standby promoted away from, after a failover),
/// class 08 (connection exceptions) and the shutdown codes.
pub(crate) fn unusable_code(code: &str) -> bool {
    code == code::READ_ONLY_SQL_TRANSACTION || code.starts_with("08") || code::SHUTTING_DOWN.contains(&code)
}

impl DbError {
    pub(crate) fn pg(e: tokio_postgres::Error) -> Self {
        Self { kind: DbErrorKind::Pg(e) }
    }

    pub(crate) fn timeout() -> Self {
        Self { kind: DbErrorKind::Timeout }
    }

    /// The SQLSTATE the server answered with, as its five characters.
    pub(crate) fn code(&self) -> Option<&str> {
        match &self.kind {
            DbErrorKind::Pg(e) => e.code().map(tokio_postgres::error::SqlState::code),
            DbErrorKind::Timeout => None,
        }
    }

    /// Whether the server answered with SQLSTATE `code`.
    pub(crate) fn is(&self, code: &str) -> bool {
        self.code() == Some(code)
    }

    pub(crate) fn timed_out(&self) -> bool {
        matches!(self.kind, DbErrorKind::Timeout)
    }

    /// The SQLSTATE for logs, `connection` or `timeout` when the server sent
    /// none (never the message, which may quote values).
    pub(crate) fn sqlstate(&self) -> &str {
        match &self.kind {
            DbErrorKind::Timeout => "timeout",
            DbErrorKind::Pg(_) => self.code().unwrap_or("connection"),
        }
    }

    /// True when the session cannot serve the claim and must not go back to
    /// the pool: no SQLSTATE (the connection closed or broke, or the step
    /// timed out), a read-only transaction (25006: the server was demoted to
    /// a standby after a failover while new sessions reach the new primary),
    /// a connection exception (class 08), an administrator or crash
    /// shutdown, or a server not accepting connections yet (57P01, 57P02,
    /// 57P03). PostgreSQL docs, "PostgreSQL Error Codes".
    pub(crate) fn unusable(&self) -> bool {
        self.code().is_none_or(unusable_code)
    }

    pub(super) fn store_kind(&self) -> StoreErrorKind {
        match (self.code(), &self.kind) {
            (_, DbErrorKind::Timeout) => StoreErrorKind::Timeout,
            (Some(code::INVALID_CATALOG_NAME), _) => StoreErrorKind::DatabaseMissing,
            (Some(code::INVALID_AUTHORIZATION | code::INVALID_PASSWORD), _) => StoreErrorKind::Authentication,
            (Some(_), _) => StoreErrorKind::Database,
            (None, _) => StoreErrorKind::Unavailable,
        }
    }

    /// The crate's error for this one; `verbose` adds the server's detail
    /// and hint; `deadline` is the step deadline a timeout passed.
    pub(super) fn to_store(&self, step: &str, verbose: bool, deadline: Option<Duration>) -> StoreError {
        let kind = self.store_kind();
        let e = match &self.kind {
            DbErrorKind::Timeout => {
                let detail = match deadline {
                    Some(d) => format!("timed out: the database did not answer within the step deadline ({d:?})"),
                    None => "timed out: the database did not answer within the step deadline".to_owned(),
                };
                return StoreError::new(kind, step, detail);
            }
            DbErrorKind::Pg(e) => e,
        };
        if let Some(db) = e.as_db_error() {
            return StoreError::new(kind, step, "")
                .with_sqlstate(db.code().code())
                .with_cause(Some(Cause::new(server_error(db, verbose))));
        }
        // Not a server error: I/O, TLS, a closed connection. The chain of
        // sources holds the reason ("Connection refused (os error 111)").
        StoreError::new(kind, step, "").with_cause(Cause::of(e))
    }

    /// The chain of causes of this error, for the crate's errors that carry
    /// one (`CommitError`, `TxError`).
    pub(crate) fn cause(&self) -> Option<Arc<Cause>> {
        match &self.kind {
            DbErrorKind::Timeout => Some(Cause::new(TIMED_OUT)),
            DbErrorKind::Pg(e) => Cause::of(e),
        }
    }
}

/// What a step past its deadline says.
const TIMED_OUT: &str = "timed out: no answer from the database within the step deadline";

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DbErrorKind::Timeout => f.write_str(TIMED_OUT),
            DbErrorKind::Pg(e) => Chain(e).fmt(f),
        }
    }
}
