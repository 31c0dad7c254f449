//! Every preset through the layer on a real PostgreSQL: the registry's
//! examples, the credential headers, the shapes of the second providers
//! review. Each preset's real-shaped deliveries (processed once, replayed,
//! 16 at once, tampered, stale) are `dev.rs`'s; the schemes themselves are
//! tested against the providers' published examples and SDK fixtures in
//! each `src/providers/<provider>.rs`.
#![cfg(feature = "full")]

use crate::support::*;
use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{Request, StatusCode};
use serde_json::json;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};
use tower::ServiceExt;
use webhook_idempotency::key::HeaderKey;
use webhook_idempotency::providers::*;
use webhook_idempotency::verify::generic::{BasicAuthVerifier, TokenHeaderVerifier};
use webhook_idempotency::verify::Delivery;
use webhook_idempotency::{Mode, Provider, SigningSecret, WebhookEvent, WebhookLayer, WebhookTx};

const SECRET: &str = "provider-test-secret-0123456789";

fn secret() -> SigningSecret {
    SigningSecret::from(SECRET)
}

fn post_to(path: &str, headers: &[(&str, String)], body: impl Into<Body>) -> Request<Body> {
    let mut req = Request::post(path);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    req.body(body.into()).unwrap()
}

/// From the second providers review: a correctly signed Slack slash command
/// (form-encoded, no `event_id`) answered 400 `body_not_json`. Slash commands
/// and interactions are keyed by their `trigger_id`; the handler gets the raw
/// form body; a repeat is a duplicate.
#[tokio::test]
async fn slack_slash_commands_and_interactions_are_claimed_by_their_trigger_id() {
    let db = TestDb::new().await;
    let layer = WebhookLayer::builder(db.pool.clone(), Provider::slack()).scope("T1").secret(secret()).build().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, Option<String>, Vec<u8>)>::new()));
    let app = Router::new().route(
        "/slack",
        post({
            let seen = std::sync::Arc::clone(&seen);
            move |tx: webhook_idempotency::WebhookTx, event: webhook_idempotency::WebhookEvent| {
                let seen = std::sync::Arc::clone(&seen);
                async move {
                    seen.lock().unwrap().push((
                        event.key().to_owned(),
                        event.event_type().map(str::to_owned),
                        event.body().to_vec(),
                    ));
                    apply_effect(tx, event).await
                }
            }
        })
        .layer(layer),
    );
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let command: &[u8] = b"token=x&team_id=T1&command=%2Fdeploy&text=prod&trigger_id=133.738.808";
    let interaction: &[u8] = b"payload=%7B%22type%22%3A%22view_submission%22%2C%22trigger_id%22%3A%22124.139%22%7D";
    for (body, key, kind) in [(command, "133.738.808", "/deploy"), (interaction, "124.139", "view_submission")] {
        let req = || {
            post_to(
                "/slack",
                &[
                    ("content-type", "application/x-www-form-urlencoded".to_owned()),
                    ("x-slack-signature", slack::FACTS.sign(&secret(), now, body)),
                    ("x-slack-request-timestamp", now.to_string()),
                ],
                body.to_vec(),
            )
        };
        let first = app.clone().oneshot(req()).await.unwrap();
        assert_eq!(first.status(), StatusCode::OK, "{kind}");
        let again = app.clone().oneshot(req()).await.unwrap();
        assert_eq!(again.status(), StatusCode::OK);
        assert!(again.headers().contains_key("idempotent-replayed"), "{kind}: a repeat is a duplicate");
        assert_eq!(db.effects_for(key).await, 1, "{kind}");
        let seen = seen.lock().unwrap();
        let last = seen.last().unwrap();
        assert_eq!((last.0.as_str(), last.1.as_deref(), &last.2[..]), (key, Some(kind), body), "{kind}: raw form body");
    }
}

