//! A throwaway PostgreSQL server for webhook-idempotency's tests and its
//! quickstart example. Internal (`publish = false`); nothing here is
//! webhook-specific.
//!
//! `initdb` into a fresh temporary directory, a server on a free loopback
//! port, run as the `postgres` user when this process is root (PostgreSQL
//! refuses to run as root), stopped and deleted on drop. A guardian shell
//! process also stops and deletes it when this process exits for any reason
//! (test binaries never drop their statics; a crash drops nothing), by
//! waiting for EOF on a pipe only this process holds.
//!
//! Binaries: `$PG_BIN`, else `initdb` on `PATH` (the directory it links
//! to, when it is a link), else the newest
//! `/usr/lib/postgresql/*/bin` (Debian's layout).
//!
//! [`TempPostgres::standby_of`] adds a streaming standby of such a server
//! (`pg_basebackup`), [`TempPostgres::synchronous_standby`] makes the server
//! wait for it at every commit. [`PgBouncer`] puts a throwaway PgBouncer in
//! transaction mode in front of such a server. [`Patroni`] runs a throwaway two-node cluster managed by
//! Patroni and etcd, for failover tests, and [`HaProxy`] routing to its
//! primary. [`Citus`] runs a throwaway Citus
//! cluster (a coordinator and workers) on loopback.
#![forbid(unsafe_code)]

mod citus;
mod daemon;
mod haproxy;
mod patroni;
mod pgbouncer;

pub use citus::Citus;
pub use haproxy::HaProxy;
pub use nix::sys::signal::Signal;
pub use patroni::{Member, Patroni, PatroniOptions, NODES};
pub use pgbouncer::PgBouncer;

use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// A running throwaway server. See the module docs.
pub struct TempPostgres {
    root: PathBuf,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    guardian: Child,
    /// `-c name=value` options every start of this server adds
    /// ([`start_with`](TempPostgres::start_with)).
    always: String,
}

pub(crate) fn find_bin() -> io::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(paths) = std::env::var_os("PATH") {
        if let Some(dir) = std::env::split_paths(&paths).find(|d| d.join("initdb").is_file()) {
            // The directory of the real binaries when `initdb` on PATH is a
            // link to them: the other programs (`pg_basebackup`) are there.
            let real = std::fs::canonicalize(dir.join("initdb")).ok();
            return Ok(real.as_deref().and_then(Path::parent).map_or(dir, Path::to_path_buf));
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").is_file())
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "PostgreSQL server binaries not found: install them (Debian: apt-get install postgresql) or set PG_BIN",
        )
    })
}

/// A loopback TCP port nothing listens on now, for a server a test starts.
///
/// Taken below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`,
/// 32768-60999 by default), where outgoing connections get their local
/// ports: a port found free by binding port 0 is an ephemeral one, which a
/// client socket of a concurrent test could take before the server binds it
/// (seen: Patroni's REST API failing with `Address already in use`). Ports
/// are handed out in turn from a process-wide counter, starting at an offset
/// from the process id, so one process never hands out a port twice and two
/// test processes start far apart. (A random pick, as `portpicker` makes,
/// can hand one process the same port twice.)
pub(crate) fn free_port() -> io::Result<u16> {
    const LOW: u16 = 10_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let high = ephemeral_low().unwrap_or(32_768).max(LOW + 1_000);
    let span = u32::from(high - LOW);
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = LOW + u16::try_from((start + n) % span).expect("below the span");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(io::Error::new(io::ErrorKind::AddrInUse, "no free loopback port below the ephemeral range"))
}

/// The first port of the kernel's ephemeral range, where Linux reports it.
fn ephemeral_low() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

