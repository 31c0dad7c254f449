//! Meta (Graph API webhooks: WhatsApp Cloud API, Messenger, Instagram, and
//! every other Graph API object): the `X-Hub-Signature-256` header, and the
//! `hub.mode=subscribe` verification request.
//!
//! Scheme (Meta for Developers, "Webhooks", "Getting Started", sections
//! "Event Notifications" and "Validating Payloads",
//! <https://developers.facebook.com/docs/graph-api/webhooks/getting-started/>):
//! `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>`, keyed
//! with the **app secret** (App Dashboard, Settings, Basic) as given. Meta
//! signs "an escaped unicode version of the payload, with lowercase hex
//! digits" (`ä` as `\u00e4`): that is the body as it is sent, so verifying
//! the raw bytes is right and verifying a re-serialised body is not. One
//! signature; after resetting the app secret, configure the old and new
//! ones together until the deliveries signed with the old one are answered.
//! (The older `X-Hub-Signature`, HMAC-SHA1, is not checked.)
//!
//! **Event key.** A notification is a batch, `{"object": "<object type>",
//! "entry": [{"id", "time", "changes" | "messaging": [...]}, ...]}`, "with a
//! maximum of 1000 updates"; Meta sends **no event or delivery id**, retries
//! a notification that failed, and tells the receiver to "handle
//! deduplication" ("Event Notifications", same page). The ids inside
//! (WhatsApp's `messages[].id`, `statuses[].id`) do not name an event: a
//! message's `sent`, `delivered` and `read` statuses all carry its one
//! `wamid`. The key is therefore a [`DerivedKey`](crate::key::DerivedKey)
//! over the whole body in canonical JSON (RFC 8785), so a retry of the same
//! notification is a duplicate however it is spaced; the event type is the
//! body's `object` (`whatsapp_business_account`, `page`, `instagram`).
//! **Limit:** Meta says batching "cannot be guaranteed"; a retry that
//! regroups the updates is a new key, and two notifications whose bodies
//! are the same share one (each `entry` carries its `time`, which makes that
//! unlikely). Where an update must take effect once, have the handler claim
//! it too ([`WebhookTx::claim_action`](crate::WebhookTx::claim_action) on,
//! for WhatsApp, the `wamid` and the status).
//!
//! **Verification request (the handshake).** When the Webhooks product is
//! configured, Meta sends `GET <endpoint>?hub.mode=subscribe&hub.challenge=<an
//! int>&hub.verify_token=<the Verify Token typed in the App Dashboard>` and
//! expects the challenge back ("Verification Requests", same page). It is
//! **not signed**: the verify token, a string the user chose, is its only
//! credential. [`Provider::meta`] answers no such request: its methods are
//! `POST` only and the layer answers a `GET` 405, so Meta's dashboard
//! reports that the callback URL could not be validated.
//! [`Provider::meta_with_verify_token`] answers it: its verifier lets a `GET`
//! through exactly when its query holds `hub.mode=subscribe`, a
//! `hub.challenge` of 1 to 64 ASCII digits and a `hub.verify_token` equal to
//! the configured token (compared in constant time, as SHA-256 digests, so
//! neither its bytes nor its length leak), each parameter once; its
//! `Challenge` answers every such request `200` `text/plain` with
//! `X-Content-Type-Options: nosniff` and the challenge as the body, before
//! any claim. Nothing of a `GET` is ever claimed or reaches the handler. A
//! `GET` with a wrong token is refused (401), one missing a parameter too,
//! and an unsigned `POST` is refused whatever its query says. An empty
//! configured token matches nothing. The verify token travels in the URL:
//! keep it out of access logs where that matters, and choose one that
//! authenticates nothing else.
//!
//! **Limit of the scheme:** only the body is signed, with no timestamp: a
//! captured notification verifies forever; the claim on its digest makes its
//! replay a duplicate while the claim is kept. Serve the endpoint over TLS.
//!
//! **Signed / not signed**
//! (<https://developers.facebook.com/docs/graph-api/webhooks/getting-started/>):
//! only the raw body is signed, so the event key (its digest) and type (its
//! `object`) are. Headers and the query are not; the verification request
//! is not signed at all (see above).
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): each
//! entry's `time` (Unix seconds; milliseconds for Messenger's `messaging[]`
//! items' `timestamp`), or WhatsApp's `statuses[].timestamp` (Unix seconds,
//! as text); Meta does not promise the order of deliveries.

