//! Inputs from the security review: key material that authenticates nothing,
//! unauthenticated requests that cost more than their size, duplicates that
//! hold pooled connections, and what an unauthenticated client or a handler
//! can learn.

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::*;
use axum::body::Body;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::Notify;
use tower::ServiceExt;
use webhook_idempotency::providers::github;
use webhook_idempotency::scope::Endpoint;
use webhook_idempotency::verify::KeyMaterialErrorKind;
use webhook_idempotency::{Provider, SigningSecret, WebhookEvent, WebhookLayer, WebhookTx};

async fn send(app: &Router, req: Request<Body>) -> (StatusCode, http::HeaderMap, Bytes) {
    let res = app.clone().oneshot(req).await.unwrap();
    let (parts, body) = res.into_parts();
    (parts.status, parts.headers, body.collect().await.unwrap().to_bytes())
}

#[tokio::test]
async fn key_material_that_authenticates_nothing_is_a_build_error_naming_the_provider() {
    let db = TestDb::new().await;
    let cases: [(&str, Provider, Vec<&str>, KeyMaterialErrorKind); 6] = [
        ("stripe, empty secret", Provider::stripe(), vec![""], KeyMaterialErrorKind::Empty),
        ("github, empty secret", Provider::github(), vec![""], KeyMaterialErrorKind::Empty),
        ("stripe, bare whsec_", Provider::stripe(), vec!["whsec_"], KeyMaterialErrorKind::OnlyPrefix),
        ("stripe, no secret", Provider::stripe(), vec![], KeyMaterialErrorKind::NoSecret),
        ("github, no secret", Provider::github(), vec![], KeyMaterialErrorKind::NoSecret),
        ("rotation with one empty", Provider::stripe(), vec![STRIPE_SECRET, ""], KeyMaterialErrorKind::Empty),
    ];
    for (name, provider, secrets, want) in cases {
        let provider_name = provider.name().to_owned();
        let mut builder = WebhookLayer::builder(db.pool.clone(), provider).scope("acct");
        for s in secrets {
            builder = builder.secret(s);
        }
        let err = builder.build().expect_err(name);
        assert_eq!(err.key_material().map(|e| e.kind()), Some(want), "{name}");
        assert!(err.to_string().contains(&provider_name), "{name}: names the provider: {err}");
    }
}

/// What `${STRIPE_WEBHOOK_SECRET}` gives in a compose file when the host
/// variable is unset: an empty secret, here from a resolver at request time.
#[tokio::test]
async fn a_resolver_returning_an_empty_secret_gets_no_2xx_and_an_error_log_naming_the_scope() {
    let db = TestDb::new().await;
    let resolver = |_: &http::request::Parts| async { Ok(Endpoint::new("tenant_empty", [SigningSecret::from("")])) };
    let app = Router::new().route(
        "/webhooks/stripe",
        post(apply_effect)
            .layer(WebhookLayer::builder(db.pool.clone(), Provider::stripe()).resolver(resolver).build().unwrap()),
    );
    let github_app = Router::new().route(
        "/webhooks/github",
        post(apply_effect).layer(
            WebhookLayer::builder(db.pool.clone(), Provider::github())
                .resolver(|_: &http::request::Parts| async {
                    Ok(Endpoint::new("tenant_empty", [SigningSecret::from("")]))
                })
                .build()
                .unwrap(),
        ),
    );
    let (logs, _guard) = Logs::capture();
    // Forged by anyone: HMAC with the empty key.
    let forged = stripe_request_at(stripe_body("evt_forged"), unix_now(), "");
    let (status, _, _) = send(&app, forged).await;
    assert!(!status.is_success(), "stripe: {status}");
    let body = b"{\"zen\":\"forged\"}".to_vec();
    let forged = Request::post("/webhooks/github")
        .header("x-github-event", "push")
        .header("x-github-delivery", "forged-1")
        .header("x-hub-signature-256", github::FACTS.sign(&SigningSecret::from(""), 0, &body))
        .body(Body::from(body))
        .unwrap();
    let (status, _, _) = send(&github_app, forged).await;
    assert!(!status.is_success(), "github: {status}");
    assert_eq!(db.events().await, 0, "nothing claimed");
    assert_eq!(db.effects().await, 0, "nothing applied");
    let errors = logs.lines_with(&["ERROR", "tenant_empty", "empty_secret", "authenticates nothing"]);
    assert_eq!(errors.len(), 2, "one ERROR line per delivery naming the scope: {}", logs.text());
}

