//! A throwaway PgBouncer in transaction mode.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::daemon::Daemon;
use crate::free_port;

/// A PgBouncer (<https://www.pgbouncer.org/config.html>) on a free loopback
/// port in front of a PostgreSQL server on `127.0.0.1`, in
/// `pool_mode = transaction`: each transaction of a client connection may run
/// on another server session, as behind Supavisor or RDS Proxy. Stopped
/// (SIGTERM) and its temporary directory deleted on drop; a guardian shell
/// process does the same when this process exits for any reason, as for
/// [`TempPostgres`](crate::TempPostgres).
///
/// Settings: every database name is forwarded to the server under the same
/// name (`* = host=127.0.0.1 port=...`), `auth_type = trust` for any user in
/// its `auth_file` (`postgres`), [`SERVER_POOL_SIZE`](Self::SERVER_POOL_SIZE)
/// server sessions per database and user, 200 client connections at most,
/// and the startup parameters `extra_float_digits` and `options` ignored.
/// Runs as the `postgres` user when this process is root.
///
/// Binary: `$PGBOUNCER`, else `pgbouncer` on `PATH`, else
/// `/usr/sbin/pgbouncer` (Debian's package `pgbouncer`).
pub struct PgBouncer {
    /// Held for its drop, which stops the process.
    _daemon: Daemon,
    port: u16,
}

impl PgBouncer {
    /// Server sessions per (database, user) pair (`default_pool_size`):
    /// small, so that a pool of more client connections than this shares
    /// them and transactions really move between server sessions.
    pub const SERVER_POOL_SIZE: usize = 2;

    /// The binary [`start`](Self::start) runs, if one is installed: when
    /// `$PGBOUNCER` is set, that file or none.
    pub fn binary() -> Option<PathBuf> {
        if let Some(path) = std::env::var_os("PGBOUNCER") {
            return Some(PathBuf::from(path)).filter(|p| p.is_file());
        }
        std::env::var_os("PATH")
            .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("pgbouncer")).find(|p| p.is_file()))
            .or_else(|| Some(PathBuf::from("/usr/sbin/pgbouncer")).filter(|p| p.is_file()))
    }

    /// Starts a PgBouncer in front of the server on `127.0.0.1:target_port`
    /// and waits until it accepts connections (at most 10 seconds; up to
    /// five free ports tried). It connects to the server lazily, on a
    /// client's first transaction.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`] when no binary is found (see
    /// [`binary`](Self::binary)); otherwise the error of the temporary
    /// directory, of spawning, or PgBouncer's own log when it exited or did
    /// not listen in time.
    pub fn start(target_port: u16) -> io::Result<Self> {
        let bin = Self::binary().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "pgbouncer not found: install it (Debian: apt-get install pgbouncer) or set PGBOUNCER",
            )
        })?;
        let as_postgres = nix::unistd::geteuid().is_root();
        let root = tempfile::Builder::new().prefix("webhook-idempotency-pgbouncer-").tempdir()?.keep();
        let mut last = None;
        for _ in 0..5 {
            let port = free_port()?;
            match Self::spawn(&bin, &root, as_postgres, target_port, port) {
                Ok(started) => return Ok(started),
                Err(e) => last = Some(e),
            }
        }
        let _ = std::fs::remove_dir_all(&root);
        Err(last.expect("tried at least once"))
    }

    fn spawn(bin: &Path, root: &Path, as_postgres: bool, target: u16, port: u16) -> io::Result<Self> {
        let config = root.join("pgbouncer.ini");
        let log = root.join("pgbouncer.log");
        std::fs::write(root.join("userlist.txt"), "\"postgres\" \"\"\n")?;
        std::fs::write(
            &config,
            format!(
                "[databases]\n\
                 * = host=127.0.0.1 port={target}\n\
                 [pgbouncer]\n\
                 listen_addr = 127.0.0.1\n\
                 listen_port = {port}\n\
                 unix_socket_dir =\n\
                 auth_type = trust\n\
                 auth_file = {users}\n\
                 pool_mode = transaction\n\
                 max_client_conn = 200\n\
                 default_pool_size = {pool}\n\
                 ignore_startup_parameters = extra_float_digits,options\n\
                 logfile = {log}\n",
                users = root.join("userlist.txt").display(),
                pool = Self::SERVER_POOL_SIZE,
                log = log.display(),
            ),
        )?;
        if as_postgres {
            let user = nix::unistd::User::from_name("postgres")
                .map_err(io::Error::other)?
                .ok_or_else(|| io::Error::other("running as root needs a `postgres` user to run pgbouncer"))?;
            for path in [root.to_path_buf(), config.clone(), root.join("userlist.txt")] {
                std::os::unix::fs::chown(&path, Some(user.uid.as_raw()), Some(user.gid.as_raw()))?;
            }
        }
        let mut command = if as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bin);
            c
        } else {
            Command::new(bin)
        };
        let child = command.arg(&config).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
        Daemon::listening(child, "pgbouncer", port, root, || Self::log(root))
            .map(|daemon| Self { _daemon: daemon, port })
    }

    fn log(root: &Path) -> String {
        std::fs::read_to_string(root.join("pgbouncer.log")).unwrap_or_default()
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A libpq-style URL for database `dbname` as user `postgres`, through
    /// this PgBouncer.
    pub fn url(&self, dbname: &str) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/{dbname}", self.port)
    }
}
