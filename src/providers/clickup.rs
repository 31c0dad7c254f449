//! ClickUp: the `X-Signature` header.
//!
//! Scheme (ClickUp API, "Webhook signature",
//! <https://developer.clickup.com/docs/webhooksignature>): `X-Signature:
//! <hex HMAC-SHA256 of the raw body>`, no prefix, keyed with the webhook's
//! `secret` (returned when the webhook is created, and by the webhook
//! endpoints) as given. One signature per webhook; each webhook has its own
//! secret, so an endpoint that receives several webhooks configures each
//! one's secret (any one that matches passes).
//!
//! **Event key.** ClickUp sends no event or delivery id. A delivery is
//! `{"webhook_id", "event" ("taskCreated", "taskUpdated", ...), "task_id" (or
//! `list_id`, `folder_id`, `space_id`, `goal_id`), "history_items": [...]}`
//! (ClickUp API, "Task webhook payloads",
//! <https://developer.clickup.com/docs/webhooktaskpayloads>); `history_items`
//! entries carry their own `id` and `date`, but not every event has them
//! (`taskDeleted` has none). The key is therefore a
//! [`DerivedKey`](crate::key::DerivedKey) over the whole body in canonical
//! JSON (RFC 8785): a retry of the same delivery is a duplicate however it
//! is spaced, and two changes to one task differ in their history items. The
//! event type is `event`. **Limit:** two events whose bodies are the same
//! (two `taskDeleted` of one task id, which cannot happen twice) share a key;
//! that ClickUp resends the same body on a retry is inferred, not documented.
//!
//! **Limit of the scheme:** only the body is signed, with no timestamp: a
//! captured delivery verifies forever; the claim on its digest makes its
//! replay a duplicate while the claim is kept. Serve the endpoint over TLS.
//!
//! **Signed / not signed** (<https://developer.clickup.com/docs/webhooksignature>):
//! only the raw body is signed, so the event key (its digest) and type (its
//! `event`) are. Headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! history items' `date` (Unix milliseconds, as text); ClickUp does not
//! promise the order of deliveries.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset, KeyField};
use crate::verify::generic::HmacScheme;

/// The facts of the clickup preset (the scheme is in the module docs).
///
/// **Replay window.** How long a ClickUp event can be sent again: 30 days.
///
/// ClickUp's webhook pages (<https://developer.clickup.com/docs/webhooks>)
/// describe a webhook's health (`fail_count`, suspension after repeated
/// failures) but publish no retry schedule or span that the research for
/// this preset could confirm, and no manual redelivery. With the span not
/// stated, the window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "clickup",
    scheme: HmacScheme { strict: true, ..HmacScheme::new("x-signature") },
    event_key: EventKey::Derived { fields: &[KeyField::CanonicalBody], event_type: Some(KeyField::Json("/event")) },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence: "no published span (https://developer.clickup.com/docs/webhooks)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// ClickUp (`X-Signature`, hex HMAC-SHA256; key derived from the
    /// canonical body, type = `event`): [`clickup::FACTS`](FACTS). See
    /// [`crate::providers::clickup`].
    pub fn clickup() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::{sign, BodyOnly};
    use crate::test_support::{assert_body_identity, headers, identity};
    use crate::verify::{SigningSecret, VerifyErrorKind::MalformedHeader};

    /// ClickUp's documented example body and secret (the page prints the
    /// signature cut short, so only its form is comparable): 64 lower-case
    /// hex digits, no prefix.
    #[test]
    fn clickups_docs_example() {
        let body = br#"{"webhook_id":"7689a169-a000-4985-8676-6902b96d6627","event":"taskCreated","task_id":"c0j"}"#;
        let header = sign(&FACTS, &SigningSecret::from("secret"), body);
        assert_eq!(header.len(), 64);
        assert!(header.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        let p = Provider::clickup();
        let key = identity(&p, &headers(&[]), body).key;
        assert_body_identity(&p, body, &key, Some("taskCreated"));
        let spaced =
            br#"{ "task_id": "c0j", "event": "taskCreated", "webhook_id": "7689a169-a000-4985-8676-6902b96d6627" }"#;
        assert_eq!(identity(&p, &headers(&[]), spaced).key, key, "a re-spaced retry is the same event");
        assert_ne!(identity(&p, &headers(&[]), br#"{"event":"taskDeleted","task_id":"c0j"}"#).key, key);
    }

    /// The common cases, rotation and precheck, and ClickUp's own: hex
    /// alone.
    #[test]
    fn verifies_and_rejects() {
        let body =
            br#"{"webhook_id":"w1","event":"taskUpdated","task_id":"t1","history_items":[{"id":"1","date":"1"}]}"#;
        BodyOnly::of(&FACTS).check_cases("clickup_secret", body, b"{\"event\":\"x\"}", "zz", |_, good| {
            vec![
                ("upper-case hex", vec![good.to_uppercase()], Ok(())),
                ("sha256= prefix", vec![format!("sha256={good}")], Err(MalformedHeader)),
                ("short hex", vec![good[..27].to_owned()], Err(MalformedHeader)),
            ]
        });
    }
}
