//! AWS SNS through the layer on PostgreSQL: the certificate fetched once
//! through a `StaticTransport` (the crate's test key and certificate,
//! `tests/fixtures/providers/aws-sns/`), only the named topic, duplicates
//! replayed, and a certificate URL outside AWS's hosts or a certificate that
//! cannot be had refused with nothing stored.

use crate::support::*;
use axum::body::Body;
use axum::Router;
use http::{Request, StatusCode};
use rsa::pkcs8::DecodePrivateKey as _;
use rsa::signature::{SignatureEncoding as _, Signer as _};
use tower::ServiceExt;
use webhook_idempotency::providers::aws_sns::{self, AwsSns};
use webhook_idempotency::verify::fetch::StaticTransport;
use webhook_idempotency::{Provider, WebhookLayer};

const CERT_URL: &str = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-suite.pem";
const TOPIC: &str = "arn:aws:sns:eu-west-1:123456789012:orders";
const CERT: &[u8] = include_bytes!("../fixtures/providers/aws-sns/test-signing-cert.pem");
const KEY: &[u8] = include_bytes!("../fixtures/providers/aws-sns/test-signing-key.der");

/// An SNS message of `kind` (`Notification`, `SubscriptionConfirmation`)
/// with `fields` over the defaults, its certificate at `cert_url`, signed
/// (SignatureVersion 2) with the test key as AWS signs.
fn message(kind: &str, id: &str, cert_url: &str, fields: serde_json::Value) -> Vec<u8> {
    use base64::Engine as _;
    let ts = time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap();
    let mut m = serde_json::json!({"Type": kind, "MessageId": id, "TopicArn": TOPIC, "Timestamp": ts,
        "Message": "{\"order\":\"o-1\"}", "SignatureVersion": "2", "SigningCertURL": cert_url});
    if kind == "SubscriptionConfirmation" {
        m["Token"] = "2336412f37fb687f5d51e6e2425f004aed".into();
        m["SubscribeURL"] = "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&Token=2336".into();
    }
    for (k, v) in fields.as_object().unwrap() {
        m[k] = v.clone();
    }
    let text = aws_sns::canonical_string(&serde_json::to_vec(&m).unwrap()).unwrap();
    let key = rsa::pkcs1v15::SigningKey::<sha2::Sha256>::new(rsa::PrivateKey::from_pkcs8_der(KEY).unwrap());
    m["Signature"] = base64::engine::general_purpose::STANDARD.encode(key.sign(text.as_bytes()).to_vec()).into();
    serde_json::to_vec(&m).unwrap()
}

fn post(body: Vec<u8>) -> Request<Body> {
    Request::post("/sns")
        .header("content-type", "text/plain; charset=UTF-8")
        .header("x-amz-sns-message-type", "Notification")
        .body(Body::from(body))
        .unwrap()
}

/// The app and the transport serving `served` (the certificate's URL, or none).
fn app(db: &TestDb, served: &[&str]) -> (Router, StaticTransport) {
    let transport = StaticTransport::new(served.iter().map(|u| ((*u).to_owned(), bytes::Bytes::from_static(CERT))));
    let sns = AwsSns::with_fetcher([TOPIC], AwsSns::fetcher(transport.clone()).build());
    let layer = WebhookLayer::builder(db.pool.clone(), Provider::aws_sns(sns)).scope("aws").build().unwrap();
    (Router::new().fallback(apply_effect).layer(layer), transport)
}

#[tokio::test]
async fn sns_messages_are_processed_once_with_one_certificate_fetch() {
    let db = TestDb::new().await;
    let (app, transport) = app(&db, &[CERT_URL]);
    for id in ["m-1", "m-2"] {
        let body = message("Notification", id, CERT_URL, serde_json::json!({"Subject": "shipped"}));
        let first = app.clone().oneshot(post(body.clone())).await.unwrap();
        assert_eq!((first.status(), first.headers().get("idempotent-replayed")), (StatusCode::OK, None), "{id}");
        let again = app.clone().oneshot(post(body)).await.unwrap();
        assert_eq!(again.status(), StatusCode::OK);
        assert!(again.headers().get("idempotent-replayed").is_some(), "{id}: SNS's retry is a duplicate");
        assert_eq!(db.effects_for(id).await, 1);
    }
    assert_eq!(transport.fetches(), 1, "one certificate fetch for every message naming it");
    // A subscription confirmation of the named topic: verified, claimed and
    // handed to the handler (typed), never confirmed by the crate.
    let confirm = message("SubscriptionConfirmation", "m-confirm", CERT_URL, serde_json::json!({}));
    assert_eq!(app.clone().oneshot(post(confirm)).await.unwrap().status(), StatusCode::OK);
    let kind =
        db.scalar_text("SELECT event_type FROM webhook_idempotency.webhook_events WHERE event_key = 'm-confirm'").await;
    assert_eq!(kind, "SubscriptionConfirmation");
}

#[tokio::test]
async fn tampered_foreign_topic_and_unfetchable_certificates_are_refused_with_nothing_stored() {
    let db = TestDb::new().await;
    let (app, transport) = app(&db, &[CERT_URL]);
    let good = message("Notification", "m-1", CERT_URL, serde_json::json!({}));
    let mut tampered: serde_json::Value = serde_json::from_slice(&good).unwrap();
    tampered["Message"] = "{\"order\":\"o-2\"}".into();
    let cases = [
        ("tampered", serde_json::to_vec(&tampered).unwrap()),
        (
            "another topic",
            message(
                "Notification",
                "m-2",
                CERT_URL,
                serde_json::json!({"TopicArn": "arn:aws:sns:eu-west-1:999999999999:x"}),
            ),
        ),
        (
            "a certificate outside AWS's hosts",
            message(
                "Notification",
                "m-3",
                "https://evil.example/SimpleNotificationService-x.pem",
                serde_json::json!({}),
            ),
        ),
        (
            "a certificate over http",
            message(
                "Notification",
                "m-4",
                "http://sns.eu-west-1.amazonaws.com/SimpleNotificationService-suite.pem",
                serde_json::json!({}),
            ),
        ),
    ];
    for (name, body) in cases {
        let res = app.clone().oneshot(post(body)).await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{name}");
    }
    assert_eq!(transport.fetches(), 1, "only the allowed URL was fetched");
    // An allowed URL whose certificate cannot be had: 503 + Retry-After, SNS retries.
    let missing = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-gone.pem";
    let res = app.clone().oneshot(post(message("Notification", "m-5", missing, serde_json::json!({})))).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.headers().get("retry-after").is_some());
    assert_eq!(db.events().await, 0, "nothing claimed");
}
