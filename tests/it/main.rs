//! The integration tests, one binary grouped by topic, on a real PostgreSQL
//! (`support`: one throwaway server per run of this binary, a fresh database
//! per test). One binary means one build and one server per `cargo test`.
//!
//! Run one topic with its module path, e.g.
//! `cargo test --all-features --test it faults::` or
//! `cargo test --all-features --test it http::verification::`.
//!
//! Not here: `tests/memory.rs` stays a binary of its own, because it measures
//! the whole process's peak resident memory and nothing else may run in that
//! process meanwhile.

mod support;

mod admin_cli;
#[cfg(feature = "aws-sns")]
mod aws_sns;
mod citus;
mod claim;
mod cli;
mod dev;
mod faults;
#[cfg(all(feature = "hookdeck", feature = "convoy"))]
mod gateway;
mod ha;
mod http;
mod idempotency_key;
mod inbox;
mod metrics;
mod ops;
mod outbox;
mod properties;
mod providers;
mod replication;
mod review;
mod setup;
#[cfg(feature = "sqlx")]
mod sqlx;
mod tower;
