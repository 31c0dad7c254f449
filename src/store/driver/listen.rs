//! The worker's dedicated `LISTEN` connection: wakes the producer on every
//! notification of its channel, reconnects after a loss (1 s between
//! tries). While it is down the producer polls, so a lost notification costs
//! at most one poll interval.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::error::Chain;

/// What the listener connection said.
#[allow(clippy::large_enum_variant)] // one value per message, on the stack of one task
enum Event {
    Message(Option<Result<tokio_postgres::AsyncMessage, tokio_postgres::Error>>),
    /// The `LISTEN` itself failed.
    Refused(tokio_postgres::Error),
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
                let listen = client.batch_execute(&statement);
                let mut listen = pin!(listen);
                // `None` until the LISTEN answered: polled until then only (a
                // finished future must not be polled again).
                let mut listening: Option<bool> = None;
                loop {
                    let event = poll_fn(|cx| {
                        if listening.is_none() {
                            if let std::task::Poll::Ready(result) = listen.as_mut().poll(cx) {
                                match result {
                                    Ok(()) => {
                                        listening = Some(true);
                                        // Rows accepted before LISTEN took effect.
                                        notify.notify_one();
                                    }
                                    Err(e) => {
                                        listening = Some(false);
                                        return std::task::Poll::Ready(Event::Refused(e));
                                    }
                                }
                            }
                        }
                        connection.poll_message(cx).map(Event::Message)
                    })
                    .await;
                    match event {
                        Event::Message(Some(Ok(tokio_postgres::AsyncMessage::Notification(_)))) => notify.notify_one(),
                        Event::Message(Some(Ok(_))) => {}
                        Event::Message(Some(Err(e))) => {
                            tracing::warn!(error = %Chain(&e), "worker listener connection lost; reconnecting");
                            break;
                        }
                        Event::Message(None) => break,
                        Event::Refused(e) => {
                            // A standby refuses LISTEN during recovery: try again
                            // (a failover may make this node, or the next, primary).
                            tracing::warn!(error = %Chain(&e), "worker listener: LISTEN refused; polling meanwhile, retrying");
                            break;
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %Chain(&e), "worker listener could not connect; polling meanwhile"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
