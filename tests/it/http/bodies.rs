//! Size limits over a real HTTP connection: 413, not a connection reset.

use std::time::Duration;

use crate::support::*;
use axum::routing::post;
use axum::Router;
use http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
