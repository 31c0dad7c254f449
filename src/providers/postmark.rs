//! Postmark: HTTP Basic credentials in the webhook URL (no signature), and
//! optionally Postmark's webhook source addresses.
//!
//! Scheme (Postmark, "Webhooks overview", "Protecting your webhook",
//! <https://postmarkapp.com/developer/webhooks/webhooks-overview>): Postmark
//! signs nothing. The webhook URL may carry Basic credentials,
//! `https://<username>:<password>@example.com/webhook`, which Postmark sends
//! as `Authorization: Basic base64(username:password)` (RFC 7617) on every
//! request; the preset checks them with
//! [`BasicAuthVerifier`]:
//! configure the secret `username:password`
//! ([`BasicAuthVerifier::credentials`](crate::verify::generic::BasicAuthVerifier::credentials)),
//! a password of at least 16 bytes (a random one: it alone authenticates).
//! A URL saved without credentials sends no `Authorization`, and this preset
//! refuses its requests (401). To rotate, change the URL in Postmark and
//! configure the old and new pairs together for the changeover.
//!
//! **Source addresses (opt-in).** Postmark also publishes the addresses its
//! webhooks come from ("IPs for firewalls", section Webhooks,
//! <https://postmarkapp.com/support/article/800-ips-for-firewalls#webhooks>;
//! [`POSTMARK_WEBHOOK_IPS`] is that list as read for this preset, the same in
//! Symfony Mailer's Postmark bridge, `PostmarkRequestParser`). The crate has
//! no notion of the connection's peer address, so the check reads the client
//! address from a header **your trusted proxy sets** (and overwrites, never
//! appends to: `X-Real-IP` from nginx's `real_ip` module, say), as one
//! address: [`PostmarkVerifier::source_ips_from`]. A request without that
//! header, or whose value is not one address, or an address outside the list,
//! is refused. Never name a header the client can set unchecked
//! (`X-Forwarded-For` as received): anyone could claim Postmark's address.
//! The list can change; pass the current one from the page.
//!
//! **Signed / not signed:** nothing is signed. The credentials (and, with the
//! check, the source address) authenticate the sender; the body, the event
//! key and the event type are **not signed**. The `Authorization` header is
//! a credential: the layer removes it once the request is verified, so the
//! handler never sees it and inbox mode never stores it.
//!
//! **Event key.** Postmark sends no event id. An event is identified by its
//! message, its kind and its own time: the key is
//! `{MessageID}:{RecordType}:{time}`, the time being the record's own field
//! (`DeliveredAt` for `Delivery`, `BouncedAt` for `Bounce` and
//! `SpamComplaint`, `ReceivedAt` for `Open` and `Click`, `ChangedAt` for
//! `SubscriptionChange`; an inbound message, which has no `RecordType`, is
//! `Inbound` with its `Date`). The time tells apart the several opens and
//! clicks of one message; a retry resends the same record, so the same key.
//! The event type is `RecordType` (`Inbound` for an inbound message).
//!
//! **Retries:** a request not answered 200 is retried ten times over about
//! 10.5 hours (1 minute, 5 minutes, ... 6 hours; a `403` stops them), and a
//! failed inbound message can be retried by hand "anytime" (Postmark,
//! "Understanding Inbound Webhook Retries in Postmark",
//! <https://postmarkapp.com/support/article/understanding-inbound-webhook-retries-in-postmark>);
//! with no bound on the manual retry published, [`REPLAY_WINDOW`].
//! **Tolerance:** none; no time is signed. **Handshake:** none.
//!
//! **Limit of the scheme:** whoever holds the credentials, or one captured
//! request, can send any body under any key at any time, and it verifies;
//! the claim only stops Postmark's own retries and concurrent copies. Serve
//! the endpoint over TLS only, use a long random password, and where the
//! event matters, fetch it back from Postmark's API (messages, bounces) by
//! its `MessageID` before acting.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! record's own time above (ISO 8601); Postmark does not promise the order
//! of its requests.

use std::net::IpAddr;

use http::HeaderName;

use crate::key::json::{self, Node};
use crate::key::{EventIdentity, KeyError, KeyErrorKind, KeyExtractor};
use crate::providers::Provider;
use crate::verify::generic::BasicAuthVerifier;
use crate::verify::{single_header, Delivery, KeyMaterialError, SigningSecret, Verifier, VerifyError, VerifyErrorKind};

/// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
pub const NAME: &str = "postmark";

/// How long a Postmark event can be sent again: 30 days.
///
/// Postmark retries a request ten times over about 10.5 hours, and a failed
/// inbound message can be retried by hand "anytime"
/// (<https://postmarkapp.com/support/article/understanding-inbound-webhook-retries-in-postmark>);
/// no bound on that is published, so the window is the crate's default for an
/// unknown span, [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const REPLAY_WINDOW: std::time::Duration = super::DEFAULT_REPLAY_WINDOW;

