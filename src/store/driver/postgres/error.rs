//! tokio-postgres's errors as the seam's [`DbError`]: a server error with
//! its SQLSTATE and fields, or a connection error with its causes as text.

use std::error::Error;

use crate::error::Cause;
use crate::store::driver::error::{DbError, ServerError};

/// `e` as the seam's error.
pub(crate) fn db_error(e: tokio_postgres::Error) -> DbError {
    match e.as_db_error() {
        Some(db) => DbError::server(server_error(db)),
        // Not a server error: I/O, TLS, a closed connection. The chain of
        // sources holds the reason ("Connection refused (os error 111)").
        None => DbError::connection(Cause::of(&e, describe)),
    }
}

fn server_error(db: &tokio_postgres::error::DbError) -> ServerError {
    ServerError {
        severity: db.severity().to_owned(),
        message: db.message().to_owned(),
        code: db.code().code().to_owned(),
        detail: db.detail().map(str::to_owned),
        hint: db.hint().map(str::to_owned),
    }
}

/// How this driver's errors read in a chain of causes
/// ([`Describe`](crate::error::Describe)): a server error by its severity,
/// message and SQLSTATE (never its detail, which may quote row values); a
/// tokio-postgres "db error" left out, its source (the server's error) says
/// it all.
pub(super) fn describe(e: &(dyn Error + 'static)) -> Option<Option<String>> {
    if let Some(db) = e.downcast_ref::<tokio_postgres::error::DbError>() {
        return Some(Some(server_error(db).text(false)));
    }
    if e.downcast_ref::<tokio_postgres::Error>().is_some_and(|pg| pg.as_db_error().is_some()) {
        return Some(None);
    }
    None
}
