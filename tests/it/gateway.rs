//! Inbound gateways: a provider behind Hookdeck or Convoy
//! (`Provider::behind`), both signatures checked and the provider's event
//! claimed, so a delivery through the gateway and a direct one are one event
//! (docs/providers.md, "Behind an inbound gateway").

use crate::support::*;
use axum::body::Body;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http::{Request, StatusCode};
use tower::ServiceExt;
use webhook_idempotency::providers::gateway::Gateway;
use webhook_idempotency::providers::{convoy, hookdeck, stripe};
use webhook_idempotency::{Provider, SigningSecret, WebhookLayer};

const HOOKDECK_SECRET: &str = "hookdeck_destination_secret_for_the_suite";
const CONVOY_SECRET: &str = "convoy_endpoint_secret_for_the_suite";

/// Stripe sent directly (`/direct`), through Hookdeck (`/hookdeck`) and
/// through Convoy (`/convoy`): one scope, one Stripe secret, one handler.
fn app(db: &TestDb) -> Router {
    let route = |provider: Provider| {
        post(apply_effect).layer(
            WebhookLayer::builder(db.pool.clone(), provider).scope("acct_test").secret(STRIPE_SECRET).build().unwrap(),
        )
    };
    let hookdeck = Gateway::hookdeck([SigningSecret::from(HOOKDECK_SECRET)]).unwrap();
    let convoy = Gateway::convoy([SigningSecret::from(CONVOY_SECRET)]).unwrap();
    Router::new()
        .route("/direct", route(Provider::stripe()))
        .route("/hookdeck", route(Provider::stripe().behind(hookdeck)))
        .route("/convoy", route(Provider::stripe().behind(convoy)))
}

/// The Stripe delivery of `body` signed at `stripe_at` with `stripe_secret`,
/// posted to `path` with the gateway `headers`.
fn delivery(
    path: &str,
    body: &Bytes,
    stripe_at: u64,
    stripe_secret: &str,
    headers: &[(&str, String)],
) -> Request<Body> {
    let mut request = Request::post(path)
        .header("content-type", "application/json")
        .header("stripe-signature", stripe::FACTS.sign(&SigningSecret::from(stripe_secret), stripe_at, body));
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    request.body(Body::from(body.clone())).unwrap()
}

/// Hookdeck's headers for `body`: its signature with `secret`, its event id.
fn hookdeck_headers(body: &[u8], secret: &str, event_id: &str) -> Vec<(&'static str, String)> {
    vec![
        ("x-hookdeck-signature", hookdeck::FACTS.sign(&SigningSecret::from(secret), 0, body)),
        ("x-hookdeck-eventid", event_id.to_owned()),
        ("x-hookdeck-attempt-count", "3".to_owned()),
    ]
}

fn replayed(response: &http::Response<axum::body::Body>) -> bool {
    response.headers().get("idempotent-replayed").is_some_and(|v| v == "true")
}

