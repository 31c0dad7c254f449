//! The SNS preset's canonical strings, signatures (versions 1 and 2), topics
//! and tolerance, over a test key and certificate served by a
//! `StaticTransport` (`tests/fixtures/providers/aws-sns/`).

use super::*;
use crate::verify::fetch::StaticTransport;
use rsa::pkcs8::DecodePrivateKey as _;
use rsa::signature::{SignatureEncoding as _, Signer as _};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) const CERT_URL: &str = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem";
pub(crate) const TOPIC: &str = "arn:aws:sns:us-east-1:123456789012:orders";
const CERT: &[u8] = include_bytes!("../../../tests/fixtures/providers/aws-sns/test-signing-cert.pem");
const KEY: &[u8] = include_bytes!("../../../tests/fixtures/providers/aws-sns/test-signing-key.der");

/// `message` with `SignatureVersion` `version`, `SigningCertURL` and its
/// `Signature` over the canonical string, by the test key.
pub(crate) fn signed(mut message: serde_json::Value, version: &str) -> Vec<u8> {
    use base64::Engine as _;
    let key = rsa::PrivateKey::from_pkcs8_der(KEY).unwrap();
    message["SignatureVersion"] = version.into();
    message["SigningCertURL"] = CERT_URL.into();
    let fields = message.as_object().unwrap().clone();
    let text = canonical(&fields).unwrap();
    let signature = match version {
        "1" => rsa::pkcs1v15::SigningKey::<sha1::Sha1>::new(key).sign(text.as_bytes()).to_vec(),
        _ => rsa::pkcs1v15::SigningKey::<sha2::Sha256>::new(key).sign(text.as_bytes()).to_vec(),
    };
    message["Signature"] = base64::engine::general_purpose::STANDARD.encode(signature).into();
    serde_json::to_vec(&message).unwrap()
}

pub(crate) fn notification(id: &str, at: SystemTime) -> serde_json::Value {
    let ts = super::super::rfc3339::format(at.duration_since(UNIX_EPOCH).unwrap().as_secs());
    serde_json::json!({
        "Type": "Notification", "MessageId": id, "TopicArn": TOPIC, "Subject": "Order shipped",
        "Message": "{\"order\":\"o-1\",\"note\":\"café ☕\"}", "Timestamp": ts,
    })
}

fn transport() -> StaticTransport {
    StaticTransport::new([(CERT_URL.to_owned(), bytes::Bytes::from_static(CERT))])
}

fn settings(transport: StaticTransport) -> AwsSns {
    AwsSns::with_fetcher([TOPIC], AwsSns::fetcher(transport).build())
}

/// Runs the verifier as the layer does: `prepare` (the fetch), then `verify`.
fn check(verifier: &SnsVerifier, body: &[u8], now: SystemTime) -> Result<(), VerifyErrorKind> {
    let (parts, ()) = http::Request::post("/sns").body(()).unwrap().into_parts();
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    if let Some(prepare) = verifier.prepare(&parts, body) {
        rt.block_on(prepare).map_err(|_| VerifyErrorKind::NoMatchingSignature)?;
    }
    verifier.verify(&Delivery::new(&parts, body, &[], now)).map_err(|e| e.kind())
}

/// The canonical strings of AWS's page, field by field.
#[test]
fn canonical_strings() {
    let n = serde_json::json!({"Type": "Notification", "MessageId": "m", "TopicArn": "t", "Message": "hi",
                               "Timestamp": "2024-06-10T06:13:20.000Z", "Subject": "s", "UnsignedExtra": "x"});
    let text = canonical(n.as_object().unwrap()).unwrap();
    assert_eq!(
        text,
        "Message\nhi\nMessageId\nm\nSubject\ns\nTimestamp\n2024-06-10T06:13:20.000Z\nTopicArn\nt\nType\nNotification\n"
    );
    let mut no_subject = n.clone();
    no_subject.as_object_mut().unwrap().remove("Subject");
    assert!(!canonical(no_subject.as_object().unwrap()).unwrap().contains("Subject"));
    let c = serde_json::json!({"Type": "SubscriptionConfirmation", "MessageId": "m", "TopicArn": "t", "Message": "hi",
                               "Timestamp": "x", "Token": "tok", "SubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription"});
    assert_eq!(
        canonical(c.as_object().unwrap()).unwrap(),
        "Message\nhi\nMessageId\nm\nSubscribeURL\nhttps://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription\nTimestamp\nx\nToken\ntok\nTopicArn\nt\nType\nSubscriptionConfirmation\n"
    );
    let mut no_token = c.clone();
    no_token.as_object_mut().unwrap().remove("Token");
    assert_eq!(canonical(no_token.as_object().unwrap()).unwrap_err().kind(), VerifyErrorKind::MissingField);
    // A Subject folded into MessageId signs the same bytes: refused.
    let folded = serde_json::json!({"Type": "Notification", "MessageId": "m\nSubject\ns", "TopicArn": "t",
                                    "Message": "hi", "Timestamp": "2024-06-10T06:13:20.000Z"});
    assert_eq!(canonical(folded.as_object().unwrap()).unwrap_err().kind(), VerifyErrorKind::MalformedHeader);
    let mut multiline = n.clone();
    multiline["Message"] = "line 1\nline 2".into();
    assert!(canonical(multiline.as_object().unwrap()).is_ok(), "the message itself may have lines");
    let other = serde_json::json!({"Type": "Other", "MessageId": "m"});
    assert_eq!(canonical(other.as_object().unwrap()).unwrap_err().kind(), VerifyErrorKind::MalformedHeader);
}

