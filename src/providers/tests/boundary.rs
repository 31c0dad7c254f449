//! Every preset that signs a time decides a timestamp exactly at its
//! tolerance as its provider's official SDK does (`>` or `>=` in the SDK's
//! comparison: [`Boundary`]), checked on the preset's signed example at the
//! limit and one unit (a second, or a millisecond for a scheme that signs
//! milliseconds) either side, into the past and into the future.

use std::time::Duration;

use super::*;
use crate::test_support::{at, NOW};
use crate::verify::{Boundary, Delivery, VerifyErrorKind};

/// The unit a scheme signs its time in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Seconds,
    Millis,
}

/// One preset's limits: (name, seconds into the past, seconds into the
/// future, what exactly the limit gets, the unit, where the decision comes
/// from: the SDK file and its comparison, or why there is none).
type Row = (&'static str, u64, u64, Boundary, Unit, &'static str);

use Boundary::{Exclusive, Inclusive};
use Unit::{Millis, Seconds};

/// The SDK (or, without one, the docs) behind each preset's boundary. A
/// preset that signs a time and has no row fails
/// [`every_timed_preset_decides_its_boundary_as_its_sdk`].
const ROWS: &[Row] = &[
    ("stripe", 300, 300, Inclusive, Seconds, "stripe-node src/Webhooks.ts: `timestampAge > tolerance` refused"),
    ("slack", 300, 300, Inclusive, Seconds, "python-slack-sdk slack_sdk/signature: `abs(now - ts) > 60 * 5` refused"),
    (
        "standard-webhooks",
        300,
        300,
        Inclusive,
        Seconds,
        "standard-webhooks libraries/javascript/src/index.ts: `now - ts > tolerance`, `ts > now + tolerance` refused",
    ),
    ("svix", 300, 300, Inclusive, Seconds, "the Standard Webhooks libraries (svix's webhook verifier is the same)"),
    (
        "paddle",
        5,
        5,
        Inclusive,
        Seconds,
        "paddle-node-sdk notifications/helpers/webhooks-validator.ts: `now_ms > (ts + 5) * 1000` refused",
    ),
    ("linear", 60, 60, Inclusive, Millis, "@linear/sdk webhooks/client.ts: `Math.abs(now - ts) > 60000` refused"),
    (
        "hubspot",
        300,
        300,
        Exclusive,
        Millis,
        "hubspot-api-python utils/signature.py: valid only when `now - ts < 300 s` (the Node SDK's `> 300000`)",
    ),
    ("zoom", 7_200, 7_200, Inclusive, Seconds, "no SDK check; docs state no tolerance: the crate's default"),
    ("twitch", 600, 600, Inclusive, Seconds, "no official SDK; the docs: refuse one \"older than 10 minutes\""),
    ("mailgun", 900, 900, Inclusive, Seconds, "mailgun-python mailgun/security.py: `abs(now - ts) > max_age` refused"),
    ("calendly", 180, 180, Inclusive, Seconds, "no official SDK; the docs' example: older than three minutes"),
    ("discord", 300, 300, Inclusive, Seconds, "discord-interactions checks no time: the crate's default"),
    ("sendgrid", 90_000, 90_000, Inclusive, Seconds, "@sendgrid/eventwebhook checks no time: the crate's default"),
    (
        "mux",
        300,
        300,
        Inclusive,
        Seconds,
        "mux-node resources/webhooks/webhooks.ts: `timestampAge > tolerance` refused",
    ),
    ("recurly", 300, 300, Inclusive, Millis, "recurly-client-go webhook.go: `time.Since(ts) > tolerance` refused"),
    ("customer-io", 300, 300, Inclusive, Seconds, "the SDK checks no age: the crate's default"),
    (
        "box",
        600,
        0,
        Inclusive,
        Seconds,
        "box-typescript-sdk-gen / box-python-sdk validateMessage: `now - maxAge > ts` or `ts > now` refused",
    ),
    ("zendesk", 300, 300, Inclusive, Seconds, "no official SDK check: the crate's default"),
    ("buildkite", 300, 300, Inclusive, Seconds, "no SDK; the docs suggest \"for example, 5 minutes\""),
    ("front", 300, 300, Inclusive, Millis, "no SDK; the docs: older than 5 minutes"),
    ("webflow", 300, 300, Inclusive, Millis, "the docs: refuse a timestamp over 5 minutes old"),
    ("convoy", 300, 300, Inclusive, Seconds, "convoy-go webhook.go: `time.Since(ts) > Tolerance` refused"),
    (
        "workos",
        180,
        180,
        Inclusive,
        Millis,
        "workos-node common/crypto/signature-provider.ts: `ts < now - tolerance` refused",
    ),
    ("vonage", 300, 300, Inclusive, Seconds, "no SDK age check on `iat`: the crate's default"),
    ("sanity", 2_592_000, 2_592_000, Inclusive, Millis, "@sanity/webhook checks no age: the replay window"),
    (
        "aws-sns",
        3_600,
        3_600,
        Inclusive,
        Seconds,
        "AWS's SDK validators (aws-js-sns-message-validator, sns-message-validator for PHP) check no age: the 1 h of delivery retries",
    ),
    (
        "apple-app-store",
        691_200,
        691_200,
        Inclusive,
        Millis,
        "Apple's app-store-server-library (SignedDataVerifier) checks no age: the replay window, 8 days",
    ),
];