#[tokio::test]
async fn the_same_stripe_event_directly_and_through_hookdeck_is_one_event() {
    let db = TestDb::new().await;
    let app = app(&db);
    let now = unix_now();

    // Sent directly first, then Hookdeck's retry of its copy an hour later,
    // with Stripe's original signature (an hour old: past Stripe's 300 s).
    let first = Bytes::from(stripe_body("evt_direct_first"));
    let direct = app.clone().oneshot(delivery("/direct", &first, now, STRIPE_SECRET, &[])).await.unwrap();
    assert_eq!(direct.status(), StatusCode::OK);
    let headers = hookdeck_headers(&first, HOOKDECK_SECRET, "evt_hkd_1");
    let through = app.clone().oneshot(delivery("/hookdeck", &first, now - 3600, STRIPE_SECRET, &headers)).await;
    let through = through.unwrap();
    assert_eq!(through.status(), StatusCode::OK);
    assert!(replayed(&through), "the gateway's copy is the direct delivery's event: a duplicate");
    assert_eq!(db.effects_for("evt_direct_first").await, 1);

    // Through Hookdeck first, then the same event directly.
    let second = Bytes::from(stripe_body("evt_gateway_first"));
    let headers = hookdeck_headers(&second, HOOKDECK_SECRET, "evt_hkd_2");
    let through = app.clone().oneshot(delivery("/hookdeck", &second, now, STRIPE_SECRET, &headers)).await.unwrap();
    assert_eq!((through.status(), replayed(&through)), (StatusCode::OK, false));
    let direct = app.clone().oneshot(delivery("/direct", &second, now, STRIPE_SECRET, &[])).await.unwrap();
    assert_eq!((direct.status(), replayed(&direct)), (StatusCode::OK, true));
    assert_eq!(db.effects_for("evt_gateway_first").await, 1);

    // A second Hookdeck event id for the same Stripe event (a copy through
    // another connection) is still the Stripe event.
    let headers = hookdeck_headers(&second, HOOKDECK_SECRET, "evt_hkd_other_connection");
    let again = app.clone().oneshot(delivery("/hookdeck", &second, now, STRIPE_SECRET, &headers)).await.unwrap();
    assert!(replayed(&again));
    assert_eq!(db.effects_for("evt_gateway_first").await, 1);
    // Claimed under Stripe's name and id, in the one scope.
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM webhook_idempotency.webhook_events WHERE provider = 'stripe' AND scope = 'acct_test'"
        )
        .await,
        2
    );
}

#[tokio::test]
async fn through_a_gateway_both_signatures_must_pass_and_nothing_is_stored_otherwise() {
    let db = TestDb::new().await;
    let app = app(&db);
    let now = unix_now();
    let body = Bytes::from(stripe_body("evt_refused"));
    let cases: Vec<(&str, Request<Body>)> = vec![
        (
            "no gateway signature",
            delivery("/hookdeck", &body, now, STRIPE_SECRET, &[("x-hookdeck-eventid", "e".into())]),
        ),
        (
            "the gateway's signature with another secret",
            delivery("/hookdeck", &body, now, STRIPE_SECRET, &hookdeck_headers(&body, "not_hookdeck_s", "e")),
        ),
        (
            "Stripe's signature with another secret",
            delivery(
                "/hookdeck",
                &body,
                now,
                "whsec_not_the_endpoint_s",
                &hookdeck_headers(&body, HOOKDECK_SECRET, "e"),
            ),
        ),
        (
            "the gateway signed another body",
            delivery("/hookdeck", &body, now, STRIPE_SECRET, &hookdeck_headers(b"{}", HOOKDECK_SECRET, "e")),
        ),
        (
            "a Convoy signature past its 300 s",
            delivery(
                "/convoy",
                &body,
                now,
                STRIPE_SECRET,
                &[("x-convoy-signature", convoy::FACTS.sign(&SigningSecret::from(CONVOY_SECRET), now - 301, &body))],
            ),
        ),
    ];
    for (name, request) in cases {
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{name}");
    }
    assert_eq!(db.events().await, 0, "nothing claimed");
    assert_eq!(db.effects_for("evt_refused").await, 0);

    // Convoy's signature (its time checked) and Stripe's: processed once.
    let convoy_header = [("x-convoy-signature", convoy::FACTS.sign(&SigningSecret::from(CONVOY_SECRET), now, &body))];
    let ok = app.clone().oneshot(delivery("/convoy", &body, now - 7200, STRIPE_SECRET, &convoy_header)).await.unwrap();
    assert_eq!((ok.status(), replayed(&ok)), (StatusCode::OK, false));
    let direct = app.clone().oneshot(delivery("/direct", &body, now, STRIPE_SECRET, &[])).await.unwrap();
    assert!(replayed(&direct));
    assert_eq!(db.effects_for("evt_refused").await, 1);
}
