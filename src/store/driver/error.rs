//! [`DbError`], the seam's error whatever the driver: the server's answer
//! (its SQLSTATE, severity, message, detail and hint), a broken or refused
//! connection (its causes as text), or a step past its deadline. Each
//! driver maps its own errors to it once, where they arise
//! ([`seam`](super::seam)), so nothing above the seam reads a driver's
//! error type.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::code;
use crate::error::{Cause, StoreError, StoreErrorKind};

/// A driver error: the server's, the connection's, or a step past its
/// deadline.
#[derive(Debug, Clone)]
pub(crate) struct DbError {
    kind: DbErrorKind,
}

#[derive(Debug, Clone)]
enum DbErrorKind {
    /// The server answered with an error.
    Server(Box<ServerError>),
    /// No answer from the server: the connection could not be made, broke,
    /// or closed (the causes, as text: `Connection refused (os error 111)`).
    Connection(Option<Arc<Cause>>),
    /// The step did not finish within the deadline: its connection is
    /// discarded.
    Timeout,
}

/// An error the server reported (PostgreSQL's `ErrorResponse`: protocol
/// docs, "Error and Notice Message Fields").
#[derive(Debug, Clone)]
pub(crate) struct ServerError {
    /// `ERROR`, `FATAL`, `PANIC`.
    pub(crate) severity: String,
    /// The primary message (never quotes row values).
    pub(crate) message: String,
    /// The five-character SQLSTATE.
    pub(crate) code: String,
    /// The detail, which may quote row values: shown only for statements
    /// that carry no event data.
    pub(crate) detail: Option<String>,
    /// The hint.
    pub(crate) hint: Option<String>,
}

impl ServerError {
    /// As the crate shows it: `ERROR: <message> (SQLSTATE <code>)`;
    /// `verbose` adds the detail and hint (migrations, schema checks).
    pub(crate) fn text(&self, verbose: bool) -> String {
        let mut text = format!("{}: {} (SQLSTATE {})", self.severity, self.message, self.code);
        if verbose {
            if let Some(d) = &self.detail {
                text.push_str(&format!(" (detail: {d})"));
            }
            if let Some(h) = &self.hint {
                text.push_str(&format!(" (hint: {h})"));
            }
        }
        text.replace('\n', " ")
    }
}

/// SQLSTATEs after which a session must not serve another step: 25006 (the
/// server is read-only: a standby promoted away from, after a failover),
/// class 08 (connection exceptions) and the shutdown codes.
pub(crate) fn unusable_code(code: &str) -> bool {
    code == code::READ_ONLY_SQL_TRANSACTION || code.starts_with("08") || code::SHUTTING_DOWN.contains(&code)
}

impl DbError {
    /// The server's error.
    pub(crate) fn server(e: ServerError) -> Self {
        Self { kind: DbErrorKind::Server(Box::new(e)) }
    }

    /// A connection that could not be made, broke or closed, with its
    /// causes.
    pub(crate) fn connection(cause: Option<Arc<Cause>>) -> Self {
        Self { kind: DbErrorKind::Connection(cause) }
    }

    pub(crate) fn timeout() -> Self {
        Self { kind: DbErrorKind::Timeout }
    }

    /// The SQLSTATE the server answered with, as its five characters.
    pub(crate) fn code(&self) -> Option<&str> {
        match &self.kind {
            DbErrorKind::Server(e) => Some(&e.code),
            DbErrorKind::Connection(_) | DbErrorKind::Timeout => None,
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
            DbErrorKind::Server(e) => &e.code,
            DbErrorKind::Connection(_) => "connection",
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
        match &self.kind {
            DbErrorKind::Timeout => {
                let detail = match deadline {
                    Some(d) => format!("timed out: the database did not answer within the step deadline ({d:?})"),
                    None => "timed out: the database did not answer within the step deadline".to_owned(),
                };
                StoreError::new(kind, step, detail)
            }
            DbErrorKind::Server(e) => StoreError::new(kind, step, "")
                .with_sqlstate(e.code.clone())
                .with_cause(Some(Cause::new(e.text(verbose)))),
            // Not a server error: I/O, TLS, a closed connection. The causes
            // hold the reason ("Connection refused (os error 111)").
            DbErrorKind::Connection(cause) => StoreError::new(kind, step, "").with_cause(cause.clone()),
        }
    }

    /// The chain of causes of this error, for the crate's errors that carry
    /// one (`CommitError`, `TxError`).
    pub(crate) fn cause(&self) -> Option<Arc<Cause>> {
        match &self.kind {
            DbErrorKind::Timeout => Some(Cause::new(TIMED_OUT)),
            DbErrorKind::Server(e) => Some(Cause::new(e.text(false))),
            DbErrorKind::Connection(cause) => cause.clone(),
        }
    }
}

/// What a step past its deadline says.
const TIMED_OUT: &str = "timed out: no answer from the database within the step deadline";

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DbErrorKind::Timeout => f.write_str(TIMED_OUT),
            DbErrorKind::Server(e) => f.write_str(&e.text(false)),
            DbErrorKind::Connection(None) => f.write_str("the connection closed"),
            DbErrorKind::Connection(Some(cause)) => cause.write_whole(f),
        }
    }
}
