//! Metrics through the [`metrics`](https://docs.rs/metrics) facade: install
//! any recorder (a Prometheus exporter, say) and the layer's counters and
//! histograms appear; without one they cost nothing. Names follow Prometheus
//! conventions (base units in the name, `_total` for counters).
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | `webhook_deliveries_total` | counter | `provider`, `outcome` | every delivery: `committed`, `accepted` (inbox), `duplicate`, `failed` (the handler's non-success), `rejected`, `handshake` |
//! | `webhook_rejections_total` | counter | `provider`, `kind` | refusals by [`RejectionKind`](crate::RejectionKind) (`invalid_signature`, `in_flight`, `store_unavailable`, ...) |
//! | `webhook_delivery_duration_seconds` | histogram | `provider`, `outcome` | from the request to the answer |
//! | `webhook_handler_duration_seconds` | histogram | `provider` | the inner service's run |
//! | `webhook_claim_duration_seconds` | histogram | `provider` | the claim, in-flight waits included |
//! | `webhook_pool_wait_seconds` | histogram | | waiting for a pooled connection (claims) |
//! | `webhook_events` | gauge | `provider`, `state` | rows by state ([`sample`]) |
//! | `webhook_oldest_pending_age_seconds` | gauge | | the oldest `pending` row's wait ([`sample`]) |
//!
//! Labels stay bounded: provider names and fixed vocabularies, never event
//! keys or scopes. See OPERATIONS.md for the alerts that matter.

use std::time::{Duration, Instant};

use deadpool_postgres::Pool;

use crate::store::admin::Admin;

/// Counts a finished delivery and its duration.
pub(crate) fn delivery(provider: &str, outcome: &'static str, started: Instant) {
    let provider = provider.to_owned();
    metrics::counter!("webhook_deliveries_total", "provider" => provider.clone(), "outcome" => outcome).increment(1);
    metrics::histogram!("webhook_delivery_duration_seconds", "provider" => provider, "outcome" => outcome)
        .record(started.elapsed().as_secs_f64());
}

/// Counts a refusal by kind.
pub(crate) fn rejection(provider: &str, kind: &'static str) {
    metrics::counter!("webhook_rejections_total", "provider" => provider.to_owned(), "kind" => kind).increment(1);
}

/// Records how long the inner service ran.
pub(crate) fn handler(provider: &str, took: Duration) {
    metrics::histogram!("webhook_handler_duration_seconds", "provider" => provider.to_owned())
        .record(took.as_secs_f64());
}

/// Records how long the claim took, in-flight waits included.
pub(crate) fn claim(provider: &str, took: Duration) {
    metrics::histogram!("webhook_claim_duration_seconds", "provider" => provider.to_owned()).record(took.as_secs_f64());
}

/// Sets the state gauges once: rows by provider and state, and the oldest
/// pending row's age in seconds (0 when none is pending).
///
/// # Errors
/// The [`OpsError`](crate::store::admin::OpsError) of the query.
pub async fn sample_once(admin: &Admin) -> Result<(), crate::store::admin::OpsError> {
    let stats = admin.stats().await?;
    let mut by_state: std::collections::BTreeMap<(String, String), i64> = Default::default();
    for (provider, _scope, state, rows) in stats.by_state {
        *by_state.entry((provider, state)).or_default() += rows;
    }
    for state in ["pending", "running", "done", "failed", "dead"] {
        // Zero the states that emptied, for the providers seen.
        let providers: std::collections::BTreeSet<String> = by_state.keys().map(|(p, _)| p.clone()).collect();
        for provider in providers {
            by_state.entry((provider, state.to_owned())).or_default();
        }
    }
    for ((provider, state), rows) in by_state {
        metrics::gauge!("webhook_events", "provider" => provider, "state" => state).set(rows as f64);
    }
    metrics::gauge!("webhook_oldest_pending_age_seconds").set(stats.oldest_pending.map_or(0.0, |d| d.as_secs_f64()));
    Ok(())
}

/// Samples the state gauges every `period` until `shutdown` completes: a
/// task to spawn beside the server. Failures are logged and retried.
///
/// # Errors
/// [`ConfigError`](crate::ConfigError) for an invalid schema name, before
/// anything runs.
pub fn sample(
    pool: Pool,
    schema: &str,
    period: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<impl std::future::Future<Output = ()> + Send + 'static, crate::ConfigError> {
    let admin = Admin::new(pool, schema)?;
    Ok(async move {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut every = tokio::time::interval(period);
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                _ = every.tick() => {}
            }
            if let Err(e) = sample_once(&admin).await {
                tracing::warn!(error = %e, "metrics sampler: query failed; retried next period");
            }
        }
    })
}