/// The header Postmark's Basic credentials come in (lower case).
pub const AUTHORIZATION_HEADER: &str = "authorization";

/// The addresses Postmark's webhooks come from, as its support page lists
/// them (<https://postmarkapp.com/support/article/800-ips-for-firewalls#webhooks>,
/// read for this preset; the same four in Symfony Mailer's Postmark bridge).
/// For [`PostmarkVerifier::source_ips_from`]; check the page for changes.
pub const POSTMARK_WEBHOOK_IPS: [&str; 4] = ["3.134.147.250", "50.31.156.6", "50.31.156.77", "18.217.206.57"];

/// Verifies Postmark's Basic credentials and, opted in, its source address.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct PostmarkVerifier {
    basic: BasicAuthVerifier,
    source: Option<(HeaderName, Vec<IpAddr>)>,
}

impl PostmarkVerifier {
    /// The Basic-credentials check alone.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also requires the client address, read from `header` (set by your
    /// trusted proxy as one IPv4 or IPv6 address, never by the client), to be
    /// one of `ips` (for example [`POSTMARK_WEBHOOK_IPS`]).
    ///
    /// # Panics
    /// When an entry of `ips` is not an IP address (a configuration error).
    pub fn source_ips_from<'i>(mut self, header: HeaderName, ips: impl IntoIterator<Item = &'i str>) -> Self {
        let ips =
            ips.into_iter().map(|ip| ip.parse().unwrap_or_else(|_| panic!("not an IP address: {ip:?}"))).collect();
        self.source = Some((header, ips));
        self
    }

    /// The source check: the header's one address is in the list.
    fn check_source(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        let Some((header, ips)) = &self.source else { return Ok(()) };
        let text = single_header(parts, header.as_str())?;
        let ip: IpAddr = text.trim().parse().map_err(|_| VerifyErrorKind::MalformedHeader)?;
        // An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) is the same sender.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        if ips.contains(&ip) {
            Ok(())
        } else {
            Err(VerifyErrorKind::NoMatchingSignature.into())
        }
    }
}

impl Verifier for PostmarkVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        self.check_source(parts)?;
        self.basic.precheck(parts)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        self.check_source(delivery.parts)?;
        self.basic.verify(delivery)
    }

    /// As [`BasicAuthVerifier`]'s: `username:password` pairs, the password
    /// at least 16 bytes.
    ///
    /// # Errors
    /// [`BasicAuthVerifier`]'s.
    fn check_secrets(&self, secrets: &[SigningSecret]) -> Result<(), KeyMaterialError> {
        self.basic.check_secrets(secrets)
    }

    /// `Authorization`.
    fn credential_headers(&self) -> &[HeaderName] {
        self.basic.credential_headers()
    }
}

/// The record's own time field, by `RecordType`.
fn time_field(record_type: &str) -> Option<&'static str> {
    Some(match record_type {
        "Delivery" => "DeliveredAt",
        "Bounce" | "SpamComplaint" => "BouncedAt",
        "Open" | "Click" => "ReceivedAt",
        "SubscriptionChange" => "ChangedAt",
        "Inbound" => "Date",
        _ => return None,
    })
}

/// Reads the key `{MessageID}:{RecordType}:{time}` and `RecordType` as the
/// type (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct PostmarkKey;

