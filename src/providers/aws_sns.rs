//! AWS SNS HTTP(S) subscriptions: the message's RSA signature, with the
//! certificate AWS publishes at `SigningCertURL`.
//!
//! Scheme (AWS, "Verifying the signatures of Amazon SNS messages",
//! <https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html>,
//! and "Parsing message formats",
//! <https://docs.aws.amazon.com/sns/latest/dg/sns-message-and-json-formats.html>):
//! the body is a JSON object of strings. `Signature` is the base64 RSA
//! PKCS #1 v1.5 signature, SHA-1 for `SignatureVersion` `1` and SHA-256 for
//! `2`, over the canonical string: for a `Notification`, `Message`,
//! `MessageId`, `Subject` (only when present), `Timestamp`, `TopicArn` and
//! `Type`; for a `SubscriptionConfirmation` or `UnsubscribeConfirmation`,
//! `Message`, `MessageId`, `SubscribeURL`, `Timestamp`, `Token`, `TopicArn`
//! and `Type`; each as its name, a newline, its value, a newline. The public
//! key is the one of the X.509 certificate at `SigningCertURL`.
//!
//! **The certificate URL** is the delivery's own, so it is checked before
//! any network access: `https` only, the host `sns.<region>.amazonaws.com`
//! (or `.amazonaws.com.cn`), a path ending `.pem`, no query, no user
//! information, port 443; then fetched at most once an hour per URL and at
//! most 10 times a minute in all ([`verify::fetch`](crate::verify::fetch),
//! the allowlist widened with [`AwsSns::fetcher`]). A URL outside it is
//! answered 401 without a fetch; a certificate that cannot be had, 503 (SNS
//! retries).
//!
//! **Topics.** Any AWS account can publish to a topic it owns and point a
//! subscription at your endpoint: every message is signed by AWS whatever the
//! topic. The preset accepts only the topics you name ([`AwsSns::new`]); a
//! message of another topic is refused (401) before any claim.
//!
//! **Subscription confirmation.** A `SubscriptionConfirmation` of a named
//! topic is verified and claimed like a notification (event type
//! `SubscriptionConfirmation`), and handed to your handler: the crate never
//! confirms a subscription itself. To confirm, the handler fetches the
//! message's `SubscribeURL` (check it is an `https://sns.<region>.amazonaws.com/`
//! URL of the same region), or you confirm in the console. One of a topic
//! you did not name is refused like any of its messages, so it is never
//! confirmed.
//!
//! The event key is `MessageId`, signed, which SNS keeps across the
//! retries of a delivery; the event type is `Type`. Raw message delivery
//! (the subscription attribute `RawMessageDelivery`) sends the message
//! without the envelope and its signature: it cannot be verified, and is
//! refused; keep it off for HTTP(S) subscriptions.
//!
//! **Tolerance: 1 hour**, past and future, on the signed `Timestamp`: an
//! HTTP(S) delivery policy's retries all fall within 3,600 seconds ("Amazon
//! SNS message delivery retries",
//! <https://docs.aws.amazon.com/sns/latest/dg/sns-message-delivery-retries.html>).
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! signed `Timestamp` (RFC 3339, milliseconds); standard topics do not keep
//! the order of messages.

use std::sync::Arc;
use std::time::Duration;

use rsa::pkcs1v15::{Signature, VerifyingKey};
use rsa::signature::Verifier as _;
use rsa::PublicKey as RsaPublicKey;

use crate::key::{EventIdentity, KeyError, KeyErrorKind, KeyExtractor};
use crate::providers::Provider;
use crate::verify::fetch::{BoxPrepare, HostPattern, KeyFetcher, KeyFetcherBuilder, KeyTransport};
use crate::verify::{Delivery, KeyMaterialError, SigningSecret, Verifier, VerifyError, VerifyErrorKind};

/// The CLI name of the preset and the `provider` column of its claims.
pub const NAME: &str = "aws-sns";

/// The signed `Timestamp`'s tolerance, both ways: 1 hour (see the module
/// docs).
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(3600);

/// How long an SNS message can be sent again: 2 days (a delivery policy's
/// retries end within an hour; a day of margin, rounded up).
pub const REPLAY_WINDOW: Duration = super::days(2);

/// The hosts AWS publishes signing certificates on: `sns.<region>.amazonaws.com`
/// (and `.com.cn`), the region an AWS region name only, so that an S3
/// bucket's website name (`sns.s3.amazonaws.com`, `sns.s3-us-west-2.amazonaws.com`:
/// a bucket named `sns`, which anyone may own) never matches.
pub fn certificate_hosts() -> [HostPattern; 2] {
    [HostPattern::new("sns.{region}.amazonaws.com"), HostPattern::new("sns.{region}.amazonaws.com.cn")]
}