/// A body most presets keyed by a JSON field can read (an id under the usual
/// names, Linear's `webhookTimestamp`, a non-empty `events` batch, Airtable's
/// ping fields, DocuSign's `generatedDateTime`, Trello's `action`), the `n`th
/// event; the second shape names the event by a string `event` (Zoom,
/// Calendly, Buildkite) instead of an object (PagerDuty).
fn registry_body(n: u32, now: u64, shape: usize) -> Vec<u8> {
    let id = format!("evt_registry_{n}");
    let event = if shape == 0 { json!({"id": id}) } else { json!("thing.created") };
    json!({
        "id": id, "event_id": id, "type": "thing.created", "event": event,
        "triggerEvent": "THING_CREATED", "createdAt": format!("2024-01-0{n}T00:00:00Z"), "created_at": "c",
        "payload": {"id": id, "uid": format!("uid_{n}"), "uri": format!("https://example.com/{n}")},
        "events": [{"id": id, "webhookEventId": id}], "webhookTimestamp": now * 1000,
        "update_id": 1000 + n, "message": {"message_id": n},
        "meta": {"webhook_id": id, "event_name": "thing_created"},
        "data": {"type": "things", "id": id, "envelopeId": id, "attributes": {"updated_at": format!("2024-01-0{n}T00:00:00Z")}},
        "base": {"id": "appRegistry"}, "webhook": {"id": "achRegistry"}, "timestamp": format!("2024-01-0{n}T00:00:00.000Z"),
        "generatedDateTime": format!("2024-01-0{n}T00:00:00.0000000Z"), "action": {"id": id, "type": "thing.created"},
    })
    .to_string()
    .into_bytes()
}

/// The request of a preset's example, with `body`.
fn example_request(ex: &Example, body: Vec<u8>) -> Request<Body> {
    let mut req = Request::builder().method(ex.parts.method.clone()).uri(ex.parts.uri.clone());
    for (name, value) in &ex.parts.headers {
        req = req.header(name, value);
    }
    req.body(Body::from(body)).unwrap()
}

/// Every preset of the registry, through the layer with the deliveries its
/// registry entry signs (`PresetInfo::example`): each of two events is
/// processed once and its duplicate replayed, and a copy with a byte flipped
/// near the end is refused 401. A preset added to the registry runs here
/// without a case of its own.
#[tokio::test]
async fn every_registry_preset_example_goes_through_the_layer() {
    let db = TestDb::new().await;
    let now = unix_now();
    let request = example_request;
    let (mut ran, mut skipped, mut runs) = (Vec::new(), Vec::new(), 0);
    for preset in all() {
        let readable = (0..2).map(|shape| {
            let examples: Vec<Example> = (1..=2)
                .map(|n| {
                    preset.example(
                        &format!("delivery-{n}"),
                        UNIX_EPOCH + Duration::from_secs(now),
                        &registry_body(n, now, shape),
                    )
                })
                .collect();
            examples.iter().all(|ex| ex.provider.identify(&ex.parts, &ex.body).is_ok()).then_some(examples)
        });
        let Some(examples) = readable.flatten().next() else {
            skipped.push(preset.name);
            continue;
        };
        let mut builder = WebhookLayer::builder(db.pool.clone(), examples[0].provider.clone()).scope("registry");
        for secret in &examples[0].secrets {
            builder = builder.secret(secret.clone());
        }
        // Any path: an example may sign its own (Twilio's query).
        let app = Router::new().fallback(apply_effect).layer(builder.build().unwrap());
        let name = preset.name;
        for ex in &examples {
            let first = app.clone().oneshot(request(ex, ex.body.clone())).await.unwrap();
            assert_eq!(first.status(), StatusCode::OK, "{name}: first delivery");
            assert!(first.headers().get("idempotent-replayed").is_none(), "{name}");
            let again = app.clone().oneshot(request(ex, ex.body.clone())).await.unwrap();
            assert_eq!(again.status(), StatusCode::OK, "{name}: duplicate");
            // A preset whose every delivery runs the handler (Dropbox) runs it again.
            let replayed = again.headers().get("idempotent-replayed").is_some();
            assert_eq!(replayed, preset.dedupes, "{name}: replayed only where the preset deduplicates");
            runs += if preset.dedupes { 1 } else { 2 };
        }
        // The byte the registry's own test flips (Mailgun signs fields at the
        // end of its body, not the whole body).
        let mut tampered = examples[0].body.clone();
        let last = tampered.len() - 2;
        tampered[last] ^= 1;
        let forged = app.clone().oneshot(request(&examples[0], tampered)).await.unwrap();
        if preset.signs_body {
            assert_eq!(forged.status(), StatusCode::UNAUTHORIZED, "{name}: tampered");
        } else {
            // A shared token signs nothing (GitLab, Telegram): the limit their
            // module docs state; the token still has to match.
            assert_ne!(forged.status(), StatusCode::UNAUTHORIZED, "{name}: token schemes sign no body");
        }
        ran.push(name);
    }
    // Only the presets whose deliveries are JSON arrays of events (their
    // hand-written cases are above) cannot read the shared body.
    assert_eq!(skipped, ["hubspot", "sendgrid"], "ran {ran:?}");
    assert_eq!(db.effects().await, runs, "ran {ran:?}");
}

