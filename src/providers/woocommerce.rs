//! WooCommerce (store webhooks): the `X-WC-Webhook-Signature` header.
//!
//! Scheme (WooCommerce REST API docs, "Webhooks",
//! <https://developer.woocommerce.com/docs/apis/rest-api/v3/webhooks/>: the
//! secret "is used to generate a HMAC-SHA256 hash of the request body"; the
//! exact bytes are in the sender's code, `WC_Webhook::deliver` and
//! `generate_signature` in woocommerce/woocommerce
//! `plugins/woocommerce/includes/class-wc-webhook.php`):
//! `X-WC-Webhook-Signature: <base64 HMAC-SHA256 of the raw body>`, the body
//! being `trim(wp_json_encode($payload))` (PHP's JSON: `/` written `\/`,
//! non-ASCII as `\u00e9`), keyed with the webhook's secret after
//! `wp_specialchars_decode($secret, ENT_QUOTES)`: configure the secret with
//! any HTML entity in it (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#039;`)
//! decoded, else as shown. One signature; to change the secret, configure
//! the old and new ones together while the webhook is edited. A site can
//! change the hash with the `woocommerce_webhook_hash_algorithm` filter; this
//! preset verifies the default, SHA-256, only.
//!
//! **Event key.** WooCommerce sends no event id. `X-WC-Webhook-Delivery-ID`
//! is `wp_hash(webhook id . time())`: new for every delivery, and the same
//! for two different deliveries of one webhook within one second, so it is
//! not read. The body is the resource as the REST API shows it at delivery
//! time (an order, a product, a coupon, a customer), `{"id": N}` for a
//! `*.deleted` topic, `{"action": ..., "arg": ...}` for an `action.*` topic:
//! no field set names the event in every shape. The key is a [`DerivedKey`](crate::key::DerivedKey)
//! over the whole body in canonical JSON (PHP's `\/` and `\u` escapes
//! decode to the same key as their plain spelling), which is signed. The
//! `X-WC-Webhook-Topic` header (`order.created`, `product.updated`) is
//! **not** signed, so it is not part of the key (a replay relabelled with
//! another topic is still a duplicate); it is the event type, which
//! therefore must not drive authorization. `X-WC-Webhook-Resource`,
//! `-Event`, `-ID` and `-Source` are not signed and not read.
//!
//! **Two events, one key** (the limit of a body key): two deliveries whose
//! bodies are the same resource snapshot share a key, and the second is a
//! duplicate within the window: `order.created` and `order.updated` hooks on
//! one endpoint both built from an unchanged order, the `{"id": N}` of an
//! order trashed, restored and trashed again within a day, or an `action.*`
//! topic whose argument repeats (`woocommerce_add_to_cart`'s cart item key
//! is the same for two shoppers adding the same product). For such topics
//! give the route its own key.
//!
//! **Retries** (WooCommerce developer docs, "Webhooks",
//! <https://developer.woocommerce.com/docs/best-practices/urls-and-routing/webhooks/>,
//! and `WC_Webhook::log_delivery` / `failed_delivery`): a delivery is sent
//! once. A response other than 2xx, 301 or 302 is not resent; it adds one to
//! the webhook's failure count, and after more than 5 consecutive failures
//! (`woocommerce_max_webhook_delivery_failures`) the webhook is disabled.
//! There is no manual redelivery. See [`FACTS`]' `replay_window`. **Tolerance:** none;
//! no timestamp is signed.
//!
//! **Handshake:** none answered. When a webhook is first saved as active,
//! WooCommerce sends a ping (`WC_Webhook::deliver_ping`): a form body
//! `webhook_id=N` with **no** signature header, which the layer refuses
//! (401, `missing_header`). The admin screen then shows "Delivery URL
//! returned response code: 401"; the webhook is saved and active and its
//! deliveries are signed. (Only a 200 clears the webhook's pending ping; an
//! unsigned request cannot be told from a forged one.)
//!
//! **Limit of the scheme:** the signature covers only the body, with no
//! timestamp; a captured delivery verifies forever, and the claim makes its
//! replay a duplicate only within the one-day window. Serve the endpoint over
//! TLS.
//!
//! **Signed / not signed**
//! (<https://developer.woocommerce.com/docs/apis/rest-api/v3/webhooks/>):
//! only the raw body is signed, so the key is. The event type
//! (`X-WC-Webhook-Topic`) and the other `X-WC-Webhook-*` headers are not.
//!
//! **Ordering** (the `version` of
//! [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer)): the
//! resource's `date_modified_gmt` (`2024-06-10T06:13:20`, UTC, whole
//! seconds: two changes within one second share it); a `*.deleted` body
//! carries only `id`.

use crate::providers::Provider;
use crate::providers::{EventKey, HmacPreset, KeyField};
use crate::verify::generic::HmacScheme;
use crate::verify::Encoding;

