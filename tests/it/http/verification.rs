//! Verification of what senders and proxies send: bad and rotated
//! signatures, header shapes (repeated, comma-joined, any case), unknown
//! schemes, the clock's tolerance, operator replays, handshakes, secret
//! hygiene.

use super::*;

#[tokio::test]
async fn bad_signatures_answer_401_and_store_nothing() {
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let app = stripe_app(&db, runs.clone());
    let body = stripe_body("evt_bad");
    let now = unix_now();
    let tampered = {
        let mut req = stripe_request(body.clone());
        *req.body_mut() = Body::from(stripe_body("evt_bad2"));
        req
    };
    let unsigned = {
        let mut req = stripe_request(body.clone());
        req.headers_mut().remove("stripe-signature");
        req
    };
    let cases: Vec<(&str, Request<Body>)> = vec![
        ("wrong secret", stripe_request_at(body.clone(), now, "whsec_wrong")),
        ("tampered body", tampered),
        ("stale timestamp", stripe_request_at(body.clone(), now - 301, STRIPE_SECRET)),
        ("future timestamp", stripe_request_at(body.clone(), now + 301, STRIPE_SECRET)),
        ("missing header", unsigned),
    ];
    for (name, req) in cases {
        let (status, _, text) = send(&app, req).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{name}");
        assert_eq!(&text[..], b"invalid webhook signature\n", "{name}: the answer reveals nothing");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(db.events().await, 0);
    assert_eq!(db.effects().await, 0);
}

#[tokio::test]
async fn github_missing_headers_and_bad_key_are_rejected() {
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).build().unwrap()));
    let strip = |name: &'static str| {
        let mut req = github_request("0b6f1e8e-0000-4000-8000-000000000001", "{}");
        req.headers_mut().remove(name);
        req
    };
    let long_key = github_request(&"k".repeat(513), "{}");
    let cases: Vec<(&str, Request<Body>, StatusCode)> = vec![
        ("no signature", strip("x-hub-signature-256"), StatusCode::UNAUTHORIZED),
        ("no delivery id", strip("x-github-delivery"), StatusCode::BAD_REQUEST),
        ("key too long", long_key, StatusCode::BAD_REQUEST),
    ];
    for (name, req, want) in cases {
        assert_eq!(send(&app, req).await.0, want, "{name}");
    }
    assert_eq!(db.events().await, 0);
}

#[tokio::test]
async fn stripe_json_without_id_is_400_after_verification() {
    let db = TestDb::new().await;
    let app = stripe_app(&db, Arc::default());
    assert_eq!(send(&app, stripe_request(&b"{\"type\":\"x\"}"[..])).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(send(&app, stripe_request(&b"not json"[..])).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(send(&app, stripe_request(&b"{\"id\":\"evt_\\u0000x\"}"[..])).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(db.events().await, 0);
}

#[tokio::test]
async fn github_docs_vector_passes_through_the_layer() {
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).build().unwrap()));
    // GitHub's worked example: secret "It's a Secret to Everybody", body "Hello, World!".
    let req = Request::post("/webhooks/github")
        .header("x-github-event", "ping")
        .header("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
        .header("x-hub-signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
        .body(Body::from("Hello, World!"))
        .unwrap();
    assert_eq!(send(&app, req).await.0, StatusCode::OK);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn stripe_header_with_two_v1_signatures_during_rotation() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect).layer(
            // The endpoint knows only the new secret; Stripe signs with both while rolling.
            webhook_idempotency::WebhookLayer::builder(db.pool.clone(), webhook_idempotency::Provider::stripe())
                .scope("acct_test")
                .secret("whsec_new")
                .build()
                .unwrap(),
        ),
    );
    let body = stripe_body("evt_rotate");
    let ts = unix_now();
    let sig = |secret: &str| {
        let h = webhook_idempotency::providers::stripe::FACTS.sign(&SigningSecret::from(secret), ts, &body);
        h.split_once(",v1=").unwrap().1.to_owned()
    };
    let header = format!("t={ts},v1={},v1={},v0={}", sig("whsec_old"), sig("whsec_new"), "0".repeat(64));
    let req = Request::post("/webhooks/stripe").header("stripe-signature", header).body(Body::from(body)).unwrap();
    assert_eq!(send(&app, req).await.0, StatusCode::OK);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn injected_clock_decides_the_tolerance() {
    let db = TestDb::new().await;
    let fixed = 1_700_000_000u64;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect).layer(
            stripe_layer(db.pool.clone())
                .clock(move || std::time::UNIX_EPOCH + Duration::from_secs(fixed))
                .build()
                .unwrap(),
        ),
    );
    let cases = [
        ("300 s old", fixed - 300, StatusCode::OK),
        ("301 s old", fixed - 301, StatusCode::UNAUTHORIZED),
        ("300 s ahead", fixed + 300, StatusCode::OK),
        ("301 s ahead", fixed + 301, StatusCode::UNAUTHORIZED),
        ("signed now by the wall clock", unix_now(), StatusCode::UNAUTHORIZED),
    ];
    for (i, (name, ts, want)) in cases.into_iter().enumerate() {
        let req = stripe_request_at(stripe_body(&format!("evt_clock_{i}")), ts, STRIPE_SECRET);
        assert_eq!(send(&app, req).await.0, want, "{name}");
    }
    assert_eq!(db.events().await, 2);
}