use bytes::Bytes;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq as _;

use crate::providers::{Challenge, Provider};
use crate::providers::{EventKey, HmacPreset, KeyField};
use crate::verify::generic::{HmacScheme, HmacVerifier};
use crate::verify::{Delivery, Verifier, VerifyError, VerifyErrorKind};

/// The facts of the meta preset (the scheme is in the module docs).
///
/// **Replay window: 8 days.** Meta retries a notification that is not
/// answered 200, "immediately" and then with decreasing frequency; for the
/// WhatsApp Business Platform for up to 7 days (Meta, WhatsApp Cloud API,
/// "Webhooks",
/// <https://developers.facebook.com/docs/whatsapp/cloud-api/guides/set-up-webhooks>;
/// the Graph API page drops unacknowledged notifications after 36 hours).
/// The longest, 7 days, plus a day of margin; no manual redelivery is
/// documented.
pub const FACTS: HmacPreset = HmacPreset {
    name: "meta",
    scheme: HmacScheme { prefix: "sha256=", strict: true, ..HmacScheme::new("x-hub-signature-256") },
    event_key: EventKey::Derived { fields: &[KeyField::CanonicalBody], event_type: Some(KeyField::Json("/object")) },
    headers: &[],
    replay_window: super::days(8),
    replay_evidence: "WhatsApp retries for up to 7 days (https://developers.facebook.com/docs/whatsapp/cloud-api/guides/set-up-webhooks)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Meta Graph API webhooks (`X-Hub-Signature-256: sha256=<hex>`, key
    /// derived from the canonical body, type = `object`), signed `POST`s
    /// only: [`meta::FACTS`](FACTS). Answers no verification request; use
    /// [`Provider::meta_with_verify_token`] on the endpoint Meta verifies.
    /// See [`crate::providers::meta`].
    pub fn meta() -> Self {
        FACTS.provider()
    }

    /// [`Provider::meta`], which also answers Meta's `GET`
    /// `hub.mode=subscribe` verification request whose `hub.verify_token`
    /// equals `verify_token` (the Verify Token typed in the App Dashboard;
    /// empty matches nothing) with its `hub.challenge`, as `text/plain`,
    /// before any claim. Methods: `POST` and `GET`. See
    /// [`crate::providers::meta`], "Verification request".
    pub fn meta_with_verify_token(verify_token: impl AsRef<str>) -> Self {
        let token = VerifyToken::new(verify_token.as_ref());
        FACTS
            .provider()
            .verifier(MetaVerifier { inner: FACTS.verifier(), token })
            .challenge(Verification { token })
            .methods([http::Method::POST, http::Method::GET])
    }
}

/// The configured verify token, as its SHA-256 (`None`: empty, which
/// matches nothing).
#[derive(Debug, Clone, Copy)]
struct VerifyToken(Option<[u8; 32]>);

impl VerifyToken {
    fn new(token: &str) -> Self {
        Self((!token.is_empty()).then(|| Sha256::digest(token.as_bytes()).into()))
    }

    /// Whether `given` is the token, in constant time.
    fn matches(&self, given: &str) -> bool {
        self.0.is_some_and(|want| bool::from(want.ct_eq(&Sha256::digest(given.as_bytes())[..])))
    }
}

/// The longest `hub.challenge` answered, in ASCII digits.
const MAX_CHALLENGE_DIGITS: usize = 64;

/// The `hub.challenge` of `parts` when it is Meta's verification request for
/// `token` (see the module docs); else why not.
fn verification_challenge(parts: &http::request::Parts, token: &VerifyToken) -> Result<String, VerifyError> {
    use VerifyErrorKind::{MalformedHeader, MissingHeader, NoMatchingSignature};
    if parts.method != http::Method::GET {
        return Err(MissingHeader.into());
    }
    let query = parts.uri.query().ok_or(MissingHeader)?;
    let (mut mode, mut challenge, mut given) = (None, None, None);
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        let slot = match &*name {
            "hub.mode" => &mut mode,
            "hub.challenge" => &mut challenge,
            "hub.verify_token" => &mut given,
            _ => continue,
        };
        if slot.replace(value).is_some() {
            return Err(MalformedHeader.into());
        }
    }
    let (Some(mode), Some(challenge), Some(given)) = (mode, challenge, given) else {
        return Err(MissingHeader.into());
    };
    let digits = !challenge.is_empty() && challenge.len() <= MAX_CHALLENGE_DIGITS;
    if mode != "subscribe" || !digits || !challenge.bytes().all(|b| b.is_ascii_digit()) {
        return Err(MalformedHeader.into());
    }
    if !token.matches(&given) {
        return Err(NoMatchingSignature.into());
    }
    Ok(challenge.into_owned())
}

