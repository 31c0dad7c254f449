//! Claims over HTTP: the first delivery commits the handler's writes with
//! its claim, duplicates are replayed, failures roll back, scopes and
//! resolvers decide what one event is.

use super::*;

#[tokio::test]
async fn first_delivery_commits_business_write_and_claim_together() {
    let db = TestDb::new().await;
    let app = stripe_app(&db, Arc::default());
    let (status, headers, _) = send(&app, stripe_request(stripe_body("evt_first"))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.get("idempotent-replayed").is_none());
    assert_eq!(db.effects_for("evt_first").await, 1);
    assert_eq!(db.event_row("evt_first").await, Some(("done".into(), 1, Some(200))));
}

#[tokio::test]
async fn sequential_duplicate_is_replayed_without_running_the_handler() {
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let app = stripe_app(&db, runs.clone());
    let body = stripe_body("evt_dup");
    assert_eq!(send(&app, stripe_request(body.clone())).await.0, StatusCode::OK);
    for _ in 0..3 {
        let (status, headers, _) = send(&app, stripe_request(body.clone())).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers.get("idempotent-replayed").unwrap(), "true");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(db.effects().await, 1);
}

#[tokio::test]
async fn stored_replay_status_answers_the_first_status() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(|tx: WebhookTx, event: WebhookEvent| async move {
            apply_effect(tx, event).await;
            StatusCode::ACCEPTED
        })
        .layer(stripe_layer(db.pool.clone()).replay_status(webhook_idempotency::ReplayStatus::Stored).build().unwrap()),
    );
    let body = stripe_body("evt_202");
    assert_eq!(send(&app, stripe_request(body.clone())).await.0, StatusCode::ACCEPTED);
    let (status, headers, _) = send(&app, stripe_request(body)).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(headers.get("idempotent-replayed").unwrap(), "true");
}

