//! GoCardless: the `Webhook-Signature` header.
//!
//! Scheme (GoCardless, "Staying up-to-date with webhooks",
//! <https://developer.gocardless.com/getting-started/staying-up-to-date-with-webhooks>,
//! and `webhooks.parse` in the official `gocardless-nodejs`):
//! `Webhook-Signature: <hex HMAC-SHA256 of the raw body>`, keyed with the
//! webhook endpoint's secret as UTF-8 bytes. The SDK decodes the hex before
//! comparing, so upper-case digits pass there and here. GoCardless sends one
//! signature; rotating the endpoint secret means configuring both here for
//! the changeover. The header's name is Standard Webhooks' too; the value is
//! a bare hex digest, not `v1,<base64>`.
//!
//! **Signed / not signed:** only the raw body is signed, so the event key
//! (`meta.webhook_id`) and the events in the batch are signed. Headers are
//! not.
//!
//! **Event key: the webhook, not each event.** A GoCardless webhook is a
//! **batch**: `events` holds one or more events, each with its own `id`
//! (`EV...`), and `meta.webhook_id` (`WB...`) names the webhook itself. The
//! key is `meta.webhook_id`, which GoCardless keeps when it retries the
//! webhook (the API's "Retry a webhook" re-sends the webhook of that id):
//! one claim per batch, so a retried batch is a duplicate. What the crate
//! does not do is claim each event of a batch on its own: a handler that
//! must not apply one event twice across batches should make its writes
//! idempotent on the event's `id` (a business key; see
//! [`WebhookTx`](crate::WebhookTx)). No event type is recorded (a batch has
//! several); each event's is `resource_type` and `action`
//! (`payments.confirmed`).
//!
//! **Retries** (GoCardless support, "Webhook retries / failures",
//! <https://support.gocardless.com/hc/en-nz/articles/360000989989-Webhook-retries-failures>):
//! a webhook not answered 2xx within 10 seconds is retried up to 8 times at
//! increasing intervals (1 minute, 2 minutes, 10 minutes, ...), and can be
//! retried through the API (`POST /webhooks/{id}/actions/retry`) with no
//! stated age limit, hence [`FACTS`]' `replay_window`. GoCardless suggests answering
//! an invalid signature with 498; the layer answers 401, which GoCardless
//! treats as a failure just the same. **Tolerance:** none; no timestamp is
//! signed (each event's `created_at` is signed but no window is set).
//! **Handshake:** none.
//!
//! **Limit of the scheme:** no timestamp is signed: a captured webhook
//! verifies forever; the claim on `meta.webhook_id` makes its replay a
//! duplicate. Serve the endpoint over TLS.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): each
//! event's `created_at` (RFC 3339, milliseconds); GoCardless does not
//! promise the order of webhooks, nor of events across batches.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;

/// The facts of the gocardless preset (the scheme is in the module docs).
///
/// **Replay window.** How long a GoCardless webhook can be sent again: 30 days.
///
/// GoCardless retries a failed webhook up to 8 times at increasing
/// intervals
/// (<https://support.gocardless.com/hc/en-nz/articles/360000989989-Webhook-retries-failures>)
/// and lets it be retried through the API with no stated age limit
/// (<https://developer.gocardless.com/api-reference/#webhooks-retry-a-webhook>),
/// so the window is the crate's default for an unknown span,
/// [`DEFAULT_REPLAY_WINDOW`](super::DEFAULT_REPLAY_WINDOW).
pub const FACTS: HmacPreset = HmacPreset {
    name: "gocardless",
    scheme: HmacScheme {
        strict: true,
        ..HmacScheme::new("webhook-signature")
    },
    event_key: EventKey::Json { id: "/meta/webhook_id", event_type: None },
    headers: &[],
    replay_window: super::DEFAULT_REPLAY_WINDOW,
    replay_evidence:
        "8 retries; API retry without a stated limit (https://support.gocardless.com/hc/en-nz/articles/360000989989-Webhook-retries-failures)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::sdk(&["sdk_time_cases"]),
};

impl Provider {
    /// GoCardless (`Webhook-Signature`; key = `meta.webhook_id`, one claim per batch). See [`crate::providers::gocardless`].
    ///
    /// The GoCardless preset: [`gocardless::FACTS`](FACTS); key = the batch's
    /// `meta.webhook_id`, no event type.
    pub fn gocardless() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::providers::tests::support::{fixture_files, BodyOnly, OneHeader};
    use crate::test_support::{headers, NOW};

    use crate::verify::VerifyErrorKind;

    /// A two-event batch signed by the documented formula and accepted by
    /// `gocardless-nodejs`'s `webhooks.parse`, which also accepts the
    /// upper-case hex; see `scripts/fixtures/gocardless.js`: the upper-case
    /// hex, and the batch's event ids.
    /// The rest of the fixture is checked in `providers::fixtures`.
    #[test]
    fn gocardless_sdk_fixture() {
        let (body, expected, secret) = fixture_files("gocardless");
        assert_eq!(expected["sdk_accepts_uppercase_hex"], serde_json::json!(true));
        let upper = expected["headers"]["webhook-signature"].as_str().unwrap().to_uppercase();
        assert_eq!(OneHeader::of(&FACTS).check(&[&upper], body, &[secret], NOW), Ok(()));
        // The batch's events, for a handler's own business keys.
        let doc: serde_json::Value = serde_json::from_slice(body).unwrap();
        let ids: Vec<&str> = doc["events"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
        let want: Vec<&str> = expected["event_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(ids, want);
    }

    /// The common cases, rotation and precheck, and GoCardless's own: bare
    /// hex, not the Standard Webhooks form.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"events":[{"id":"EV1"}],"meta":{"webhook_id":"WB1"}}"#;
        BodyOnly::of(&FACTS).check_cases("gc_secret", body, b"{\"events\":[]}", "zz", |_, _| {
            vec![
                (
                    "Standard Webhooks form",
                    vec![format!("v1,{}", "A".repeat(43))],
                    Err(VerifyErrorKind::MalformedHeader),
                ),
                ("short hex", vec!["abcd".to_owned()], Err(VerifyErrorKind::MalformedHeader)),
            ]
        });
    }

    #[test]
    fn key_needs_meta() {
        let p = Provider::gocardless();
        let no_meta = p.extractor_ref().extract(&headers(&[]), br#"{"events":[{"id":"EV1"}]}"#).unwrap_err();
        assert_eq!(no_meta.kind(), KeyErrorKind::Missing);
        assert_eq!(p.name(), "gocardless");
    }
}
