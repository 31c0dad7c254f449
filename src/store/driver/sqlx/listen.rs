//! The workers' `LISTEN` session over sqlx: a dedicated connection from
//! `PgConnectOptions`, read with sqlx's `PgListener` (its own reconnection
//! off: the crate's `listen_loop` reconnects and checks the new session).

use futures_util::stream::{self, BoxStream, StreamExt};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection};

use super::db_error;
use crate::store::driver::error::DbError;
use crate::store::driver::seam::{ListenEvent, Listener};

/// The workers' `LISTEN` connection: its options.
#[derive(Clone)]
pub(crate) struct SqlxListener {
    options: PgConnectOptions,
}

impl SqlxListener {
    /// Sessions connected with `options`.
    pub(crate) fn new(options: PgConnectOptions) -> Self {
        Self { options }
    }
}

/// A listening session between two events.
struct Listening {
    listener: PgListener,
    channel: String,
    listened: bool,
    lost: bool,
}

impl Listening {
    async fn next(mut self) -> Option<(ListenEvent, Self)> {
        if self.lost {
            return None;
        }
        if !self.listened {
            self.listened = true;
            let answered = self.listener.listen(&self.channel).await.map_err(db_error);
            self.lost = answered.is_err();
            return Some((ListenEvent::Listened(answered), self));
        }
        match self.listener.try_recv().await {
            Ok(Some(n)) => Some((ListenEvent::Notification(n.payload().to_owned()), self)),
            // sqlx says the connection was lost; with eager reconnection
            // off it does not reconnect: the loop above does.
            Ok(None) => {
                self.lost = true;
                Some((ListenEvent::Lost(None), self))
            }
            Err(e) => {
                self.lost = true;
                Some((ListenEvent::Lost(Some(db_error(e))), self))
            }
        }
    }
}

impl Listener for SqlxListener {
    async fn listen(&self, channel: &str) -> Result<BoxStream<'static, ListenEvent>, DbError> {
        // A pool of one, which sqlx's listener takes its connection from.
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .max_lifetime(None)
            .idle_timeout(None)
            .connect_lazy_with(self.options.clone());
        let mut listener = PgListener::connect_with(&pool).await.map_err(db_error)?;
        listener.eager_reconnect(false);
        let state = Listening { listener, channel: channel.to_owned(), listened: false, lost: false };
        Ok(stream::unfold(state, Listening::next).boxed())
    }

    async fn notify(&self, channel: &str, payload: &str) -> Result<(), DbError> {
        let mut conn = self.options.connect().await.map_err(db_error)?;
        // The simple query protocol: no statement to prepare behind a pooler.
        let statement = format!("NOTIFY \"{channel}\", '{payload}'");
        let sent = sqlx::raw_sql(AssertSqlSafe(statement)).execute(&mut conn).await.map_err(db_error);
        let _ = conn.close().await;
        sent.map(drop)
    }

    fn hosts(&self) -> String {
        format!("{}:{}", self.options.get_host(), self.options.get_port())
    }
}
