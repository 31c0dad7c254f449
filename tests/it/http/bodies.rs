//! Bodies: byte for byte to the handler, axum's extractors after the layer,
//! size limits (413, also over a real connection rather than a reset),
//! Content-Encoding.

use super::*;

async fn raw_exchange(addr: std::net::SocketAddr, head: String, body_len: usize) -> std::io::Result<String> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut rd, mut wr) = stream.into_split();
    let writer = tokio::spawn(async move {
        wr.write_all(head.as_bytes()).await?;
        let chunk = vec![b'x'; 64 * 1024];
        let mut left = body_len;
        while left > 0 {
            let n = left.min(chunk.len());
            wr.write_all(&chunk[..n]).await?;
            left -= n;
        }
        wr.flush().await
    });
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), rd.read_to_end(&mut response)).await??;
    let _ = writer.await; // the server may stop reading once it has answered
    Ok(String::from_utf8_lossy(&response).into_owned())
}

#[tokio::test]
async fn oversized_body_gets_413_not_a_reset() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/github",
        post(|| async { StatusCode::OK }).layer(github_layer(db.pool.clone()).body_limit(16 * 1024).build().unwrap()),
    );
    let addr = serve(app).await;
    let len = 8 * 1024 * 1024;
    let declared = format!(
        "POST /webhooks/github HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len}\r\n\r\n"
    );
    // A well-formed (if wrong) signature header, so the early header check lets
    // the body be read and the limit is what answers.
    let chunked_head = format!(
        "POST /webhooks/github HTTP/1.1\r\nhost: x\r\nx-hub-signature-256: sha256={}\r\n\
         transfer-encoding: chunked\r\n\r\n",
        "0".repeat(64)
    );
    let answer = raw_exchange(addr, declared, len).await.expect("a response, not a reset");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    // Chunked: one 1 MiB chunk, never finished; the limit trips while streaming.
    let head = format!("{chunked_head}{:x}\r\n", 1024 * 1024);
    let answer = raw_exchange(addr, head, 1024 * 1024).await.expect("a response, not a reset");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert_eq!(db.events().await, 0);
}

/// How a client that writes the whole request before reading a byte (as
/// Python's `http.client` and `requests` with a bytes body do: `sendall`,
/// then read) fares against a refusal answered before the body is read.
async fn write_all_then_read(addr: std::net::SocketAddr, head: &str, body_len: usize) -> std::io::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&vec![b'x'; body_len]).await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut response)).await??;
    Ok(String::from_utf8_lossy(&response).into_owned())
}

/// The refusal a client gets when it writes the whole body before reading,
/// for a declared Content-Length over the limit (413 answered before the
/// body is read; hyper then closes the connection with the rest unread):
/// the status while the unread rest fits in the socket buffers between the
/// two, otherwise a broken pipe or reset instead of the status. Never
/// another status, never anything stored. Measured on Linux loopback
/// (`tcp_wmem` max 4 MiB): up to 3 MiB the 413, from 4 MiB a broken pipe.
/// Input from the reliability review (Python's `http.client` got a broken
/// pipe for 8 MiB).
#[tokio::test]
async fn early_413_to_a_client_that_writes_the_whole_body_first() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/github",
        post(|| async { StatusCode::OK }).layer(github_layer(db.pool.clone()).body_limit(16 * 1024).build().unwrap()),
    );
    let addr = serve(app).await;
    let mut outcomes = Vec::new();
    for (name, len) in [("64 KiB", 64 << 10), ("1 MiB", 1 << 20), ("8 MiB", 8 << 20)] {
        let head = format!(
            "POST /webhooks/github HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len}\r\n\r\n"
        );
        let outcome = match write_all_then_read(addr, &head, len).await {
            Ok(answer) => answer.lines().next().unwrap_or_default().to_owned(),
            Err(e) => format!("{:?}", e.kind()),
        };
        outcomes.push((name, outcome));
    }
    println!("write the whole body, then read: {outcomes:?}");
    let status_line = "HTTP/1.1 413 Payload Too Large";
    assert_eq!(outcomes[0].1, status_line, "64 KiB fits the buffers: {outcomes:?}");
    assert_eq!(outcomes[1].1, status_line, "1 MiB fits the buffers: {outcomes:?}");
    for (name, outcome) in &outcomes {
        let reset = ["BrokenPipe", "ConnectionReset"].contains(&outcome.as_str());
        assert!(outcome == status_line || reset, "{name}: the 413 or a connection error, nothing else: {outcome}");
    }
    assert_eq!(db.events().await, 0);
}