pub(crate) fn check(status: io::Result<std::process::Output>, what: &str) -> io::Result<()> {
    let out = status.map_err(|e| {
        // A bare "No such file or directory" names nothing: say which program.
        if e.kind() == io::ErrorKind::NotFound {
            io::Error::new(
                e.kind(),
                format!(
                    "{what}: program not found ({e}); the PostgreSQL server binaries (initdb, pg_ctl) and, as root, \
                     runuser (util-linux, in /usr/sbin: is it on PATH?) are needed"
                ),
            )
        } else {
            e
        }
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

impl TempPostgres {
    /// Creates and starts a new server (`initdb`, then [`start_server`](Self::start_server)
    /// on a free port, up to five ports tried).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`] when the server binaries are not found; any
    /// other error of `initdb`, `pg_ctl start` (with their output in the
    /// message), the temporary directory, or, as root, a missing `postgres` user.
    pub fn start() -> io::Result<Self> {
        Self::start_with("")
    }

    /// [`start`](Self::start) with `always` (`-c name=value` options) on
    /// the server's command line at this start and every later one
    /// ([`start_server`](Self::start_server), [`start_server_with`](Self::start_server_with)):
    /// `"-c shared_preload_libraries=citus"` for a [`Citus`] node.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_with(always: &str) -> io::Result<Self> {
        let mut pg = Self::prepare()?;
        pg.always = always.to_owned();
        check(
            pg.command("initdb")
                .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "-D"])
                .arg(pg.data_dir())
                .output(),
            "initdb",
        )?;
        pg.start_on_a_free_port()
    }

    /// A streaming standby of `primary`: `pg_basebackup` of it (as user
    /// `postgres`, over TCP, with WAL streamed and a physical replication
    /// slot of its own, `-R` writing `primary_conninfo`, `primary_slot_name`
    /// and `standby.signal`), started on its own free port. The slot keeps
    /// the WAL the standby has not received on the primary, so it catches up
    /// after being stopped for a while (its primary restarted meanwhile
    /// too). Its `application_name` is `walreceiver`, which
    /// `synchronous_standby_names = '*'` on the primary matches
    /// ([`synchronous_standby`](Self::synchronous_standby)). PostgreSQL
    /// docs, "pg_basebackup" and "Log-Shipping Standby Servers".
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start), and `pg_basebackup`'s failure (its output
    /// in the message).
    pub fn standby_of(primary: &TempPostgres) -> io::Result<Self> {
        static SLOTS: AtomicU32 = AtomicU32::new(0);
        let pg = Self::prepare()?;
        let slot = format!("standby_{}_{}", std::process::id(), SLOTS.fetch_add(1, Ordering::Relaxed));
        let port = primary.port.to_string();
        check(
            pg.command("pg_basebackup")
                .args(["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-X", "stream", "-c", "fast"])
                .args(["-C", "-S", &slot, "-R", "--no-sync", "-D"])
                .arg(pg.data_dir())
                .output(),
            "pg_basebackup",
        )?;
        pg.start_on_a_free_port()
    }

    /// Makes every commit on this server wait for a standby's confirmation
    /// (`synchronous_standby_names = '*'` in its `postgresql.conf`, then
    /// `pg_ctl reload`): any connected standby is the synchronous one.
    /// PostgreSQL docs, "Synchronous Replication".
    ///
    /// # Errors
    ///
    /// Writing the file, or `pg_ctl reload`.
    pub fn synchronous_standby(&self) -> io::Result<()> {
        use std::io::Write as _;
        let mut conf = std::fs::OpenOptions::new().append(true).open(self.data_dir().join("postgresql.conf"))?;
        writeln!(conf, "synchronous_standby_names = '*'")?;
        check(self.command("pg_ctl").arg("-D").arg(self.data_dir()).arg("reload").output(), "pg_ctl reload")
    }

    /// The server's log so far (`pg_ctl -l`): its WARNINGs, errors and
    /// startup messages.
    ///
    /// # Errors
    ///
    /// Reading the file.
    pub fn log(&self) -> io::Result<String> {
        std::fs::read_to_string(self.root.join("server.log"))
    }

    /// A fresh temporary directory (owned by `postgres` when this process
    /// is root) and its guardian, no data directory yet.
    fn prepare() -> io::Result<Self> {
        let bin = find_bin()?;
        let as_postgres = nix::unistd::geteuid().is_root();
        let root = tempfile::Builder::new().prefix("webhook-idempotency-pg-").tempdir()?.keep();
        if as_postgres {
            let user = nix::unistd::User::from_name("postgres")
                .map_err(io::Error::other)?
                .ok_or_else(|| io::Error::other("running as root needs a `postgres` user to run the server"))?;
            std::os::unix::fs::chown(&root, Some(user.uid.as_raw()), Some(user.gid.as_raw()))?;
        }
        // The guardian: when this process exits, stdin reaches EOF. With
        // `WEBHOOK_TEST_LOG_DIR` set, it keeps the server's log there first
        // (`<directory name>.log`): what CI prints when a test fails.
        let guardian = Command::new("sh")
            .arg("-c")
            .arg(
                r#"read _ignored; $PGCTL -D "$1/data" stop -m immediate >/dev/null 2>&1;
                   [ -n "$WEBHOOK_TEST_LOG_DIR" ] && cp "$1/server.log" "$WEBHOOK_TEST_LOG_DIR/${1##*/}.log" 2>/dev/null;
                   rm -rf "$1""#,
            )
            .arg("guardian")
            .arg(&root)
            .env("PGCTL", Self::command_line(as_postgres, &bin.join("pg_ctl")))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Self { root, bin, port: 0, as_postgres, guardian, always: String::new() })
    }

    /// Starts the server on a free port, up to five ports tried.
    fn start_on_a_free_port(mut self) -> io::Result<Self> {
        let mut last = None;
        for _ in 0..5 {
            self.port = free_port()?;
            match self.start_server() {
                Ok(()) => return Ok(self),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("tried at least once"))
    }

    fn command_line(as_postgres: bool, program: &Path) -> String {
        if as_postgres {
            format!("runuser -u postgres -- {}", program.display())
        } else {
            program.display().to_string()
        }
    }

    /// A command running the server's program `program` (`psql`) as the
    /// user the server runs as.
    pub(crate) fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// Starts the server (again) on its port, waiting until it accepts
    /// connections (at most 60 seconds).
    ///
    /// # Errors
    ///
    /// `pg_ctl start` failed (its output is in the message), for example
    /// because the port was taken meanwhile.
    pub fn start_server(&self) -> io::Result<()> {
        self.start_server_with("-c fsync=off")
    }

    /// [`start_server`](Self::start_server) with `settings` (`-c name=value`
    /// options for the server's command line) in place of its `-c
    /// fsync=off`: `""` starts it durable (`fsync` at its default, on), as a
    /// benchmark wants it.
    ///
    /// # Errors
    ///
    /// As [`start_server`](Self::start_server).
    pub fn start_server_with(&self, settings: &str) -> io::Result<()> {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories={} {settings} \
             -c max_connections=400 -c shared_buffers=64MB {}",
            self.port,
            self.root.display(),
            self.always
        );
        check(
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.data_dir())
                .arg("-l")
                .arg(self.root.join("server.log"))
                .args(["-w", "-t", "60", "-o", &options, "start"])
                .output(),
            "pg_ctl start",
        )
    }

    /// Stops the server (fast shutdown: open transactions roll back,
    /// committed data stays) and waits until it is down.
    ///
    /// # Errors
    ///
    /// `pg_ctl stop` failed (its output is in the message).
    pub fn stop_server(&self) -> io::Result<()> {
        check(
            self.command("pg_ctl").arg("-D").arg(self.data_dir()).args(["-w", "-m", "fast", "stop"]).output(),
            "pg_ctl stop",
        )
    }

    /// Turns TLS on: writes `cert_pem` (the server's certificate, PEM) and
    /// `key_pem` (its private key, PEM, mode 0600) into the server's
    /// directory, owned by the user the server runs as, sets `ssl = on`,
    /// `ssl_cert_file` and `ssl_key_file` in its `postgresql.conf`, and
    /// restarts it ([`stop_server`](Self::stop_server), then
    /// [`start_server`](Self::start_server)), so TLS is on for every
    /// connection opened once this returns. Clients may still connect
    /// without TLS (`pg_hba.conf` stays `host ... trust`); `sslmode=require`
    /// on the client is what demands it. PostgreSQL docs, "Secure TCP/IP
    /// Connections with SSL".
    ///
    /// # Errors
    ///
    /// Writing the files, or the restart (for example a key that does not
    /// match the certificate: `pg_ctl start` fails with the server's log in
    /// the message).
    pub fn enable_tls(&self, cert_pem: &str, key_pem: &str) -> io::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        let (cert, key) = (self.root.join("server.crt"), self.root.join("server.key"));
        std::fs::write(&cert, cert_pem)?;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&key)?
            .write_all(key_pem.as_bytes())?;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))?;
        if self.as_postgres {
            let owner = std::fs::metadata(&self.root).map(|m| std::os::unix::fs::MetadataExt::uid(&m))?;
            let group = std::fs::metadata(&self.root).map(|m| std::os::unix::fs::MetadataExt::gid(&m))?;
            for path in [&cert, &key] {
                std::os::unix::fs::chown(path, Some(owner), Some(group))?;
            }
        }
        let mut conf = std::fs::OpenOptions::new().append(true).open(self.data_dir().join("postgresql.conf"))?;
        writeln!(conf, "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'", cert.display(), key.display())?;
        self.stop_server()?;
        self.start_server().map_err(|e| {
            let log = std::fs::read_to_string(self.root.join("server.log")).unwrap_or_default();
            io::Error::other(format!("{e}; server log: {log}"))
        })
    }

    /// Puts `line` first in the server's `pg_hba.conf` (the first matching
    /// line decides: `host all app 127.0.0.1/32 scram-sha-256` makes role
    /// `app` log in with its password while every other role keeps `trust`)
    /// and reloads the configuration, so it applies to connections opened
    /// once this returns. PostgreSQL docs, "The pg_hba.conf File".
    ///
    /// # Errors
    ///
    /// Reading or writing the file, or `pg_ctl reload`.
    pub fn prepend_hba(&self, line: &str) -> io::Result<()> {
        let path = self.data_dir().join("pg_hba.conf");
        let old = std::fs::read_to_string(&path)?;
        std::fs::write(&path, format!("{line}\n{old}"))?; // keeps the file's owner
        check(self.command("pg_ctl").arg("-D").arg(self.data_dir()).arg("reload").output(), "pg_ctl reload")
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A libpq-style URL for database `dbname` as user `postgres`.
    pub fn url(&self, dbname: &str) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/{dbname}", self.port)
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-w", "-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Some(dir) = std::env::var_os("WEBHOOK_TEST_LOG_DIR") {
            if let Some(name) = self.root.file_name() {
                let _ = std::fs::copy(self.root.join("server.log"), Path::new(&dir).join(name).with_extension("log"));
            }
        }
        let _ = std::fs::remove_dir_all(&self.root);
        // Closing stdin lets the guardian exit (it finds nothing left to do).
        drop(self.guardian.stdin.take());
        let _ = self.guardian.wait();
    }
}