/// Copies of an event whose first delivery is still running must not hold
/// pooled connections while they wait: an unrelated event still gets one.
#[tokio::test]
async fn in_flight_duplicates_wait_without_holding_pooled_connections() {
    const POOL: usize = 4;
    let db = TestDb::new().await;
    let entered = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let handler = {
        let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
        move |tx: WebhookTx, event: WebhookEvent| {
            let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
            async move {
                if event.key() == "evt_slow" {
                    entered.notify_one();
                    release.notified().await;
                }
                apply_effect(tx, event).await
            }
        }
    };
    let layer = stripe_layer(StoreConfig::from(db.pool(POOL)).pool_timeout(Duration::from_secs(2)))
        .lock_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let app = Router::new().route("/webhooks/stripe", post(handler).layer(layer));
    let (logs, _guard) = Logs::capture();

    let slow = stripe_body("evt_slow");
    let first = tokio::spawn(app.clone().oneshot(stripe_request(slow.clone())));
    entered.notified().await;
    // As many copies as the pool has connections.
    let copies: Vec<_> = (0..POOL).map(|_| tokio::spawn(app.clone().oneshot(stripe_request(slow.clone())))).collect();
    // Each copy has found the event in flight and is waiting.
    let waiting = || logs.lines_with(&["another delivery of this event is in flight; checking again"]).len();
    assert!(eventually(Duration::from_secs(10), || std::future::ready(waiting() >= POOL)).await, "{}", logs.text());

    // An unrelated genuine event is served while they wait.
    let (status, _, _) = send(&app, stripe_request(stripe_body("evt_unrelated"))).await;
    assert_eq!(status, StatusCode::OK, "{}", logs.text());

    release.notify_one();
    assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
    for copy in copies {
        let res = copy.await.unwrap().unwrap();
        assert_eq!(res.status(), StatusCode::OK, "replayed once the first committed");
        assert_eq!(res.headers().get("idempotent-replayed").unwrap(), "true");
    }
    assert_eq!(db.effects_for("evt_slow").await, 1);
    assert_eq!(db.effects_for("evt_unrelated").await, 1);
}

#[tokio::test]
async fn a_route_without_the_layer_answers_a_generic_500() {
    let (logs, _guard) = Logs::capture();
    let app = Router::new().route("/webhooks/stripe", post(|_: WebhookTx| async { StatusCode::OK }));
    let (status, _, body) = send(&app, stripe_request(stripe_body("evt_1"))).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let body = String::from_utf8_lossy(&body);
    assert!(!body.contains("WebhookLayer") && !body.contains("WebhookTx"), "says nothing of the build: {body}");
    assert_eq!(logs.lines_with(&["ERROR", "WebhookLayer"]).len(), 1, "the explanation is logged");
}