#[tokio::test]
async fn bodies_reach_the_handler_byte_for_byte() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/github",
        post(|tx: WebhookTx, event: WebhookEvent, raw: bytes::Bytes| async move {
            assert_eq!(event.body(), &raw, "WebhookEvent::body and the Bytes extractor agree");
            apply_effect(tx, event).await
        })
        .layer(github_layer(db.pool.clone()).build().unwrap()),
    );
    let cases: &[(&str, &[u8])] = &[
        ("non-ascii utf-8", "{\"name\": \"Zoë ✓ 日本\"}".as_bytes()),
        ("invalid utf-8", b"{\"a\": \"\xff\xfe\x00\"}"),
        ("crlf", b"{\r\n  \"a\": 1\r\n}\r\n"),
        ("trailing newline", b"{\"b\":2}\n"),
        ("odd whitespace and key order", b"{ \"z\" :1,\t\"a\":  [ ] }"),
        ("empty", b""),
    ];
    for (i, (name, body)) in cases.iter().enumerate() {
        let delivery = format!("00000000-0000-4000-8000-{i:012}");
        assert_eq!(send(&app, github_request(&delivery, body.to_vec())).await.0, StatusCode::OK, "{name}");
        let c = db.pool.get().await.unwrap();
        let stored: Vec<u8> =
            c.query_one("SELECT body FROM effects WHERE event_key = $1", &[&delivery]).await.unwrap().get(0);
        assert_eq!(&stored[..], *body, "{name}");
    }
}

#[tokio::test]
async fn stripe_json_extractor_still_works_after_the_layer() {
    #[derive(serde::Deserialize)]
    struct Event {
        id: String,
    }
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(|axum::Json(e): axum::Json<Event>| async move {
            assert_eq!(e.id, "evt_json");
            StatusCode::NO_CONTENT
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    assert_eq!(send(&app, stripe_request(stripe_body("evt_json"))).await.0, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn body_over_the_limit_is_413() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/github",
        post(apply_effect).layer(github_layer(db.pool.clone()).body_limit(1024).build().unwrap()),
    );
    let big = vec![b'x'; 4096];
    // With Content-Length: rejected before reading.
    let mut declared = github_request("d-1", big.clone());
    declared.headers_mut().insert("content-length", "4096".parse().unwrap());
    assert_eq!(send(&app, declared).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    // Streamed without Content-Length: rejected while reading.
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = big.chunks(100).map(|c| Ok(c.to_vec().into())).collect();
    let mut streamed = github_request("d-2", "");
    *streamed.body_mut() = Body::from_stream(futures_stream(chunks));
    assert_eq!(send(&app, streamed).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    // At the limit: accepted.
    assert_eq!(send(&app, github_request("d-3", vec![b'y'; 1024])).await.0, StatusCode::OK);
    assert_eq!(db.events().await, 1);
}

fn futures_stream(
    items: Vec<Result<bytes::Bytes, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static {
    futures_util::stream::iter(items)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[tokio::test]
async fn content_encoding_is_415_unless_gzip_is_enabled() {
    let db = TestDb::new().await;
    let plain = Router::new()
        .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).build().unwrap()));
    let with_gzip = Router::new()
        .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).gzip(4096).build().unwrap()));
    let decoded = b"{\"action\":\"opened\"}\n".to_vec();
    let secret = SigningSecret::from(GITHUB_SECRET);
    let req = |delivery: &str, encoding: &str, body: Vec<u8>, signed_over: &[u8]| {
        Request::post("/webhooks/github")
            .header("x-github-event", "issues")
            .header("x-github-delivery", delivery)
            .header("content-encoding", encoding)
            .header("x-hub-signature-256", github::FACTS.sign(&secret, 0, signed_over))
            .body(Body::from(body))
            .unwrap()
    };
    let bomb = vec![b'a'; 64 * 1024];
    let cases = [
        ("gzip, not enabled", &plain, req("g-1", "gzip", gzip(&decoded), &decoded), StatusCode::UNSUPPORTED_MEDIA_TYPE),
        ("br, never", &with_gzip, req("g-2", "br", decoded.clone(), &decoded), StatusCode::UNSUPPORTED_MEDIA_TYPE),
        ("identity", &plain, req("g-3", "identity", decoded.clone(), &decoded), StatusCode::OK),
        ("gzip, signed decoded", &with_gzip, req("g-4", "gzip", gzip(&decoded), &decoded), StatusCode::OK),
        (
            "gzip, signed compressed",
            &with_gzip,
            req("g-5", "gzip", gzip(&decoded), &gzip(&decoded)),
            StatusCode::UNAUTHORIZED,
        ),
        ("inflates past the cap", &with_gzip, req("g-6", "gzip", gzip(&bomb), &bomb), StatusCode::PAYLOAD_TOO_LARGE),
        (
            "corrupt gzip",
            &with_gzip,
            req("g-7", "gzip", b"\x1f\x8bnot gzip".to_vec(), &decoded),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (name, app, r, want) in cases {
        assert_eq!(status_and_body(app, r).await.0, want, "{name}");
    }
    let c = db.pool.get().await.unwrap();
    let stored: Vec<u8> = c.query_one("SELECT body FROM effects WHERE event_key = 'g-4'", &[]).await.unwrap().get(0);
    assert_eq!(stored, decoded, "the handler got the decoded bytes");
    assert_eq!(db.events().await, 2);
}