/// A certificate's RSA public key, or `None` for anything else (PEM or
/// DER).
pub fn certificate_key(bytes: &[u8]) -> Option<RsaPublicKey> {
    use rsa::pkcs8::DecodePublicKey as _;
    use x509_cert::der::{Decode as _, DecodePem as _, Encode as _};
    let cert = x509_cert::Certificate::from_pem(bytes).or_else(|_| x509_cert::Certificate::from_der(bytes)).ok()?;
    let spki = cert.tbs_certificate().subject_public_key_info().to_der().ok()?;
    RsaPublicKey::from_public_key_der(&spki).ok()
}

/// The AWS SNS preset's settings: the topics accepted and the certificate
/// fetcher.
#[derive(Debug, Clone)]
#[must_use]
pub struct AwsSns {
    /// `None`: any topic (the registry's provider, for offline checks only).
    topics: Option<Arc<[String]>>,
    fetcher: KeyFetcher<RsaPublicKey>,
    tolerance: Duration,
}

impl AwsSns {
    /// The topics `topics` (their ARNs, at least one), certificates fetched
    /// over HTTPS ([`HttpsTransport`](crate::verify::fetch::HttpsTransport))
    /// from AWS's hosts with the default limits.
    ///
    pub fn new(topics: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::with_fetcher(topics, Self::fetcher(crate::verify::fetch::HttpsTransport::new()).build())
    }

    /// The fetcher's builder for AWS's hosts over `transport` (a
    /// [`StaticTransport`](crate::verify::fetch::StaticTransport) in tests),
    /// paths `/SimpleNotificationService-….pem` only, parsing certificates;
    /// its limits can be changed before `build`.
    pub fn fetcher(transport: impl KeyTransport) -> KeyFetcherBuilder<RsaPublicKey> {
        KeyFetcher::builder(certificate_hosts(), transport, certificate_key)
            .path_prefix("/SimpleNotificationService-")
            .path_suffix(".pem")
    }

    /// The topics `topics` with `fetcher`.
    pub fn with_fetcher(
        topics: impl IntoIterator<Item = impl Into<String>>,
        fetcher: KeyFetcher<RsaPublicKey>,
    ) -> Self {
        Self { topics: Some(topics.into_iter().map(Into::into).collect()), fetcher, tolerance: DEFAULT_TOLERANCE }
    }

    /// Any topic: the registry's example only (its fetcher holds the crate's
    /// test certificate), never a receiver's.
    fn any_topic(fetcher: KeyFetcher<RsaPublicKey>) -> Self {
        Self { topics: None, fetcher, tolerance: DEFAULT_TOLERANCE }
    }

    /// Whether messages of `topic` (an ARN) are accepted.
    fn accepts(&self, topic: &str) -> bool {
        self.topics.as_ref().is_none_or(|topics| topics.iter().any(|t| t == topic))
    }

    setters! {
        /// The signed `Timestamp`'s tolerance, both ways (default
        /// [`DEFAULT_TOLERANCE`]).
        pub fn tolerance(tolerance: Duration) => tolerance = tolerance;
    }
}

impl Provider {
    /// AWS SNS HTTP(S) subscriptions (RSA `Signature` over the canonical
    /// string, certificate from `SigningCertURL`, only the topics named;
    /// key = `MessageId`): see [`crate::providers::aws_sns`]. It takes no
    /// signing secret (the layer's secrets are not used).
    pub fn aws_sns(settings: AwsSns) -> Self {
        Provider::new(NAME, SnsVerifier(settings), SnsKey)
    }
}

/// The certificate URL of the registry's example (served by no one: the
/// example's fetcher has the test certificate inserted).
const EXAMPLE_CERT_URL: &str = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-example.pem";
/// The crate's test certificate and its key (`tests/fixtures/providers/aws-sns/`; not AWS's).
const EXAMPLE_CERT: &[u8] = include_bytes!("../../tests/fixtures/providers/aws-sns/test-signing-cert.pem");
const EXAMPLE_KEY: &[u8] = include_bytes!("../../tests/fixtures/providers/aws-sns/test-signing-key.der");

