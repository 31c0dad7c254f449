//! Peak memory of one unauthenticated request, from the process's own
//! statistics (`VmHWM` in `/proc/self/status`, reset through
//! `/proc/self/clear_refs`). One test in its own binary, so nothing else runs
//! in the process meanwhile: keep it out of the shared test binary
//! (`tests/it/`), whose other tests would count in this process's memory.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use deadpool_postgres::{Manager, Pool};
use http::{Request, StatusCode};
use http_body::Frame;
use tower::{Layer as _, ServiceExt as _};
use webhook_idempotency::{Provider, WebhookLayer};

const BODY: usize = 24 << 20;

/// `len` bytes of `a` in frames of `frame` bytes.
struct Chunked {
    left: usize,
    frame: Bytes,
}

impl http_body::Body for Chunked {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.frame.len().min(self.left);
        self.left -= n;
        Poll::Ready(Some(Ok(Frame::data(self.frame.slice(..n)))))
    }
}

impl From<Bytes> for Chunked {
    fn from(b: Bytes) -> Self {
        Self { left: b.len(), frame: b }
    }
}

fn status_kib(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Peak resident memory while `f` runs, above the resident memory before.
async fn peak_above_baseline<F: std::future::Future<Output = StatusCode>>(f: F) -> (StatusCode, usize) {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak RSS (Linux 4.0+)");
    let before = status_kib("VmRSS:");
    let status = f.await;
    let peak = status_kib("VmHWM:");
    (status, (peak.saturating_sub(before)) * 1024)
}

#[tokio::test(flavor = "current_thread")]
async fn an_unsigned_body_costs_about_its_size_whatever_its_framing() {
    // The request is refused on its signature before any database work.
    let pool =
        Pool::builder(Manager::new("postgres://nobody@127.0.0.1:1/none".parse().unwrap(), tokio_postgres::NoTls))
            .build()
            .unwrap();
    let layer = WebhookLayer::builder(pool, Provider::stripe()).scope("acct").secret("whsec_memory").build().unwrap();
    let handler = tower::service_fn(|_: Request<Chunked>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    });
    let svc = layer.layer(handler);
    let fake = format!(
        "t={},v1={}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs(),
        "0".repeat(64)
    );
    let cases = [
        ("one-byte frames", 1usize, false),
        ("4 KiB frames", 4096, false),
        ("declared length, 4 KiB frames", 4096, true),
    ];
    for (name, frame, declared) in cases {
        let mut req = Request::post("/webhooks/stripe").header("stripe-signature", &fake);
        if declared {
            req = req.header("content-length", BODY);
        }
        let req = req.body(Chunked { left: BODY, frame: Bytes::from(vec![b'a'; frame]) }).unwrap();
        let (status, peak) = peak_above_baseline(async { svc.clone().oneshot(req).await.unwrap().status() }).await;
        println!(
            "{name}: {BODY} bytes received, peak memory {peak} bytes above the baseline ({:.2}x)",
            peak as f64 / BODY as f64
        );
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{name}");
        // One growing buffer: at most its doubling slack over the bytes
        // received (the old frame-by-frame buffering cost 39x in one-byte frames).
        assert!(peak <= 2 * BODY + (4 << 20), "{name}: {peak} bytes for a {BODY}-byte body");
    }
}