#[tokio::test]
async fn handler_failure_rolls_back_and_the_next_delivery_succeeds() {
    let db = TestDb::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx, event: WebhookEvent| {
            let run = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                // The write happens either way; only the status decides.
                apply_effect(tx, event).await;
                if run == 0 {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                }
            }
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    let body = stripe_body("evt_fail_once");
    assert_eq!(send(&app, stripe_request(body.clone())).await.0, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(db.effects().await, 0, "the failed run's write was rolled back");
    assert_eq!(db.event_row("evt_fail_once").await, Some(("failed".into(), 1, Some(500))));

    assert_eq!(send(&app, stripe_request(body.clone())).await.0, StatusCode::OK);
    assert_eq!(db.effects().await, 1);
    assert_eq!(db.event_row("evt_fail_once").await, Some(("done".into(), 2, Some(200))));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn redirect_is_not_a_success_and_does_not_commit() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(|tx: WebhookTx, event: WebhookEvent| async move {
            apply_effect(tx, event).await;
            (StatusCode::SEE_OTHER, [("location", "/elsewhere")])
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    assert_eq!(send(&app, stripe_request(stripe_body("evt_303"))).await.0, StatusCode::SEE_OTHER);
    assert_eq!(db.effects().await, 0);
}

#[tokio::test]
async fn swallowed_sql_error_answers_503_and_commits_nothing() {
    let db = TestDb::new().await;
    let app = Router::new().route(
        "/webhooks/stripe",
        post(|tx: WebhookTx, event: WebhookEvent| async move {
            let mut client = TxDb::of(&tx).await.unwrap();
            client
                .execute(
                    "INSERT INTO effects (scope, event_key) VALUES ($1, $2)",
                    &[event.scope().into(), event.key().into()],
                )
                .await
                .unwrap();
            // Fails and aborts the transaction; the handler ignores it.
            let _ = client.execute("SELECT 1 / 0", &[]).await;
            StatusCode::OK
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    let (status, headers, _) = send(&app, stripe_request(stripe_body("evt_swallow"))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(headers.get("retry-after").is_some());
    assert_eq!(db.effects().await, 0);
    let row = db.event_row("evt_swallow").await;
    assert!(matches!(row, Some((ref s, 1, _)) if s == "failed"), "{row:?}");
}

#[tokio::test]
async fn same_event_key_in_two_scopes_is_two_events() {
    let db = TestDb::new().await;
    let layer_for = |scope: &str| stripe_layer(db.pool.clone()).scope(scope);
    let app = Router::new()
        .route("/a", post(apply_effect).layer(layer_for("acct_a").build().unwrap()))
        .route("/b", post(apply_effect).layer(layer_for("acct_b").build().unwrap()));
    let body = stripe_body("evt_shared");
    for path in ["/a", "/b", "/a", "/b"] {
        let mut req = stripe_request(body.clone());
        *req.uri_mut() = path.parse().unwrap();
        assert_eq!(send(&app, req).await.0, StatusCode::OK, "{path}");
    }
    assert_eq!(db.effects_for("evt_shared").await, 2);
    assert_eq!(db.scalar("SELECT count(DISTINCT scope) FROM effects").await, 2);
}

#[tokio::test]
async fn webhook_tx_after_the_response_is_an_error_not_a_hang() {
    let db = TestDb::new().await;
    let (sent, got) = tokio::sync::oneshot::channel();
    let sent = Arc::new(std::sync::Mutex::new(Some(sent)));
    let app = Router::new().route(
        "/webhooks/stripe",
        post(move |tx: WebhookTx| {
            let sent = sent.lock().unwrap().take().unwrap();
            async move {
                sent.send(tx).unwrap();
                StatusCode::OK
            }
        })
        .layer(stripe_layer(db.pool.clone()).build().unwrap()),
    );
    assert_eq!(send(&app, stripe_request(stripe_body("evt_late"))).await.0, StatusCode::OK);
    let kept = got.await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), TxDb::of(&kept)).await.expect("no hang").err().unwrap();
    assert_eq!(err.kind(), webhook_idempotency::TxErrorKind::Finished);
}

#[tokio::test]
async fn resolver_picks_scope_and_secrets_from_the_route() {
    use webhook_idempotency::scope::{Endpoint, ResolveError};
    let db = TestDb::new().await;
    let resolver = |parts: &http::request::Parts| {
        // /tenants/{tenant}/stripe; the "broken" tenant's config store is down.
        let tenant = parts.uri.path().split('/').nth(2).map(str::to_owned);
        async move {
            match tenant.as_deref() {
                Some("acme") => Ok(Endpoint::new("acme", [SigningSecret::from("whsec_acme")])),
                Some("globex") => Ok(Endpoint::new("globex", [SigningSecret::from("whsec_globex")])),
                Some("broken") => Err(ResolveError::unavailable("tenant store timed out")),
                _ => Err(ResolveError::not_found()),
            }
        }
    };
    let layer = webhook_idempotency::WebhookLayer::builder(db.pool.clone(), webhook_idempotency::Provider::stripe())
        .resolver(resolver)
        .build()
        .unwrap();
    let app = Router::new().route("/tenants/{tenant}/stripe", post(apply_effect).layer(layer));
    let body = stripe_body("evt_tenant");
    let to = |path: &str, secret: &str| {
        let mut req = stripe_request_at(body.clone(), unix_now(), secret);
        *req.uri_mut() = path.parse().unwrap();
        req
    };
    let cases = [
        ("acme with its secret", to("/tenants/acme/stripe", "whsec_acme"), StatusCode::OK),
        ("globex with its secret", to("/tenants/globex/stripe", "whsec_globex"), StatusCode::OK),
        ("globex with acme's secret", to("/tenants/globex/stripe", "whsec_acme"), StatusCode::UNAUTHORIZED),
        ("unknown tenant", to("/tenants/initech/stripe", "whsec_acme"), StatusCode::NOT_FOUND),
        ("resolver failure", to("/tenants/broken/stripe", "whsec_acme"), StatusCode::SERVICE_UNAVAILABLE),
    ];
    for (name, req, want) in cases {
        assert_eq!(send(&app, req).await.0, want, "{name}");
    }
    assert_eq!(db.scalar("SELECT count(DISTINCT scope) FROM effects WHERE event_key = 'evt_tenant'").await, 2);
    assert_eq!(db.events().await, 2);
}
