//! Peak memory of deliveries through the layer, from the process's own
//! statistics (`VmHWM` in `/proc/self/status`, reset through
//! `/proc/self/clear_refs`): one unauthenticated request, 64 concurrent
//! signed 1 MiB deliveries claimed in a real PostgreSQL, and 8 concurrent
//! trickled bodies through the `Idempotency-Key` layer. Its own binary, so
//! nothing else runs in the process meanwhile: keep it out of the shared test
//! binary (`tests/it/`), whose other tests would count in this process's
//! memory. The peak is the process's, so the tests here take [`MEASURING`]
//! and run one at a time. A PostgreSQL server is another process: its memory
//! is not counted.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use deadpool_postgres::{Manager, Pool};
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use http::{Request, StatusCode};
use http_body::Frame;
use tower::{Layer as _, ServiceExt as _};
use webhook_idempotency::idempotency_key::IdempotencyKeyLayer;
use webhook_idempotency::providers::stripe;
use webhook_idempotency::{Provider, Rejection, SigningSecret, StoreConfig, WebhookEvent, WebhookLayer, WebhookTx};

const BODY: usize = 24 << 20;

/// `left` bytes of `frame`'s byte in frames of `frame`'s length, as a client
/// trickling its body: it yields to the runtime every [`Chunked::YIELD_EVERY`]
/// frames, so that concurrent requests on one thread are read interleaved.
struct Chunked {
    left: usize,
    frame: Bytes,
    since_yield: usize,
}

impl Chunked {
    const YIELD_EVERY: usize = 4096;

    fn new(left: usize, frame: Bytes) -> Self {
        Self { left, frame, since_yield: 0 }
    }
}

impl http_body::Body for Chunked {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        if self.since_yield == Self::YIELD_EVERY {
            self.since_yield = 0;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.since_yield += 1;
        let n = self.frame.len().min(self.left);
        self.left -= n;
        Poll::Ready(Some(Ok(Frame::data(self.frame.slice(..n)))))
    }
}

impl From<Bytes> for Chunked {
    fn from(b: Bytes) -> Self {
        Self::new(b.len(), b)
    }
}

