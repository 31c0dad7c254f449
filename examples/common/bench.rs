//! What the load benchmarks (`inbox_load`, `outbox_load`) share: the pool,
//! the load average, a loopback server, and running pgbench.

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::Router;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::oneshot;
use tokio_postgres::NoTls;

pub(crate) fn pool(config: &tokio_postgres::Config, size: usize) -> Pool {
    let manager =
        Manager::from_config(config.clone(), NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    Pool::builder(manager).max_size(size).build().expect("pool config")
}

/// The 1-minute load average (`/proc/loadavg`).
pub(crate) fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// `before→now` of the load average.
pub(crate) fn load_span(before: f64) -> String {
    format!("{before:.2}→{:.2}", load1())
}

/// Serves `app` on a free loopback port until the sender fires.
pub(crate) async fn serve(app: Router) -> (SocketAddr, oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("address");
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
            .expect("serve")
    });
    (addr, stop)
}

/// `arg`, else the newest `/usr/lib/postgresql/*/bin/pgbench`.
pub(crate) fn pgbench_bin(arg: Option<PathBuf>) -> Option<PathBuf> {
    arg.or_else(|| {
        let mut bins: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .flatten()
            .map(|e| e.path().join("bin/pgbench"))
            .filter(|p| p.is_file())
            .collect();
        bins.sort();
        bins.pop()
    })
}

/// A libpq key=value string for pgbench.
pub(crate) fn conninfo(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "host={host} port={port} user={} dbname={}",
        config.get_user().unwrap_or("postgres"),
        config.get_dbname().unwrap_or("postgres")
    )
}

/// The number after `prefix` on a line of pgbench's report.
pub(crate) fn field(out: &str, prefix: &str) -> f64 {
    out.lines()
        .find_map(|l| l.trim().strip_prefix(prefix))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}
