//! The whole layer (`WebhookService`) on arbitrary requests: method, path,
//! headers, `Content-Length`, `Content-Encoding`, and a body split into
//! arbitrary frames that may end in trailers, an error, or a stall. Every
//! preset, each in two configurations (the default limits; and a 64-byte body
//! limit with gzip decoding up to 128 bytes, a 1 s body timeout and an
//! operator replay token), with real verifiers and secrets.
//!
//! No database: the pool points at a closed loopback port with a 50 ms pool
//! timeout, so a delivery that passes verification and key extraction is
//! answered 503. Everything before the claim runs as in production. The
//! runtime's clock is paused, so the body timeout (408) fires as soon as a
//! stalled body leaves nothing else to do.
//!
//! Half the inputs are signed by the harness with the endpoint's real secret
//! (over the body the layer verifies: the uncompressed one for gzip), so
//! verification, handshakes and key extraction are reached too.
//!
//! Invariants:
//! - no panic;
//! - the status is one the layer documents: 400, 401, 404, 405, 408, 413,
//!   415, 500, 503, or 200 from a handshake;
//! - the handler is never called (no claim can succeed without a database);
//! - a 2xx (a handshake answer) only for a request the harness signed;
//! - an unsigned request is refused before the claim: never 503, never a
//!   handshake answer, never "no usable event id" (that check follows
//!   verification);
//! - a `Content-Length` over the body limit is 413; a `Content-Encoding`
//!   the configuration does not accept is 415 (or 413 from the length);
//! - a request that reached the claim (503) or a handshake had at most
//!   `body_limit` body bytes.
#![no_main]
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body::{Frame, SizeHint};
use http_body_util::{BodyExt as _, Full};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use tower_layer::Layer as _;
use tower_service::Service;
use webhook_idempotency::postgres::deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use webhook_idempotency::postgres::tokio_postgres::{Config as PgConfig, NoTls};
use webhook_idempotency::providers;
use webhook_idempotency::{StoreConfig, WebhookLayer, WebhookService};

/// The layer's clock: signed timestamps are `NOW` plus the input's offset.
const NOW: u64 = 1_700_000_000;
const REPLAY_HEADER: &str = "x-operator-replay";
const REPLAY_TOKEN: &str = "operator-replay-token-0123456789";
/// The small configuration's limits.
const SMALL_BODY_LIMIT: usize = 64;
const SMALL_GZIP_LIMIT: usize = 128;

/// Headers the layer reads; the registry adds every preset's.
const LAYER_HEADERS: &[&str] = &["content-length", "content-encoding", "content-type", "transfer-encoding", REPLAY_HEADER];

/// Headers the presets and the layer read, for the input to pick by index.
fn header_names() -> &'static [HeaderName] {
    static NAMES: OnceLock<Vec<HeaderName>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<&str> = LAYER_HEADERS.to_vec();
        for preset in providers::all() {
            for h in preset.headers() {
                if !names.contains(&h) {
                    names.push(h);
                }
            }
        }
        names.into_iter().map(HeaderName::from_static).collect()
    })
}

