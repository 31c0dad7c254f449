//! Code the demo examples share (a directory, so Cargo does not build it as an
//! example of its own).

use std::sync::{Arc, Mutex};

/// Log output held in memory until the demo has printed its tables.
#[derive(Clone, Default)]
pub(crate) struct HeldLog(Arc<Mutex<Vec<u8>>>);

impl HeldLog {
    pub(crate) fn take(&self) -> String {
        String::from_utf8_lossy(&std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))).into_owned()
    }
}

impl std::io::Write for HeldLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for HeldLog {
    type Writer = HeldLog;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Ctrl-C or SIGTERM (what a deploy or `docker stop` sends): either starts the
/// graceful shutdown.
pub(crate) async fn terminated() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// The production settings of the examples' HTTP server, which `axum::serve`
/// does not set (it runs hyper without a timer, so hyper's header-read timeout
/// is off and a client that trickles header bytes holds its connection for
/// ever). Set the same in your own server (README, "Serving in production").
pub(crate) mod server {
    use std::future::Future;
    use std::sync::Arc;
    use std::time::Duration;

    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto;
    use hyper_util::server::graceful::GracefulShutdown;
    use hyper_util::service::TowerToHyperService;
    use tokio::net::TcpListener;
    use tokio::sync::Semaphore;

    /// The whole request head must arrive within this time, and an idle
    /// keep-alive connection is closed after it: hyper starts the timer
    /// whenever it waits for a request head (HTTP/1).
    pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
    /// Connections served at once; the next waits in the kernel's backlog.
    pub(crate) const MAX_CONNECTIONS: usize = 1024;
    /// How long a graceful shutdown waits for requests in flight.
    pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
    /// HTTP/2 keep-alive ping interval and the time to wait for its answer.
    const H2_KEEP_ALIVE: Duration = Duration::from_secs(20);

    /// Serves `router` on `listener` with the settings above until `shutdown`
    /// completes, then stops accepting, lets requests in flight finish (up to
    /// [`SHUTDOWN_GRACE`]) and returns.
    pub(crate) async fn serve(
        listener: TcpListener,
        router: axum::Router,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder.http1().timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
        builder.http2().timer(TokioTimer::new()).keep_alive_interval(H2_KEEP_ALIVE).keep_alive_timeout(H2_KEEP_ALIVE);
        let builder = Arc::new(builder);
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let graceful = GracefulShutdown::new();
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                () = &mut shutdown => break,
                permit = Arc::clone(&slots).acquire_owned() => permit.expect("never closed"),
            };
            let (stream, _peer) = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    // Out of file descriptors and the like: wait, then go on.
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let service = TowerToHyperService::new(router.clone());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).into_owned();
            let conn = graceful.watch(conn);
            tokio::spawn(async move {
                // A timed-out or reset connection is the client's business.
                let _ = conn.await;
                drop(permit);
            });
        }
        drop(listener);
        if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await.is_err() {
            tracing::warn!("requests still in flight after the shutdown grace period; closing them");
        }
        Ok(())
    }
}

/// The examples' database: `DATABASE_URL` when given, else a throwaway
/// PostgreSQL that lives as long as the returned guard (stopped and removed
/// when it drops). Returns a migrated pool of `max_size` connections on it,
/// its URL, and the guard.
pub(crate) async fn database(
    database_url: Option<&str>,
    max_size: usize,
) -> Result<
    (webhook_idempotency::postgres::deadpool_postgres::Pool, String, Option<webhook_test_support::TempPostgres>),
    Box<dyn std::error::Error + Send + Sync>,
> {
    use webhook_idempotency::postgres::deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
    let (url, throwaway) = match database_url {
        Some(url) => {
            println!("database: DATABASE_URL");
            (url.to_owned(), None)
        }
        None => {
            let pg = webhook_test_support::TempPostgres::start()?;
            let url = pg.url("postgres");
            println!("database: throwaway PostgreSQL (removed on exit); share it: DATABASE_URL={url}");
            (url, Some(pg))
        }
    };
    let config = url.parse()?;
    let manager = Manager::from_config(
        config,
        webhook_idempotency::postgres::tokio_postgres::NoTls,
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    let pool = Pool::builder(manager).max_size(max_size).build()?;
    webhook_idempotency::migrate(&pool.clone().into()).await?;
    Ok((pool, url, throwaway))
}