/// One delivery whose credentials must go no further than the verifier: its
/// provider (a name unique among the cases), key material and signed request,
/// and the strings that alone authenticate (each secret's text, and the forms
/// a header carries it in: Basic's base64, the password).
struct Credentialed {
    provider: Provider,
    secrets: Vec<SigningSecret>,
    parts: http::request::Parts,
    body: Vec<u8>,
    credentials: Vec<String>,
}

impl Credentialed {
    fn new(provider: Provider, secrets: Vec<SigningSecret>, parts: http::request::Parts, body: Vec<u8>) -> Self {
        let credentials = secrets.iter().map(|s| String::from_utf8_lossy(s.expose()).into_owned()).collect();
        Self { provider, secrets, parts, body, credentials }
    }

    fn request(&self) -> Request<Body> {
        let mut req = Request::builder().method(self.parts.method.clone()).uri(self.parts.uri.clone());
        for (name, value) in &self.parts.headers {
            req = req.header(name, value);
        }
        req.body(Body::from(self.body.clone())).unwrap()
    }

    /// The layer for this case, its clock at `now` (the examples' signing
    /// time: Paddle's tolerance is 5 s).
    fn layer(&self, db: &TestDb, mode: Mode, now: u64) -> WebhookLayer {
        let at = UNIX_EPOCH + Duration::from_secs(now);
        let builder = WebhookLayer::builder(db.pool.clone(), self.provider.clone())
            .scope("credentials")
            .mode(mode)
            .clock(move || at);
        self.secrets.iter().fold(builder, |b, s| b.secret(s.clone())).build().unwrap()
    }

    /// The names of the headers among `headers` whose value holds a credential.
    fn leaked(&self, headers: &[(String, String)]) -> Vec<String> {
        let holds = |value: &String| self.credentials.iter().any(|c| value.contains(c.as_str()));
        headers.iter().filter(|(_, value)| holds(value)).map(|(name, _)| name.clone()).collect()
    }
}

/// Every registry preset's example (each with a body its key extractor
/// reads: the registry body, or a one-event batch for HubSpot and SendGrid),
/// and the generic shared-token, Bearer and Basic verifiers. The token
/// provider declares its token header among those it reads, the mistake a
/// keep-list would store.
fn credentialed(now: u64) -> Vec<Credentialed> {
    let batch = json!([{
        "sg_event_id": "sg_1", "event": "delivered", "eventId": 1, "portalId": 2, "subscriptionId": 3,
        "occurredAt": 4, "subscriptionType": "contact.creation", "objectId": 5,
    }])
    .to_string()
    .into_bytes();
    let at = UNIX_EPOCH + Duration::from_secs(now);
    let mut cases: Vec<Credentialed> = all()
        .iter()
        .map(|preset| {
            let bodies = [registry_body(1, now, 0), registry_body(1, now, 1), batch.clone()];
            let ex = bodies
                .iter()
                .map(|body| preset.example("delivery-1", at, body))
                .find(|ex| ex.provider.identify(&ex.parts, &ex.body).is_ok())
                .unwrap_or_else(|| panic!("{}: no body its key extractor reads", preset.name));
            Credentialed::new(ex.provider, ex.secrets, ex.parts, ex.body)
        })
        .collect();
    let (token, password) = ("tok-0123456789abcdef-0123456789", "pass-0123456789abcdef");
    let id = http::HeaderName::from_static("x-event-id");
    let generic = |name: &'static str, verifier: &dyn Fn(Provider) -> Provider, header: (&str, &str), secret| {
        let provider = verifier(Provider::new(name, |_: &Delivery<'_>| Ok(()), HeaderKey::new(id.clone())));
        let parts = Request::post("/hooks/generic")
            .header(header.0, header.1)
            .header(&id, format!("{name}-1"))
            .body(())
            .unwrap()
            .into_parts()
            .0;
        Credentialed::new(provider, vec![secret], parts, br#"{"ok":true}"#.to_vec())
    };
    let token_header = http::HeaderName::from_static("x-webhook-token");
    let declared = |p: Provider| {
        p.verifier(TokenHeaderVerifier::new(token_header.clone())).reads_headers([token_header.clone(), id.clone()])
    };
    cases.push(generic("token", &declared, ("x-webhook-token", token), SigningSecret::from(token)));
    let bearer = |p: Provider| p.verifier(TokenHeaderVerifier::new(http::header::AUTHORIZATION).scheme("Bearer"));
    let value = format!("Bearer {token}");
    cases.push(generic("bearer", &bearer, ("authorization", &value), SigningSecret::from(token)));
    let value = BasicAuthVerifier::header_value("hook", password);
    let secret = BasicAuthVerifier::credentials("hook", password);
    let mut basic =
        generic("basic", &|p: Provider| p.verifier(BasicAuthVerifier::new()), ("authorization", &value), secret);
    basic.credentials.extend([value.trim_start_matches("Basic ").to_owned(), password.to_owned()]);
    cases.push(basic);
    cases
}

/// A handler that records the headers it is handed, by provider, and
/// applies the effect.
fn recording_handler(
    seen: Arc<Mutex<HashMap<String, Vec<(String, String)>>>>,
) -> impl Fn(http::HeaderMap, WebhookTx, WebhookEvent) -> std::pin::Pin<Box<dyn Future<Output = StatusCode> + Send>>
       + Clone
       + Send
       + Sync
       + 'static {
    move |headers: http::HeaderMap, tx: WebhookTx, event: WebhookEvent| {
        let pairs = headers.iter().map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()));
        seen.lock().unwrap().insert(event.provider().to_owned(), pairs.collect());
        Box::pin(apply_effect(tx, event))
    }
}