/// The registry's example: `body` as the `Message` of a notification
/// `id` at `at`, signed (version 2) with the crate's test key, to a provider
/// whose fetcher holds the test certificate.
fn example(id: &str, at: std::time::SystemTime, body: &[u8]) -> super::Example {
    use base64::Engine as _;
    use rsa::pkcs8::DecodePrivateKey as _;
    use rsa::signature::{SignatureEncoding as _, Signer as _};
    let fetcher = AwsSns::fetcher(crate::verify::fetch::StaticTransport::default()).build();
    fetcher.insert(EXAMPLE_CERT_URL, EXAMPLE_CERT).expect("the test certificate");
    let ts = super::rfc3339::format(super::unix_seconds(at));
    let mut m = serde_json::json!({
        "Type": "Notification", "MessageId": id, "TopicArn": "arn:aws:sns:us-east-1:123456789012:example",
        "Message": String::from_utf8_lossy(body), "Timestamp": ts, "SignatureVersion": "2",
        "SigningCertURL": EXAMPLE_CERT_URL,
    });
    let signed = canonical(m.as_object().expect("an object")).expect("a notification");
    let key = rsa::PrivateKey::from_pkcs8_der(EXAMPLE_KEY).expect("the test key");
    let signature = rsa::pkcs1v15::SigningKey::<sha2::Sha256>::new(key).sign(signed.as_bytes()).to_vec();
    m["Signature"] = base64::engine::general_purpose::STANDARD.encode(signature).into();
    // No key material: the fetched certificate verifies.
    super::Example {
        provider: Provider::aws_sns(AwsSns::any_topic(fetcher)),
        secrets: vec![],
        parts: super::example_parts("/", vec![("x-amz-sns-message-type", "Notification".to_owned())]),
        body: serde_json::to_vec(&m).expect("JSON"),
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)):
/// its provider accepts **no** topic (a receiver names its own,
/// [`AwsSns::new`]; `webhook-verify` names the message's own topic).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &["x-amz-sns-message-type", "x-amz-sns-message-id", "x-amz-sns-topic-arn"],
    |_| Provider::aws_sns(AwsSns::new(std::iter::empty::<String>())),
    super::ExampleOf::Whole(example),
)
.keys(super::KeyKind::Fetched, super::raw_secret, Some(certificate_text))
.signs("RSA (SHA1 v1, SHA256 v2) `Signature` over the canonical message, certificate from `SigningCertURL` (AWS hosts, fetched)")
.key_from("the message's MessageId (JSON)")
.fixture(super::Fixture::own("signed with the crate's test key (`tests/fixtures/providers/aws-sns/`), in the module's tests"));

/// `--public-key` for SNS: the certificate's PEM text (checked, unused: the
/// verifier fetches the certificate the message names).
fn certificate_text(text: &str) -> Result<SigningSecret, super::KeyTextError> {
    certificate_key(text.as_bytes())
        .map(|_| SigningSecret::from(text))
        .ok_or_else(|| super::key_error("not an X.509 certificate with an RSA key (PEM)"))
}

/// The SNS message's fields, strings all.
type Message = serde_json::Map<String, serde_json::Value>;

/// The message's fields. A name given twice is refused: serde keeps the last
/// value, and a handler's parser might read the first, unsigned one.
fn message(body: &[u8]) -> Result<Message, VerifyError> {
    let refused = |_| VerifyError::new(VerifyErrorKind::MalformedHeader);
    crate::key::json::parse(body).map_err(refused)?;
    serde_json::from_slice(body).map_err(|_| VerifyError::new(VerifyErrorKind::MissingField))
}

fn text<'m>(message: &'m Message, name: &str) -> Result<&'m str, VerifyError> {
    match message.get(name) {
        Some(serde_json::Value::String(s)) => Ok(s),
        _ => Err(VerifyErrorKind::MissingField.into()),
    }
}

/// The canonical string AWS signs for the SNS message `body` (a JSON
/// object; see the module docs for the fields of each `Type`): what a test
/// signs to make an SNS delivery of its own.
///
/// # Errors
/// [`VerifyErrorKind::MissingField`] for a body that is not a JSON object or
/// lacks a signed field, [`VerifyErrorKind::MalformedHeader`] for another
/// `Type`.
pub fn canonical_string(body: &[u8]) -> Result<String, VerifyError> {
    canonical(&message(body)?)
}

