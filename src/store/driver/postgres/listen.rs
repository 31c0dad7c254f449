//! The workers' `LISTEN` session over tokio-postgres: a dedicated
//! connection from a `tokio_postgres::Config` and a TLS connector, its
//! notifications read with `Connection::poll_message`.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;

use futures_util::stream::{self, BoxStream, StreamExt};
use tokio_postgres::{AsyncMessage, Client, Error};

use super::db_error;
use crate::store::driver::error::DbError;
use crate::store::driver::seam::{ListenEvent, Listener};

/// A session's client and what its connection says.
type Session = (Client, BoxStream<'static, Result<AsyncMessage, Error>>);

/// Opens a session of the configured connection.
type Connect = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<Session, Error>> + Send>> + Send + Sync>;

/// The workers' `LISTEN` connection: a configuration and its TLS.
#[derive(Clone)]
pub(crate) struct PgListener {
    connect: Connect,
    hosts: String,
}

impl PgListener {
    /// Sessions connected from `config` with `tls`.
    pub(crate) fn new<T>(config: tokio_postgres::Config, tls: T) -> Self
    where
        T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket> + Clone + Send + Sync + 'static,
        T::Stream: Send,
        T::TlsConnect: Send,
        <T::TlsConnect as tokio_postgres::tls::TlsConnect<tokio_postgres::Socket>>::Future: Send,
    {
        let hosts = format!("{:?}", config.get_hosts());
        let connect: Connect = Arc::new(move || {
            let (config, tls) = (config.clone(), tls.clone());
            Box::pin(async move {
                let (client, mut connection) = config.connect(tls).await?;
                let messages = stream::poll_fn(move |cx| connection.poll_message(cx));
                Ok((client, messages.boxed()))
            })
        });
        Self { connect, hosts }
    }
}

/// A listening session's state between two events.
struct Listening {
    client: Client,
    messages: BoxStream<'static, Result<AsyncMessage, Error>>,
    statement: String,
    /// The `LISTEN` was answered.
    listened: bool,
    /// Notifications that arrived while the `LISTEN` was awaited.
    early: VecDeque<String>,
    /// The session is lost: the stream ends.
    lost: bool,
}

impl Listening {
    async fn next(mut self) -> Option<(ListenEvent, Self)> {
        if self.lost {
            return None;
        }
        if !self.listened {
            let event = self.listen().await;
            return Some((event, self));
        }
        if let Some(payload) = self.early.pop_front() {
            return Some((ListenEvent::Notification(payload), self));
        }
        loop {
            match self.messages.next().await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    return Some((ListenEvent::Notification(n.payload().to_owned()), self));
                }
                Some(Ok(_)) => {} // a notice
                Some(Err(e)) => {
                    self.lost = true;
                    return Some((ListenEvent::Lost(Some(db_error(e))), self));
                }
                None => {
                    self.lost = true;
                    return Some((ListenEvent::Lost(None), self));
                }
            }
        }
    }

    /// Sends the `LISTEN` and drives the connection until it is answered.
    async fn listen(&mut self) -> ListenEvent {
        let mut listen = pin!(self.client.batch_execute(&self.statement));
        loop {
            tokio::select! {
                biased;
                message = self.messages.next() => match message {
                    Some(Ok(AsyncMessage::Notification(n))) => self.early.push_back(n.payload().to_owned()),
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        self.lost = true;
                        return ListenEvent::Lost(Some(db_error(e)));
                    }
                    None => {
                        self.lost = true;
                        return ListenEvent::Lost(None);
                    }
                },
                listened = &mut listen => {
                    self.listened = true;
                    return ListenEvent::Listened(listened.map_err(db_error));
                }
            }
        }
    }
}

impl Listener for PgListener {
    async fn listen(&self, channel: &str) -> Result<BoxStream<'static, ListenEvent>, DbError> {
        let (client, messages) = (self.connect)().await.map_err(db_error)?;
        let statement = format!("LISTEN \"{channel}\"");
        let state = Listening { client, messages, statement, listened: false, early: VecDeque::new(), lost: false };
        Ok(stream::unfold(state, Listening::next).boxed())
    }

    async fn notify(&self, channel: &str, payload: &str) -> Result<(), DbError> {
        let (client, mut messages) = (self.connect)().await.map_err(db_error)?;
        // The simple query protocol: no statement to prepare behind a pooler.
        let statement = format!("NOTIFY \"{channel}\", '{payload}'");
        let mut sent = pin!(client.batch_execute(&statement));
        loop {
            tokio::select! {
                biased;
                sent = &mut sent => return sent.map_err(db_error),
                message = messages.next() => match message {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(db_error(e)),
                    None => return Err(DbError::connection(None)),
                },
            }
        }
    }

    fn hosts(&self) -> String {
        self.hosts.clone()
    }
}
