//! Real-shaped deliveries by name: each preset's fixtures, as templates the
//! [`Delivery`](super::Delivery) fills with fresh ids and times.
//!
//! # The fixture format
//! One JSON file per preset, `src/dev/fixtures/<preset>.json`:
//!
//! ```json
//! {
//!   "source": "https://docs.stripe.com/api/events/object",
//!   "fixtures": [
//!     {
//!       "name": "payment_intent.succeeded",
//!       "id": "{{uuid}}",
//!       "headers": { "x-github-event": "push" },
//!       "body": { "id": "evt_{{id}}", "created": "{{now}}", "data": { "object": { "id": "pi_{{object}}" } } }
//!     }
//!   ]
//! }
//! ```
//!
//! - `source`: where the shape comes from (the provider's documented example).
//! - `name`: what `webhook-dev send <preset> --fixture NAME` and
//!   [`Delivery::fixture`](super::Delivery::fixture) take; the first is the
//!   preset's default.
//! - `id` (optional, default `{{uuid}}`): the id the sender writes in a
//!   header of its own ([`Signing::id`](crate::providers::Signing::id)).
//! - `headers` (optional): more headers the sender sends (an event-type
//!   header), templated too.
//! - `body`: a JSON value, sent compact; or `form`: `application/x-www-form-urlencoded`
//!   text, sent as written.
//!
//! Placeholders, in any string: `{{id}}` (24 letters and digits), `{{uuid}}`,
//! `{{n}}` (a number below 2^31), `{{object}}` (24 letters and digits: the
//! object the event is about, the same for the two events of an
//! out-of-order pair), `{{seq}}` (1, then 2 for the newer event of a pair),
//! `{{now}}` (Unix seconds), `{{now_ms}}` (Unix milliseconds) and
//! `{{now_rfc3339}}` (`2026-12-05T17:12:57Z`), `{{now_rfc3339_ms}}`
//! (`2026-12-05T17:12:57.123Z`). All are drawn once per event
//! and kept by its redeliveries: the times are when the event was made, not
//! when a redelivery is signed. `{{sent}}` and `{{sent_ms}}` are the time
//! this delivery is signed (Unix seconds, milliseconds), for senders that
//! write it in the body (Linear's `webhookTimestamp`). A JSON string that is
//! exactly `{{n}}`, `{{seq}}`, `{{now}}`, `{{now_ms}}`, `{{sent}}` or
//! `{{sent_ms}}` becomes a number.

use std::time::SystemTime;

use serde::Deserialize;

