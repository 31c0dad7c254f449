//! Cal.com: the `X-Cal-Signature-256` header.
//!
//! Scheme (Cal.com, "Webhooks", <https://cal.com/docs/developing/guides/automation/webhooks>,
//! and the sender's source, `calcom/cal.com`
//! `packages/features/webhooks/lib/sendPayload.ts`, `createWebhookSignature`):
//! `X-Cal-Signature-256: <hex HMAC-SHA256 of the raw body>`, no prefix,
//! keyed with the webhook's secret as given. A webhook saved **without** a
//! secret is sent with the literal header `no-secret-provided`: such a
//! delivery is unsigned, and this preset refuses it as a malformed header
//! (give the webhook a secret). One signature; to change the secret,
//! configure the old and new ones together.
//!
//! **Event key.** Cal.com sends no event or delivery id. The body is
//! `{triggerEvent, createdAt, payload}`; a booking's `payload.uid` names the
//! booking. The key is a [`DerivedKey`] over `triggerEvent`, `createdAt`
//! (the event's time, not the send time) and `payload.uid`; a body without
//! `payload.uid` (the "Ping test" the settings page sends, `triggerEvent:
//! "PING"`, meeting and form events) falls back to `triggerEvent` and the
//! whole body in canonical JSON. The sender makes one attempt per event (no
//! retry in `sendPayload.ts`), so the key chiefly stops a request that
//! arrives twice. The event type is `triggerEvent` (`BOOKING_CREATED`).
//!
//! **Not covered:** a webhook with a custom payload template that is not
//! JSON is sent as `application/x-www-form-urlencoded`; it verifies (the MAC
//! is over the raw body), but this preset finds no key in it (400
//! `body_not_json`): give such a webhook its own key extractor.
//!
//! **Limit of the scheme:** the signature covers only the body, with no
//! timestamp; a captured delivery verifies forever; the claim makes its
//! replay a duplicate. Serve the endpoint over TLS.
//!
//! **Signed / not signed**
//! (<https://cal.com/docs/developing/guides/automation/webhooks>): only the
//! raw body is signed; the event key and type come from it. Headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! body's `createdAt` (ISO 8601).

use crate::key::{json, DerivedKey, EventIdentity, KeyError, KeyErrorKind};
use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;

/// The header the signature travels in.
const SIGNATURE_HEADER: &str = "x-cal-signature-256";

/// The facts of the cal-com preset (the scheme is in the module docs).
///
/// **Replay window.** How long a Cal.com event can be sent again: 30 days.
///
/// Cal.com documents no retry schedule and no manual redelivery
/// (<https://cal.com/docs/developing/guides/automation/webhooks>); the
/// sender's `sendPayload.ts` makes a single attempt, and newer deployments
/// may queue deliveries differently. With the span not stated, the window is
/// the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "cal-com",
    scheme: HmacScheme {
        strict: true,
        ..HmacScheme::new(SIGNATURE_HEADER)
    },
    event_key: EventKey::Own {
        extractor: &event_identity,
        reads: "fields of the JSON body (a derived key)",
        id_header: None,
    },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence:
        "no retry found in the sender's code; no published span (https://cal.com/docs/developing/guides/automation/webhooks)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// Cal.com (`X-Cal-Signature-256`, hex HMAC-SHA256; derived key). See [`crate::providers::cal_com`].
    ///
    /// The Cal.com preset: [`cal_com::FACTS`](FACTS); key derived from
    /// `triggerEvent`, `createdAt` and `payload.uid` (`event_identity`),
    /// type = `triggerEvent`.
    pub fn cal_com() -> Self {
        FACTS.provider()
    }
}

/// What Cal.com sends in `SIGNATURE_HEADER` for a webhook without a
/// secret (refused: the delivery is not signed).
#[cfg(test)]
const NO_SECRET: &str = "no-secret-provided";

/// Cal.com's event identity (see the [module docs](self)): a derived key
/// over `triggerEvent`, `createdAt` and `payload.uid`, else over
/// `triggerEvent` and the canonical body; type = `triggerEvent`.
///
/// # Errors
/// [`KeyErrorKind::BodyNotJson`] (and the other [`DerivedKey`] errors) for a
/// body that is not strict JSON, [`KeyErrorKind::Missing`] without
/// `triggerEvent`.
fn event_identity(parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
    let doc = json::parse(body)?;
    let booking = DerivedKey::new().json("/triggerEvent").json("/createdAt").json("/payload/uid");
    match booking.event_type_json("/triggerEvent").extract_parsed(parts, Some(&doc)) {
        Err(e) if e.kind() == KeyErrorKind::Missing && doc.pointer("/triggerEvent").is_some() => DerivedKey::new()
            .json("/triggerEvent")
            .canonical_body()
            .event_type_json("/triggerEvent")
            .extract_parsed(parts, Some(&doc)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::BodyOnly;
    use crate::test_support::headers;

    use crate::verify::VerifyErrorKind;

    /// The common cases, rotation and precheck (`no-secret-provided` fails
    /// it), and Cal.com's own: bare hex, and the no-secret marker refused.
    #[test]
    fn verifies_and_rejects() {
        let body =
            br#"{"triggerEvent":"BOOKING_CREATED","createdAt":"2024-06-10T06:13:20.000Z","payload":{"uid":"b1"}}"#;
        let tampered = b"{\"triggerEvent\":\"PING\"}";
        BodyOnly::of(&FACTS).check_cases("cal_secret", body, tampered, NO_SECRET, |_, good| {
            vec![
                ("no secret configured at Cal.com", vec![NO_SECRET.to_owned()], Err(VerifyErrorKind::MalformedHeader)),
                (
                    "no-secret next to a good one",
                    vec![NO_SECRET.to_owned(), good.to_owned()],
                    Err(VerifyErrorKind::MalformedHeader),
                ),
                ("sha256= prefix", vec![format!("sha256={good}")], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
    }

    #[test]
    fn key_cases() {
        let key =
            |body: &[u8]| event_identity(&headers(&[]), body).map(|i| (i.key, i.event_type)).map_err(|e| e.kind());
        let booking = br#"{"triggerEvent":"BOOKING_CREATED","createdAt":"t1","payload":{"uid":"b1","title":"x"}}"#;
        let same =
            br#"{ "payload": {"title":"changed","uid":"b1"}, "createdAt":"t1", "triggerEvent":"BOOKING_CREATED" }"#;
        let other_time = br#"{"triggerEvent":"BOOKING_CREATED","createdAt":"t2","payload":{"uid":"b1"}}"#;
        let ping = br#"{"triggerEvent":"PING","createdAt":"t1","payload":{"type":"Test"}}"#;
        let ping_b = br#"{"triggerEvent":"PING","createdAt":"t1","payload":{"type":"Other"}}"#;
        let (k1, t1) = key(booking).unwrap();
        assert_eq!(t1.as_deref(), Some("BOOKING_CREATED"));
        assert_eq!(key(same).unwrap().0, k1, "the booking's fields decide, not the rest of the body");
        assert_ne!(key(other_time).unwrap().0, k1);
        let (p1, pt) = key(ping).unwrap();
        assert_eq!(pt.as_deref(), Some("PING"));
        assert_ne!(key(ping_b).unwrap().0, p1, "without payload.uid the whole body decides");
        assert_eq!(key(br#"{"createdAt":"t1","payload":{}}"#), Err(KeyErrorKind::Missing));
        assert_eq!(key(b"name=x"), Err(KeyErrorKind::BodyNotJson));
    }
}