/// The verifier of [`Provider::meta_with_verify_token`]: a `GET` passes when
/// it is Meta's verification request for its token; anything else is
/// verified as [`FACTS`] says.
#[derive(Debug, Clone)]
struct MetaVerifier {
    inner: HmacVerifier,
    token: VerifyToken,
}

impl Verifier for MetaVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        if parts.method == http::Method::GET {
            return verification_challenge(parts, &self.token).map(drop);
        }
        self.inner.precheck(parts)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        if delivery.parts.method == http::Method::GET {
            return verification_challenge(delivery.parts, &self.token).map(drop);
        }
        self.inner.verify(delivery)
    }
}

/// Answers every request [`MetaVerifier`] let through as a verification
/// request: `200` `text/plain` (`nosniff`) with its `hub.challenge`; `None`
/// for every other delivery.
#[derive(Debug, Clone, Copy)]
struct Verification {
    token: VerifyToken,
}

impl Challenge for Verification {
    fn respond(&self, delivery: &Delivery<'_>) -> Option<http::Response<Bytes>> {
        let challenge = verification_challenge(delivery.parts, &self.token).ok()?;
        let mut res = http::Response::new(Bytes::from(challenge));
        let headers = res.headers_mut();
        headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
        headers.insert(http::header::X_CONTENT_TYPE_OPTIONS, http::HeaderValue::from_static("nosniff"));
        Some(res)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::{sign, BodyOnly};
    use crate::test_support::{at, request_to, NOW};
    use crate::verify::SigningSecret;

    /// The common cases, rotation and precheck, and Meta's own: lower-case
    /// hex behind `sha256=`.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"object":"page","entry":[{"id":"1","time":1700000000,"messaging":[]}]}"#;
        BodyOnly::of(&FACTS).check_cases("meta_app_secret", body, b"{\"object\":\"page\"}", "sha1=00", |_, good| {
            use VerifyErrorKind::MalformedHeader;
            vec![
                ("no prefix", vec![good[7..].to_owned()], Err(MalformedHeader)),
                ("sha1 prefix", vec![format!("sha1={}", &good[7..])], Err(MalformedHeader)),
            ]
        });
    }

    /// The escaped-unicode body Meta signs verifies as sent; the same JSON
    /// with the characters unescaped is another body.
    #[test]
    fn signs_the_escaped_body_as_sent() {
        let secret = SigningSecret::from("meta_app_secret");
        let escaped = br#"{"object":"page","entry":[{"id":"1","time":1,"text":"\u00e4\u00f6\u00e5"}]}"#;
        let raw = r#"{"object":"page","entry":[{"id":"1","time":1,"text":"äöå"}]}"#.as_bytes();
        let p = crate::test_support::header_lines(FACTS.scheme.header, &[&sign(&FACTS, &secret, escaped)]);
        let secrets = [secret];
        assert!(FACTS.verifier().verify(&Delivery::new(&p, escaped, &secrets, at(NOW))).is_ok());
        let got = FACTS.verifier().verify(&Delivery::new(&p, raw, &secrets, at(NOW))).map_err(|e| e.kind());
        assert_eq!(got, Err(VerifyErrorKind::NoMatchingSignature));
        // Both spellings are one event: the key is over the canonical JSON.
        let p = Provider::meta();
        let key = |body: &[u8]| crate::test_support::identity(&p, &crate::test_support::headers(&[]), body);
        assert_eq!(key(escaped).key, key(raw).key);
        assert_eq!(key(escaped).event_type.as_deref(), Some("page"));
    }