#[test]
fn every_timed_preset_decides_its_boundary_as_its_sdk() {
    use VerifyErrorKind::{TimestampInFuture, TimestampTooOld};
    let body = format!(r#"{{"id":"evt_1","type":"t","webhookTimestamp":{}}}"#, NOW * 1000);
    let signed = at(NOW);
    for preset in REGISTRY {
        let name = preset.name;
        let Some(found) = super::tolerance(preset) else { continue };
        let &(_, past, ahead, boundary, unit, source) =
            ROWS.iter().find(|r| r.0 == name).unwrap_or_else(|| panic!("{name}: signs a time but has no boundary row"));
        assert!(!source.is_empty());
        let ex = preset.example("delivery-1", signed, body.as_bytes());
        let check = |now: std::time::SystemTime| {
            ex.provider
                .verifier_ref()
                .verify(&Delivery::new(&ex.parts, &ex.body, &ex.secrets, now))
                .map_err(|e| e.kind())
        };
        let step = match unit {
            Seconds => Duration::from_secs(1),
            Millis => Duration::from_millis(1),
        };
        let at_limit = |ok: bool, kind| if ok { Ok(()) } else { Err(kind) };
        for (limit, kind, toward) in [
            (past, TimestampTooOld, &(|d: Duration| signed + d) as &dyn Fn(Duration) -> std::time::SystemTime),
            (ahead, TimestampInFuture, &|d: Duration| signed - d),
        ] {
            let limit = Duration::from_secs(limit);
            let case = format!("{name} ({source}), {kind:?} side");
            if let Some(inside) = limit.checked_sub(step) {
                assert_eq!(check(toward(inside)), Ok(()), "{case}: a unit inside the limit");
            }
            assert_eq!(check(toward(limit)), at_limit(boundary == Inclusive, kind), "{case}: exactly at the limit");
            assert_eq!(check(toward(limit + step)), Err(kind), "{case}: a unit past the limit");
        }
        // The docs' table shows the same limits.
        let shown = match boundary {
            Inclusive => (past, ahead),
            Exclusive => (past - 1, ahead - 1),
        };
        assert_eq!(found, shown, "{name}: the limits the registry-wide bisection finds");
    }
}

/// Every row names a preset of the registry (with every preset compiled in).
#[cfg(feature = "full")]
#[test]
fn every_boundary_row_is_a_timed_preset() {
    for row in ROWS {
        let preset = find(row.0).unwrap_or_else(|| panic!("{}: no such preset", row.0));
        assert!(super::tolerance(preset).is_some(), "{}: signs no time", row.0);
    }
}
