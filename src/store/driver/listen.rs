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
//! [`CHECK_WAIT`], a WARN names the fix (point `listen` at PostgreSQL
//! directly) and `webhook_worker_listen_checks_total{outcome="missed"}`
//! counts it.

use std::future::poll_fn;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::error::Chain;

/// How long the listener waits for its check notification once the check's
/// `NOTIFY` committed. PostgreSQL delivers a notification when the sending
/// transaction commits, to listening sessions that are idle at once
/// (<https://www.postgresql.org/docs/current/sql-notify.html>), so a direct
/// connection gets it in milliseconds.
pub(crate) const CHECK_WAIT: Duration = Duration::from_secs(5);

/// The payload prefix of check notifications (every worker's): never a
/// wake-up. Producers send empty payloads.
const CHECK_PREFIX: &str = "webhook-idempotency listen check ";

/// What the listener connection said.
#[allow(clippy::large_enum_variant)] // one value per message, on the stack of one task
enum Event {
    Message(Option<Result<tokio_postgres::AsyncMessage, tokio_postgres::Error>>),
    /// The `LISTEN` answered.
    Listened(Result<(), tokio_postgres::Error>),
    /// The check's wait ended without its notification (`Ok`), or the
    /// check could not be sent.
    CheckEnded(Result<(), tokio_postgres::Error>),
}

/// `LISTEN`s on `channel` and wakes `notify` on every notification;
/// reconnects after a loss. Runs until dropped.
pub(crate) async fn listen_loop<T>(config: tokio_postgres::Config, tls: T, notify: Arc<Notify>, channel: String)
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket> + Clone + Send + Sync + 'static,
    T::Stream: Send,
{
    loop {
        match config.connect(tls.clone()).await {
            Ok((client, mut connection)) => {
                let statement = format!("LISTEN \"{channel}\"");
                let mut listen = pin!(client.batch_execute(&statement));
                let token = format!("{CHECK_PREFIX}{:016x}", fastrand::u64(..));
                let mut check = pin!(send_check(&config, tls.clone(), &channel, &token));
                // Polled until it answered only (a finished future must not
                // be polled again); the check from then until it ends.
                let mut listening = false;
                let mut checking: Option<Instant> = None;
                loop {
                    let event = tokio::select! {
                        biased;
                        message = poll_fn(|cx| connection.poll_message(cx)) => Event::Message(message),
                        listened = &mut listen, if !listening => Event::Listened(listened),
                        ended = &mut check, if checking.is_some() => Event::CheckEnded(ended),
                    };
                    match event {
                        Event::Message(Some(Ok(tokio_postgres::AsyncMessage::Notification(n)))) => {
                            if n.payload() == token {
                                let took = checking.take().map(|t| t.elapsed());
                                crate::metrics::listen_check(&channel, "received");
                                tracing::info!(
                                    channel,
                                    took_ms = took.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                                    "worker listener: notifications from other sessions reach this connection"
                                );
                            } else if !n.payload().starts_with(CHECK_PREFIX) {
                                notify.notify_one();
                            }
                        }
                        Event::Message(Some(Ok(_))) => {}
                        Event::Message(Some(Err(e))) => {
                            tracing::warn!(error = %Chain(&e), "worker listener connection lost; reconnecting");
                            break;
                        }
                        Event::Message(None) => break,
                        Event::Listened(Ok(())) => {
                            listening = true;
                            checking = Some(Instant::now());
                            // Rows accepted before LISTEN took effect.
                            notify.notify_one();
                        }
                        Event::Listened(Err(e)) => {
                            // A standby refuses LISTEN during recovery: try again
                            // (a failover may make this node, or the next, primary).
                            tracing::warn!(error = %Chain(&e), "worker listener: LISTEN refused; polling meanwhile, retrying");
                            break;
                        }
                        Event::CheckEnded(ended) => {
                            checking = None;
                            missed(&config, &channel, ended);
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %Chain(&e), "worker listener could not connect; polling meanwhile"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Sends the check notification `token` on `channel` from a session of its
/// own (a notification a session sends to itself would come back through a
/// pooler too: the pooler keeps the session for the transaction that sent
/// it), then waits [`CHECK_WAIT`]. `Err` when it could not be sent.
async fn send_check<T>(
    config: &tokio_postgres::Config,
    tls: T,
    channel: &str,
    token: &str,
) -> Result<(), tokio_postgres::Error>
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>,
{
    let (client, mut connection) = config.connect(tls).await?;
    // The simple query protocol: no statement to prepare behind a pooler.
    let statement = format!("NOTIFY \"{channel}\", '{token}'");
    let sent = tokio::select! {
        sent = client.batch_execute(&statement) => sent,
        Err(e) = &mut connection => Err(e),
    };
    drop((client, connection));
    sent?;
    tokio::time::sleep(CHECK_WAIT).await;
    Ok(())
}

/// The check's notification did not arrive (`Ok`), or was not sent.
fn missed(config: &tokio_postgres::Config, channel: &str, ended: Result<(), tokio_postgres::Error>) {
    let hosts = config.get_hosts();
    match ended {
        Ok(()) => {
            crate::metrics::listen_check(channel, "missed");
            tracing::warn!(
                channel,
                ?hosts,
                wait_secs = CHECK_WAIT.as_secs(),
                "worker listener: a notification sent from another session did not arrive: LISTEN does not work \
                 through this connection (a transaction-mode pooler such as PgBouncer drops notifications), so \
                 the worker only polls (every poll_interval). Point `listen` at PostgreSQL directly, not at the \
                 pooler"
            );
        }
        Err(e) => {
            crate::metrics::listen_check(channel, "unchecked");
            tracing::warn!(
                channel,
                ?hosts,
                error = %Chain(&e),
                "worker listener: could not send the check notification; whether notifications arrive is unknown"
            );
        }
    }
}
