//! A throwaway two-node PostgreSQL cluster managed by Patroni, with a
//! one-member etcd as its distributed configuration store, on loopback.

use std::io::{self, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::{find_bin, free_port};

/// The node names, in the order of [`Patroni::multi_host_url`]'s hosts.
pub const NODES: [&str; 2] = ["n0", "n1"];

/// Patroni's dynamic settings for a [`Patroni`] cluster (Patroni docs,
/// "Dynamic Configuration Settings"). `ttl` 8 s, `loop_wait` 1 s and
/// `retry_timeout` 3 s always: a dead leader's lock expires within 8 s.
#[derive(Clone, Debug)]
pub struct PatroniOptions {
    /// `synchronous_mode`: the primary's `synchronous_standby_names` names
    /// the standby, and only a synchronous standby may be promoted.
    pub synchronous_mode: bool,
    /// `synchronous_mode_strict`: with no synchronous standby left, the
    /// primary keeps refusing to confirm commits instead of going
    /// asynchronous.
    pub synchronous_mode_strict: bool,
    /// `maximum_lag_on_failover` in bytes: a standby further behind the last
    /// position the leader published is not promoted.
    pub maximum_lag_on_failover: u64,
}

impl Default for PatroniOptions {
    fn default() -> Self {
        Self { synchronous_mode: false, synchronous_mode_strict: false, maximum_lag_on_failover: 1 << 20 }
    }
}

/// A member as Patroni's `GET /cluster` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// `n0` or `n1`.
    pub name: String,
    /// `leader`, `replica` or `sync_standby`.
    pub role: String,
    /// `running`, `starting`, `stopped`, ...
    pub state: String,
}

struct Node {
    name: &'static str,
    pg_port: u16,
    api_port: u16,
    dir: PathBuf,
    patroni: Mutex<Option<Child>>,
}

/// A Patroni cluster of two PostgreSQL nodes (`n0` bootstrapped first, so
/// the first leader; `n1` its streaming standby) and an etcd, each process
/// on its own free loopback ports, data under one temporary directory owned
/// by the `postgres` user (every process runs as that user when this
/// process is root). On drop every process is killed (SIGKILL) and the
/// directory removed; a guardian shell process does the same when this
/// process exits for any reason, as for [`TempPostgres`](crate::TempPostgres).
///
/// PostgreSQL runs with `fsync = off` (a killed process loses nothing the
/// kernel holds; the tests kill processes, not the machine), `wal_level =
/// replica` and 200 connections. Authentication is `trust` on loopback for
/// user `postgres`, replication included.
///
/// Binaries: `$PATRONI` (else `patroni` on `PATH`, else `/usr/bin/patroni`),
/// `$ETCD` (else `etcd` on `PATH`, else `/usr/bin/etcd`), PostgreSQL's as for
/// [`TempPostgres`](crate::TempPostgres). Debian packages: `patroni`,
/// `etcd-server`.
pub struct Patroni {
    root: PathBuf,
    nodes: Vec<Node>,
    etcd: Mutex<Option<Child>>,
    owner: Option<(u32, u32)>,
    guardian: Child,
}

fn binary(env: &str, name: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env) {
        return Some(PathBuf::from(path)).filter(|p| p.is_file());
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
        .or_else(|| Some(PathBuf::from("/usr/bin").join(name)).filter(|p| p.is_file()))
}

/// `(status, body)` of one HTTP/1.0 request to `127.0.0.1:port`.
fn http(port: u16, method: &str, path: &str, body: &str, timeout: Duration) -> io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1))?;
    stream.set_read_timeout(Some(timeout))?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("not an HTTP answer: {answer:?}")))?;
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((status, body))
}

