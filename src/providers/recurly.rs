//! Recurly: the `recurly-signature` header.
//!
//! Scheme (Recurly, "Signature verification",
//! <https://docs.recurly.com/recurly-subscriptions/docs/signature-verification>,
//! and `VerifyWebhookSignature` in Recurly's Go client,
//! `recurly-client-go/v4`, `webhook.go`):
//! `recurly-signature: <Unix milliseconds>,<hex>[,<hex>...]`: a timestamp in
//! **milliseconds**, then one or more hex HMAC-SHA256 signatures of
//! `{milliseconds}.{raw body}`, keyed with the endpoint's secret key as
//! UTF-8 bytes. Several signatures are sent while a key is rotated; any one
//! may match. The entries carry no labels (no `t=`/`v1=`), so this preset
//! has a verifier of its own: the timestamp must be ASCII digits, each
//! signature 64 hex digits, at most 16 entries, else
//! [`VerifyErrorKind::MalformedHeader`]. Only JSON-format webhooks are
//! signed; XML webhooks carry no signature and are not covered.
//!
//! **Tolerance:** the Go client's default is 5 minutes, for the past only
//! (`time.Since(ts) > tolerance`); it checks no future time.
//! [`DEFAULT_TOLERANCE`] is 300 seconds in **both** directions, compared to
//! the millisecond, as every timestamped preset of this crate: a timestamp
//! more than 5 minutes ahead of the clock, which the client would accept, is
//! refused here; widen it with [`RecurlyVerifier::tolerance`].
//!
//! **Signed / not signed:** the timestamp and the raw body are signed, so
//! the event key (the body's `id`) and the event type (`object_type` and
//! `event_type`) are signed. Other headers are not.
//!
//! The event key is the notification's `id`; a retry resends the
//! notification (with a fresh timestamp and signature). That the `id` is
//! kept is the notification's meaning, not a sentence of the docs: the one
//! assumption of this preset. The event type is `object_type` and
//! `event_type` joined by a dot (`account.created`).
//!
//! **Retries** ("Automatic retries",
//! <https://docs.recurly.com/recurly-subscriptions/docs/automatic-retries>):
//! a notification not answered 2xx is retried up to 10 times, the `x`-th
//! retry (from 0) about `10 + x·2^(x+5)` seconds after the previous attempt:
//! about 3 days in all, hence [`REPLAY_WINDOW`]. **Handshake:** none.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! notification's `event_time` (RFC 3339); Recurly retries in the order the
//! notifications were created, but a retry can arrive after a newer one.

use std::time::Duration;

use crate::key::{EventIdentity, JsonPointerKey, KeyError, KeyExtractor};
use crate::providers::Provider;
use crate::verify::{
    check_signature_header_size, count_entry, hmac_sha256, match_any_secret, parse_unix_millis, single_header,
    Delivery, SigningSecret, Verifier, VerifyError, VerifyErrorKind,
};

/// The header Recurly signs deliveries with.
pub const SIGNATURE_HEADER: &str = "recurly-signature";

/// Recurly's tolerance in its Go client: 5 minutes (here in both directions).
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// The CLI name of the preset and the `provider` column of its claims.
pub const NAME: &str = "recurly";
/// How long a Recurly notification can be sent again: 4 days.
///
/// Recurly retries a notification up to 10 times with a back-off of about
/// `10 + x·2^(x+5)` seconds, about 3 days in all (Recurly, "Automatic
/// retries",
/// <https://docs.recurly.com/recurly-subscriptions/docs/automatic-retries>).
/// The 3 days plus a day of margin.
pub const REPLAY_WINDOW: std::time::Duration = super::days(4);

timed_verifier! {
    /// Verifies `recurly-signature`.
    pub struct RecurlyVerifier;
    /// A verifier with Recurly's tolerance of 5 minutes.
    fn new();
    /// Sets how far (both directions) the timestamp may be from now.
    fn tolerance();
}

/// The header's timestamp (as sent and in milliseconds) and signatures.
fn parse(parts: &http::request::Parts) -> Result<(&str, u64, Vec<[u8; 32]>), VerifyError> {
    check_signature_header_size(parts, SIGNATURE_HEADER)?;
    let value = single_header(parts, SIGNATURE_HEADER)?;
    let mut entries = value.split(',').map(str::trim);
    let mut seen = 0;
    count_entry(&mut seen)?;
    let ts = entries.next().unwrap_or_default();
    let millis = parse_unix_millis(ts)?;
    let mut signatures = Vec::new();
    for entry in entries {
        count_entry(&mut seen)?;
        let mut sig = [0u8; 32];
        hex::decode_to_slice(entry, &mut sig).map_err(|_| VerifyErrorKind::MalformedHeader)?;
        signatures.push(sig);
    }
    if signatures.is_empty() {
        return Err(VerifyErrorKind::MalformedHeader.into());
    }
    Ok((ts, millis, signatures))
}

impl Verifier for RecurlyVerifier {
    fn precheck(&self, parts: &http::request::Parts) -> Result<(), VerifyError> {
        parse(parts).map(drop)
    }

    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        let (ts, millis, signatures) = parse(delivery.parts)?;
        delivery.check_time_millis(millis, self.tolerance)?;
        match_any_secret(delivery, signatures.iter().map(|s| &s[..]), |secret| {
            hmac_sha256(secret, &[ts.as_bytes(), b".", delivery.body])
        })
    }
}