/// The facts of the woocommerce preset (the scheme is in the module docs).
///
/// **Replay window.** How long a WooCommerce delivery can be sent again: 1 day.
///
/// WooCommerce does not resend a failed delivery and offers no manual
/// redelivery: it counts the failure and disables the webhook after more
/// than 5 in a row
/// (<https://developer.woocommerce.com/docs/best-practices/urls-and-routing/webhooks/>;
/// `WC_Webhook::log_delivery` and `failed_delivery` in
/// `plugins/woocommerce/includes/class-wc-webhook.php`). The claim only
/// meets concurrent or replayed copies of one request. One day, the
/// crate's shortest window (no span, plus a day of margin).
pub const FACTS: HmacPreset = HmacPreset {
    name: "woocommerce",
    scheme: HmacScheme {
        encoding: Encoding::Base64,
        strict: true,
        ..HmacScheme::new("x-wc-webhook-signature")
    },
    event_key: EventKey::Derived { fields: &[KeyField::CanonicalBody], event_type: Some(KeyField::Header(TOPIC_HEADER)) },
    headers: &[],
    replay_window: super::days(1),
    replay_evidence:
        "no retry and no manual redelivery: a failure is counted, not resent (https://developer.woocommerce.com/docs/best-practices/urls-and-routing/webhooks/)",
    challenge: None,
    example_headers: &[],
    fixture: super::Fixture::formula(&[]),
};

impl Provider {
    /// WooCommerce (`X-WC-Webhook-Signature`, base64; derived key). See [`crate::providers::woocommerce`].
    ///
    /// The WooCommerce preset: [`woocommerce::FACTS`](FACTS); key derived from the
    /// canonical body, type = the `X-WC-Webhook-Topic` header (unsigned).
    pub fn woocommerce() -> Self {
        FACTS.provider()
    }
}

/// The header carrying the webhook's topic (the event type; not signed).
const TOPIC_HEADER: &str = "x-wc-webhook-topic";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::tests::support::{BodyOnly, OneHeader};
    use crate::providers::Provider;
    use crate::test_support::{headers, identity, NOW};
    use crate::verify::SigningSecret;
    use crate::verify::VerifyErrorKind::MissingHeader;

    /// The common cases, rotation and precheck, and WooCommerce's own:
    /// standard padded base64 alone, one line per signature. WooCommerce
    /// publishes no test vector (its docs and the `class-wc-webhook.php`
    /// tests searched); the recorded fixture, from the formula in
    /// `scripts/fixtures/woocommerce.py`, is checked in `providers::fixtures`.
    #[test]
    fn verifies_and_rejects() {
        let body = br#"{"id":727,"status":"processing","date_modified_gmt":"2024-06-10T06:13:20"}"#;
        BodyOnly::of(&FACTS)
            .check_cases("wc_secret", body, b"{\"id\":728}", "!!", |_, good| BodyOnly::base64_alone(good));
    }

    /// The ping WooCommerce sends when a webhook is first activated carries
    /// no signature: refused before the body is read.
    #[test]
    fn the_unsigned_ping_is_refused() {
        let secrets = [SigningSecret::from("wc_secret")];
        let one = OneHeader::of(&FACTS);
        assert_eq!(one.precheck(&[]), Err(MissingHeader));
        assert_eq!(one.check(&[], b"webhook_id=7", &secrets, NOW), Err(MissingHeader));
    }

    #[test]
    fn derived_key() {
        let p = Provider::woocommerce();
        let body = br#"{"id":727,"date_modified_gmt":"2024-06-10T06:13:20","_links":{"self":[{"href":"https:\/\/shop.example\/wp-json\/wc\/v3\/orders\/727"}]},"note":"caf\u00e9"}"#;
        let created = identity(&p, &headers(&[(TOPIC_HEADER, "order.created")]), body);
        assert!(created.key.starts_with("sha256:"));
        assert_eq!(created.event_type.as_deref(), Some("order.created"));
        let relabelled = identity(&p, &headers(&[(TOPIC_HEADER, "order.deleted")]), body);
        assert_eq!(created.key, relabelled.key, "the unsigned topic header is not in the key");
        // PHP's escapes and their plain spelling: one key.
        let plain = r#"{"id":727,"date_modified_gmt":"2024-06-10T06:13:20","_links":{"self":[{"href":"https://shop.example/wp-json/wc/v3/orders/727"}]},"note":"café"}"#;
        assert_eq!(identity(&p, &headers(&[]), plain.as_bytes()).key, created.key);
        let later = br#"{"id":727,"date_modified_gmt":"2024-06-10T06:13:21"}"#;
        assert_ne!(identity(&p, &headers(&[]), later).key, created.key);
        // The per-delivery id is not read: two deliveries of one body, one key.
        let a = identity(&p, &headers(&[("x-wc-webhook-delivery-id", "a1")]), body);
        let b = identity(&p, &headers(&[("x-wc-webhook-delivery-id", "b2")]), body);
        assert_eq!(a.key, b.key);
        assert_eq!(identity(&p, &headers(&[]), body).event_type, None);
        assert_eq!(p.name(), "woocommerce");
    }
}
