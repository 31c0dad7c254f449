//! Header and body shapes senders and proxies produce: repeated and
//! comma-joined headers, header case, unknown signature schemes,
//! Content-Encoding, operator replays, handshakes, secret hygiene.

mod support;

use std::io::Write as _;

use axum::body::Body;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use support::*;
use tower::ServiceExt;
use webhook_idempotency::providers::{github, stripe};
use webhook_idempotency::SigningSecret;

async fn send(app: &Router, req: Request<Body>) -> (StatusCode, Bytes) {
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    (status, res.into_body().collect().await.unwrap().to_bytes())
}

fn v1_of(header: &str) -> &str {
    header.split_once(",v1=").unwrap().1
}

#[tokio::test]
async fn stripe_header_shapes() {
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/stripe", post(apply_effect).layer(stripe_layer(db.pool.clone()).build().unwrap()));
    let ts = unix_now();
    let secret = SigningSecret::from(STRIPE_SECRET);
    let build = |id: &str, lines: &[String]| {
        let body = stripe_body(id);
        let mut req = Request::post("/webhooks/stripe");
        for line in lines {
            req = req.header("Stripe-Signature", line.replace("SIG", v1_of(&stripe::sign(&secret, ts, &body))));
        }
        req.body(Body::from(body)).unwrap()
    };
    let zeros = "0".repeat(64);
    let cases: Vec<(&str, Vec<String>, StatusCode)> = vec![
        ("one line", vec![format!("t={ts},v1=SIG")], StatusCode::OK),
        ("split over two header lines", vec![format!("t={ts}"), "v1=SIG".into()], StatusCode::OK),
        ("two lines, wrong then right", vec![format!("t={ts},v1={zeros}"), "v1=SIG".into()], StatusCode::OK),
        ("unknown schemes around it", vec![format!("t={ts},v2=abc,v0={zeros},x=1,v1=SIG")], StatusCode::OK),
        ("spaces after commas", vec![format!("t={ts}, v1=SIG")], StatusCode::OK),
        (
            "upper-case hex",
            vec![format!("t={ts},v1=SIG").to_uppercase().replace("T=", "t=").replace("V1=", "v1=")],
            StatusCode::OK,
        ),
        ("two different timestamps", vec![format!("t={ts},v1=SIG"), format!("t={}", ts - 1)], StatusCode::UNAUTHORIZED),
        ("only unknown schemes", vec![format!("t={ts},v2=SIG")], StatusCode::UNAUTHORIZED),
    ];
    for (i, (name, lines, want)) in cases.into_iter().enumerate() {
        assert_eq!(send(&app, build(&format!("evt_shape_{i}"), &lines)).await.0, want, "{name}");
    }
}

#[tokio::test]
async fn github_header_shapes() {
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).build().unwrap()));
    let body = b"{\"zen\":\"Design for failure.\"}";
    let sig = github::sign(&SigningSecret::from(GITHUB_SECRET), body);
    let zeros = format!("sha256={}", "0".repeat(64));
    let req = |delivery: &[&str], sigs: &[&str]| {
        let mut r = Request::post("/webhooks/github").header("X-GitHub-Event", "ping");
        for d in delivery {
            r = r.header("X-GITHUB-DELIVERY", *d);
        }
        for s in sigs {
            r = r.header("x-hub-signature-256", *s);
        }
        r.body(Body::from(&body[..])).unwrap()
    };
    let cases = [
        ("upper-case names", req(&["d-1"], &[&sig]), StatusCode::OK),
        ("signature repeated", req(&["d-2"], &[&sig, &sig]), StatusCode::OK),
        ("a wrong and a right line", req(&["d-3"], &[&zeros, &sig]), StatusCode::OK),
        ("delivery id twice, equal", req(&["d-4", "d-4"], &[&sig]), StatusCode::OK),
        ("delivery id twice, different", req(&["d-5", "d-6"], &[&sig]), StatusCode::BAD_REQUEST),
        ("sha1 header only", req(&["d-7"], &["sha1=abc"]), StatusCode::UNAUTHORIZED),
    ];
    for (name, r, want) in cases {
        assert_eq!(send(&app, r).await.0, want, "{name}");
    }
}