fn status_kib(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Peak resident memory while `f` runs, above the resident memory before.
async fn peak_above_baseline<T, F: std::future::Future<Output = T>>(f: F) -> (T, usize) {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak RSS (Linux 4.0+)");
    let before = status_kib("VmRSS:");
    let status = f.await;
    let peak = status_kib("VmHWM:");
    (status, (peak.saturating_sub(before)) * 1024)
}

/// Held for the whole of each test: the peak is process-wide, so one test's
/// allocations must not land in another's measurement.
static MEASURING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "current_thread")]
async fn an_unsigned_body_costs_about_its_size_whatever_its_framing() {
    let _measuring = MEASURING.lock().await;
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
        let req = req.body(Chunked::new(BODY, Bytes::from(vec![b'a'; frame]))).unwrap();
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

/// Issue 33 item 3: the `Idempotency-Key` layer buffers a body in the
/// webhook layer's one growing buffer. 8 concurrent bodies of 1 MiB trickled
/// in one-byte frames cost about their size (collecting the frames cost
/// about 36x: +289 MiB). The bodies are read before any database work; the
/// store here is unreachable, so each request ends 503 once its body is in.
#[tokio::test(flavor = "current_thread")]
async fn idempotency_key_bodies_in_one_byte_frames_cost_about_their_size() {
    const REQUESTS: usize = 8;
    const SIZE: usize = 1 << 20;
    let _measuring = MEASURING.lock().await;
    let pool =
        Pool::builder(Manager::new("postgres://nobody@127.0.0.1:1/none".parse().unwrap(), tokio_postgres::NoTls))
            .build()
            .unwrap();
    let layer = IdempotencyKeyLayer::builder(pool).scope(|_| Some("caller".to_owned())).build().unwrap();
    let handler = tower::service_fn(|_: Request<Chunked>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    });
    let svc = layer.layer(handler);
    let requests: Vec<_> = (0..REQUESTS)
        .map(|i| {
            Request::post("/payments")
                .header("idempotency-key", format!("k-{i}"))
                .header("content-type", "application/json")
                .body(Chunked::new(SIZE, Bytes::from_static(b"{")))
                .unwrap()
        })
        .collect();
    let all = futures_util::future::join_all(requests.into_iter().map(|req| svc.clone().oneshot(req)));
    let (answers, peak) = peak_above_baseline(all).await;
    let bodies = REQUESTS * SIZE;
    println!(
        "Idempotency-Key layer, {REQUESTS} concurrent bodies of {SIZE} bytes in one-byte frames: peak memory {peak} \
         bytes above the baseline ({:.2}x the {bodies} bytes of bodies)",
        peak as f64 / bodies as f64
    );
    for answer in answers {
        // Read whole, then the unreachable store: 503 (a 413, 400 or 408 would mean the body was not read).
        assert_eq!(answer.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    // One growing buffer per body: at most its doubling slack over the bytes received.
    assert!(peak <= 2 * bodies + (4 << 20), "{peak} bytes for {REQUESTS} bodies of {SIZE} bytes");
}

const DELIVERIES: usize = 64;
const DELIVERY: usize = 1 << 20;
const FRAME: usize = 16 << 10;
const SECRET: &str = "whsec_memory";

/// A Stripe event of exactly [`DELIVERY`] bytes, `{"id":"evt_…", …,
/// "padding":"xxx…"}`, generated as it is sent in [`FRAME`]-byte frames: the
/// padding frames are slices of one shared buffer of `x`, so the test holds
/// no copy of any body while it is measured (only the first and last frames,
/// which hold the JSON around the padding, are built, and dropped once the
/// layer has copied them). `From<Bytes>` (how the layer hands the buffered
/// body on) gives a body of those bytes.
struct Padded {
    head: Bytes,
    pad: Bytes,
    tail: &'static [u8],
    len: usize,
    pos: usize,
}

impl Padded {
    fn event(id: &str, pad: &Bytes) -> Self {
        let head = format!(
            r#"{{"id":"{id}","object":"event","type":"payment_intent.succeeded","data":{{"object":{{"id":"pi_1","padding":""#
        );
        Self { head: head.into(), pad: pad.clone(), tail: b"\"}}}", len: DELIVERY, pos: 0 }
    }

    fn byte_at(&self, i: usize) -> u8 {
        if i < self.head.len() {
            self.head[i]
        } else if i >= self.len - self.tail.len() {
            self.tail[i - (self.len - self.tail.len())]
        } else {
            b'x'
        }
    }

    /// The whole body into `buf` (cleared first), for signing.
    fn write_into(&self, buf: &mut Vec<u8>) {
        buf.clear();
        buf.extend_from_slice(&self.head);
        buf.resize(self.len - self.tail.len(), b'x');
        buf.extend_from_slice(self.tail);
    }
}

impl From<Bytes> for Padded {
    fn from(head: Bytes) -> Self {
        Self { len: head.len(), head, pad: Bytes::new(), tail: b"", pos: 0 }
    }
}

impl http_body::Body for Padded {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let (start, end) = (self.pos, (self.pos + FRAME).min(self.len));
        if start == end {
            return Poll::Ready(None);
        }
        self.pos = end;
        let frame = if end <= self.head.len() {
            self.head.slice(start..end)
        } else if start >= self.head.len() && end <= self.len - self.tail.len() && end - start <= self.pad.len() {
            self.pad.slice(..end - start)
        } else {
            (start..end).map(|i| self.byte_at(i)).collect::<Vec<u8>>().into()
        };
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact((self.len - self.pos) as u64)
    }
}

#[tokio::test(flavor = "current_thread")]
async fn concurrent_signed_deliveries_cost_about_their_bodies() {
    let _measuring = MEASURING.lock().await;
    let pg = webhook_test_support::TempPostgres::start().expect("start a throwaway PostgreSQL");
    let manager = deadpool_postgres::Manager::from_config(
        pg.url("postgres").parse().unwrap(),
        tokio_postgres::NoTls,
        deadpool_postgres::ManagerConfig { recycling_method: deadpool_postgres::RecyclingMethod::Fast },
    );
    // Every delivery holds its claim's connection while it waits at the
    // barrier: 64, and a margin (the server allows 400).
    let pool = Pool::builder(manager).max_size(DELIVERIES + 6).build().unwrap();
    webhook_idempotency::migrate(&pool.clone().into()).await.expect("migrate");
    pool.get()
        .await
        .unwrap()
        .batch_execute("CREATE TABLE effects (id bigserial PRIMARY KEY, event_key text NOT NULL)")
        .await
        .unwrap();
    // Open the connections before measuring: connecting is the pool's cost,
    // not the layer's.
    let warm: Vec<_> = futures_util::future::join_all((0..DELIVERIES).map(|_| pool.get()))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    drop(warm);

    // Memory is measured here, not latency: on one thread of a debug build on
    // a busy machine, parsing the other bodies' JSON can keep a claim or a
    // commit from being polled past the 2 s default step deadline, which
    // would refuse that delivery (503).
    let store = StoreConfig::new(pool).database_timeout(Duration::from_secs(60)).pool_timeout(Duration::from_secs(60));
    let layer = WebhookLayer::builder(store, Provider::stripe())
        .scope("acct")
        .secret(SECRET)
        .body_limit(2 * DELIVERY)
        .body_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    // One insert (the event key: a bytea parameter of the body would be
    // encoded into the connection's buffer, the handler's cost), then wait
    // until every delivery is in a handler, so all 64 bodies are held at once.
    let barrier = Arc::new(tokio::sync::Barrier::new(DELIVERIES));
    let handler = tower::service_fn(move |req: Request<Padded>| {
        let barrier = Arc::clone(&barrier);
        async move {
            let tx = req.extensions().get::<WebhookTx>().expect("inside WebhookLayer");
            let event = req.extensions().get::<WebhookEvent>().expect("inside WebhookLayer");
            assert_eq!(event.body().len(), DELIVERY, "the handler gets the whole body");
            let client = tx.client().await.expect("transaction open");
            let inserted = client.execute("INSERT INTO effects (event_key) VALUES ($1)", &[&event.key()]).await;
            drop(client);
            barrier.wait().await;
            let mut res = http::Response::new(String::new());
            *res.status_mut() = if inserted.is_ok() { StatusCode::OK } else { StatusCode::INTERNAL_SERVER_ERROR };
            drop(req);
            Ok::<_, std::convert::Infallible>(res)
        }
    });
    let svc = layer.layer(handler);

    // Signed ahead: each body is written whole into one buffer, signed, and
    // only the signature kept. The buffer lives until the measurement ends,
    // so its memory is in the baseline and cannot be reused by the layer.
    let pad = Bytes::from(vec![b'x'; FRAME]);
    let mut signing = Vec::with_capacity(DELIVERY);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let requests: Vec<Request<Padded>> = (0..DELIVERIES)
        .map(|i| {
            let body = Padded::event(&format!("evt_memory_{i:03}"), &pad);
            body.write_into(&mut signing);
            assert_eq!(signing.len(), DELIVERY);
            let signature = stripe::FACTS.sign(&SigningSecret::from(SECRET), now, &signing);
            Request::post("/webhooks/stripe")
                .header("content-type", "application/json")
                .header("content-length", DELIVERY)
                .header("stripe-signature", signature)
                .body(body)
                .unwrap()
        })
        .collect();

    // The first answer that is not 200 ends the wait: the deliveries still in
    // a handler would wait at the barrier for ever (the runtime drops them).
    let deliveries = async {
        let mut tasks: FuturesUnordered<_> =
            requests.into_iter().map(|req| tokio::spawn(svc.clone().oneshot(req))).collect();
        while let Some(done) = tasks.next().await {
            let res = done.unwrap().unwrap();
            if res.status() != StatusCode::OK {
                let rejection = res.extensions().get::<Rejection>();
                return (res.status(), rejection.map(|r| (r.kind(), r.reason())));
            }
        }
        (StatusCode::OK, None)
    };
    let ((status, rejection), peak) = peak_above_baseline(deliveries).await;
    drop(signing);
    let bodies = DELIVERIES * DELIVERY;
    println!(
        "{DELIVERIES} concurrent signed deliveries of {DELIVERY} bytes in {FRAME}-byte frames: peak memory {peak} bytes \
         above the baseline, {:.3}x the {bodies} bytes of bodies in flight ({} bytes per delivery)",
        peak as f64 / bodies as f64,
        peak / DELIVERIES
    );
    assert_eq!(
        (status, rejection.map(|(kind, _)| kind)),
        (StatusCode::OK, None),
        "every delivery is claimed and committed (refused at: {:?})",
        rejection.map(|(_, reason)| reason)
    );
    // Issue 12's budget: in-flight requests x body size + 10 %.
    assert!(peak * 10 <= bodies * 11, "{peak} bytes for {DELIVERIES} deliveries of {DELIVERY} bytes");
}

/// A body that declares 25 MiB, sends two one-byte frames (the second is
/// when the old buffer reserved the whole declared length) and then nothing,
/// as the review's trickling clients did. Counts the second frames sent.
struct Trickle {
    sent: u8,
    seconds: Arc<(std::sync::atomic::AtomicUsize, tokio::sync::Notify)>,
    want: usize,
}

impl http_body::Body for Trickle {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.sent == 2 {
            return Poll::Pending; // never woken: the client stopped sending
        }
        self.sent += 1;
        if self.sent == 2 {
            let (count, all_in) = &*self.seconds;
            if count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == self.want {
                all_in.notify_one();
            }
        }
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"{")))))
    }
}

