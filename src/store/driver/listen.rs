//! The worker's dedicated `LISTEN` connection: wakes the producer on every
//! notification of its channel, reconnects after a loss (1 s between
//! tries). While it is down the producer polls, so a lost notification costs
//! at most one poll interval.
//!
//! Once `LISTEN` answered (at start and after every reconnect) the listener
//! checks that notifications reach it: a second session of the same
//! settings sends one on the channel, with a payload of its own. A
//! transaction-mode pooler (PgBouncer, Supavisor, RDS Proxy) takes `LISTEN`
//! but hands the listening server session to other clients between
//! transactions, so no notification ever arrives
//! (<https://www.pgbouncer.org/features.html>: `LISTEN` is among the features
//! transaction pooling breaks): without the check the worker falls back to
//! polling silently. When the check's notification has not arrived within
//! [`CHECK_WAIT`], a WARN names the fix (point `listen_connection` at PostgreSQL
//! directly) and `webhook_worker_listen_checks_total{outcome="missed"}`
//! counts it; that connection is not checked again (nor replaced: a pooler
//! would miss every check).
//!
//! A connection whose check passed is checked again every `recheck` (the
//! worker's [`listen_check_interval`](crate::worker::WorkerBuilder::listen_check_interval),
//! 60 s by default) after the previous check ended. A connection can go
//! silent without closing: a NAT gateway or a load balancer drops a flow
//! idle for some minutes (AWS NAT gateway: 350 s; Azure Load Balancer: 4
//! minutes by default) and tells neither end, and TCP keepalive notices only
//! after 2 hours by default. A re-check whose notification does not arrive
//! there is counted `missed` too, logged at WARN, and the listener
//! reconnects: a silent listener leaves rows to polling for at most
//! `recheck` plus [`CHECK_WAIT`].

use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{BoxStream, StreamExt};
use tokio::sync::Notify;

use super::any::AnyListener;
use super::error::DbError;
use super::seam::{ListenEvent, Listener};

/// How long the listener waits for its check notification once the check's
/// `NOTIFY` committed. PostgreSQL delivers a notification when the sending
/// transaction commits, to listening sessions that are idle at once
/// (<https://www.postgresql.org/docs/current/sql-notify.html>), so a direct
/// connection gets it in milliseconds.
pub(crate) const CHECK_WAIT: Duration = Duration::from_secs(5);

/// The payload prefix of check notifications (every worker's): never a
/// wake-up. Producers send empty payloads.
const CHECK_PREFIX: &str = "webhook-idempotency listen check ";

/// What woke the listener.
enum Event {
    /// The session said something (`None`: it ended).
    Session(Option<ListenEvent>),
    /// The check's wait ended without its notification (`Ok`), or the
    /// check could not be sent.
    CheckEnded(Result<(), DbError>),
    /// Time to check an established connection again.
    Recheck,
}

