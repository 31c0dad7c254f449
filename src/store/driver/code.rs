//! SQLSTATEs the protocol modules and the seam name (PostgreSQL docs,
//! Appendix A "PostgreSQL Error Codes").

/// `division_by_zero`: a fence check that did not hold.
pub(crate) const DIVISION_BY_ZERO: &str = "22012";
/// `lock_not_available`: `lock_timeout` elapsed.
pub(crate) const LOCK_NOT_AVAILABLE: &str = "55P03";
/// `query_canceled`: `statement_timeout` elapsed (or a cancel request).
pub(crate) const QUERY_CANCELED: &str = "57014";
/// `serialization_failure`.
pub(crate) const SERIALIZATION_FAILURE: &str = "40001";
/// `deadlock_detected`.
pub(crate) const DEADLOCK_DETECTED: &str = "40P01";
/// `invalid_schema_name`: the schema does not exist.
pub(crate) const INVALID_SCHEMA_NAME: &str = "3F000";
/// `undefined_table`.
pub(crate) const UNDEFINED_TABLE: &str = "42P01";
/// `undefined_column`: a schema older than the crate.
pub(crate) const UNDEFINED_COLUMN: &str = "42703";
/// `read_only_sql_transaction`: a server demoted to a standby.
pub(crate) const READ_ONLY_SQL_TRANSACTION: &str = "25006";
/// `invalid_catalog_name`: the database does not exist.
pub(crate) const INVALID_CATALOG_NAME: &str = "3D000";
/// `invalid_authorization_specification`: no such role, no `pg_hba.conf` entry.
pub(crate) const INVALID_AUTHORIZATION: &str = "28000";
/// `invalid_password`.
pub(crate) const INVALID_PASSWORD: &str = "28P01";
/// `admin_shutdown`, `crash_shutdown`, `cannot_connect_now`.
pub(crate) const SHUTTING_DOWN: [&str; 3] = ["57P01", "57P02", "57P03"];
/// `invalid_sql_statement_name`: the named prepared statement does not
/// exist on this server session (a transaction-mode pooler ran the
/// statement on another session than the one it was prepared on).
pub(crate) const INVALID_SQL_STATEMENT_NAME: &str = "26000";
/// `duplicate_prepared_statement`: a statement of that name is already
/// prepared on this server session (another client's, behind a
/// transaction-mode pooler).
pub(crate) const DUPLICATE_PREPARED_STATEMENT: &str = "42P05";