impl From<Bytes> for Trickle {
    fn from(_: Bytes) -> Self {
        unreachable!("no trickled body is ever complete")
    }
}

/// Sets this process's soft address-space limit (`RLIMIT_AS`, through
/// util-linux `prlimit`) and puts it back on drop.
struct AddressSpaceLimit(String);

impl AddressSpaceLimit {
    fn set(bytes: u64) -> Self {
        let pid = std::process::id().to_string();
        let out = std::process::Command::new("prlimit")
            .args(["--pid", &pid, "--as", "--output", "SOFT", "--noheadings"])
            .output()
            .expect("prlimit (util-linux)");
        let before = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let before = if before == "unlimited" { "unlimited".to_owned() } else { before };
        let status =
            std::process::Command::new("prlimit").args(["--pid", &pid, &format!("--as={bytes}:")]).status().unwrap();
        assert!(status.success(), "prlimit could not set RLIMIT_AS");
        Self(before)
    }
}

impl Drop for AddressSpaceLimit {
    fn drop(&mut self) {
        let pid = std::process::id().to_string();
        let _ = std::process::Command::new("prlimit").args(["--pid", &pid, &format!("--as={}:", self.0)]).status();
    }
}

/// Input from the third security review: 500 connections each declaring
/// `Content-Length: 26214400` and trickling bytes grew the virtual size from
/// 359 MB to 13.2 GB, and under an address-space limit the server aborted
/// with `memory allocation of 26214400 bytes failed` after about 110
/// connections: the buffer reserved the whole declared length at the second
/// frame. Now it reserves at most 64 KiB ahead of the bytes received: under a
/// limit of the current size + 1 GiB (the old code needed 12.5 GiB more), all
/// 500 are held and the address space grows by megabytes.
#[tokio::test(flavor = "current_thread")]
async fn declared_lengths_are_not_reserved_under_an_address_space_limit() {
    const CONNECTIONS: usize = 500;
    const DECLARED: usize = 26_214_400;
    let _measuring = MEASURING.lock().await;
    let pool =
        Pool::builder(Manager::new("postgres://nobody@127.0.0.1:1/none".parse().unwrap(), tokio_postgres::NoTls))
            .build()
            .unwrap();
    let layer = WebhookLayer::builder(pool, Provider::stripe())
        .scope("acct")
        .secret("whsec_memory")
        .body_limit(DECLARED)
        .build()
        .unwrap();
    let handler = tower::service_fn(|_: Request<Trickle>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    });
    let svc = layer.layer(handler);
    let seconds = Arc::new((std::sync::atomic::AtomicUsize::new(0), tokio::sync::Notify::new()));
    let before = status_kib("VmSize:") * 1024;
    let _limit = AddressSpaceLimit::set((before + (1 << 30)) as u64);
    let tasks: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let req = Request::post("/webhooks/stripe")
                .header("stripe-signature", format!("t=1,v1={}", "0".repeat(64)))
                .header("content-length", DECLARED)
                .body(Trickle { sent: 0, seconds: Arc::clone(&seconds), want: CONNECTIONS })
                .unwrap();
            tokio::spawn(svc.clone().oneshot(req))
        })
        .collect();
    // Every request has had its second frame read.
    tokio::time::timeout(Duration::from_secs(60), seconds.1.notified()).await.expect("all 500 trickled");
    let grown = (status_kib("VmSize:") * 1024).saturating_sub(before);
    println!("{CONNECTIONS} connections declaring {DECLARED} bytes: address space +{} MiB", grown >> 20);
    assert!(tasks.iter().all(|t| !t.is_finished()), "every request is still being received");
    assert!(grown < 256 << 20, "the address space grew by {grown} bytes");
    for t in tasks {
        t.abort();
    }
}
