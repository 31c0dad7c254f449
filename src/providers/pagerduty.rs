//! PagerDuty (v3 webhooks): the `X-PagerDuty-Signature` header.
//!
//! Scheme (PagerDuty, "Verifying Signatures",
//! <https://developer.pagerduty.com/docs/ZG9jOjExMDI5NTkz-verifying-signatures>,
//! whose source is `docs/webhooks/04-Signatures.md` in the
//! `PagerDuty/developer-docs` repository):
//! `X-PagerDuty-Signature: v1=<hex>,v1=<hex>`, a comma-separated list with one
//! `v1=` entry per signing secret of the subscription (several during a
//! zero-downtime rotation; any one may match). Each is the hex (Base16)
//! HMAC-SHA256 of the raw body, keyed with the subscription's secret as
//! given. Entries of other versions are ignored, as PagerDuty's steps say
//! ("select only signatures which are version `v1`"); an entry that is not
//! 64 hex digits is skipped the same way.
//!
//! The event key is the body's `event.id` ("the unique id of the event") and
//! the event type its `event.event_type` (`incident.triggered`), from the v3
//! payload (PagerDuty, "v3 Overview", `docs/webhooks/01-v3-Overview.md` in
//! the same repository). PagerDuty retries up to 4 times over about 20
//! minutes; its "Behavior" page (`docs/webhooks/02-Behavior.md`) also
//! offers the `X-Webhook-Id` header, repeated on every attempt of one
//! webhook, for de-duplication. `event.id` is chosen because it names the
//! event itself: two subscriptions delivering one event to the same endpoint
//! are claimed once. Use `HeaderKey::new("x-webhook-id")` to claim per
//! subscription instead.
//!
//! **Limit of the scheme:** like GitHub's, the signature covers only the
//! body: no timestamp. A captured delivery verifies forever; the claim on
//! `event.id` makes a replay of it a duplicate, but nothing dates it. Serve
//! the endpoint over TLS (PagerDuty also offers mutual TLS).
//!
//! **Signed / not signed**
//! (<https://developer.pagerduty.com/docs/ZG9jOjExMDI5NTkz-verifying-signatures>):
//! only the raw body is signed (no timestamp); the event key (`event.id`) and
//! the event type (`event.event_type`) come from it and are signed. Headers are
//! not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! event's `occurred_at` (ISO 8601).

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset};
use crate::verify::generic::HmacScheme;

/// The facts of the pagerduty preset (the scheme is in the module docs).
///
/// **Replay window.** How long a PagerDuty event can be sent again: 1 day.
///
/// PagerDuty retries a failed v3 webhook up to 4 times over about 20 minutes
/// (PagerDuty, "Webhook Behavior", `docs/webhooks/02-Behavior.md` in
/// <https://github.com/PagerDuty/developer-docs>) and documents no manual
/// redelivery. A day covers the retries with a margin.
pub const FACTS: HmacPreset = HmacPreset {
    name: "pagerduty",
    scheme: HmacScheme { key_value: Some("v1"), separator: Some(','), ..HmacScheme::new("x-pagerduty-signature") },
    event_key: EventKey::Json { id: "/event/id", event_type: Some("/event/event_type") },
    headers: &[],
    replay_window: super::days(1),
    replay_evidence: "4 retries over about 20 minutes (https://github.com/PagerDuty/developer-docs)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&["old_secret"]),
};

