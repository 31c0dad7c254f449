//! Metrics through the [`metrics`](https://docs.rs/metrics) facade: install
//! any recorder (a Prometheus exporter, say) and the layer's and the
//! workers' counters, histograms and gauges appear; without one they cost
//! nothing. Names follow Prometheus conventions (base units in the name,
//! `_total` for counters). This module only records; the gauges are set by
//! the sampler beside the operator API it polls
//! ([`Admin::run_gauge_sampler`](crate::store::admin::Admin::run_gauge_sampler)).
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | `webhook_deliveries_total` | counter | `provider`, `outcome` | every delivery: `committed`, `accepted` (inbox), `duplicate`, `failed` (the handler's non-success), `rejected`, `handshake`, `abandoned` (the response future was dropped before an answer: the client went away or an outer timeout fired; if the handler had started, a `failed` row records it) |
//! | `webhook_rejections_total` | counter | `provider`, `kind` | refusals by [`RejectionKind`](crate::layer::RejectionKind) (`invalid_signature`, `in_flight`, `store_unavailable`, ...) |
//! | `webhook_delivery_duration_seconds` | histogram | `provider`, `outcome` | from the request to the answer |
//! | `webhook_handler_duration_seconds` | histogram | `provider` | the inner service's run (the layers' and the inbox worker's) |
//! | `webhook_claim_duration_seconds` | histogram | `provider` | the claim, in-flight waits included |
//! | `webhook_pool_wait_seconds` | histogram | | waiting for a pooled connection |
//! | `webhook_worker_runs_total` | counter | `kind`, `provider`, `outcome` | every run of a worker's item (`kind` `inbox` or `outbox`): `done`, `retried` (failed, due again), `dead`, `lease_lost`, `released` (at shutdown), and the outbox's `uncertain`, `resent`, `unrecorded` |
//! | `webhook_worker_run_duration_seconds` | histogram | `kind`, `provider`, `outcome` | one run, from its lease to its end |
//! | `webhook_worker_listen_checks_total` | counter | `channel`, `outcome` | a worker's `LISTEN` connection checks, at start and after each reconnect, then every `listen_check_interval` (60 s) while its checks pass, that a notification sent from another session reaches it: `received`, `missed` (it did not within 5 s: at a connection's first check, a transaction-mode pooler between `listen` and PostgreSQL, the worker only polls and a WARN names the fix; at a later check, the connection went silent (a NAT or load balancer idle timeout), a WARN says so and the listener reconnects), `unchecked` (the check could not be sent) |
//! | `webhook_outbox_effects_total` | counter | `provider`, `effect`, `outcome` | every run of an outbox effect: `delivered`, `retried`, `uncertain`, `resent` (reconciled as not delivered), `dead`, `lease_lost`, `released`, `unrecorded` (its end could not be written: the lease expires) |
//! | `webhook_inbox_integrity_failures_total` | counter | `provider`, `reason` | inbox rows a worker with an integrity key refused to run (`missing`, `mismatch`): each is `dead` |
//! | `webhook_events` | gauge | `provider`, `state` | rows by state (the gauge sampler) |
//! | `webhook_inbox_unserved_events` | gauge | `provider` | inbox rows due longer than [`Admin::unserved_after`](crate::store::admin::Admin::unserved_after) (5 min) with no row of their provider and scope run meanwhile: no running worker serves them (the gauge sampler) |
//! | `webhook_oldest_pending_age_seconds` | gauge | | the oldest `pending` row's wait (the gauge sampler) |
//! | `webhook_outbox_effects` | gauge | `effect`, `state` | outbox rows by state (the gauge sampler) |
//! | `webhook_outbox_oldest_due_age_seconds` | gauge | | how long the oldest due outbox row (`pending`, or `uncertain` with a reconciliation due) has been due (the gauge sampler) |
//!
//! Labels stay bounded: provider names and fixed vocabularies, never event
//! keys or scopes (effect names are the registered ones). See OPERATIONS.md for the alerts that matter.

use std::time::{Duration, Instant};

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

/// Records a wait for a pooled connection.
pub(crate) fn pool_wait(took: Duration) {
    metrics::histogram!("webhook_pool_wait_seconds").record(took.as_secs_f64());
}

/// Counts a worker's run of one item by kind, provider and outcome, and its
/// duration when it ran.
pub(crate) fn worker_run(kind: &'static str, provider: &str, outcome: &'static str, took: Option<Duration>) {
    let provider = provider.to_owned();
    metrics::counter!("webhook_worker_runs_total", "kind" => kind, "provider" => provider.clone(), "outcome" => outcome)
        .increment(1);
    if let Some(took) = took {
        metrics::histogram!(
            "webhook_worker_run_duration_seconds", "kind" => kind, "provider" => provider, "outcome" => outcome
        )
        .record(took.as_secs_f64());
    }
}

/// Counts how a worker listener's check that notifications reach it ended
/// (`received`, `missed`, `unchecked`).
pub(crate) fn listen_check(channel: &str, outcome: &'static str) {
    metrics::counter!("webhook_worker_listen_checks_total", "channel" => channel.to_owned(), "outcome" => outcome)
        .increment(1);
}

/// Counts an inbox row refused for its integrity tag (`missing`, `mismatch`).
pub(crate) fn inbox_integrity_failure(provider: &str, reason: &'static str) {
    metrics::counter!("webhook_inbox_integrity_failures_total", "provider" => provider.to_owned(), "reason" => reason)
        .increment(1);
}

/// Sets the rows of `provider` in `state`.
pub(crate) fn events(provider: String, state: String, rows: i64) {
    metrics::gauge!("webhook_events", "provider" => provider, "state" => state).set(rows as f64);
}

/// Sets the inbox rows of `provider` no worker serves.
pub(crate) fn inbox_unserved(provider: String, rows: i64) {
    metrics::gauge!("webhook_inbox_unserved_events", "provider" => provider).set(rows as f64);
}

/// Sets the oldest pending row's wait (zero when none is pending).
pub(crate) fn oldest_pending(age: Duration) {
    metrics::gauge!("webhook_oldest_pending_age_seconds").set(age.as_secs_f64());
}

/// Counts how a run of an outbox effect ended.
pub(crate) fn outbox_effect(provider: &str, effect: &str, outcome: &'static str) {
    metrics::counter!(
        "webhook_outbox_effects_total", "provider" => provider.to_owned(), "effect" => effect.to_owned(), "outcome" => outcome
    )
    .increment(1);
}

/// Sets the outbox rows of `effect` in `state`.
pub(crate) fn outbox_rows(effect: String, state: String, rows: i64) {
    metrics::gauge!("webhook_outbox_effects", "effect" => effect, "state" => state).set(rows as f64);
}

/// Sets how long the oldest due outbox row has been due (zero when none is).
pub(crate) fn outbox_oldest_due(age: Duration) {
    metrics::gauge!("webhook_outbox_oldest_due_age_seconds").set(age.as_secs_f64());
}
