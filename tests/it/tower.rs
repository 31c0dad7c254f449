//! The layer without axum: a plain `tower::service_fn` handler reads
//! `WebhookTx` and `WebhookEvent` from the request extensions.

use std::convert::Infallible;

use crate::support::*;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use tower::{Layer, ServiceExt};
use webhook_idempotency::providers::github;
use webhook_idempotency::{SigningSecret, WebhookEvent, WebhookTx};

async fn handler(req: Request<Full<Bytes>>) -> Result<Response<Full<Bytes>>, Infallible> {
    let tx = req.extensions().get::<WebhookTx>().expect("layer put WebhookTx in").clone();
    let event = req.extensions().get::<WebhookEvent>().expect("layer put WebhookEvent in").clone();
    let body = req.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body, event.body());
    TxDb::of(&tx)
        .await
        .unwrap()
        .execute(
            "INSERT INTO effects (scope, event_key, body) VALUES ($1, $2, $3)",
            &[event.scope().into(), event.key().into(), body.as_ref().into()],
        )
        .await
        .unwrap();
    Ok(Response::new(Full::from(format!("applied {}", event.event_type().unwrap_or("?")))))
}

fn request(delivery: &str, body: &'static [u8]) -> Request<Full<Bytes>> {
    Request::post("/hook")
        .header("x-github-event", "push")
        .header("x-github-delivery", delivery)
        .header("x-hub-signature-256", github::FACTS.sign(&SigningSecret::from(GITHUB_SECRET), 0, body))
        .body(Full::new(Bytes::from_static(body)))
        .unwrap()
}

#[tokio::test]
async fn service_fn_handler_reads_tx_and_event_from_extensions() {
    let db = TestDb::new().await;
    let svc = github_layer(db.pool.clone()).build().unwrap().layer(tower::service_fn(handler));

    let res = svc.clone().oneshot(request("6f1c1e0a-1", b"{\"zen\":\"Keep it logically awesome.\"}")).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(&res.into_body().collect().await.unwrap().to_bytes()[..], b"applied push");

    let dup = svc.oneshot(request("6f1c1e0a-1", b"{\"zen\":\"Keep it logically awesome.\"}")).await.unwrap();
    assert_eq!(dup.status(), StatusCode::OK);
    assert_eq!(dup.headers().get("idempotent-replayed").unwrap(), "true");
    assert_eq!(db.effects().await, 1);
}

/// A response body of the application's own whose error is not a
/// `std::error::Error` (so not a `BoxError`).
struct OwnBody;

#[derive(Debug)]
struct NotAnError;

impl http_body::Body for OwnBody {
    type Data = Bytes;
    type Error = NotAnError;
    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, NotAnError>>> {
        std::task::Poll::Ready(None)
    }
}

fn is_service<S: tower::Service<Request<Full<Bytes>>>>(_: &S) {}

/// `WebhookService` passes the handler's response body through untouched, so
/// it asks nothing of the body's error type (the Idempotency-Key service,
/// which reads the body to store it, does). Checked by the compiler: a bound
/// added there fails to build this test.
#[tokio::test]
async fn webhook_service_takes_a_response_body_whose_error_is_not_a_box_error() {
    let db = TestDb::new().await;
    let handler = tower::service_fn(|_: Request<Full<Bytes>>| async { Ok::<_, Infallible>(Response::new(OwnBody)) });
    let service = github_layer(db.pool.clone()).build().unwrap().layer(handler);
    is_service(&service);
    let answer = service.oneshot(request("d-own-body", b"{}")).await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
}