#[tokio::test]
async fn unsigned_request_is_rejected_before_its_body_is_read() {
    let db = TestDb::new().await;
    let app = stripe_app(&db, Arc::default());
    // A body that never ends: buffering it would hang.
    let (_keep_open, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
    let endless = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
    let req = Request::post("/webhooks/stripe").body(Body::from_stream(endless)).unwrap();
    let (status, _, _) =
        tokio::time::timeout(Duration::from_secs(10), send(&app, req)).await.expect("answered at once");
    assert_eq!(status, StatusCode::UNAUTHORIZED);
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
            req = req.header("Stripe-Signature", line.replace("SIG", v1_of(&stripe::FACTS.sign(&secret, ts, &body))));
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
        assert_eq!(status_and_body(&app, build(&format!("evt_shape_{i}"), &lines)).await.0, want, "{name}");
    }
}

#[tokio::test]
async fn github_header_shapes() {
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).build().unwrap()));
    let body = b"{\"zen\":\"Design for failure.\"}";
    let sig = github::FACTS.sign(&SigningSecret::from(GITHUB_SECRET), 0, body);
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
        assert_eq!(status_and_body(&app, r).await.0, want, "{name}");
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
    let sig = github::FACTS.sign(&SigningSecret::from(GITHUB_SECRET), 0, body);
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
        assert_eq!(status_and_body(&app, r).await.0, want, "{name}");
    }
    // Replayed twice: still one effect.
    assert_eq!(status_and_body(&app, with("evt_r3", Some(token), false)).await.0, StatusCode::OK);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn challenge_is_answered_after_verification_without_a_claim() {
    use webhook_idempotency::key::JsonPointerKey;
    use webhook_idempotency::providers::github;
    use webhook_idempotency::verify::Delivery;
    let db = TestDb::new().await;
    let provider = webhook_idempotency::Provider::new("acme", github::FACTS.verifier(), JsonPointerKey::new("/id"))
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
            .header("x-hub-signature-256", github::FACTS.sign(&secret, 0, signed))
            .body(Body::from(body))
            .unwrap()
    };
    let hello = br#"{"challenge":"abc123"}"#;
    assert_eq!(status_and_body(&app, req(hello, hello)).await, (StatusCode::OK, Bytes::from_static(b"abc123")));
    assert_eq!(status_and_body(&app, req(hello, b"other")).await.0, StatusCode::UNAUTHORIZED, "signature first");
    assert_eq!(db.events().await, 0);
    assert_eq!(status_and_body(&app, req(br#"{"id":"e1"}"#, br#"{"id":"e1"}"#)).await.0, StatusCode::OK);
    assert_eq!(db.events().await, 1);
}

#[test]
fn secrets_with_surrounding_whitespace_are_a_build_error() {
    let pool = crate::support::pool("host=127.0.0.1 user=nobody".parse().unwrap(), 1);
    for bad in ["whsec_abc\n", " whsec_abc", "whsec_abc\r\n", "\twhsec"] {
        let err = stripe_layer(pool.clone()).secret(bad).build().unwrap_err();
        assert!(err.to_string().contains("whitespace"), "{bad:?}: {err}");
        assert!(!err.to_string().contains("whsec"), "the error must not echo the secret");
    }
    assert!(stripe_layer(pool).secret("whsec_inner space_ok").build().is_ok());
}