/// The fixture files, by preset name.
const FILES: &[(&str, &str)] = &[
    ("adyen", include_str!("fixtures/adyen.json")),
    ("airtable", include_str!("fixtures/airtable.json")),
    ("asana", include_str!("fixtures/asana.json")),
    ("bitbucket", include_str!("fixtures/bitbucket.json")),
    ("box", include_str!("fixtures/box.json")),
    ("buildkite", include_str!("fixtures/buildkite.json")),
    ("cal-com", include_str!("fixtures/cal-com.json")),
    ("calendly", include_str!("fixtures/calendly.json")),
    ("checkout-com", include_str!("fixtures/checkout-com.json")),
    ("circleci", include_str!("fixtures/circleci.json")),
    ("clickup", include_str!("fixtures/clickup.json")),
    ("coinbase-commerce", include_str!("fixtures/coinbase-commerce.json")),
    ("convoy", include_str!("fixtures/convoy.json")),
    ("customer-io", include_str!("fixtures/customer-io.json")),
    ("discord", include_str!("fixtures/discord.json")),
    ("docusign", include_str!("fixtures/docusign.json")),
    ("dropbox", include_str!("fixtures/dropbox.json")),
    ("forgejo", include_str!("fixtures/forgejo.json")),
    ("front", include_str!("fixtures/front.json")),
    ("gitea", include_str!("fixtures/gitea.json")),
    ("github", include_str!("fixtures/github.json")),
    ("gitlab", include_str!("fixtures/gitlab.json")),
    ("gocardless", include_str!("fixtures/gocardless.json")),
    ("help-scout", include_str!("fixtures/help-scout.json")),
    ("heroku", include_str!("fixtures/heroku.json")),
    ("hookdeck", include_str!("fixtures/hookdeck.json")),
    ("hubspot", include_str!("fixtures/hubspot.json")),
    ("intercom", include_str!("fixtures/intercom.json")),
    ("lemon-squeezy", include_str!("fixtures/lemon-squeezy.json")),
    ("line", include_str!("fixtures/line.json")),
    ("linear", include_str!("fixtures/linear.json")),
    ("mailgun", include_str!("fixtures/mailgun.json")),
    ("mandrill", include_str!("fixtures/mandrill.json")),
    ("meta", include_str!("fixtures/meta.json")),
    ("mux", include_str!("fixtures/mux.json")),
    ("notion", include_str!("fixtures/notion.json")),
    ("paddle", include_str!("fixtures/paddle.json")),
    ("pagerduty", include_str!("fixtures/pagerduty.json")),
    ("paystack", include_str!("fixtures/paystack.json")),
    ("postmark", include_str!("fixtures/postmark.json")),
    ("quickbooks", include_str!("fixtures/quickbooks.json")),
    ("razorpay", include_str!("fixtures/razorpay.json")),
    ("recurly", include_str!("fixtures/recurly.json")),
    ("sanity", include_str!("fixtures/sanity.json")),
    ("sendgrid", include_str!("fixtures/sendgrid.json")),
    ("sentry", include_str!("fixtures/sentry.json")),
    ("shopify", include_str!("fixtures/shopify.json")),
    ("slack", include_str!("fixtures/slack.json")),
    ("square", include_str!("fixtures/square.json")),
    ("standard-webhooks", include_str!("fixtures/standard-webhooks.json")),
    ("stripe", include_str!("fixtures/stripe.json")),
    ("svix", include_str!("fixtures/svix.json")),
    ("telegram", include_str!("fixtures/telegram.json")),
    ("trello", include_str!("fixtures/trello.json")),
    ("twilio", include_str!("fixtures/twilio.json")),
    ("twitch", include_str!("fixtures/twitch.json")),
    ("typeform", include_str!("fixtures/typeform.json")),
    ("vercel", include_str!("fixtures/vercel.json")),
    ("vonage", include_str!("fixtures/vonage.json")),
    ("webflow", include_str!("fixtures/webflow.json")),
    ("woocommerce", include_str!("fixtures/woocommerce.json")),
    ("workos", include_str!("fixtures/workos.json")),
    ("xero", include_str!("fixtures/xero.json")),
    ("zendesk", include_str!("fixtures/zendesk.json")),
    ("zoom", include_str!("fixtures/zoom.json")),
];

/// One preset's fixture file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    /// Where the shapes come from.
    pub(super) source: String,
    pub(super) fixtures: Vec<Fixture>,
}

/// One named delivery shape.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Fixture {
    pub(super) name: String,
    #[serde(default = "uuid_template")]
    pub(super) id: String,
    #[serde(default)]
    pub(super) headers: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub(super) body: Option<serde_json::Value>,
    #[serde(default)]
    pub(super) form: Option<String>,
}

fn uuid_template() -> String {
    "{{uuid}}".to_owned()
}

/// The fixture file of `preset`, parsed; `None` when the preset has none.
///
/// # Panics
/// On a file that does not parse (a test reads every file).
pub(super) fn file(preset: &str) -> Option<File> {
    let (_, text) = FILES.iter().find(|(name, _)| *name == preset)?;
    Some(serde_json::from_str(text).unwrap_or_else(|e| panic!("src/dev/fixtures/{preset}.json: {e}")))
}

/// The presets with a fixture file.
pub(super) fn presets() -> impl Iterator<Item = &'static str> {
    FILES.iter().map(|(name, _)| *name)
}

/// The values one event's placeholders take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EventIds {
    pub(super) id: String,
    pub(super) uuid: String,
    pub(super) n: u32,
    pub(super) object: String,
    pub(super) seq: u32,
    /// When the event was made.
    pub(super) created: SystemTime,
    /// When this delivery of it is signed (`{{sent}}`, `{{sent_ms}}`).
    pub(super) sent: SystemTime,
}

impl EventIds {
    /// Fresh values, about a fresh object.
    pub(super) fn fresh() -> Self {
        Self {
            id: token(),
            uuid: uuid::Uuid::new_v4().to_string(),
            n: number(),
            object: token(),
            seq: 1,
            created: creation_time(),
            sent: SystemTime::now(),
        }
    }