    /// Meta's verification request: answered with the challenge only when
    /// the token matches; every `GET` the verifier passes is answered; an
    /// unsigned `POST` is refused whatever its query.
    #[test]
    fn answers_the_verification_request_only_with_the_token() {
        use VerifyErrorKind::{MalformedHeader, MissingHeader, NoMatchingSignature};
        let provider = Provider::meta_with_verify_token("meatyhamhock");
        assert_eq!(provider.allowed_methods(), [http::Method::POST, http::Method::GET]);
        assert_eq!(Provider::meta().allowed_methods(), [http::Method::POST]);
        let secrets = [SigningSecret::from("meta_app_secret")];
        let ask = |method: &str, uri: &str| {
            let p = request_to(method, uri, &[]);
            let verified = provider.verifier_ref().precheck(&p).map_err(|e| e.kind());
            let answer = provider.handshake(&Delivery::new(&p, b"", &secrets, at(NOW))).map_err(|e| e.kind());
            if let Ok(ok) = &answer {
                assert!(ok.is_some(), "{uri}: a GET the verifier passes is answered, never claimed");
            }
            assert_eq!(verified, answer.as_ref().map(drop).map_err(|k| *k), "{uri}: the precheck agrees");
            answer.map(|res| res.expect("answered"))
        };
        let ok = "/hook?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock";
        let res = ask("GET", ok).unwrap();
        assert_eq!(res.status(), http::StatusCode::OK);
        assert_eq!(res.body().as_ref(), b"1158201444");
        assert_eq!(res.headers()[http::header::CONTENT_TYPE], "text/plain; charset=utf-8");
        assert_eq!(res.headers()[http::header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        let encoded = "/hook?hub.verify_token=meaty%68amhock&hub.challenge=7&hub.mode=subscribe&x=1";
        assert_eq!(ask("GET", encoded).unwrap().body().as_ref(), b"7");
        let cases: &[(&str, VerifyErrorKind)] = &[
            ("/hook?hub.mode=subscribe&hub.challenge=1&hub.verify_token=wrong", NoMatchingSignature),
            ("/hook?hub.mode=subscribe&hub.challenge=1&hub.verify_token=", NoMatchingSignature),
            ("/hook?hub.mode=subscribe&hub.challenge=1", MissingHeader),
            ("/hook", MissingHeader),
            ("/hook?hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=meatyhamhock", MalformedHeader),
            ("/hook?hub.mode=subscribe&hub.challenge=%3Cb%3E&hub.verify_token=meatyhamhock", MalformedHeader),
            ("/hook?hub.mode=subscribe&hub.challenge=&hub.verify_token=meatyhamhock", MalformedHeader),
            ("/hook?hub.mode=subscribe&hub.challenge=1&hub.challenge=2&hub.verify_token=meatyhamhock", MalformedHeader),
        ];
        for (uri, want) in cases {
            assert_eq!(ask("GET", uri).map(drop), Err(*want), "{uri}");
        }
        let long = format!("/hook?hub.mode=subscribe&hub.challenge={}&hub.verify_token=meatyhamhock", "9".repeat(65));
        assert_eq!(ask("GET", &long).map(drop), Err(MalformedHeader));
        // An unsigned POST carrying the same query is refused.
        let p = request_to("POST", ok, &[]);
        let got = provider.handshake(&Delivery::new(&p, b"{}", &secrets, at(NOW))).map_err(|e| e.kind());
        assert_eq!(got.unwrap_err(), MissingHeader);
        // The preset without a token lets no GET through.
        let p = request_to("GET", ok, &[]);
        assert!(Provider::meta().handshake(&Delivery::new(&p, b"", &secrets, at(NOW))).is_err());
        // An empty configured token matches nothing, not even an empty one.
        let empty = Provider::meta_with_verify_token("");
        let p = request_to("GET", "/hook?hub.mode=subscribe&hub.challenge=1&hub.verify_token=", &[]);
        assert!(empty.handshake(&Delivery::new(&p, b"", &secrets, at(NOW))).is_err());
    }

    /// With the token configured, signed notifications verify as
    /// [`Provider::meta`]'s do, and are not taken for a handshake.
    #[test]
    fn with_a_token_notifications_still_verify() {
        let secret = SigningSecret::from("meta_app_secret");
        let body = br#"{"object":"instagram","entry":[{"id":"1","time":2,"changes":[]}]}"#;
        let sig = sign(&FACTS, &secret, body);
        let provider = Provider::meta_with_verify_token("t");
        let p = request_to(
            "POST",
            "/hook?hub.mode=subscribe&hub.challenge=1&hub.verify_token=t",
            &[(FACTS.scheme.header, sig.as_str())],
        );
        let secrets = [secret];
        assert!(provider.handshake(&Delivery::new(&p, body, &secrets, at(NOW))).unwrap().is_none());
        let tampered = [&body[..], b" "].concat();
        assert!(provider.handshake(&Delivery::new(&p, &tampered, &secrets, at(NOW))).is_err());
        assert_eq!(provider.name(), "meta");
    }
}
