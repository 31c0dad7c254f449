//! A throwaway HAProxy in front of a [`Patroni`] cluster, routing to
//! whichever node Patroni's REST API names the primary: the path an sqlx
//! user takes behind a failover, since sqlx has no multi-host URLs.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::daemon::Daemon;
use crate::{free_port, Patroni, NODES};

/// An HAProxy (<https://docs.haproxy.org/2.6/configuration.html>) on a free
/// loopback port, in TCP mode, whose one backend is every node of a
/// [`Patroni`] cluster, each health-checked by `GET /primary` on the node's
/// REST API (200 on the leader only: Patroni docs, "REST API", health check
/// endpoints). It is the configuration Patroni ships as `haproxy.cfg`
/// (`option httpchk`, `http-check expect status 200`,
/// `on-marked-down shutdown-sessions`), with checks every 500 ms and a node
/// marked down after 2 failed checks, so that connections reach the new
/// primary about a second after Patroni promotes it, and sessions on a
/// demoted node are closed.
///
/// Stopped (SIGTERM) and its temporary directory deleted on drop; a
/// guardian shell process does the same when this process exits.
///
/// Binary: `$HAPROXY`, else `haproxy` on `PATH`, else `/usr/sbin/haproxy`
/// (Debian's package `haproxy`).
pub struct HaProxy {
    daemon: Daemon,
    port: u16,
}

impl HaProxy {
    /// The binary [`start`](Self::start) runs, if one is installed: when
    /// `$HAPROXY` is set, that file or none.
    pub fn binary() -> Option<PathBuf> {
        if let Some(path) = std::env::var_os("HAPROXY") {
            return Some(PathBuf::from(path)).filter(|p| p.is_file());
        }
        std::env::var_os("PATH")
            .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("haproxy")).find(|p| p.is_file()))
            .or_else(|| Some(PathBuf::from("/usr/sbin/haproxy")).filter(|p| p.is_file()))
    }

    /// Starts an HAProxy in front of `cluster` and waits until it listens
    /// (at most 10 seconds; up to five free ports tried) and its checks have
    /// settled: HAProxy counts a server up until its first checks fail, so
    /// it is ready once 8 connections in a row reach a primary (at most 10
    /// seconds more).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`] when no binary is found (see
    /// [`binary`](Self::binary)); otherwise the error of the temporary
    /// directory, of spawning, or HAProxy's output when it exited or did not
    /// listen in time.
    pub fn start(cluster: &Patroni) -> io::Result<Self> {
        let bin = Self::binary().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "haproxy not found: install it (Debian: apt-get install haproxy) or set HAPROXY",
            )
        })?;
        let root = tempfile::Builder::new().prefix("webhook-idempotency-haproxy-").tempdir()?.keep();
        let servers: String = NODES
            .iter()
            .map(|n| format!("  server {n} 127.0.0.1:{} check port {}\n", cluster.pg_port(n), cluster.api_port(n)))
            .collect();
        let mut last = None;
        for _ in 0..5 {
            let port = free_port()?;
            match Self::spawn(&bin, &root, port, &servers) {
                Ok(started) => return started.settled().map(|()| started),
                Err(e) => last = Some(e),
            }
        }
        let _ = std::fs::remove_dir_all(&root);
        Err(last.expect("tried at least once"))
    }

    /// Waits until 8 connections in a row through this HAProxy reach a
    /// primary (`pg_is_in_recovery()` false, read with `psql`).
    fn settled(&self) -> io::Result<()> {
        let psql = crate::find_bin()?.join("psql");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut in_a_row = 0;
        while in_a_row < 8 {
            let out = Command::new(&psql)
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-d", "postgres"])
                .args(["-Atc", "SELECT pg_is_in_recovery()"])
                .env("PGCONNECT_TIMEOUT", "2")
                .output()?;
            let primary = out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "f";
            in_a_row = if primary { in_a_row + 1 } else { 0 };
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "haproxy's checks did not settle on a primary within 10 s: {}",
                        Self::log(self.daemon.root())
                    ),
                ));
            }
        }
        Ok(())
    }

    fn spawn(bin: &Path, root: &Path, port: u16, servers: &str) -> io::Result<Self> {
        let config = root.join("haproxy.cfg");
        let log = root.join("haproxy.log");
        std::fs::write(
            &config,
            format!(
                "global\n  maxconn 1000\n\
                 defaults\n  mode tcp\n  timeout connect 2s\n  timeout client 30m\n  timeout server 30m\n  \
                 timeout check 1s\n\
                 listen primary\n  bind 127.0.0.1:{port}\n  option httpchk\n  \
                 http-check send meth GET uri /primary\n  http-check expect status 200\n  \
                 default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions\n{servers}"
            ),
        )?;
        let out = std::fs::File::create(&log)?;
        let child = Command::new(bin)
            .arg("-db") // foreground, no daemon
            .arg("-f")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        Daemon::listening(child, "haproxy", port, root, || Self::log(root)).map(|daemon| Self { daemon, port })
    }

    fn log(root: &Path) -> String {
        std::fs::read_to_string(root.join("haproxy.log")).unwrap_or_default()
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A libpq-style URL for database `dbname` as user `postgres`, through
    /// this HAProxy (to the primary of the moment).
    pub fn url(&self, dbname: &str) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/{dbname}?connect_timeout=2", self.port)
    }
}