#[derive(Arbitrary, Debug)]
enum Name {
    Known(u8),
    Any(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
enum Shape {
    /// The bytes as given.
    Raw(Vec<u8>),
    /// A JSON event with the ids the presets' key extractors read.
    Event { id: String, kind: String, extra: Vec<u8> },
    /// Slack's `url_verification`.
    SlackChallenge(String),
    /// Discord's PING interaction.
    DiscordPing,
    /// Zoom's `endpoint.url_validation`, with or without a plainToken.
    ZoomValidation(Option<String>),
}

impl Shape {
    fn bytes(&self, ts: u64) -> Vec<u8> {
        match self {
            Shape::Raw(b) => b.clone(),
            Shape::Event { id, kind, extra } => serde_json::json!({
                "id": id, "event_id": id, "type": kind, "event": {"id": id, "type": kind},
                "event-data": {"id": id}, "webhookTimestamp": ts * 1000, "created_at": ts,
                "payload": {"event": kind}, "extra": String::from_utf8_lossy(extra),
            })
            .to_string()
            .into_bytes(),
            Shape::SlackChallenge(c) => {
                serde_json::json!({"token": "t", "challenge": c, "type": "url_verification"}).to_string().into_bytes()
            }
            Shape::DiscordPing => br#"{"id":"1","type":1}"#.to_vec(),
            Shape::ZoomValidation(t) => match t {
                Some(t) => serde_json::json!({"event": "endpoint.url_validation", "payload": {"plainToken": t}}),
                None => serde_json::json!({"event": "endpoint.url_validation", "payload": {}}),
            }
            .to_string()
            .into_bytes(),
        }
    }
}

/// How the body ends after its data frames.
#[derive(Arbitrary, Debug)]
enum Tail {
    End,
    Trailers(Vec<(u8, Vec<u8>)>),
    Error,
    /// Pending forever: only the body timeout ends it.
    Stall,
}

#[derive(Arbitrary, Debug)]
enum ContentLength {
    None,
    /// The real length of the data frames.
    Exact,
    Value(u64),
    Text(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    preset: u8,
    small: bool,
    method: Vec<u8>,
    path: Vec<u8>,
    headers: Vec<(Name, Vec<u8>)>,
    shape: Shape,
    /// Frame boundaries in the (possibly gzip-encoded) body.
    cuts: Vec<u16>,
    tail: Tail,
    /// Sign with the endpoint's secret, at `NOW` + this many seconds.
    sign: Option<i16>,
    gzip: bool,
    content_length: ContentLength,
    operator_replay: bool,
    size_hint: Option<(u16, Option<u16>)>,
}

/// A request body of arbitrary frames. `From<Bytes>` is what the layer needs
/// to hand the buffered body on.
struct FuzzBody {
    steps: VecDeque<Step>,
    hint: SizeHint,
}

enum Step {
    Data(Bytes),
    Trailers(HeaderMap),
    Error,
    Stall,
}

impl From<Bytes> for FuzzBody {
    fn from(b: Bytes) -> Self {
        let hint = SizeHint::with_exact(b.len() as u64);
        Self { steps: VecDeque::from([Step::Data(b)]), hint }
    }
}

impl http_body::Body for FuzzBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.steps.pop_front() {
            None => Poll::Ready(None),
            Some(Step::Data(b)) => Poll::Ready(Some(Ok(Frame::data(b)))),
            Some(Step::Trailers(t)) => Poll::Ready(Some(Ok(Frame::trailers(t)))),
            Some(Step::Error) => Poll::Ready(Some(Err(std::io::Error::other("client aborted")))),
            Some(Step::Stall) => {
                self.steps.push_front(Step::Stall);
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.steps.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        self.hint
    }
}

/// The handler: must never run, as no claim can succeed without a database.
#[derive(Clone)]
struct Handler;

static HANDLER_CALLED: AtomicBool = AtomicBool::new(false);

impl Service<Request<FuzzBody>> for Handler {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: Request<FuzzBody>) -> Self::Future {
        HANDLER_CALLED.store(true, Ordering::SeqCst);
        std::future::ready(Ok(Response::new(Full::new(Bytes::from_static(b"handled")))))
    }
}

/// The signature headers preset `index` would send for `body` at `ts`,
/// from its registry example, or `None` where the example signs another URI
/// or body than the request's (Twilio's URL, Mailgun's body): the preset is
/// then fuzzed unsigned.
fn sign(index: usize, ts: u64, body: &[u8], id: &str) -> Option<Vec<(HeaderName, HeaderValue)>> {
    let ex = providers::all()[index].example(id, UNIX_EPOCH + Duration::from_secs(ts), body);
    if ex.parts.uri != "/" || ex.body != body {
        return None;
    }
    Some(ex.parts.headers.iter().map(|(n, v)| (n.clone(), v.clone())).collect())
}

struct Harness {
    rt: tokio::runtime::Runtime,
    /// Per preset: (default configuration, small configuration).
    services: Vec<(WebhookService<Handler>, WebhookService<Handler>)>,
}

fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(|| {
        // A port nothing listens on: bound, then released.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut pg = PgConfig::new();
        pg.host("127.0.0.1").port(port).user("fuzz").dbname("fuzz");
        let manager = Manager::from_config(pg, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager).max_size(4).build().unwrap();
        let clock = || UNIX_EPOCH + Duration::from_secs(NOW);
        let services = providers::all()
            .iter()
            .map(|preset| {
                let name = preset.name;
                let base = || {
                    let ex = preset.example("evt_fuzz", clock(), b"{}");
                    let secret = ex.secrets.into_iter().next().expect("an example key");
                    let store = StoreConfig::new(pool.clone()).pool_timeout(Duration::from_millis(50));
                    WebhookLayer::builder(store, ex.provider).scope("fuzz").secret(secret).clock(clock)
                };
                let default = base().build().unwrap_or_else(|e| panic!("{name}: {e}")).layer(Handler);
                let small = base()
                    .body_limit(SMALL_BODY_LIMIT)
                    .gzip(SMALL_GZIP_LIMIT)
                    .body_timeout(Duration::from_secs(1))
                    .operator_replay(HeaderName::from_static(REPLAY_HEADER), REPLAY_TOKEN)
                    .build()
                    .unwrap_or_else(|e| panic!("{name}: {e}"))
                    .layer(Handler);
                (default, small)
            })
            .collect();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
        Harness { rt, services }
    })
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// The layer's own answer texts for refusals that come before verification.
const PRE_VERIFY_400: &[&[u8]] = &[b"could not read the request body\n", b"could not decode the gzip body\n"];

fuzz_target!(|input: Input| {
    let h = harness();
    let index = usize::from(input.preset) % providers::all().len();
    let name = providers::all()[index].name;
    let (default, small) = &h.services[index];
    let mut service = if input.small { small.clone() } else { default.clone() };
    let (body_limit, gzip_enabled) = if input.small { (SMALL_BODY_LIMIT, true) } else { (25 * 1024 * 1024, false) };

    let ts = NOW.saturating_add_signed(input.sign.map_or(0, i64::from));
    let plain = input.shape.bytes(ts);
    let id = match &input.shape {
        Shape::Event { id, .. } => id.as_str(),
        _ => "evt_fuzz",
    };
    let data = if input.gzip { gzip(&plain) } else { plain.clone() };

    let mut req = Request::new(());
    let Ok(method) = Method::from_bytes(&input.method) else { return };
    let req_method = method.clone();
    *req.method_mut() = method;
    let mut path = b"/".to_vec();
    path.extend_from_slice(&input.path);
    let Ok(uri) = http::Uri::from_maybe_shared(path) else { return };
    *req.uri_mut() = uri;
    let headers = req.headers_mut();
    for (n, v) in &input.headers {
        let name = match n {
            Name::Known(i) => header_names()[usize::from(*i) % header_names().len()].clone(),
            Name::Any(b) => match HeaderName::from_bytes(b) {
                Ok(n) => n,
                Err(_) => continue,
            },
        };
        if let Ok(v) = HeaderValue::from_bytes(v) {
            headers.append(name, v);
        }
    }
    let signed = match input.sign {
        Some(_) => match sign(index, ts, &plain, id) {
            Some(sig) => {
                for (n, v) in sig {
                    headers.insert(n, v);
                }
                true
            }
            None => false,
        },
        None => false,
    };
    if input.gzip {
        headers.insert(http::header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    if input.operator_replay {
        headers.insert(REPLAY_HEADER, HeaderValue::from_static(REPLAY_TOKEN));
    }
    match &input.content_length {
        ContentLength::None => {}
        ContentLength::Exact => {
            headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(data.len()));
        }
        ContentLength::Value(n) => {
            headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(*n));
        }
        ContentLength::Text(t) => {
            if let Ok(v) = HeaderValue::from_bytes(t) {
                headers.insert(http::header::CONTENT_LENGTH, v);
            }
        }
    }

    // What the layer must decide from the headers alone.
    let declared = headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let over_declared = declared.is_some_and(|n| n > body_limit as u64);
    let encoding_refused = headers.get(http::header::CONTENT_ENCODING).is_some_and(|v| {
        let v = v.as_bytes().trim_ascii();
        !(v.eq_ignore_ascii_case(b"identity")
            || (gzip_enabled && (v.eq_ignore_ascii_case(b"gzip") || v.eq_ignore_ascii_case(b"x-gzip"))))
    });

    // The body: the data cut into frames, then the tail.
    let mut cuts: Vec<usize> = input.cuts.iter().map(|c| usize::from(*c) % (data.len() + 1)).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let data = Bytes::from(data);
    let mut steps = VecDeque::new();
    let mut start = 0;
    for c in cuts.into_iter().chain([data.len()]) {
        steps.push_back(Step::Data(data.slice(start..c)));
        start = c;
    }
    match &input.tail {
        Tail::End => {}
        Tail::Trailers(t) => {
            let mut map = HeaderMap::new();
            for (i, v) in t {
                if let Ok(v) = HeaderValue::from_bytes(v) {
                    map.append(header_names()[usize::from(*i) % header_names().len()].clone(), v);
                }
            }
            steps.push_back(Step::Trailers(map));
        }
        Tail::Error => steps.push_back(Step::Error),
        Tail::Stall => steps.push_back(Step::Stall),
    }
    let hint = match input.size_hint {
        None => SizeHint::new(),
        Some((lower, upper)) => {
            let mut hint = SizeHint::new();
            hint.set_lower(u64::from(lower));
            if let Some(upper) = upper.filter(|u| u >= &lower) {
                hint.set_upper(u64::from(upper));
            }
            hint
        }
    };
    let (parts, ()) = req.into_parts();
    let req = Request::from_parts(parts, FuzzBody { steps, hint });

    let (status, text) = h.rt.block_on(async {
        let res = service.call(req).await.unwrap();
        let status = res.status();
        let text = res.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
        (status, text)
    });

    assert!(!HANDLER_CALLED.load(Ordering::SeqCst), "the handler ran without a claim");
    let documented = [400, 401, 404, 405, 408, 413, 415, 500, 503];
    assert!(documented.contains(&status.as_u16()) || status == StatusCode::OK, "{name}: undocumented status {status}");
    if status.is_success() {
        assert!(signed, "{name}: {status} for a request the harness did not sign");
        assert_eq!(status, StatusCode::OK, "{name}: a 2xx other than a handshake's 200");
    }
    if !signed {
        assert_ne!(status, StatusCode::SERVICE_UNAVAILABLE, "{name}: an unsigned request reached the claim");
        if status == StatusCode::BAD_REQUEST {
            assert!(
                PRE_VERIFY_400.contains(&&text[..]),
                "{name}: an unsigned request got a post-verification 400: {text:?}"
            );
        }
    }
    // A method the provider never sends is answered 405 before the body's
    // headers are looked at.
    if status == StatusCode::METHOD_NOT_ALLOWED {
        assert_ne!(req_method, Method::POST, "{name}: 405 for a POST");
    } else if over_declared {
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{name}: Content-Length over the limit");
    } else if encoding_refused {
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{name}: Content-Encoding not accepted");
    }
    if status.is_success() || status == StatusCode::SERVICE_UNAVAILABLE {
        assert!(data.len() <= body_limit, "{name}: {} body bytes passed a {body_limit}-byte limit", data.len());
    }
});