#[tokio::test]
async fn the_operator_replay_token_never_reaches_the_handler() {
    const TOKEN: &str = "operator-token-0123456789";
    let db = TestDb::new().await;
    let handler = |tx: WebhookTx, event: WebhookEvent, headers: http::HeaderMap| async move {
        if headers.contains_key("x-operator-replay") {
            return StatusCode::IM_A_TEAPOT;
        }
        apply_effect(tx, event).await
    };
    let layer = stripe_layer(db.pool.clone())
        .operator_replay(http::HeaderName::from_static("x-operator-replay"), TOKEN)
        .build()
        .unwrap();
    let app = Router::new().route("/webhooks/stripe", post(handler).layer(layer));
    let old = unix_now() - 3600;
    let with = |id: &str, token: &str| {
        let mut req = stripe_request_at(stripe_body(id), old, STRIPE_SECRET);
        req.headers_mut().insert("x-operator-replay", token.parse().unwrap());
        req
    };
    let cases = [
        ("right token: replayed, header stripped", with("evt_op1", TOKEN), StatusCode::OK),
        ("a prefix of the token", with("evt_op2", &TOKEN[..10]), StatusCode::UNAUTHORIZED),
        ("the token and more", with("evt_op3", &format!("{TOKEN}x")), StatusCode::UNAUTHORIZED),
        ("empty", with("evt_op4", ""), StatusCode::UNAUTHORIZED),
    ];
    for (name, req, want) in cases {
        assert_eq!(send(&app, req).await.0, want, "{name}");
    }
    // A fresh delivery carrying a wrong token still passes on its own
    // signature, and the handler does not see the header either.
    assert_eq!(
        send(&app, {
            let mut req = stripe_request(stripe_body("evt_op5"));
            req.headers_mut().insert("x-operator-replay", "guess".parse().unwrap());
            req
        })
        .await
        .0,
        StatusCode::OK
    );
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[tokio::test]
async fn every_content_encoding_line_counts() {
    let db = TestDb::new().await;
    let plain = Router::new()
        .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).build().unwrap()));
    let with_gzip = Router::new()
        .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).gzip(4096).build().unwrap()));
    let decoded = br#"{"zen":"lines"}"#.to_vec();
    let req = |id: &str, lines: &[&str], body: Vec<u8>| {
        let mut req = Request::post("/webhooks/github")
            .header("x-github-event", "push")
            .header("x-github-delivery", id)
            .header("x-hub-signature-256", github::FACTS.sign(&SigningSecret::from(GITHUB_SECRET), 0, &decoded));
        for line in lines {
            req = req.header("content-encoding", *line);
        }
        req.body(Body::from(body)).unwrap()
    };
    let cases: [(&str, &Router, Request<Body>, StatusCode); 6] = [
        (
            "identity then gzip, gzip off",
            &plain,
            req("l-1", &["identity", "gzip"], gzip(&decoded)),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "identity then br",
            &with_gzip,
            req("l-2", &["identity", "br"], decoded.clone()),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "gzip twice",
            &with_gzip,
            req("l-3", &["gzip", "gzip"], gzip(&gzip(&decoded))),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "gzip, gzip on one line",
            &with_gzip,
            req("l-4", &["gzip, gzip"], gzip(&gzip(&decoded))),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        ("identity then gzip, gzip on", &with_gzip, req("l-5", &["identity", "gzip"], gzip(&decoded)), StatusCode::OK),
        ("identity twice", &plain, req("l-6", &["identity", "identity"], decoded.clone()), StatusCode::OK),
    ];
    for (name, app, req, want) in cases {
        assert_eq!(send(app, req).await.0, want, "{name}");
    }
}

/// A gzip bomb (about 1000:1) inflates on the blocking pool: the async
/// worker thread keeps running other tasks meanwhile.
#[test]
fn inflating_a_gzip_bomb_does_not_stall_the_async_thread() {
    const INFLATED: usize = 24 << 20;
    let bomb = gzip(&vec![b' '; INFLATED]);
    // Baseline in this run: inflating it inline.
    let t = Instant::now();
    std::io::copy(&mut flate2::read::GzDecoder::new(&bomb[..]), &mut std::io::sink()).unwrap();
    let inline = t.elapsed();

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let db = TestDb::new().await;
        let app = Router::new().route(
            "/webhooks/github",
            post(apply_effect).layer(github_layer(db.pool.clone()).gzip(INFLATED + 1).build().unwrap()),
        );
        let req = Request::post("/webhooks/github")
            .header("x-github-event", "push")
            .header("x-github-delivery", "bomb-1")
            .header("x-hub-signature-256", github::FACTS.sign(&SigningSecret::from(GITHUB_SECRET), 0, b"forged"))
            .header("content-encoding", "gzip")
            .body(Body::from(bomb))
            .unwrap();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // A task on the same (only) async thread counts how often it runs
        // while the request is served: inflating inline would leave it no
        // turn for the whole inflation (a handful of turns in all, at the
        // request's own await points); on the blocking pool it keeps running.
        let ticker = {
            let done = Arc::clone(&done);
            tokio::spawn(async move {
                let (mut turns, mut longest, mut last) = (0u64, Duration::ZERO, Instant::now());
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    tokio::task::yield_now().await;
                    turns += 1;
                    longest = longest.max(last.elapsed());
                    last = Instant::now();
                }
                (turns, longest)
            })
        };
        let started = Instant::now();
        let (status, _, _) = send(&app, req).await;
        let served_in = started.elapsed();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let (turns, longest) = ticker.await.unwrap();
        assert_eq!(status, StatusCode::UNAUTHORIZED, "inflated, then refused on its signature");
        println!(
            "inflating 24 MiB inline: {inline:?}; served in {served_in:?}, other task ran {turns} times, \
             longest pause {longest:?}"
        );
        assert!(turns > 1_000, "the async thread was held: the other task ran only {turns} times");
    });
}