/// The canonical string AWS signs for `message`.
pub(crate) fn canonical(message: &Message) -> Result<String, VerifyError> {
    let fields: &[&str] = match text(message, "Type")? {
        "Notification" => &["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"],
        "SubscriptionConfirmation" | "UnsubscribeConfirmation" => {
            &["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"]
        }
        _ => return Err(VerifyErrorKind::MalformedHeader.into()),
    };
    let mut out = String::new();
    for name in fields {
        match text(message, name) {
            // A newline in any field but the message could move text from one
            // field to another with the same signed bytes (a `Subject` folded
            // into `MessageId`): AWS writes none there.
            Ok(value) if *name != "Message" && value.contains('\n') => {
                return Err(VerifyErrorKind::MalformedHeader.into())
            }
            Ok(value) => out.push_str(&format!("{name}\n{value}\n")),
            // Only a notification's Subject may be absent.
            Err(_) if *name == "Subject" && !message.contains_key("Subject") => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The verifier of [`Provider::aws_sns`].
struct SnsVerifier(AwsSns);

impl Verifier for SnsVerifier {
    fn prepare<'a>(&'a self, _parts: &'a http::request::Parts, body: &'a [u8]) -> Option<BoxPrepare<'a>> {
        let message = message(body).ok()?;
        // A topic this endpoint does not accept costs no fetch (verify refuses it).
        if !self.0.accepts(text(&message, "TopicArn").ok()?) {
            return None;
        }
        let url = text(&message, "SigningCertURL").ok()?.to_owned();
        Some(Box::pin(async move { self.0.fetcher.get(&url).await.map(drop) }))
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let message = message(delivery.body)?;
        let topic = text(&message, "TopicArn")?;
        if !self.0.accepts(topic) {
            tracing::debug!("an SNS message of a topic this endpoint does not accept; refused");
            return Err(VerifyErrorKind::NoMatchingSignature.into());
        }
        let signed = canonical(&message)?;
        let signature = {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD.decode(text(&message, "Signature")?);
            Signature::try_from(bytes.map_err(|_| VerifyErrorKind::MalformedHeader)?.as_slice())
                .map_err(|_| VerifyErrorKind::MalformedHeader)?
        };
        let key = self.0.fetcher.cached(text(&message, "SigningCertURL")?).ok_or_else(|| {
            tracing::debug!("the SNS message's certificate is not fetched (or its URL is not allowed)");
            VerifyError::new(VerifyErrorKind::NoMatchingSignature)
        })?;
        let valid = match text(&message, "SignatureVersion")? {
            "1" => VerifyingKey::<sha1::Sha1>::new(RsaPublicKey::clone(&key)).verify(signed.as_bytes(), &signature),
            "2" => VerifyingKey::<sha2::Sha256>::new(RsaPublicKey::clone(&key)).verify(signed.as_bytes(), &signature),
            _ => return Err(VerifyErrorKind::MalformedHeader.into()),
        };
        valid.map_err(|_| VerifyError::new(VerifyErrorKind::NoMatchingSignature))?;
        let at = super::rfc3339::parse(text(&message, "Timestamp")?).ok_or(VerifyErrorKind::MalformedHeader)?;
        delivery.check_time(u64::try_from(at).unwrap_or(0), self.0.tolerance)
    }

    /// SNS sends `x-amz-sns-message-type` (`Notification`,
    /// `SubscriptionConfirmation`, `UnsubscribeConfirmation`) with every
    /// message ("HTTP/HTTPS headers",
    /// <https://docs.aws.amazon.com/sns/latest/dg/http-header.html>): a
    /// request without it is refused before its body is read.
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        let kind = parts.headers.get("x-amz-sns-message-type").ok_or(VerifyErrorKind::MissingHeader)?;
        match kind.as_bytes() {
            b"Notification" | b"SubscriptionConfirmation" | b"UnsubscribeConfirmation" => Ok(()),
            _ => Err(VerifyErrorKind::MalformedHeader.into()),
        }
    }

    /// An RSA signature: verified on the blocking pool.
    fn costly(&self, _parts: &http::request::Parts) -> bool {
        true
    }

    /// SNS takes no signing secret: any (or none) is accepted and unused.
    fn check_secrets(&self, _secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        Ok(())
    }
}

/// `MessageId` as the key, `Type` as the type.
struct SnsKey;

impl KeyExtractor for SnsKey {
    fn extract(&self, _parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let message = message(body).map_err(|_| KeyErrorKind::BodyNotJson)?;
        let key = text(&message, "MessageId").map_err(|_| KeyErrorKind::Missing)?.to_owned();
        let event_type = text(&message, "Type").ok().map(str::to_owned);
        Ok(EventIdentity { key, event_type })
    }
}

#[cfg(test)]
mod tests;