/// A credential (a shared token, Basic credentials: a header whose value
/// alone authenticates any delivery) reaches neither the handler nor the
/// database, for every registry preset and the generic token and Basic
/// verifiers: in synchronous mode the handler's request has no header
/// holding it; in inbox mode no stored `request_head` holds it, nor the
/// request the worker rebuilds for the handler. GitLab, Telegram and the
/// three generic cases are the deliveries that carry one (pinned, so the
/// test cannot pass by carrying none).
#[tokio::test]
async fn no_credential_reaches_the_handler_or_the_inbox_for_any_preset() {
    let now = unix_now();
    let cases = credentialed(now);
    let carrying: Vec<&str> = cases
        .iter()
        .filter(|c| {
            let sent: Vec<(String, String)> = c
                .parts
                .headers
                .iter()
                .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect();
            !c.leaked(&sent).is_empty()
        })
        .map(|c| c.provider.name())
        .collect();
    assert_eq!(carrying, ["gitlab", "telegram", "token", "bearer", "basic"], "the deliveries that carry one");
    assert_no_credential_goes_further(&cases, now).await;
}

/// Breaker of the issue 33 fixes: the GitLab preset with its verifier
/// wrapped in a closure (`Provider::gitlab().verifier(move |d|
/// inner.verify(d))`, the documented way to add a check or a log line) is
/// still named `gitlab`, so its registry entry put `X-Gitlab-Token` on the
/// inbox keep-list, while the strip went by what the verifier declared, and
/// a closure declares nothing: the token was stored in `request_head` and
/// handed to the handler again (Telegram alike). A preset's credential
/// headers are now a fact of the provider: every registry preset with its
/// verifier wrapped in a closure keeps no credential from the handler and
/// the inbox, nor do the generic token, Bearer and Basic verifiers wrapped
/// in closures on providers that declare their header
/// (`Provider::credentials_in`).
#[tokio::test]
async fn no_credential_reaches_the_handler_or_the_inbox_when_a_verifier_is_wrapped_in_a_closure() {
    let now = unix_now();
    let mut cases = credentialed(now);
    // A preset whose key is fetched (SNS) or whose root is shipped (Apple)
    // needs its own verifier to take no secret; a closure's default asks for
    // one. It reads no credential.
    cases.retain(|c| find(c.provider.name()).is_none_or(|p| !matches!(p.key, KeyKind::Fetched | KeyKind::ShippedRoot)));
    for case in &mut cases {
        let inner = case.provider.clone();
        let wrapped = inner.clone().verifier(move |d: &Delivery<'_>| inner.verify(d));
        case.provider = match case.provider.name() {
            "token" => wrapped.credentials_in([http::HeaderName::from_static("x-webhook-token")]),
            "bearer" | "basic" => wrapped.credentials_in([http::header::AUTHORIZATION]),
            _ => wrapped,
        };
    }
    assert_no_credential_goes_further(&cases, now).await;
}

/// Breaker of the issue 33 fixes (held): the GitLab preset as shipped, its
/// endpoint from a `ScopeResolver`, a delivery re-sent by an operator (the
/// operator-replay header beside the token) with the token header on two
/// identical lines: inbox mode stores neither token, and the request the
/// worker rebuilds carries neither, but keeps the headers the handler reads.
#[tokio::test]
async fn a_resolved_operator_replay_with_repeated_token_lines_stores_and_hands_on_no_credential() {
    use webhook_idempotency::Endpoint;
    const GITLAB_TOKEN: &str = "glwh-breaker-0123456789abcdef-tok";
    const REPLAY_TOKEN: &str = "operator-replay-token-0123456789";
    let db = TestDb::new().await;
    let resolver =
        |_: &http::request::Parts| async { Ok(Endpoint::new("group_1", [SigningSecret::from(GITLAB_TOKEN)])) };
    let replay_header = http::HeaderName::from_static("x-operator-replay");
    let layer = WebhookLayer::builder(db.pool.clone(), Provider::gitlab())
        .resolver(resolver)
        .mode(Mode::Inbox)
        .operator_replay(replay_header.clone(), REPLAY_TOKEN)
        .keep_headers([replay_header])
        .build()
        .unwrap();
    let app = Router::new().route("/hooks/gitlab", post(|| async { StatusCode::OK })).layer(layer);
    let req = Request::post("/hooks/gitlab")
        .header("content-type", "application/json")
        .header("x-gitlab-token", GITLAB_TOKEN)
        .header("x-gitlab-token", GITLAB_TOKEN)
        .header("x-gitlab-event", "Push Hook")
        .header("idempotency-key", "hook-replayed")
        .header("x-operator-replay", REPLAY_TOKEN)
        .body(Body::from(r#"{"object_kind":"push"}"#))
        .unwrap();
    assert_eq!(app.oneshot(req).await.unwrap().status(), StatusCode::OK);
    let head = db.scalar_text("SELECT request_head::text FROM webhook_idempotency.webhook_events").await;
    assert!(!head.contains(GITLAB_TOKEN) && !head.contains(REPLAY_TOKEN), "{head}");

    let seen = Arc::new(Mutex::new(HashMap::new()));
    let handlers = Router::new().route("/hooks/gitlab", post(recording_handler(Arc::clone(&seen))));
    let worker = webhook_idempotency::inbox::InboxWorker::builder(db.pool(2), handlers)
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let (stop, task) = crate::inbox::spawn_worker(worker);
    let ran = eventually(Duration::from_secs(20), || async { db.effects().await == 1 }).await;
    let _ = stop.send(());
    task.await.unwrap();
    assert!(ran, "the worker ran the row");
    let handed = seen.lock().unwrap().remove("gitlab").expect("the handler's headers");
    let leaked: Vec<_> = handed.iter().filter(|(_, v)| [GITLAB_TOKEN, REPLAY_TOKEN].contains(&v.as_str())).collect();
    assert!(leaked.is_empty(), "{leaked:?}");
    assert!(
        handed.contains(&("x-gitlab-event".to_owned(), "Push Hook".to_owned())),
        "the kept headers reach the handler"
    );
}

/// Each of `cases` delivered in synchronous mode, then in inbox mode and run
/// by a worker: no header of the handler's request, nor of a stored
/// `request_head`, holds one of its credentials.
async fn assert_no_credential_goes_further(cases: &[Credentialed], now: u64) {
    // Synchronous mode: the handler's request.
    let db = TestDb::new().await;
    let seen = Arc::new(Mutex::new(HashMap::new()));
    for case in cases {
        let name = case.provider.name();
        let app = Router::new().fallback(recording_handler(Arc::clone(&seen))).layer(case.layer(&db, Mode::Sync, now));
        let res = app.oneshot(case.request()).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{name}: synchronous delivery");
        let handed = seen.lock().unwrap().remove(name).unwrap_or_else(|| panic!("{name}: the handler ran"));
        assert_eq!(case.leaked(&handed), Vec::<String>::new(), "{name}: a credential handed to the handler");
    }
    assert_eq!(db.effects().await, cases.len() as i64);

    // Inbox mode: the stored head, then the request the worker rebuilds.
    let db = TestDb::new().await;
    for case in cases {
        let app = Router::new().fallback(|| async { StatusCode::IM_A_TEAPOT }).layer(case.layer(&db, Mode::Inbox, now));
        let res = app.oneshot(case.request()).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{}: accepted", case.provider.name());
    }
    let c = db.pool.get().await.unwrap();
    let heads =
        c.query("SELECT provider, request_head::text FROM webhook_idempotency.webhook_events", &[]).await.unwrap();
    assert_eq!(heads.len(), cases.len(), "one row per case");
    for row in heads {
        let (provider, head): (String, String) = (row.get(0), row.get(1));
        let case = cases.iter().find(|c| c.provider.name() == provider).unwrap();
        let head: serde_json::Value = serde_json::from_str(&head).unwrap();
        let stored: Vec<(String, String)> = serde_json::from_value(head["headers"].clone()).unwrap();
        assert_eq!(case.leaked(&stored), Vec::<String>::new(), "{provider}: a credential stored in request_head");
    }
    let handlers = Router::new().fallback(recording_handler(Arc::clone(&seen)));
    let worker = webhook_idempotency::inbox::InboxWorker::builder(db.pool(8), handlers)
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    let all_done = eventually(Duration::from_secs(30), || async { db.effects().await == cases.len() as i64 }).await;
    let _ = stop.send(());
    task.await.unwrap();
    assert!(all_done, "every row processed: {} of {}", db.effects().await, cases.len());
    let seen = seen.lock().unwrap();
    for case in cases {
        let name = case.provider.name();
        let handed = seen.get(name).unwrap_or_else(|| panic!("{name}: the worker ran it"));
        assert_eq!(case.leaked(handed), Vec::<String>::new(), "{name}: a credential in the rebuilt request");
    }
}

/// The scrub CHANGELOG.md gives for rows stored before credential headers
/// were dropped, run as written: the GitLab and Telegram tokens leave every
/// stored head, the other headers stay in order, other rows are untouched.
#[tokio::test]
async fn the_changelog_s_scrub_removes_stored_tokens_and_keeps_the_other_headers() {
    let changelog = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/CHANGELOG.md")).unwrap();
    let from = changelog.find("### Security (fourth round)").expect("the section");
    let block = &changelog[from..];
    let start = block.find("```sql\n").expect("the scrub's SQL block") + "```sql\n".len();
    let scrub = &block[start..start + block[start..].find("```").unwrap()];
    let db = TestDb::new().await;
    let inbox = webhook_idempotency::store::inbox::Inbox::new(db.pool.clone()).unwrap();
    let head = |headers: &[(&str, &str)]| webhook_idempotency::store::inbox::RequestHead {
        method: "POST".into(),
        uri: "/hook".into(),
        headers: headers.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect(),
    };
    let rows = [
        (
            "gitlab",
            head(&[
                ("content-type", "application/json"),
                ("x-gitlab-token", "glpat-secret-token-1"),
                ("idempotency-key", "k1"),
                ("x-gitlab-event", "Push Hook"),
            ]),
        ),
        ("telegram", head(&[("x-telegram-bot-api-secret-token", "tg-secret-token-1")])),
        ("stripe", head(&[("content-type", "application/json"), ("user-agent", "Stripe/1.0")])),
    ];
    for (provider, head) in &rows {
        let event = webhook_idempotency::ScopedEvent::new(*provider, "s", format!("{provider}-1"));
        assert!(inbox.accept(&event, b"{}", head).await.unwrap());
    }
    let changed = db.pool.get().await.unwrap().execute(scrub, &[]).await.unwrap();
    assert_eq!(changed, 2, "the two rows holding a token");
    let c = db.pool.get().await.unwrap();
    let stored = c
        .query("SELECT provider, request_head::text FROM webhook_idempotency.webhook_events ORDER BY provider", &[])
        .await
        .unwrap();
    let heads: Vec<(String, Vec<(String, String)>)> = stored
        .iter()
        .map(|r| {
            let head: serde_json::Value = serde_json::from_str(r.get(1)).unwrap();
            (r.get(0), serde_json::from_value(head["headers"].clone()).unwrap())
        })
        .collect();
    let pairs = |h: &[(&str, &str)]| h.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect::<Vec<_>>();
    assert_eq!(
        heads,
        [
            (
                "gitlab".to_owned(),
                pairs(&[
                    ("content-type", "application/json"),
                    ("idempotency-key", "k1"),
                    ("x-gitlab-event", "Push Hook")
                ])
            ),
            ("stripe".to_owned(), pairs(&[("content-type", "application/json"), ("user-agent", "Stripe/1.0")])),
            ("telegram".to_owned(), vec![]),
        ]
    );
    let all =
        db.scalar_text("SELECT string_agg(request_head::text, ' ') FROM webhook_idempotency.webhook_events").await;
    assert!(!all.contains("secret-token"), "{all}");
}