/// The children of `pid` (from `/proc/*/stat`).
fn children(pid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).ok().is_some_and(|stat| {
                // pid (comm) state ppid ...: comm may hold spaces and parentheses.
                stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

impl Patroni {
    /// Why the cluster cannot run here (a binary missing), or `None`.
    pub fn missing() -> Option<String> {
        let mut missing = Vec::new();
        if binary("PATRONI", "patroni").is_none() {
            missing.push("patroni (Debian: apt-get install patroni; or set PATRONI)");
        }
        if binary("ETCD", "etcd").is_none() {
            missing.push("etcd (Debian: apt-get install etcd-server; or set ETCD)");
        }
        if find_bin().is_err() {
            missing.push("PostgreSQL server binaries (Debian: apt-get install postgresql; or set PG_BIN)");
        }
        (!missing.is_empty()).then(|| format!("not installed: {}", missing.join(", ")))
    }

    /// Starts etcd, then `n0` (it bootstraps the cluster and becomes
    /// leader), then `n1` (a `pg_basebackup` of `n0`), and waits until `n1`
    /// streams from `n0` (and, in synchronous mode, is its synchronous
    /// standby): at most 120 seconds.
    ///
    /// # Errors
    ///
    /// A binary missing ([`io::ErrorKind::NotFound`]), the temporary
    /// directory, spawning, or a process that did not get ready in time
    /// (with the logs in the message).
    pub fn start(options: &PatroniOptions) -> io::Result<Self> {
        if let Some(why) = Self::missing() {
            return Err(io::Error::new(io::ErrorKind::NotFound, why));
        }
        let root = tempfile::Builder::new().prefix("webhook-idempotency-patroni-").tempdir()?.keep();
        let owner = if nix::unistd::geteuid().is_root() {
            let user = nix::unistd::User::from_name("postgres")
                .map_err(io::Error::other)?
                .ok_or_else(|| io::Error::other("running as root needs a `postgres` user to run the cluster"))?;
            Some((user.uid.as_raw(), user.gid.as_raw()))
        } else {
            None
        };
        // The guardian: when this process exits, its stdin reaches EOF; it
        // kills what the pid file lists and every node's postmaster.
        let guardian = Command::new("sh")
            .arg("-c")
            .arg(
                r#"read _ignored; kill -9 $(cat "$1/pids" 2>/dev/null) 2>/dev/null;
                   for p in "$1"/n*/data/postmaster.pid; do [ -f "$p" ] && kill -9 "$(head -1 "$p")" 2>/dev/null; done;
                   sleep 1; rm -rf "$1""#,
            )
            .arg("guardian")
            .arg(&root)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let nodes = NODES
            .iter()
            .map(|name| {
                Ok(Node {
                    name,
                    pg_port: free_port()?,
                    api_port: free_port()?,
                    dir: root.join(name),
                    patroni: Mutex::new(None),
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        let cluster = Self { root, nodes, etcd: Mutex::new(None), owner, guardian };
        cluster.chown(&cluster.root)?;
        let (client, peer) = (free_port()?, free_port()?);
        cluster.start_etcd(client, peer)?;
        for node in &cluster.nodes {
            std::fs::create_dir_all(&node.dir)?;
            cluster.chown(&node.dir)?;
            let config = node.dir.join("patroni.yml");
            std::fs::write(&config, cluster.config(node, client, options))?;
            cluster.chown(&config)?;
        }
        cluster.start_node("n0")?;
        cluster.wait_until(Duration::from_secs(60), "n0 leads", |m| m.iter().any(|m| m.is_running_leader("n0")))?;
        cluster.start_node("n1")?;
        cluster.wait_for_standby("n1", options.synchronous_mode, Duration::from_secs(90))?;
        Ok(cluster)
    }

    fn chown(&self, path: &Path) -> io::Result<()> {
        match self.owner {
            Some((uid, gid)) => std::os::unix::fs::chown(path, Some(uid), Some(gid)),
            None => Ok(()),
        }
    }

    fn command(&self, program: &Path) -> Command {
        use std::os::unix::process::CommandExt as _;
        let mut c = Command::new(program);
        if let Some((uid, gid)) = self.owner {
            c.uid(uid).gid(gid);
        }
        c.env("HOME", &self.root).current_dir(&self.root).stdin(Stdio::null());
        c
    }

    fn log_file(&self, name: &str) -> io::Result<std::fs::File> {
        let path = self.root.join(format!("{name}.log"));
        let file = std::fs::File::create(&path)?;
        self.chown(&path)?;
        Ok(file)
    }

    fn record_pid(&self, pid: u32) -> io::Result<()> {
        let mut pids = std::fs::OpenOptions::new().create(true).append(true).open(self.root.join("pids"))?;
        writeln!(pids, "{pid}")
    }

    fn start_etcd(&self, client: u16, peer: u16) -> io::Result<()> {
        let bin = binary("ETCD", "etcd").expect("checked by missing()");
        let log = self.log_file("etcd")?;
        let data = self.root.join("etcd");
        let child = self
            .command(&bin)
            .args(["--name", "e0", "--data-dir"])
            .arg(&data)
            .arg(format!("--listen-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--advertise-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!("--initial-cluster=e0=http://127.0.0.1:{peer}"))
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.record_pid(child.id())?;
        *self.etcd.lock().unwrap() = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // Polling etcd's health endpoint: it signals readiness no other way.
            if let Ok((200, body)) = http(client, "GET", "/health", "", Duration::from_secs(2)) {
                if body.contains("true") {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!("etcd not healthy within 30 s: {}", self.log("etcd"))));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn config(&self, node: &Node, etcd: u16, o: &PatroniOptions) -> String {
        // The directory of the real binaries: Patroni runs pg_controldata,
        // pg_basebackup and pg_rewind from it too, which a directory of
        // symbolic links to initdb and pg_ctl may lack.
        let bin = find_bin().expect("checked by missing()");
        let bin = bin.join("initdb").canonicalize().ok().and_then(|p| p.parent().map(Path::to_path_buf)).unwrap_or(bin);
        format!(
            "scope: webhook-idempotency-ha
name: {name}
log: {{level: INFO}}
restapi: {{listen: '127.0.0.1:{api}', connect_address: '127.0.0.1:{api}'}}
etcd3: {{hosts: '127.0.0.1:{etcd}'}}
bootstrap:
  dcs:
    ttl: 8
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: {lag}
    synchronous_mode: {sync}
    synchronous_mode_strict: {strict}
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: 'on'
        wal_log_hints: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
        max_connections: 200
        fsync: 'off'
  initdb: [{{encoding: UTF8}}, {{auth: trust}}, no-sync]
postgresql:
  listen: '127.0.0.1:{pg}'
  connect_address: '127.0.0.1:{pg}'
  data_dir: '{dir}/data'
  bin_dir: '{bin}'
  pgpass: '{dir}/pgpass'
  basebackup: [{{checkpoint: fast}}]
  authentication:
    superuser: {{username: postgres}}
    replication: {{username: postgres}}
    rewind: {{username: postgres}}
  parameters:
    unix_socket_directories: '{dir}'
    shared_buffers: 32MB
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
",
            name = node.name,
            api = node.api_port,
            pg = node.pg_port,
            dir = node.dir.display(),
            bin = bin.display(),
            lag = o.maximum_lag_on_failover,
            sync = o.synchronous_mode,
            strict = o.synchronous_mode_strict,
        )
    }

    fn node(&self, name: &str) -> &Node {
        self.nodes.iter().find(|n| n.name == name).unwrap_or_else(|| panic!("no node {name}"))
    }

    /// Starts (again) node `name`'s Patroni, which starts its PostgreSQL:
    /// as the bootstrapping leader, a new standby, or the standby of the
    /// current leader (rewinding a former primary first).
    ///
    /// # Errors
    ///
    /// Spawning failed.
    pub fn start_node(&self, name: &str) -> io::Result<()> {
        let node = self.node(name);
        let bin = binary("PATRONI", "patroni").expect("checked by missing()");
        let log = self.log_file(&format!("patroni-{name}"))?;
        let child =
            self.command(&bin).arg(node.dir.join("patroni.yml")).stdout(log.try_clone()?).stderr(log).spawn()?;
        self.record_pid(child.id())?;
        *node.patroni.lock().unwrap() = Some(child);
        Ok(())
    }

    fn log(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.root.join(format!("{name}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// The tail of every process's log, for a failure message.
    pub fn logs(&self) -> String {
        ["etcd", "patroni-n0", "patroni-n1"].map(|n| format!("--- {n}:\n{}", self.log(n))).join("\n")
    }

    /// Node `name`'s PostgreSQL port on 127.0.0.1.
    pub fn pg_port(&self, name: &str) -> u16 {
        self.node(name).pg_port
    }

    /// Node `name`'s Patroni REST API port on 127.0.0.1.
    pub fn api_port(&self, name: &str) -> u16 {
        self.node(name).api_port
    }

    /// A libpq-style connection string naming both nodes with
    /// `target_session_attrs=read-write`: a client connects to whichever
    /// node is the primary.
    pub fn multi_host_url(&self, dbname: &str) -> String {
        let ports: Vec<String> = self.nodes.iter().map(|n| n.pg_port.to_string()).collect();
        format!(
            "host={} port={} user=postgres dbname={dbname} target_session_attrs=read-write connect_timeout=2",
            vec!["127.0.0.1"; self.nodes.len()].join(","),
            ports.join(",")
        )
    }

    /// A URL for node `name` alone (a standby's view, for instance).
    pub fn node_url(&self, name: &str, dbname: &str) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/{dbname}", self.pg_port(name))
    }

    /// The members as `GET /cluster` reports them, asked of each node's
    /// REST API in turn until one answers.
    ///
    /// # Errors
    ///
    /// No node's REST API answered.
    pub fn members(&self) -> io::Result<Vec<Member>> {
        let mut last = io::Error::other("no node");
        for node in &self.nodes {
            match http(node.api_port, "GET", "/cluster", "", Duration::from_secs(3)) {
                Ok((200, body)) => return parse_members(&body),
                Ok((status, body)) => last = io::Error::other(format!("GET /cluster: {status} {body}")),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The running leader's name, if there is one now.
    pub fn leader(&self) -> Option<String> {
        self.members().ok()?.into_iter().find(|m| m.role == "leader" && m.state == "running").map(|m| m.name)
    }

    /// Polls [`members`](Self::members) (every 100 ms) until `ready` holds.
    ///
    /// # Errors
    ///
    /// `limit` passed (the last members and the logs in the message).
    pub fn wait_until(
        &self,
        limit: Duration,
        what: &str,
        ready: impl Fn(&[Member]) -> bool,
    ) -> io::Result<Vec<Member>> {
        let deadline = Instant::now() + limit;
        loop {
            let members = self.members();
            if let Ok(members) = &members {
                if ready(members) {
                    return Ok(members.clone());
                }
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{what}: not within {limit:?}; members {members:?}\n{}", self.logs()),
                ));
            }
            // Polling Patroni's view: the cluster's state has no push channel here.
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until a running leader other than `not` is elected; its name.
    ///
    /// # Errors
    ///
    /// None within `limit`.
    pub fn wait_for_new_leader(&self, not: &str, limit: Duration) -> io::Result<String> {
        let members = self.wait_until(limit, &format!("a leader other than {not}"), |m| {
            m.iter().any(|m| m.name != not && m.role == "leader" && m.state == "running")
        })?;
        Ok(members.into_iter().find(|m| m.role == "leader").map(|m| m.name).expect("checked"))
    }

    /// Waits until `name` runs as a standby of the leader, streaming from
    /// it (`pg_stat_replication` on the leader, through its REST API's
    /// `GET /patroni`), and, with `synchronous`, is its synchronous standby.
    ///
    /// # Errors
    ///
    /// Not so within `limit`.
    pub fn wait_for_standby(&self, name: &str, synchronous: bool, limit: Duration) -> io::Result<()> {
        let role = if synchronous { "sync_standby" } else { "replica" };
        let what = format!("{name} a streaming {role}");
        let deadline = Instant::now() + limit;
        let members = self
            .wait_until(limit, &what, |m| m.iter().any(|m| m.name == name && m.role == role && m.state == "running"))?;
        let leader = members.iter().find(|m| m.role == "leader").map(|m| self.node(&m.name).api_port);
        loop {
            let streaming = leader
                .and_then(|port| http(port, "GET", "/patroni", "", Duration::from_secs(3)).ok())
                .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(&body).ok())
                .is_some_and(|v| {
                    v["replication"]
                        .as_array()
                        .is_some_and(|r| r.iter().any(|r| r["application_name"] == name && r["state"] == "streaming"))
                });
            if streaming {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, format!("{what}: not streaming\n{}", self.logs())));
            }
            std::thread::sleep(Duration::from_millis(100)); // polling pg_stat_replication through Patroni
        }
    }

    /// A planned switchover (`POST /switchover` on the leader's REST API,
    /// which answers once it is done): the leader stops, the standby is
    /// promoted. The new leader's name.
    ///
    /// # Errors
    ///
    /// No leader, or Patroni refused or failed the switchover.
    pub fn switchover(&self) -> io::Result<String> {
        let leader = self.leader().ok_or_else(|| io::Error::other("no leader to switch over from"))?;
        let (status, body) = http(
            self.node(&leader).api_port,
            "POST",
            "/switchover",
            &format!("{{\"leader\": \"{leader}\"}}"),
            Duration::from_secs(60),
        )?;
        if status != 200 {
            return Err(io::Error::other(format!("POST /switchover: {status} {body}\n{}", self.logs())));
        }
        self.wait_for_new_leader(&leader, Duration::from_secs(60))
    }

    /// The pid of node `name`'s postmaster, while it runs.
    pub fn postmaster_pid(&self, name: &str) -> Option<i32> {
        let pid_file = std::fs::read_to_string(self.node(name).dir.join("data/postmaster.pid")).ok()?;
        let pid: i32 = pid_file.lines().next()?.trim().parse().ok()?;
        cmdline(pid).contains("postgres").then_some(pid)
    }

    /// The pids of node `name`'s PostgreSQL processes whose title contains
    /// `title` (`walsender`, `walreceiver`, ...).
    pub fn processes(&self, name: &str, title: &str) -> Vec<i32> {
        self.postmaster_pid(name)
            .map(|pm| children(pm).into_iter().filter(|c| cmdline(*c).contains(title)).collect())
            .unwrap_or_default()
    }

    /// Sends `signal` to `pid` (one of [`processes`](Self::processes)).
    ///
    /// # Errors
    ///
    /// `kill(2)` failed.
    pub fn signal(pid: i32, signal: Signal) -> io::Result<()> {
        kill(Pid::from_raw(pid), signal).map_err(io::Error::other)
    }

    /// Kills node `name` as a power cut would: its PostgreSQL processes are
    /// all frozen (SIGSTOP, the postmaster first so that it forks no more)
    /// before any of them is killed, then SIGKILL goes to its Patroni (so it
    /// neither restarts PostgreSQL nor releases the leader lock, which
    /// expires after `ttl`), its postmaster and every child of it. Killing the
    /// postmaster while its children still run would let them see it die: a
    /// backend waiting for the synchronous standby then stops waiting and its
    /// commit becomes visible to the backends still serving (PostgreSQL's
    /// `SyncRepWaitForLSN`), which no crash of the whole node can do.
    pub fn kill_node(&self, name: &str) {
        let mut frozen = Vec::new();
        // The postmaster first, so that it forks no child after the list is read.
        let freeze = |pm: i32, frozen: &mut Vec<i32>| {
            let _ = kill(Pid::from_raw(pm), Signal::SIGSTOP);
            frozen.push(pm);
            for kid in children(pm) {
                let _ = kill(Pid::from_raw(kid), Signal::SIGSTOP);
                frozen.push(kid);
            }
        };
        if let Some(pm) = self.postmaster_pid(name) {
            freeze(pm, &mut frozen);
        }
        let node = self.node(name);
        if let Some(mut child) = node.patroni.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // A postmaster Patroni started meanwhile (during a restart or a
        // rejoin, when none ran above) is killed the same way.
        if let Some(pm) = self.postmaster_pid(name).filter(|pm| !frozen.contains(pm)) {
            freeze(pm, &mut frozen);
        }
        for pid in frozen {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

impl Member {
    fn is_running_leader(&self, name: &str) -> bool {
        self.name == name && self.role == "leader" && self.state == "running"
    }
}

fn parse_members(body: &str) -> io::Result<Vec<Member>> {
    let value: serde_json::Value = serde_json::from_str(body).map_err(io::Error::other)?;
    let members = value["members"].as_array().ok_or_else(|| io::Error::other(format!("no members: {body}")))?;
    Ok(members
        .iter()
        .map(|m| Member {
            name: m["name"].as_str().unwrap_or_default().to_owned(),
            role: m["role"].as_str().unwrap_or_default().to_owned(),
            state: m["state"].as_str().unwrap_or_default().to_owned(),
        })
        .collect())
}

impl Drop for Patroni {
    fn drop(&mut self) {
        for node in &self.nodes {
            self.kill_node(node.name);
        }
        if let Some(mut etcd) = self.etcd.lock().unwrap().take() {
            let _ = etcd.kill();
            let _ = etcd.wait();
        }
        let _ = std::fs::remove_dir_all(&self.root);
        // Done: the guardian goes without a word (its pids are stale).
        let _ = self.guardian.kill();
        let _ = self.guardian.wait();
    }
}