/// The `recurly-signature` value Recurly would send for `body` at `millis`
/// (Unix milliseconds) with `secret`: `{millis},{hex}`. For tests and
/// fixtures.
pub fn sign(secret: &SigningSecret, millis: u64, body: &[u8]) -> String {
    let ts = millis.to_string();
    format!("{ts},{}", hex::encode(hmac_sha256(secret, &[ts.as_bytes(), b".", body])))
}

/// Recurly's event identity: key = the body's `id`; type = `object_type`
/// and `event_type` as `object.event`.
///
/// # Errors
/// As [`JsonPointerKey`] for `id`: missing, not a string or
/// integer, or a body that is not JSON.
pub fn event_identity(parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
    let mut identity = JsonPointerKey::new("/id").extract(parts, body)?;
    if let Ok(doc) = serde_json::from_slice::<serde_json::Value>(body) {
        let text = |name: &str| doc.get(name).and_then(serde_json::Value::as_str).filter(|s| !s.is_empty());
        if let (Some(object), Some(event)) = (text("object_type"), text("event_type")) {
            identity.event_type = Some(format!("{object}.{event}"));
        }
    }
    Ok(identity)
}

impl crate::providers::Provider {
    /// Recurly (`recurly-signature` `ms,hex`, 300 s; key = `id`). See [`crate::providers::recurly`].
    ///
    /// The Recurly preset: [`RecurlyVerifier`] with the 5 minute tolerance
    /// and [`event_identity`].
    pub fn recurly() -> Self {
        Provider::new(NAME, RecurlyVerifier::new(), event_identity)
    }
}

/// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
    NAME,
    NAME,
    REPLAY_WINDOW,
    &[SIGNATURE_HEADER],
    |_| crate::providers::Provider::recurly(),
    super::ExampleOf::Signed(|s, d| vec![(SIGNATURE_HEADER, sign(s, super::unix_millis(d.at), d.body))]),
)
.signs("`recurly-signature: <ms>,<hex>[,<hex>]` HMAC-SHA256 of `{ms}.{body}` (JSON webhooks)")
.key_from("the body's id (JSON)")
.fixture(super::Fixture::sdk(&["sdk_time_cases", "sdk_differs", "timestamp_ms"]));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::OneHeader;

    #[test]
    fn verifies_and_rejects() {
        use VerifyErrorKind::{
            MalformedHeader, MissingHeader, NoMatchingSignature, TimestampInFuture, TimestampTooOld,
        };
        const NOW: u64 = 1_700_000_000_000;
        let secret = SigningSecret::from("recurly_key");
        let other = SigningSecret::from("recurly_other");
        let body = br#"{"id":"n1","object_type":"account","event_type":"created"}"#;
        let good = sign(&secret, NOW, body);
        let sig = &good[good.find(',').unwrap() + 1..];
        let rotated = format!("{},{sig}", sign(&other, NOW, body));
        let spaced = good.replace(',', ", ");
        let upper = good.to_uppercase();
        let seconds = format!("{},{sig}", NOW / 1000);
        let labelled = format!("t={NOW},v1={sig}");
        let no_sig = NOW.to_string();
        let short = format!("{NOW},abcd");
        let zeros = format!("{NOW},{}", "0".repeat(64));
        let many = format!("{NOW}{}", format!(",{sig}").repeat(16));
        OneHeader::preset(&PRESET).millis().check_timed(
            &secret,
            &[
                ("valid", vec![&good], body, NOW, Ok(())),
                ("two signatures during rotation", vec![&rotated], body, NOW, Ok(())),
                ("spaces after commas", vec![&spaced], body, NOW, Ok(())),
                ("upper-case hex", vec![&upper], body, NOW, Ok(())),
                ("same header twice", vec![&good, &good], body, NOW, Ok(())),
                ("edge past", vec![&good], body, NOW + 300_000, Ok(())),
                ("edge future", vec![&good], body, NOW - 300_000, Ok(())),
                ("stale by a millisecond", vec![&good], body, NOW + 300_001, Err(TimestampTooOld)),
                ("future by a millisecond", vec![&good], body, NOW - 300_001, Err(TimestampInFuture)),
                ("seconds instead of milliseconds", vec![&seconds], body, NOW, Err(TimestampTooOld)),
                ("tampered body", vec![&good], b"{}", NOW, Err(NoMatchingSignature)),
                ("wrong signature", vec![&zeros], body, NOW, Err(NoMatchingSignature)),
                ("missing", vec![], body, NOW, Err(MissingHeader)),
                ("two different lines", vec![&good, &rotated], body, NOW, Err(MalformedHeader)),
                ("no signature", vec![&no_sig], body, NOW, Err(MalformedHeader)),
                ("short signature", vec![&short], body, NOW, Err(MalformedHeader)),
                ("labelled entries", vec![&labelled], body, NOW, Err(MalformedHeader)),
                ("17 entries", vec![&many], body, NOW, Err(MalformedHeader)),
                ("empty", vec![""], body, NOW, Err(MalformedHeader)),
            ],
        );
    }

    #[test]
    fn rotation_tolerance_and_precheck() {
        let (old, new) = (SigningSecret::from("old"), SigningSecret::from("new"));
        let header = sign(&new, 1_000_000, b"{}");
        let one = OneHeader::preset(&PRESET).millis();
        one.check_rotation_and_precheck([&old, &new], &header, b"{}", 1_000_000, "1000000");
        let wide = RecurlyVerifier::new().tolerance(Duration::from_secs(3_600));
        one.check_replay_and_tolerance(wide, (&header, b"{}", &new), [1_000_000, 4_600_000]);
        assert_eq!(RecurlyVerifier::new().tolerance, DEFAULT_TOLERANCE);
    }
}