/// The key of a large delivery is read on the blocking pool, like its
/// signature: parsing a 16 MiB JSON body never holds the async thread.
#[test]
fn reading_the_key_of_a_large_body_does_not_stall_the_async_thread() {
    // 16 MiB of small objects: slow to parse into a `serde_json::Value`.
    let items = vec![r#"{"a":1,"b":"xx","c":[true,null]}"#; (16 << 20) / 34].join(",");
    let body = format!(r#"{{"id":"evt_large_key","type":"bulk.imported","data":{{"items":[{items}]}}}}"#);
    // Baseline in this run: the parse the key extractor does, inline.
    let t = Instant::now();
    let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
    let inline = t.elapsed();
    drop(parsed);

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let db = TestDb::new().await;
        let app = Router::new().route(
            "/webhooks/stripe",
            post(apply_effect).layer(
                stripe_layer(StoreConfig::from(db.pool.clone()).database_timeout(Duration::from_secs(60)))
                    .body_limit(32 << 20)
                    .build()
                    .unwrap(),
            ),
        );
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // A task on the same (only) async thread notes the longest time it
        // had to wait for a turn while the request is served.
        let ticker = {
            let done = Arc::clone(&done);
            tokio::spawn(async move {
                let (mut longest, mut last) = (Duration::ZERO, Instant::now());
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    tokio::task::yield_now().await;
                    longest = longest.max(last.elapsed());
                    last = Instant::now();
                }
                longest
            })
        };
        let (status, _, _) = send(&app, stripe_request(body)).await;
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let longest = ticker.await.unwrap();
        assert_eq!(status, StatusCode::OK);
        assert_eq!(db.effects_for("evt_large_key").await, 1);
        println!("parsing the body inline: {inline:?}; longest pause of another task: {longest:?}");
        assert!(longest < inline / 2, "the async thread was held for {longest:?} (the parse takes {inline:?})");
    });
}

/// Public-key verification (Ed25519, ECDSA) is flagged for the blocking
/// pool; HMAC-only deliveries are verified inline.
#[test]
fn public_key_verification_is_flagged_costly() {
    use webhook_idempotency::providers::{discord, sendgrid, standard_webhooks, stripe};
    use webhook_idempotency::verify::Verifier;
    let head = |name: &str, value: &str| Request::post("/").header(name, value).body(()).unwrap().into_parts().0;
    let cases: [(&str, Box<dyn Verifier>, http::request::Parts, bool); 5] = [
        ("discord", Box::new(discord::DiscordVerifier::new()), head("x-signature-ed25519", "00"), true),
        (
            "sendgrid",
            Box::new(sendgrid::SendGridVerifier::new()),
            head("x-twilio-email-event-webhook-signature", "x"),
            true,
        ),
        (
            "standard webhooks v1a",
            Box::new(standard_webhooks::StandardWebhooksVerifier::new()),
            head("webhook-signature", "v1,abc v1a,def"),
            true,
        ),
        (
            "standard webhooks v1 only",
            Box::new(standard_webhooks::StandardWebhooksVerifier::new()),
            head("webhook-signature", "v1,abc"),
            false,
        ),
        ("stripe", Box::new(stripe::FACTS.verifier()), head("stripe-signature", "t=1,v1=00"), false),
    ];
    for (name, verifier, parts, want) in cases {
        assert_eq!(verifier.costly(&parts), want, "{name}");
    }
}