/// `LISTEN`s on `channel` through `listener` and wakes `notify` on every
/// notification; reconnects after a loss, and after a re-check (every
/// `recheck`) found a connection that received notifications before deaf.
/// Runs until dropped.
pub(crate) async fn listen_loop(listener: AnyListener, notify: Arc<Notify>, channel: String, recheck: Duration) {
    loop {
        match listener.listen(&channel).await {
            Ok(events) => listening(&listener, events, &notify, &channel, recheck).await,
            Err(e) => tracing::warn!(error = %e, "worker listener could not connect; polling meanwhile"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// One listening session, from its `LISTEN` until it is lost, refused or
/// found silent (then the caller connects again): wakes `notify`, and
/// checks that notifications arrive once `LISTEN` answered and, while they
/// do, every `recheck`.
async fn listening(
    listener: &AnyListener,
    mut events: BoxStream<'static, ListenEvent>,
    notify: &Notify,
    channel: &str,
    recheck: Duration,
) {
    let new_token = || format!("{CHECK_PREFIX}{:016x}", fastrand::u64(..));
    let mut token = new_token();
    let mut check = pin!(send_check(listener, channel, token.clone()));
    // Polled from the `LISTEN`'s answer until the check ends.
    let mut checking: Option<Instant> = None;
    // A check on this connection found its notification: a later miss
    // means the connection went silent, not a pooler.
    let mut received_before = false;
    let mut next_check: Option<tokio::time::Instant> = None;
    loop {
        let recheck_at = next_check.unwrap_or_else(tokio::time::Instant::now);
        let event = tokio::select! {
            biased;
            event = events.next() => Event::Session(event),
            ended = &mut check, if checking.is_some() => Event::CheckEnded(ended),
            () = tokio::time::sleep_until(recheck_at), if next_check.is_some() => Event::Recheck,
        };
        match event {
            Event::Session(Some(ListenEvent::Notification(payload))) => {
                if payload == token && checking.is_some() {
                    let took = checking.take().map(|t| t.elapsed());
                    let took_ms = took.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
                    crate::metrics::listen_check(channel, "received");
                    if received_before {
                        tracing::debug!(channel, took_ms, "worker listener: notifications still reach this connection");
                    } else {
                        tracing::info!(
                            channel,
                            took_ms,
                            "worker listener: notifications from other sessions reach this connection"
                        );
                    }
                    received_before = true;
                    next_check = Some(tokio::time::Instant::now() + recheck);
                } else if !payload.starts_with(CHECK_PREFIX) {
                    notify.notify_one();
                }
            }
            Event::Session(Some(ListenEvent::Listened(Ok(())))) => {
                checking = Some(Instant::now());
                // Rows accepted before LISTEN took effect.
                notify.notify_one();
            }
            Event::Session(Some(ListenEvent::Listened(Err(e)))) => {
                // A standby refuses LISTEN during recovery: try again
                // (a failover may make this node, or the next, primary).
                tracing::warn!(error = %e, "worker listener: LISTEN refused; polling meanwhile, retrying");
                return;
            }
            Event::Session(Some(ListenEvent::Lost(Some(e)))) => {
                tracing::warn!(error = %e, "worker listener connection lost; reconnecting");
                return;
            }
            Event::Session(Some(ListenEvent::Lost(None)) | None) => return,
            Event::CheckEnded(ended) => {
                checking = None;
                if ended.is_ok() && received_before {
                    went_silent(listener, channel, recheck);
                    return;
                }
                // A pooler misses every check: this connection is not
                // checked again. One that could not be sent is retried.
                next_check = ended.is_err().then(|| tokio::time::Instant::now() + recheck);
                missed(listener, channel, ended);
            }
            Event::Recheck => {
                next_check = None;
                token = new_token();
                check.set(send_check(listener, channel, token.clone()));
                checking = Some(Instant::now());
            }
        }
    }
}

/// Sends the check notification `token` on `channel` from a session of its
/// own (a notification a session sends to itself would come back through a
/// pooler too: the pooler keeps the session for the transaction that sent
/// it), then waits [`CHECK_WAIT`]. `Err` when it could not be sent within
/// [`CHECK_WAIT`] (a session that connects but never answers, as a flow a
/// NAT gateway dropped: unbounded, it would hold the check, and the listener
/// with it, for ever).
async fn send_check(listener: &AnyListener, channel: &str, token: String) -> Result<(), DbError> {
    tokio::time::timeout(CHECK_WAIT, listener.notify(channel, &token)).await.map_err(|_| DbError::timeout())??;
    tokio::time::sleep(CHECK_WAIT).await;
    Ok(())
}

/// A re-check's notification did not arrive on a connection where an
/// earlier check's did: the connection went silent.
fn went_silent(listener: &AnyListener, channel: &str, recheck: Duration) {
    crate::metrics::listen_check(channel, "missed");
    tracing::warn!(
        channel,
        hosts = %listener.hosts(),
        wait_secs = CHECK_WAIT.as_secs(),
        recheck_secs = recheck.as_secs(),
        "worker listener: a notification sent from another session did not arrive on a connection that received \
         them before: the connection went silent (a NAT gateway or load balancer dropping idle flows?); \
         reconnecting, rows are found by polling meanwhile"
    );
}

/// The first check's notification did not arrive (`Ok`), or a check was
/// not sent.
fn missed(listener: &AnyListener, channel: &str, ended: Result<(), DbError>) {
    let hosts = listener.hosts();
    match ended {
        Ok(()) => {
            crate::metrics::listen_check(channel, "missed");
            tracing::warn!(
                channel,
                %hosts,
                wait_secs = CHECK_WAIT.as_secs(),
                "worker listener: a notification sent from another session did not arrive: LISTEN does not work \
                 through this connection (a transaction-mode pooler such as PgBouncer drops notifications), so \
                 the worker only polls (every poll_interval). Point the store's `listen_connection` at PostgreSQL \
                 directly, not at the pooler"
            );
        }
        Err(e) => {
            crate::metrics::listen_check(channel, "unchecked");
            tracing::warn!(
                channel,
                %hosts,
                error = %e,
                "worker listener: could not send the check notification; whether notifications arrive is unknown"
            );
        }
    }
}