impl Provider {
    /// PagerDuty v3 (`X-PagerDuty-Signature` `v1=`; key = `event.id`). See [`crate::providers::pagerduty`].
    ///
    /// The PagerDuty v3 preset: [`pagerduty::FACTS`](FACTS); key = the body's
    /// `event.id`, type = `event.event_type`.
    pub fn pagerduty() -> Self {
        FACTS.provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::{fixture_files, OneHeader};
    use crate::providers::Provider;
    use crate::test_support::{assert_body_identity, NOW};
    use crate::verify::{hmac_sha256, SigningSecret, VerifyErrorKind};

    /// The `X-PagerDuty-Signature` value PagerDuty would send for `body` from a
    /// subscription with `secrets` (one during normal operation, two during a
    /// rotation): `v1={hex},v1={hex}`.
    fn sign(secrets: &[SigningSecret], body: &[u8]) -> String {
        let mut header = String::with_capacity(secrets.len() * 68);
        for (i, secret) in secrets.iter().enumerate() {
            if i > 0 {
                header.push(',');
            }
            header.push_str("v1=");
            header.push_str(&hex::encode(hmac_sha256(secret, &[body])));
        }
        header
    }

    /// The vector in PagerDuty's Go client (`PagerDuty/go-pagerduty`,
    /// `webhookv3/webhookv3_test.go`), the implementation PagerDuty's
    /// "Verifying Signatures" page links as its Go example.
    #[test]
    fn go_pagerduty_vector() {
        let secret = SigningSecret::from("lDQHScfUeXUKaQRNF+8XIiDKZ7XX3itBAYzwU0TARw8lJqRnkKl2iB1anSb0Z+IK");
        let body = br#"{"event":{"id":"01BWDWL3NYY7LUFPZCC28QUCMK","event_type":"incident.priority_updated","resource_type":"incident","occurred_at":"2021-04-26T17:36:27.458Z","agent":{"html_url":"https://acme.pagerduty.com/users/PLH1HKV","id":"PLH1HKV","self":"https://api.pagerduty.com/users/PLH1HKV","summary":"Tenex Engineer","type":"user_reference"},"client":null,"data":{"id":"PGR0VU2","type":"incident","self":"https://api.pagerduty.com/incidents/PGR0VU2","html_url":"https://acme.pagerduty.com/incidents/PGR0VU2","number":2,"status":"triggered","title":"A little bump in the road","service":{"html_url":"https://acme.pagerduty.com/services/PF9KMXH","id":"PF9KMXH","self":"https://api.pagerduty.com/services/PF9KMXH","summary":"API Service","type":"service_reference"},"assignees":[{"html_url":"https://acme.pagerduty.com/users/PTUXL6G","id":"PTUXL6G","self":"https://api.pagerduty.com/users/PTUXL6G","summary":"User 123","type":"user_reference"}],"escalation_policy":{"html_url":"https://acme.pagerduty.com/escalation_policies/PUS0KTE","id":"PUS0KTE","self":"https://api.pagerduty.com/escalation_policies/PUS0KTE","summary":"Default","type":"escalation_policy_reference"},"teams":[{"html_url":"https://acme.pagerduty.com/teams/PFCVPS0","id":"PFCVPS0","self":"https://api.pagerduty.com/teams/PFCVPS0","summary":"Engineering","type":"team_reference"}],"priority":{"html_url":"https://acme.pagerduty.com/account/incident_priorities","id":"PSO75BM","self":"https://api.pagerduty.com/priorities/PSO75BM","summary":"P1","type":"priority_reference"},"urgency":"high","conference_bridge":{"conference_number":1000,"conference_url":"https://example.com"},"resolve_reason":null}}}"#;
        let good = "v1=0c0b9495b893a39e70d1fea2fe11fbe0a825f88b9f67846f6cc07dd2bc5476cd";
        let mismatch = "v1=7020c8a7ec668a9b7012bc3dd82e483394b038f4230acc6785efbf2a7d8bcaf5";
        assert_eq!(sign(std::slice::from_ref(&secret), body), good);
        let secrets = [secret];
        assert_eq!(OneHeader::of(&FACTS).check(&[good], body, &secrets, NOW), Ok(()));
        assert_eq!(
            OneHeader::of(&FACTS).check(&[mismatch], body, &secrets, NOW),
            Err(VerifyErrorKind::NoMatchingSignature)
        );
        assert_eq!(OneHeader::of(&FACTS).check(&[], body, &secrets, NOW), Err(VerifyErrorKind::MissingHeader));

        assert_body_identity(
            &Provider::pagerduty(),
            body,
            "01BWDWL3NYY7LUFPZCC28QUCMK",
            Some("incident.priority_updated"),
        );
    }

    /// Hand-computed vectors (Python's `hmac`, independent of this crate):
    /// no official npm or PyPI package verifies PagerDuty signatures; see
    /// `scripts/fixtures/pagerduty.py`. Here: `sign` with both secrets makes
    /// the rotated header, and a header with an unknown version verifies.
    /// The rest of the fixture (the rotated header's verdicts too) is checked
    /// in `providers::fixtures`.
    #[test]
    fn hand_computed_fixture() {
        let (body, expected, secret) = fixture_files("pagerduty");
        let old = SigningSecret::from(expected["old_secret"].as_str().unwrap());
        let rotated = expected["rotated_header"].as_str().unwrap();
        let with_unknown = expected["header_with_unknown_version"].as_str().unwrap();
        assert_eq!(sign(&[old, secret.clone()], body), rotated);
        assert_eq!(OneHeader::of(&FACTS).check(&[with_unknown], body, &[secret], NOW), Ok(()));
    }

    #[test]
    fn verifies_and_rejects() {
        let secret = SigningSecret::from("pd_secret");
        let other = SigningSecret::from("pd_other");
        let body = br#"{"event":{"id":"e1","event_type":"incident.triggered"}}"#;
        let good = sign(std::slice::from_ref(&secret), body);
        let rotated = sign(&[other.clone(), secret.clone()], body);
        let other_only = sign(std::slice::from_ref(&other), body);
        let spaced = format!("{other_only}, {good}");
        let future_version = format!("v2={},{good}", "ab".repeat(40));
        let short_then_good = format!("v1=abcd,{good}");
        let not_hex = format!("v1={}", "z".repeat(64));
        let trailing = format!("{good},");
        let mut cases = OneHeader::body_only_common(&good, &other_only, body, b"{\"event\":{\"id\":\"e2\"}}");
        cases.extend([
            ("rotation, second matches", vec![rotated.as_str()], &body[..], Ok(())),
            ("space after comma", vec![&spaced], body, Ok(())),
            ("other version ignored", vec![&future_version], body, Ok(())),
            ("short v1 skipped", vec![&short_then_good], body, Ok(())),
            ("empty value", vec![""], body, Err(VerifyErrorKind::MalformedHeader)),
            ("bare hex", vec![&good[3..]], body, Err(VerifyErrorKind::MalformedHeader)),
            ("only other versions", vec!["v0=00,v2=11"], body, Err(VerifyErrorKind::NoMatchingSignature)),
            ("not hex", vec![&not_hex], body, Err(VerifyErrorKind::NoMatchingSignature)),
            ("trailing comma", vec![&trailing], body, Err(VerifyErrorKind::MalformedHeader)),
        ]);
        OneHeader::of(&FACTS).check_cases(&secret, &cases);
    }

    #[test]
    fn precheck_and_secrets() {
        let (old, new) = (SigningSecret::from("old"), SigningSecret::from("s"));
        OneHeader::of(&FACTS).check_rotation_and_precheck(
            [&old, &new],
            &sign(std::slice::from_ref(&new), b"{}"),
            b"{}",
            NOW,
            "junk",
        );
        assert_eq!(sign(&[], b"{}"), "");
    }
}