/// Input from the third security review: a Standard Webhooks route with four
/// `whpk_` keys, flooded with forged headers of eight signatures from an
/// unrelated key (32 Ed25519 verifications a request before the cap), held a
/// signed GitHub delivery on another route at 242 ms median. Now a forged
/// header costs at most `MAX_PUBLIC_KEY_VERIFICATIONS` (8) verifications, on
/// the blocking pool: while a flood at the cap is being refused, the async
/// thread serves the other route.
#[test]
fn a_public_key_flood_on_one_route_does_not_hold_another() {
    use webhook_idempotency::providers::standard_webhooks;
    const FLOOD: usize = 48;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let db = TestDb::new().await;
        let keys: Vec<String> = (1u8..=4).map(|i| standard_webhooks::public_key_of(&[i; 32])).collect();
        let mut sw = WebhookLayer::builder(db.pool.clone(), Provider::standard_webhooks()).scope("sw");
        for k in &keys {
            sw = sw.secret(k.as_str());
        }
        let app = Router::new()
            .route("/webhooks/sw", post(apply_effect).layer(sw.build().unwrap()))
            .route("/webhooks/github", post(apply_effect).layer(github_layer(db.pool.clone()).build().unwrap()));
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let body = br#"{"type":"user.created"}"#;
        let forged = |i: usize, sigs: usize| {
            let id = format!("msg_flood_{i}");
            let one = standard_webhooks::sign_ed25519(b"an unrelated key signs this one.", &id, now, body);
            Request::post("/webhooks/sw")
                .header("webhook-id", id)
                .header("webhook-timestamp", now.to_string())
                .header("webhook-signature", vec![one; sigs].join(" "))
                .body(Body::from(&body[..]))
                .unwrap()
        };
        // Past the cap: refused before any verification.
        assert_eq!(send(&app, forged(0, 8)).await.0, StatusCode::UNAUTHORIZED);
        // At the cap (2 signatures x 4 keys): verified, on the blocking pool.
        let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let flood: Vec<_> = (1..=FLOOD)
            .map(|i| {
                let (app, refused) = (app.clone(), Arc::clone(&refused));
                let req = forged(i, 2);
                tokio::spawn(async move {
                    let status = app.oneshot(req).await.unwrap().status();
                    refused.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    status
                })
            })
            .collect();
        // Spawned after the whole flood, on the same (only) async thread: with
        // verification inline it would run after every forged request.
        let (status, _, _) = send(&app, github_request("gh-during-flood", "{}")).await;
        let done_before = refused.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(status, StatusCode::OK);
        for task in flood {
            assert_eq!(task.await.unwrap(), StatusCode::UNAUTHORIZED);
        }
        println!("the GitHub delivery was answered after {done_before} of {FLOOD} forged requests");
        assert!(done_before < FLOOD, "the GitHub delivery waited for the whole flood");
        assert_eq!(db.effects_for("gh-during-flood").await, 1);
    });
}