#[tokio::test]
async fn header_names_are_case_insensitive_on_the_wire() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).build().unwrap()));
    let addr = serve(app).await;
    let body = b"{}";
    let sig = github::sign(&SigningSecret::from(GITHUB_SECRET), body);
    let raw = format!(
        "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-HUB-SIGNATURE-256: {sig}\r\nx-GitHub-Delivery: wire-1\r\n\
         X-GITHUB-EVENT: ping\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(raw.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(db.effects_for("wire-1").await, 1);
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
            .header("x-hub-signature-256", github::sign(&secret, signed_over))
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
        assert_eq!(send(app, r).await.0, want, "{name}");
    }
    let c = db.pool.get().await.unwrap();
    let stored: Vec<u8> = c.query_one("SELECT body FROM effects WHERE event_key = 'g-4'", &[]).await.unwrap().get(0);
    assert_eq!(stored, decoded, "the handler got the decoded bytes");
    assert_eq!(db.events().await, 2);
}

#[tokio::test]
async fn operator_replay_skips_the_age_check_not_the_signature() {
    let db = TestDb::new().await;
    let token = "replay-token-0123456789";
    let header = http::HeaderName::from_static("x-webhook-operator-replay");
    let app = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect).layer(stripe_layer(db.pool.clone()).operator_replay(header.clone(), token).build().unwrap()),
    );
    let day_old = unix_now() - 86_400;
    let with = |id: &str, token: Option<&str>, tamper: bool| {
        let mut req = stripe_request_at(stripe_body(id), day_old, STRIPE_SECRET);
        if tamper {
            *req.body_mut() = Body::from(stripe_body("evt_forged"));
        }
        if let Some(t) = token {
            req.headers_mut().insert(header.clone(), t.parse().unwrap());
        }
        req
    };
    let cases = [
        ("stale, no token", with("evt_r1", None, false), StatusCode::UNAUTHORIZED),
        ("stale, wrong token", with("evt_r2", Some("not-the-token-at-all"), false), StatusCode::UNAUTHORIZED),
        ("stale, token", with("evt_r3", Some(token), false), StatusCode::OK),
        ("tampered, token", with("evt_r4", Some(token), true), StatusCode::UNAUTHORIZED),
    ];
    for (name, r, want) in cases {
        assert_eq!(send(&app, r).await.0, want, "{name}");
    }
    // Replayed twice: still one effect.
    assert_eq!(send(&app, with("evt_r3", Some(token), false)).await.0, StatusCode::OK);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn challenge_is_answered_after_verification_without_a_claim() {
    use webhook_idempotency::key::JsonPointerKey;
    use webhook_idempotency::providers::github::GitHubVerifier;
    use webhook_idempotency::verify::Delivery;
    let db = TestDb::new().await;
    let provider = webhook_idempotency::Provider::new("acme", GitHubVerifier::new(), JsonPointerKey::new("/id"))
        .challenge(|d: &Delivery<'_>| {
            let v: serde_json::Value = serde_json::from_slice(d.body).ok()?;
            let challenge = v.get("challenge")?.as_str()?.to_owned();
            Some(http::Response::new(Bytes::from(challenge)))
        });
    let layer = webhook_idempotency::WebhookLayer::builder(db.pool.clone(), provider)
        .scope("s")
        .secret(GITHUB_SECRET)
        .build()
        .unwrap();
    let app = Router::new().route("/hook", post(apply_effect).layer(layer));
    let secret = SigningSecret::from(GITHUB_SECRET);
    let req = |body: &'static [u8], signed: &[u8]| {
        Request::post("/hook")
            .header("x-hub-signature-256", github::sign(&secret, signed))
            .body(Body::from(body))
            .unwrap()
    };
    let hello = br#"{"challenge":"abc123"}"#;
    assert_eq!(send(&app, req(hello, hello)).await, (StatusCode::OK, Bytes::from_static(b"abc123")));
    assert_eq!(send(&app, req(hello, b"other")).await.0, StatusCode::UNAUTHORIZED, "signature first");
    assert_eq!(db.events().await, 0);
    assert_eq!(send(&app, req(br#"{"id":"e1"}"#, br#"{"id":"e1"}"#)).await.0, StatusCode::OK);
    assert_eq!(db.events().await, 1);
}

#[test]
fn secrets_with_surrounding_whitespace_are_a_build_error() {
    let pool = support::pool("host=127.0.0.1 user=nobody".parse().unwrap(), 1);
    for bad in ["whsec_abc\n", " whsec_abc", "whsec_abc\r\n", "\twhsec"] {
        let err = stripe_layer(pool.clone()).secret(bad).build().unwrap_err();
        assert!(err.to_string().contains("whitespace"), "{bad:?}: {err}");
        assert!(!err.to_string().contains("whsec"), "the error must not echo the secret");
    }
    assert!(stripe_layer(pool).secret("whsec_inner space_ok").build().is_ok());
}