impl KeyExtractor for PostmarkKey {
    /// # Errors
    /// [`KeyErrorKind::BodyNotJson`] for a body that is not strict JSON;
    /// [`KeyErrorKind::Missing`] without `MessageID`, or without the record's
    /// time field (a `RecordType` this preset does not know has none);
    /// [`KeyErrorKind::Invalid`] for one that is not text.
    fn extract(&self, _parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let root = json::parse(body)?;
        let text = |name: &str| match root.pointer(&format!("/{name}")) {
            None | Some(Node::Null) => Ok(None),
            Some(Node::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
            Some(_) => Err(KeyError::from(KeyErrorKind::Invalid)),
        };
        let message = text("MessageID")?.ok_or(KeyErrorKind::Missing)?;
        let record = text("RecordType")?.map_or_else(|| "Inbound".to_owned(), |r| r.into_owned());
        let field = time_field(&record).ok_or(KeyErrorKind::Missing)?;
        let time = text(field)?.ok_or(KeyErrorKind::Missing)?;
        Ok(EventIdentity { key: format!("{message}:{record}:{time}"), event_type: Some(record) })
    }
}

impl Provider {
    /// Postmark (Basic credentials from the webhook URL, no signature; key =
    /// `MessageID:RecordType:time`). See [`crate::providers::postmark`].
    ///
    /// The Postmark preset: [`PostmarkVerifier`] without the source check
    /// (add it with `.verifier(PostmarkVerifier::new().source_ips_from(..))`),
    /// key [`PostmarkKey`], `Authorization` declared a credential.
    pub fn postmark() -> Self {
        Provider::new(NAME, PostmarkVerifier::new(), PostmarkKey).credentials_in(PRESET.credentials())
    }
}

/// The example's Basic credentials.
const EXAMPLE_USER: &str = "postmark";
const EXAMPLE_PASSWORD: &str = "example-password-0123456789";

/// [`PresetInfo::sign`](super::PresetInfo::sign) for Postmark: `key` is the
/// webhook URL's Basic credentials, `user:password`.
fn send(key: &str, d: &super::Signing<'_>) -> Result<super::Example, super::SignError> {
    let (user, password) = key
        .split_once(':')
        .ok_or_else(|| super::key_error("postmark: the credentials are user:password, as in the webhook URL"))?;
    let headers = vec![
        (AUTHORIZATION_HEADER, BasicAuthVerifier::header_value(user, password)),
        ("content-type", "application/json".to_owned()),
    ];
    let secret = BasicAuthVerifier::credentials(user, password);
    super::signed_delivery(Provider::postmark(), secret, d, headers, d.body.to_vec())
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[AUTHORIZATION_HEADER],
    |_| Provider::postmark(),
    super::ExampleOf::Whole(|id, _, body| {
        let header = BasicAuthVerifier::header_value(EXAMPLE_USER, EXAMPLE_PASSWORD);
        let record = serde_json::json!({
            "RecordType": "Delivery", "MessageID": if id.is_empty() { "message-1" } else { id },
            "DeliveredAt": "2024-06-10T06:13:20Z", "Details": String::from_utf8_lossy(body),
        });
        super::Example {
            provider: Provider::postmark(),
            secrets: vec![BasicAuthVerifier::credentials(EXAMPLE_USER, EXAMPLE_PASSWORD)],
            parts: super::example_parts("/", vec![(AUTHORIZATION_HEADER, header)]),
            body: record.to_string().into_bytes(),
        }
    }),
)
.sends(send)
.shared_token(&[AUTHORIZATION_HEADER])
.signs("`Authorization: Basic` from the webhook URL's credentials (no signature; body not signed)")
.key_from("the body's MessageID:RecordType:time (JSON)")
.fixture(super::Fixture::formula(&[]));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_body_identity, at, headers, NOW};
    use crate::verify::VerifyErrorKind::{MalformedHeader, MissingHeader, NoMatchingSignature};

    fn check(v: &PostmarkVerifier, list: &[(&str, &str)], secrets: &[SigningSecret]) -> Result<(), VerifyErrorKind> {
        let p = headers(list);
        let got = v.verify(&Delivery::new(&p, b"{}", secrets, at(NOW))).map_err(|e| e.kind());
        if matches!(got, Err(MissingHeader | MalformedHeader)) {
            assert_eq!(v.precheck(&p).map_err(|e| e.kind()), got, "the head alone fails it");
        }
        got
    }

    #[test]
    fn verifies_and_rejects() {
        let pair = BasicAuthVerifier::credentials("postmark", "a-long-random-password-42");
        let good = BasicAuthVerifier::header_value("postmark", "a-long-random-password-42");
        let wrong = BasicAuthVerifier::header_value("postmark", "a-long-random-password-43");
        let other_user = BasicAuthVerifier::header_value("mark", "a-long-random-password-42");
        let plain = PostmarkVerifier::new();
        let ips = PostmarkVerifier::new().source_ips_from(HeaderName::from_static("x-real-ip"), POSTMARK_WEBHOOK_IPS);
        let k = std::slice::from_ref(&pair);
        let auth = AUTHORIZATION_HEADER;
        let cases: Vec<(&str, &PostmarkVerifier, Vec<(&str, &str)>, Result<(), VerifyErrorKind>)> = vec![
            ("valid", &plain, vec![(auth, &good)], Ok(())),
            ("wrong password", &plain, vec![(auth, &wrong)], Err(NoMatchingSignature)),
            ("other user", &plain, vec![(auth, &other_user)], Err(NoMatchingSignature)),
            ("no credentials", &plain, vec![], Err(MissingHeader)),
            ("Bearer, not Basic", &plain, vec![(auth, "Bearer a-long-random-password-42")], Err(MalformedHeader)),
            ("from Postmark's address", &ips, vec![(auth, &good), ("x-real-ip", "50.31.156.6")], Ok(())),
            ("an IPv4-mapped address", &ips, vec![(auth, &good), ("x-real-ip", "::ffff:50.31.156.6")], Ok(())),
            ("from elsewhere", &ips, vec![(auth, &good), ("x-real-ip", "203.0.113.9")], Err(NoMatchingSignature)),
            ("no address header", &ips, vec![(auth, &good)], Err(MissingHeader)),
            (
                "a list of addresses",
                &ips,
                vec![(auth, &good), ("x-real-ip", "50.31.156.6, 1.2.3.4")],
                Err(MalformedHeader),
            ),
            (
                "right address, wrong password",
                &ips,
                vec![(auth, &wrong), ("x-real-ip", "50.31.156.6")],
                Err(NoMatchingSignature),
            ),
        ];
        for (name, v, list, want) in cases {
            assert_eq!(check(v, &list, k), want, "{name}");
        }
        // Rotation: either pair configured passes.
        let both = [BasicAuthVerifier::credentials("postmark", "the-old-password-0123"), pair.clone()];
        assert_eq!(check(&plain, &[(auth, &good)], &both), Ok(()));
        // A short password is refused when the layer is built.
        let weak = [BasicAuthVerifier::credentials("postmark", "short")];
        assert_eq!(plain.check_secrets(&weak).unwrap_err().kind(), crate::verify::KeyMaterialErrorKind::WeakCredential);
        assert_eq!(plain.credential_headers(), [http::header::AUTHORIZATION]);
    }

    #[test]
    #[should_panic(expected = "not an IP address")]
    fn a_source_list_entry_must_be_an_address() {
        let _ = PostmarkVerifier::new().source_ips_from(HeaderName::from_static("x-real-ip"), ["postmark.com"]);
    }

    /// Every record type's time field, an inbound message, a retry (the same
    /// record, the same key), two opens of one message (two keys).
    #[test]
    fn key_and_type() {
        let p = Provider::postmark();
        let cases: &[(&str, &str, &str)] = &[
            (
                r#"{"RecordType":"Delivery","MessageID":"m1","DeliveredAt":"2024-06-10T06:13:20Z"}"#,
                "m1:Delivery:2024-06-10T06:13:20Z",
                "Delivery",
            ),
            (
                r#"{"RecordType":"Bounce","ID":42,"MessageID":"m1","BouncedAt":"2024-06-10T06:13:21Z"}"#,
                "m1:Bounce:2024-06-10T06:13:21Z",
                "Bounce",
            ),
            (
                r#"{"RecordType":"SpamComplaint","MessageID":"m1","BouncedAt":"t3"}"#,
                "m1:SpamComplaint:t3",
                "SpamComplaint",
            ),
            (r#"{"RecordType":"Open","MessageID":"m1","ReceivedAt":"t4"}"#, "m1:Open:t4", "Open"),
            (r#"{"RecordType":"Open","MessageID":"m1","ReceivedAt":"t5"}"#, "m1:Open:t5", "Open"),
            (r#"{"RecordType":"Click","MessageID":"m1","ReceivedAt":"t6"}"#, "m1:Click:t6", "Click"),
            (
                r#"{"RecordType":"SubscriptionChange","MessageID":"m1","ChangedAt":"t7"}"#,
                "m1:SubscriptionChange:t7",
                "SubscriptionChange",
            ),
            (
                r#"{"MessageID":"in1","Date":"Mon, 10 Jun 2024 06:13:20 +0000","From":"a@example.com"}"#,
                "in1:Inbound:Mon, 10 Jun 2024 06:13:20 +0000",
                "Inbound",
            ),
        ];
        for (body, key, event_type) in cases {
            assert_body_identity(&p, body.as_bytes(), key, Some(event_type));
        }
        let bare = headers(&[]);
        let errors: &[(&str, KeyErrorKind)] = &[
            (r#"{"RecordType":"Open","ReceivedAt":"t"}"#, KeyErrorKind::Missing),
            (r#"{"RecordType":"Open","MessageID":"m1"}"#, KeyErrorKind::Missing),
            (r#"{"RecordType":"NewKind","MessageID":"m1","ReceivedAt":"t"}"#, KeyErrorKind::Missing),
            (r#"{"RecordType":"Open","MessageID":7,"ReceivedAt":"t"}"#, KeyErrorKind::Invalid),
            (r#"{"MessageID":"m","MessageID":"n"}"#, KeyErrorKind::DuplicateMember),
            ("RecordType=Open", KeyErrorKind::BodyNotJson),
        ];
        for (body, want) in errors {
            assert_eq!(PostmarkKey.extract(&bare, body.as_bytes()).unwrap_err().kind(), *want, "{body}");
        }
        let entry = crate::providers::find(NAME).expect("the preset");
        assert!(!entry.signs_body);
        assert_eq!(entry.credential_headers, [AUTHORIZATION_HEADER]);
    }
}