/// A GitLab delivery carrying `token`, for the event `id`.
fn gitlab_request(token: &str, id: &str) -> Request<Body> {
    Request::post("/webhooks/gitlab")
        .header("x-gitlab-token", token)
        .header("idempotency-key", id)
        .header("x-gitlab-event", "Push Hook")
        .body(Body::from(r#"{"object_kind":"push"}"#))
        .unwrap()
}

/// A shared token or a Basic password alone authenticates any delivery: one
/// under 16 bytes, or an empty password, is refused when the layer is built
/// (`KeyMaterialErrorKind::WeakCredential`, naming the provider, never the
/// token) and answered 500 with nothing stored when a resolver returns it.
/// Telegram, whose `secret_token` may be 1 character, opts out explicitly
/// (`TelegramVerifier::allow_short_tokens`) and then runs its deliveries.
#[tokio::test]
async fn a_short_shared_token_or_basic_password_is_refused_unless_the_provider_opts_out() {
    use webhook_idempotency::providers::telegram::TelegramVerifier;
    use webhook_idempotency::verify::generic::{BasicAuthVerifier, TokenHeaderVerifier};
    let db = TestDb::new().await;
    let basic =
        || Provider::new("acme-basic", BasicAuthVerifier::new(), webhook_idempotency::key::JsonPointerKey::new("/id"));
    let token = || {
        let header = http::HeaderName::from_static("x-acme-token");
        Provider::new(
            "acme-token",
            TokenHeaderVerifier::new(header),
            webhook_idempotency::key::JsonPointerKey::new("/id"),
        )
    };
    let (sixteen, fifteen) = ("0123456789abcdef", "0123456789abcde");
    let pair = |p: &str| BasicAuthVerifier::credentials("hook", p);
    let short_ok = Provider::telegram().verifier(TelegramVerifier::new().allow_short_tokens());
    let cases: Vec<(&str, Provider, SigningSecret, Option<KeyMaterialErrorKind>)> = vec![
        ("gitlab, 15 bytes", Provider::gitlab(), fifteen.into(), Some(KeyMaterialErrorKind::WeakCredential)),
        ("gitlab, 16 bytes", Provider::gitlab(), sixteen.into(), None),
        ("telegram, 15 bytes", Provider::telegram(), fifteen.into(), Some(KeyMaterialErrorKind::WeakCredential)),
        ("telegram opted out, 1 character", short_ok.clone(), "t".into(), None),
        ("token, 15 bytes", token(), fifteen.into(), Some(KeyMaterialErrorKind::WeakCredential)),
        ("basic, 15-byte password", basic(), pair(fifteen), Some(KeyMaterialErrorKind::WeakCredential)),
        ("basic, empty password", basic(), pair(""), Some(KeyMaterialErrorKind::WeakCredential)),
        ("basic, 16-byte password", basic(), pair(sixteen), None),
    ];
    for (name, provider, secret, want) in cases {
        let provider_name = provider.name().to_owned();
        let built = WebhookLayer::builder(db.pool.clone(), provider).scope("acct").secret(secret).build();
        match want {
            None => assert!(built.is_ok(), "{name}: {:?}", built.err()),
            Some(kind) => {
                let err = built.expect_err(name);
                assert_eq!(err.kind(), webhook_idempotency::ConfigErrorKind::KeyMaterial, "{name}");
                assert_eq!(err.key_material().map(|e| e.kind()), Some(kind), "{name}");
                let text = err.to_string();
                assert!(text.contains(&provider_name) && !text.contains(fifteen), "{name}: {text}");
            }
        }
    }

    // The opt-out runs deliveries with the short token; the strict preset
    // refuses the same token from a resolver: 500, nothing stored.
    let opted = Router::new().route(
        "/webhooks/telegram",
        post(apply_effect)
            .layer(WebhookLayer::builder(db.pool.clone(), short_ok).scope("bot").secret("t").build().unwrap()),
    );
    let update = Request::post("/webhooks/telegram")
        .header("x-telegram-bot-api-secret-token", "t")
        .body(Body::from(r#"{"update_id":7,"message":{"text":"hi"}}"#))
        .unwrap();
    assert_eq!(send(&opted, update).await.0, StatusCode::OK);
    assert_eq!(db.effects_for("#int:7").await, 1, "the opted-out bot's update ran");
    let resolver =
        |_: &http::request::Parts| async { Ok(Endpoint::new("tenant_short", [SigningSecret::from("short")])) };
    let strict = Router::new().route(
        "/webhooks/gitlab",
        post(apply_effect)
            .layer(WebhookLayer::builder(db.pool.clone(), Provider::gitlab()).resolver(resolver).build().unwrap()),
    );
    let (logs, _guard) = Logs::capture();
    assert_eq!(send(&strict, gitlab_request("short", "gl-1")).await.0, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(db.scalar("SELECT count(*) FROM webhook_idempotency.webhook_events WHERE provider = 'gitlab'").await, 0);
    let errors = logs.lines_with(&["ERROR", "tenant_short", "weak_credential"]);
    assert_eq!(errors.len(), 1, "one ERROR line naming the scope and why: {}", logs.text());
}

/// The Idempotency-Key layer stores its keys as claims of the provider
/// `idempotency-key`: a webhook provider of that name would share their rows
/// (a delivery keyed like a client's key would be its duplicate, and the
/// other way round), so a layer with it is refused at build, in any case.
#[tokio::test]
async fn the_idempotency_key_layer_s_provider_name_is_refused_for_a_webhook_layer() {
    let db = TestDb::new().await;
    assert_eq!(webhook_idempotency::idempotency_key::PROVIDER, "idempotency-key");
    for name in ["idempotency-key", "Idempotency-Key"] {
        let provider =
            Provider::new(name, github::FACTS.verifier(), webhook_idempotency::key::JsonPointerKey::new("/id"));
        let err = WebhookLayer::builder(db.pool.clone(), provider).scope("acct").secret(GITHUB_SECRET).build();
        let err = err.expect_err(name);
        assert_eq!(err.kind(), webhook_idempotency::ConfigErrorKind::InvalidName, "{name}");
        assert!(err.to_string().contains("reserved"), "{err}");
    }
    let renamed = Provider::new(
        "idempotency-keys",
        github::FACTS.verifier(),
        webhook_idempotency::key::JsonPointerKey::new("/id"),
    );
    assert!(WebhookLayer::builder(db.pool.clone(), renamed).scope("acct").secret(GITHUB_SECRET).build().is_ok());
}