    /// Values drawn from `seed`: the same for the same seed.
    pub(super) fn seeded(seed: &str) -> Self {
        use sha2::Digest as _;
        let digest = |label: &str| sha2::Sha256::digest(format!("{label}:{seed}"));
        let token_of = |label: &str| -> String {
            digest(label).iter().map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char).take(24).collect()
        };
        let uuid = uuid::Builder::from_random_bytes(digest("uuid")[..16].try_into().expect("16 bytes")).into_uuid();
        let n = u32::from_be_bytes(digest("n")[..4].try_into().expect("4 bytes")) & 0x7fff_ffff;
        Self {
            id: token_of("id"),
            uuid: uuid.to_string(),
            n,
            object: token_of("object"),
            seq: 1,
            created: creation_time(),
            sent: SystemTime::now(),
        }
    }

    /// Fresh values for the next event about the same object, made at
    /// least a second later: a body whose times are in whole seconds
    /// (`{{now}}`, `{{now_rfc3339}}`) tells the newer event from the older,
    /// as the sender's would (Lemon Squeezy, Cal.com and DocuSign key an
    /// event by the object and such a time: the pair was one event).
    pub(super) fn next_of_object(&self) -> Self {
        let fresh = Self::fresh();
        let created = fresh.created.max(self.created + std::time::Duration::from_secs(1));
        Self { object: self.object.clone(), seq: self.seq + 1, created, ..fresh }
    }
}

/// Now, to the millisecond, and later than every earlier call's answer in
/// this process: two events made at once are a millisecond apart, so a
/// sender whose key is a time (Airtable, Xero) gives each its own.
fn creation_time() -> SystemTime {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = u64::try_from(unix(SystemTime::now()).as_millis()).unwrap_or(u64::MAX);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(next),
            Err(seen) => last = seen,
        }
    }
}

/// The letters and digits of ids.
const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// 24 random letters and digits.
fn token() -> String {
    let bytes = [uuid::Uuid::new_v4().into_bytes(), uuid::Uuid::new_v4().into_bytes()].concat();
    bytes.iter().take(24).map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char).collect()
}

/// A random number below 2^31.
fn number() -> u32 {
    (uuid::Uuid::new_v4().as_u128() & 0x7fff_ffff) as u32
}

/// `template` with each placeholder replaced (see the module docs).
/// `at` since the Unix epoch (zero before it).
fn unix(at: SystemTime) -> std::time::Duration {
    at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default()
}

pub(super) fn render(template: &str, ids: &EventIds) -> String {
    let at = ids.created;
    let secs = at.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let millis = at.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let rfc3339 = time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).unwrap_or(0))
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default();
    // The same with the milliseconds: `...:57.123Z`.
    let rfc3339_ms = rfc3339.strip_suffix('Z').map_or_else(String::new, |s| format!("{s}.{:03}Z", millis % 1000));
    template
        .replace("{{id}}", &ids.id)
        .replace("{{uuid}}", &ids.uuid)
        .replace("{{n}}", &ids.n.to_string())
        .replace("{{object}}", &ids.object)
        .replace("{{seq}}", &ids.seq.to_string())
        .replace("{{now_rfc3339_ms}}", &rfc3339_ms)
        .replace("{{now_rfc3339}}", &rfc3339)
        .replace("{{now_ms}}", &millis.to_string())
        .replace("{{now}}", &secs.to_string())
        .replace("{{sent_ms}}", &unix(ids.sent).as_millis().to_string())
        .replace("{{sent}}", &unix(ids.sent).as_secs().to_string())
}

/// `value` with its strings rendered; a string that is exactly a numeric
/// placeholder becomes a number.
pub(super) fn render_json(value: &serde_json::Value, ids: &EventIds) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s)
            if ["{{n}}", "{{seq}}", "{{now}}", "{{now_ms}}", "{{sent}}", "{{sent_ms}}"].contains(&s.as_str()) =>
        {
            let text = render(s, ids);
            text.parse::<u64>().map_or(Value::String(text), Value::from)
        }
        Value::String(s) => Value::String(render(s, ids)),
        Value::Array(items) => Value::Array(items.iter().map(|v| render_json(v, ids)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), render_json(v, ids))).collect()),
        other => other.clone(),
    }
}

impl Fixture {
    /// The body of this fixture for the event `ids` at `at`.
    pub(super) fn body(&self, ids: &EventIds) -> Vec<u8> {
        match (&self.body, &self.form) {
            (Some(json), _) => render_json(json, ids).to_string().into_bytes(),
            (None, Some(form)) => render(form, ids).into_bytes(),
            (None, None) => Vec::new(),
        }
    }

    /// The content type of its body.
    pub(super) fn content_type(&self) -> &'static str {
        if self.form.is_some() {
            "application/x-www-form-urlencoded"
        } else {
            "application/json"
        }
    }
}
