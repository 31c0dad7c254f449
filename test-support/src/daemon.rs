//! A helper process the harness starts in front of a server (PgBouncer,
//! HAProxy): waited for until it listens, stopped on drop, and stopped by a
//! guardian shell process when this process exits for any reason.

use std::io;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running helper process and its temporary directory. On drop: SIGTERM
/// (passed on by `runuser` when it runs through it), a wait, the directory
/// deleted, and the guardian let go.
pub(crate) struct Daemon {
    root: PathBuf,
    child: Child,
    guardian: Child,
}

impl Daemon {
    /// Waits until `child` (named `name` in errors) accepts TCP connections
    /// on 127.0.0.1:`port`, at most 10 seconds, then starts its guardian: a
    /// shell whose standard input reaches EOF when this process exits, and
    /// which then sends SIGTERM to `child` and deletes `root`. `log` reads
    /// the process's log for the error when it exits or does not listen in
    /// time; `child` is then killed.
    ///
    /// # Errors
    ///
    /// The process exited, did not listen within 10 seconds, or the
    /// guardian could not be spawned.
    pub(crate) fn listening(
        mut child: Child,
        name: &str,
        port: u16,
        root: &Path,
        log: impl Fn() -> String,
    ) -> io::Result<Self> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let failure = loop {
            if let Some(status) = child.try_wait()? {
                break io::Error::other(format!("{name} exited ({status}): {}", log()));
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                let guardian = Command::new("sh")
                    .arg("-c")
                    .arg(r#"read _ignored; kill -TERM "$1" 2>/dev/null; sleep 1; rm -rf "$2""#)
                    .arg("guardian")
                    .arg(child.id().to_string())
                    .arg(root)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn();
                match guardian {
                    Ok(guardian) => return Ok(Self { root: root.to_path_buf(), child, guardian }),
                    Err(e) => break e,
                }
            }
            if Instant::now() > deadline {
                break io::Error::new(io::ErrorKind::TimedOut, format!("{name} did not listen within 10 s: {}", log()));
            }
            std::thread::sleep(Duration::from_millis(20)); // polling the port: the process signals nothing else
        };
        let _ = child.kill();
        let _ = child.wait();
        Err(failure)
    }

    /// The temporary directory.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
        // Done: the guardian goes without a word (its process id is stale).
        let _ = self.guardian.kill();
        let _ = self.guardian.wait();
    }
}
