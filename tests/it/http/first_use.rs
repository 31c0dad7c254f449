//! The traps a new user falls into: axum's body extractors and their own
//! limit, the layer on a whole router, logs that say where a refusal came
//! from.

use crate::support::*;
use axum::body::Body;
use axum::routing::{get, post};
use axum::{Json, Router};
use http::{Request, StatusCode};
use tower::ServiceExt;
use webhook_idempotency::{WebhookEvent, WebhookTx};

async fn status(app: &Router, req: Request<Body>) -> (StatusCode, http::HeaderMap) {
    let res = app.clone().oneshot(req).await.unwrap();
    (res.status(), res.headers().clone())
}

/// A 3 MB delivery passes the layer's 25 MiB limit; axum's `Json` extractor
/// (2 MB by default) must not refuse it after the claim.
#[tokio::test]
async fn axum_body_extractors_read_what_the_layer_accepted() {
    let db = TestDb::new().await;
    let handler = |tx: WebhookTx, event: WebhookEvent, Json(body): Json<serde_json::Value>| async move {
        assert_eq!(body["id"], event.key());
        apply_effect(tx, event).await
    };
    let bytes_handler = |tx: WebhookTx, event: WebhookEvent, body: axum::body::Bytes| async move {
        assert_eq!(&body[..], &event.body()[..]);
        apply_effect(tx, event).await
    };
    let app = Router::new()
        .route("/webhooks/stripe", post(handler).layer(stripe_layer(db.pool.clone()).build().unwrap()))
        .route("/webhooks/stripe-bytes", post(bytes_handler).layer(stripe_layer(db.pool.clone()).build().unwrap()));
    let big = |id: &str| {
        let padding = "x".repeat(3 << 20);
        format!("{{\"id\":\"{id}\",\"type\":\"invoice.paid\",\"data\":{{\"padding\":\"{padding}\"}}}}").into_bytes()
    };
    let (code, _) = status(&app, stripe_request(big("evt_3mb"))).await;
    assert_eq!(code, StatusCode::OK, "Json<T>");
    let mut req = stripe_request(big("evt_3mb_bytes"));
    *req.uri_mut() = "/webhooks/stripe-bytes".parse().unwrap();
    let (code, _) = status(&app, req).await;
    assert_eq!(code, StatusCode::OK, "Bytes");
    assert_eq!(db.effects().await, 2);
}

/// `Router::layer` instead of the webhook route: the other routes answer
/// 405 (with `Allow`), not a misleading 401, and the log says method and path.
#[tokio::test]
async fn a_layer_on_the_whole_router_shows_as_405_with_method_and_path_logged() {
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/webhooks/stripe", post(apply_effect))
        .layer(stripe_layer(db.pool.clone()).build().unwrap());
    let (logs, _guard) = Logs::capture();
    let (code, headers) = status(&app, Request::get("/health").body(Body::empty()).unwrap()).await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers.get("allow").unwrap(), "POST");
    assert_eq!(logs.lines_with(&["method_not_allowed", "method=GET", "path=/health"]).len(), 1, "{}", logs.text());
    // An unsigned POST elsewhere: 401, and the log names the path and that
    // no signature header was there at all.
    let unsigned = Request::post("/other").body(Body::from("{}")).unwrap();
    assert_eq!(status(&app, unsigned).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(logs.lines_with(&["method=POST", "path=/other", "no stripe signature header"]).len(), 1);
    let refusal = ["method=POST", "path=/other", "kind=\"invalid_signature\"", "reason=\"missing_header\""];
    assert_eq!(logs.lines_with(&refusal).len(), 1, "{}", logs.text());
    // The webhook route itself still works.
    assert_eq!(status(&app, stripe_request(stripe_body("evt_whole"))).await.0, StatusCode::OK);
}

/// `webhook-verify` (through `Provider::check`) and the layer decide what
/// passes with one function: the same deliveries pass and fail in both.
#[tokio::test]
async fn the_offline_check_and_the_layer_agree() {
    use webhook_idempotency::providers::github;
    use webhook_idempotency::verify::Delivery;
    use webhook_idempotency::{Provider, SigningSecret};
    let db = TestDb::new().await;
    let app = Router::new()
        .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).build().unwrap()));
    let body = br#"{"zen":"agree"}"#.to_vec();
    let with = |event: &str, delivery: &str| {
        Request::post("/webhooks/github")
            .header("x-github-event", event)
            .header("x-github-delivery", delivery)
            .header("x-hub-signature-256", github::FACTS.sign(&SigningSecret::from(GITHUB_SECRET), 0, &body))
            .body(Body::from(body.clone()))
            .unwrap()
    };
    let cases = [
        ("ordinary", with("push", "d-1"), true),
        ("empty event type: no type", with("", "d-2"), true),
        ("event type over 512 bytes", with(&"x".repeat(513), "d-3"), false),
        ("delivery id over 512 bytes", with("push", &"d".repeat(513)), false),
    ];
    let secrets = [SigningSecret::from(GITHUB_SECRET)];
    for (name, req, passes) in cases {
        let (parts, _) = Request::from_parts(req.into_parts().0.clone(), ()).into_parts();
        let offline = Provider::github().check(&Delivery::new(&parts, &body, &secrets, std::time::SystemTime::now()));
        assert_eq!(offline.is_ok(), passes, "{name}: offline {offline:?}");
        let req = Request::from_parts(parts, Body::from(body.clone()));
        let (code, _) = status(&app, req).await;
        assert_eq!(code.is_success(), passes, "{name}: layer {code}");
    }
}
