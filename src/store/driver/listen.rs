//! The worker's dedicated `LISTEN` connection: wakes the producer on every
//! notification of its channel, reconnects after a loss (1 s between
//! tries). While it is down the producer polls, so a lost notification costs
//! at most one poll interval.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

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
                let mut listening = false;
                loop {
                    let message = poll_fn(|cx| {
                        if !listening {
                            if let std::task::Poll::Ready(result) = listen.as_mut().poll(cx) {
                                listening = result.is_ok();
                                if result.is_ok() {
                                    // Rows accepted before LISTEN took effect.
                                    notify.notify_one();
                                }
                            }
                        }
                        connection.poll_message(cx)
                    })
                    .await;
                    match message {
                        Some(Ok(tokio_postgres::AsyncMessage::Notification(_))) => notify.notify_one(),
                        Some(Ok(_)) => {}
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "worker listener connection lost; reconnecting");
                            break;
                        }
                        None => break,
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "worker listener could not connect; polling meanwhile"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
