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