#[test]
fn verifies_both_signature_versions_and_refuses_the_rest() {
    let now = SystemTime::now();
    let verifier = SnsVerifier(settings(transport()));
    for version in ["1", "2"] {
        assert_eq!(check(&verifier, &signed(notification("m-1", now), version), now), Ok(()), "version {version}");
    }
    let good: serde_json::Value = serde_json::from_slice(&signed(notification("m-1", now), "2")).unwrap();
    let with = |field: &str, value: serde_json::Value| {
        let mut m = good.clone();
        m[field] = value;
        serde_json::to_vec(&m).unwrap()
    };
    let cases: Vec<(&str, Vec<u8>, Result<(), VerifyErrorKind>)> = vec![
        ("message tampered", with("Message", "{\"order\":\"o-2\"}".into()), Err(VerifyErrorKind::NoMatchingSignature)),
        ("another MessageId", with("MessageId", "m-2".into()), Err(VerifyErrorKind::NoMatchingSignature)),
        (
            "version 1 claimed for a SHA-256 signature",
            with("SignatureVersion", "1".into()),
            Err(VerifyErrorKind::NoMatchingSignature),
        ),
        ("version 3", with("SignatureVersion", "3".into()), Err(VerifyErrorKind::MalformedHeader)),
        ("signature not base64", with("Signature", "!!".into()), Err(VerifyErrorKind::MalformedHeader)),
        ("no signature", with("Signature", serde_json::Value::Null), Err(VerifyErrorKind::MissingField)),
        ("not JSON", b"Type=Notification".to_vec(), Err(VerifyErrorKind::MalformedHeader)),
        (
            "a field twice",
            {
                let mut twice = serde_json::to_vec(&good).unwrap();
                twice.pop();
                twice.extend_from_slice(br#","Message":"{\"order\":\"o-2\"}"}"#);
                twice
            },
            Err(VerifyErrorKind::MalformedHeader),
        ),
    ];
    for (name, body, want) in cases {
        assert_eq!(check(&verifier, &body, now), want, "{name}");
    }
}

#[test]
fn only_the_named_topics_and_within_an_hour() {
    let now = SystemTime::now();
    let verifier = SnsVerifier(settings(transport()));
    let mut other = notification("m-1", now);
    other["TopicArn"] = "arn:aws:sns:us-east-1:999999999999:not-yours".into();
    assert_eq!(check(&verifier, &signed(other, "2"), now), Err(VerifyErrorKind::NoMatchingSignature));
    let hour = Duration::from_secs(3600);
    let at = |offset: i64| {
        let base = now.duration_since(UNIX_EPOCH).unwrap().as_secs();
        UNIX_EPOCH + Duration::from_secs(base.checked_add_signed(offset).unwrap())
    };
    let old = signed(notification("m-old", at(-(hour.as_secs() as i64) - 2)), "2");
    assert_eq!(check(&verifier, &old, now), Err(VerifyErrorKind::TimestampTooOld));
    let recent = signed(notification("m-recent", at(-(hour.as_secs() as i64) + 60)), "2");
    assert_eq!(check(&verifier, &recent, now), Ok(()));
    let ahead = signed(notification("m-ahead", at(hour.as_secs() as i64 + 2)), "2");
    assert_eq!(check(&verifier, &ahead, now), Err(VerifyErrorKind::TimestampInFuture));
}

#[test]
fn a_certificate_url_outside_aws_s_hosts_is_never_fetched() {
    let now = SystemTime::now();
    let served = transport();
    let verifier = SnsVerifier(settings(served.clone()));
    let good: serde_json::Value = serde_json::from_slice(&signed(notification("m-1", now), "2")).unwrap();
    for url in [
        "http://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem",
        "https://sns.us-east-1.amazonaws.com.evil.example/SimpleNotificationService-test.pem",
        "https://evil.example/sns.us-east-1.amazonaws.com/x.pem",
        "https://user@sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem",
        "https://sns.us-east-1.amazonaws.com:8443/SimpleNotificationService-test.pem",
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem?x=1",
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.txt",
        "https://s3.us-east-1.amazonaws.com/SimpleNotificationService-test.pem",
        "https://sns.s3.amazonaws.com/SimpleNotificationService-test.pem",
        "https://sns.s3-us-west-2.amazonaws.com/SimpleNotificationService-test.pem",
        "https://sns.us-east-1.amazonaws.com/bucket/SimpleNotificationService-test.pem",
    ] {
        let mut m = good.clone();
        m["SigningCertURL"] = url.into();
        let body = serde_json::to_vec(&m).unwrap();
        assert_eq!(check(&verifier, &body, now), Err(VerifyErrorKind::NoMatchingSignature), "{url}");
    }
    assert_eq!(served.fetches(), 0, "no URL outside the allowlist reached the network");
}

#[test]
fn the_key_is_the_message_id_and_the_type_the_message_s() {
    let body = signed(notification("4d6a2c1e-9b8f-4e6a-8b3c-1d2e3f4a5b6c", SystemTime::now()), "2");
    let (parts, ()) = http::Request::post("/").body(()).unwrap().into_parts();
    let id = SnsKey.extract(&parts, &body).unwrap();
    assert_eq!(
        (id.key.as_str(), id.event_type.as_deref()),
        ("4d6a2c1e-9b8f-4e6a-8b3c-1d2e3f4a5b6c", Some("Notification"))
    );
    assert!(certificate_key(CERT).is_some() && certificate_key(b"not a certificate").is_none());
}
