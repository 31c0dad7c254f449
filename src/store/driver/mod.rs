//! The driver seam: everything that talks to PostgreSQL through a driver
//! lives under this module, so the claim, inbox, queue, outbox, admin,
//! retention and migrate modules and the handler's transaction (`tx.rs`)
//! hold the protocol and its SQL text only, and name no driver type.
//!
//! It is built as River's `riverdriver` is: one interface, one
//! implementation module per driver, the user's own pool and client types
//! passed through.
//! - The interface is [`seam`]: crate-internal traits for what the protocol
//!   needs of a driver, and only that: a pooled connection ([`seam::Pool`]),
//!   a statement prepared and cached on it, one flight of statements, and
//!   the three ways it leaves a step: pooled, discarded (detached, its
//!   statement cancelled, closed) or closed without a cancel while a
//!   `COMMIT` is in flight ([`seam::Connection`]); a row's columns as the
//!   types the protocol reads ([`seam::Columns`]); a `LISTEN` session and a
//!   `NOTIFY` from a session of its own ([`seam::Listener`]); every error as
//!   a [`DbError`] with the server's SQLSTATE.
//! - Each driver is a module implementing those traits behind its own
//!   cargo feature: `postgres` (tokio-postgres with a deadpool pool,
//!   feature `tokio-postgres`, on by default). Its public face (building a
//!   [`StoreConfig`](crate::StoreConfig) from the pool, the settings only
//!   that driver has, the handler's borrowed client) is the public module
//!   `crate::postgres` (`src/drivers/`), above the protocol modules: the
//!   user's own types go in there and come out there.
//! - [`any`] dispatches over the compiled-in drivers: an enum per trait,
//!   implementing it by delegation (static dispatch, no generic parameter on
//!   the public types, several drivers in one binary; its module docs say
//!   why). The compiler checks each driver against the traits.
//!
//! What is written once, above the traits, whatever the driver:
//! - [`Db`]: the pool timeout, the client-side deadline of every step, the
//!   statement mode (named statements prepared once per connection, or
//!   unnamed ones behind a transaction-mode pooler) and its switch at the
//!   first 26000 or 42P05, the mapping of errors to
//!   [`StoreError`](crate::error::StoreError) (with the configured
//!   `host:port` for connection errors);
//! - [`Conn`] and [`TxConn`], the connection typestate: a pooled connection
//!   outside any transaction, or one with a transaction open on it, which is
//!   never pooled again unless a `COMMIT` or `ROLLBACK` was confirmed;
//!   dropping either without a confirmed end (a timeout, a dropped future, a
//!   panic) discards the connection, so PostgreSQL rolls back; an
//!   autocommit write or a `COMMIT` past its deadline is closed without a
//!   cancel request ([`Conn::query_commit`]);
//! - the fenced commit ([`TxConn::commit_fenced`]): a check statement and
//!   `COMMIT` in one flight, where the check fails in an aborted transaction
//!   (25P02) or when its fence does not hold (it divides by zero: 22012), so
//!   a `COMMIT` that PostgreSQL would silently turn into `ROLLBACK`
//!   (rust-postgres#1334) is an error before anything answers 2xx, and a
//!   `NOTIFY` queued on the transaction ([`TxConn::notify_after_commit`])
//!   sent in that flight after it;
//! - under synchronous replication, the confirmation a duplicate waits for
//!   before it is answered 2xx (`Db::confirm_replicated`): a commit that
//!   waits for the standby, sent after the stored row was read, one in
//!   flight per pool;
//! - the workers' `LISTEN` loop with its checks ([`listen_loop`]);
//! - [`Param`], the crate's statement parameter; [`Row`] and
//!   [`FromColumn`](row::FromColumn), the crate's column decoder
//!   (timestamps as its own [`Timestamp`](column::Timestamp)); [`TxSlot`],
//!   an open transaction's connection shared by every handle on it.
//!
//! The handler's transaction itself (`WebhookTx`: which event it holds,
//! where the crate's tables are, what a handler may do with it) is protocol,
//! not driver: it is the [`tx`](crate::tx) module's, above the store.
//! CONTRIBUTING.md ("A second driver") shows what adding a driver takes.

pub(crate) mod any;
pub(crate) mod code;
mod column;
mod confirm;
mod conn;
mod db;
mod error;
mod listen;
mod param;
#[cfg(feature = "tokio-postgres")]
pub(crate) mod postgres;
mod replication;
mod row;
pub(crate) mod seam;
mod slot;
#[cfg(feature = "sqlx")]
pub(crate) mod sqlx;
mod tx_conn;

pub(crate) use conn::Conn;
pub(crate) use db::Db;
pub(crate) use error::DbError;
pub(crate) use listen::listen_loop;
pub(crate) use param::Param;
pub use replication::SynchronousReplication;
pub(crate) use replication::DETECT_SQL;
pub(crate) use row::Row;
pub(crate) use slot::{Lent, TxSlot, Unlent};
pub(crate) use tx_conn::{Fenced, TxConn, FENCE_HOLDS, FENCE_ON};

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// The source lines outside the driver modules that may name a driver
    /// crate: the driver-specific constructors a user writes (building the
    /// pool the store is made from), each with its reason.
    const ALLOWED: &[(&str, &str, &str)] = &[
        (
            "src/lib.rs",
            "use webhook_idempotency::postgres::deadpool_postgres::{Manager, Pool};",
            "the quickstart builds its pool",
        ),
        ("src/lib.rs", "use webhook_idempotency::postgres::tokio_postgres::NoTls;", "the quickstart builds its pool"),
        (
            "src/bin/webhook-admin/main.rs",
            "use webhook_idempotency::postgres::deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};",
            "the command builds its pool from --database-url",
        ),
        (
            "src/bin/webhook-admin/main.rs",
            "use webhook_idempotency::postgres::tokio_postgres::config::{Host, SslMode};",
            "the command reads the URL's hosts and sslmode for its messages",
        ),
        (
            "src/bin/webhook-admin/main.rs",
            "use webhook_idempotency::postgres::tokio_postgres::{Config, NoTls};",
            "the command builds its pool from --database-url",
        ),
    ];

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("a source folder") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// Outside `store/driver/` (the seam and its implementations) and
    /// `drivers/` (each driver's public face), no source line names a
    /// driver's crate: the protocol modules, the layers, the workers and the
    /// handler's transaction are written against the seam alone. The lines
    /// in [`ALLOWED`] build a pool, as a user does.
    #[test]
    fn only_the_driver_modules_name_a_driver_crate() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        sources(&root.join("src"), &mut files);
        let mut named = Vec::new();
        for file in files {
            let relative = file.strip_prefix(root).expect("under the crate").to_string_lossy().replace('\\', "/");
            if relative.starts_with("src/store/driver/") || relative.starts_with("src/drivers/") {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("a readable source file");
            for (n, line) in text.lines().enumerate() {
                let names_one =
                    ["tokio_postgres", "deadpool", "postgres_types", "sqlx::"].iter().any(|c| line.contains(c));
                let allowed =
                    ALLOWED.iter().any(|(f, l, _)| *f == relative && line.trim_start_matches("//! ").trim() == *l);
                if names_one && !allowed {
                    named.push(format!("{relative}:{}: {}", n + 1, line.trim()));
                }
            }
        }
        assert!(named.is_empty(), "driver crates named outside the driver modules:\n{}", named.join("\n"));
    }
}
