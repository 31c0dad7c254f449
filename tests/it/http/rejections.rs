//! The layer's refusals carry their kind in the response extensions, and a
//! builder hook shapes their body.

use crate::support::*;
use ::tower::ServiceExt;
use axum::body::Body;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use webhook_idempotency::{Rejection, RejectionKind};

fn problem(rejection: &Rejection) -> http::Response<Bytes> {
    let body = format!(
        "{{\"type\":\"about:blank\",\"title\":\"{}\",\"status\":{}}}",
        rejection.kind(),
        rejection.status().as_u16()
    );
    http::Response::builder().header("content-type", "application/problem+json").body(Bytes::from(body)).unwrap()
}

#[tokio::test]
async fn refusals_carry_their_kind_and_the_hook_shapes_the_body() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect)
            .layer(stripe_layer(db.pool.clone()).body_limit(1024).rejection_response(problem).build().unwrap()),
    );
    let plain = Router::new()
        .route("/webhooks/stripe", post(apply_effect).layer(stripe_layer(db.pool.clone()).build().unwrap()));
    let unsigned = || Request::post("/webhooks/stripe").body(Body::from("{}")).unwrap();
    let tampered = || {
        let mut req = stripe_request(stripe_body("evt_r1"));
        *req.body_mut() = Body::from(stripe_body("evt_r2"));
        req
    };
    let too_large = || {
        Request::post("/webhooks/stripe").header("content-length", "4096").body(Body::from(vec![b'x'; 4096])).unwrap()
    };
    let get = || Request::get("/webhooks/stripe").body(Body::empty()).unwrap();
    let no_key = || stripe_request(b"{\"type\":\"x\"}".to_vec());
    let cases: [(&str, Request<Body>, RejectionKind, &str); 5] = [
        ("unsigned", unsigned(), RejectionKind::InvalidSignature, "missing_header"),
        ("tampered", tampered(), RejectionKind::InvalidSignature, "no_matching_signature"),
        ("declared too large", too_large(), RejectionKind::BodyTooLarge, "declared_too_large"),
        ("GET", get(), RejectionKind::MethodNotAllowed, "method_not_allowed"),
        ("no event id", no_key(), RejectionKind::InvalidEventKey, "key_missing"),
    ];
    for (name, req, kind, reason) in cases {
        let res = app.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), kind.status(), "{name}");
        let rejection = res.extensions().get::<Rejection>().copied().unwrap_or_else(|| panic!("{name}: no extension"));
        assert_eq!((rejection.kind(), rejection.reason()), (kind, reason), "{name}");
        assert_eq!(res.headers()["content-type"], "application/problem+json", "{name}");
        let body: serde_json::Value =
            serde_json::from_slice(&res.into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert_eq!(body["title"], kind.as_str(), "{name}");
    }
    // Without the hook: the default one-line text, the same kind.
    let res = plain.clone().oneshot(unsigned()).await.unwrap();
    assert_eq!(res.extensions().get::<Rejection>().map(Rejection::kind), Some(RejectionKind::InvalidSignature));
    assert_eq!(res.headers()["content-type"], "text/plain; charset=utf-8");
    // A handler's own answers and replays carry no rejection.
    let res = plain.clone().oneshot(stripe_request(stripe_body("evt_ok"))).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.extensions().get::<Rejection>().is_none());
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn retry_after_is_kept_when_the_hook_shapes_a_503() {
    // A pool to a closed port: the claim fails, 503.
    let dead = pool("postgres://nobody@127.0.0.1:1/none".parse().unwrap(), 1);
    let layer = stripe_layer(StoreConfig::from(dead).pool_timeout(std::time::Duration::from_millis(500)))
        .rejection_response(problem)
        .build()
        .unwrap();
    let app = Router::new().route("/webhooks/stripe", post(apply_effect).layer(layer));
    let res = app.oneshot(stripe_request(stripe_body("evt_503"))).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.headers().contains_key("retry-after"));
    assert_eq!(res.extensions().get::<Rejection>().map(Rejection::kind), Some(RejectionKind::StoreUnavailable));
}
