//! A throwaway Citus cluster: a coordinator and workers, each a
//! [`TempPostgres`] started with `shared_preload_libraries = 'citus'`, on
//! loopback.
//!
//! Citus docs, "Multi-Node Citus": every node loads the extension's library
//! at start, `CREATE EXTENSION citus` runs in the database on every node, the
//! coordinator is told its own address (`citus_set_coordinator_host`) and
//! each worker is registered on it (`citus_add_node`). Node metadata is per
//! database, so [`Citus::create_database`] does all of it for each database a
//! test creates.

use std::io;
use std::path::PathBuf;

use crate::{check, find_bin, TempPostgres};

/// The settings every node starts with: the extension's library;
/// prepared transactions for Citus's two-phase commit of a transaction that
/// wrote on several nodes (Citus docs, "Distributed transactions";
/// PostgreSQL docs, `max_prepared_transactions`); background workers for
/// Citus's maintenance daemon, one per database (a test run creates over a
/// hundred; the default 8 runs out); and connections for those daemons,
/// each of which keeps about 3 on the coordinator and 2 on each worker
/// while its database exists (Citus 13.2: its 2PC recovery and deadlock
/// detection connect to every node), besides the tests' own: with the
/// harness's 400, the CI step's 140 databases ran the coordinator out
/// (`53300 sorry, too many clients already`).
const NODE_SETTINGS: &str = "-c shared_preload_libraries=citus -c max_prepared_transactions=200 \
     -c max_worker_processes=256 -c max_connections=1200";

/// A running cluster. See the module docs.
pub struct Citus {
    /// The node the application connects to: it plans each statement and
    /// routes it to the worker holding the shard.
    pub coordinator: TempPostgres,
    /// The nodes holding the shards.
    pub workers: Vec<TempPostgres>,
}

impl Citus {
    /// Why a cluster cannot run here (the server binaries or Citus's library
    /// missing), or `None`. `../shared/citus/install.sh` installs Citus
    /// 13.2.2 for Debian's PostgreSQL 15.
    pub fn missing() -> Option<String> {
        let bin = match find_bin() {
            Ok(bin) => bin,
            Err(e) => return Some(e.to_string()),
        };
        let library = Self::library(&bin);
        (!library.is_file()).then(|| format!("Citus is not installed ({} missing)", library.display()))
    }

    /// `citus.so` in the server's library directory (Debian's layout:
    /// `/usr/lib/postgresql/<major>/lib` beside `bin`).
    fn library(bin: &std::path::Path) -> PathBuf {
        bin.parent().map_or_else(|| PathBuf::from("lib"), |p| p.join("lib")).join("citus.so")
    }

    /// Starts a coordinator and `workers` workers (each `initdb`, started on a
    /// free port with the library loaded). No database is set up yet: see
    /// [`create_database`](Self::create_database).
    ///
    /// # Errors
    ///
    /// Citus or the server binaries missing ([`io::ErrorKind::NotFound`]), or
    /// any node's [`TempPostgres::start_with`] error.
    pub fn start(workers: usize) -> io::Result<Self> {
        if let Some(why) = Self::missing() {
            return Err(io::Error::new(io::ErrorKind::NotFound, why));
        }
        let coordinator = TempPostgres::start_with(NODE_SETTINGS)?;
        let workers = (0..workers).map(|_| TempPostgres::start_with(NODE_SETTINGS)).collect::<io::Result<_>>()?;
        Ok(Self { coordinator, workers })
    }

    /// Creates database `name` on every node with the extension in it, and
    /// registers the coordinator and every worker in the coordinator's
    /// metadata for it; `shard_count` is the database's default number of
    /// shards for a new distributed table (`citus.shard_count`, 32 when not
    /// set; fewer makes a test's schema quicker to create, shards still
    /// placed on every worker when at least one each).
    ///
    /// # Errors
    ///
    /// Any statement's failure (`psql`'s output in the message).
    pub fn create_database(&self, name: &str, shard_count: Option<u32>) -> io::Result<()> {
        // One at a time: registering a node copies the roles to it
        // (`worker_create_or_alter_role`), and roles are shared by every
        // database of a node, so two databases set up at once can fail each
        // other with "tuple concurrently updated".
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        for node in std::iter::once(&self.coordinator).chain(&self.workers) {
            psql(node, "postgres", &format!("CREATE DATABASE {name}"))?;
            psql(node, name, "CREATE EXTENSION IF NOT EXISTS citus")?;
        }
        let mut setup = format!("SELECT citus_set_coordinator_host('127.0.0.1', {});", self.coordinator.port());
        for worker in &self.workers {
            setup.push_str(&format!("SELECT citus_add_node('127.0.0.1', {});", worker.port()));
        }
        if let Some(count) = shard_count {
            setup.push_str(&format!("ALTER DATABASE {name} SET citus.shard_count = {count};"));
        }
        psql(&self.coordinator, name, &setup)
    }

    /// A libpq-style URL for database `dbname` on the coordinator, as user
    /// `postgres`.
    pub fn url(&self, dbname: &str) -> String {
        self.coordinator.url(dbname)
    }
}

/// Runs `sql` on `node`'s database `db` with `psql`, stopping at the first
/// error.
fn psql(node: &TempPostgres, db: &str, sql: &str) -> io::Result<()> {
    let port = node.port().to_string();
    check(
        node.command("psql")
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-d", db])
            .args(["-c", sql])
            .output(),
        "psql",
    )
}
