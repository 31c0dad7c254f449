//! The dispatch over the compiled-in drivers: one enum per trait of the
//! [`seam`](super::seam) (pool, connection, statement, row, listener), one
//! variant per driver feature, each implementing its trait by delegating
//! to the variant's driver.
//!
//! Why an enum: the calls stay statically dispatched (a `match` on a
//! one-variant enum compiles to the call itself; no boxed future per
//! statement on the claim's path), nothing generic leaks into the public
//! types (`StoreConfig`, `WebhookLayer`, `ClaimStore`, the workers hold a
//! `Db`, not a `Db<D>`), several drivers can be compiled into one binary
//! (features are additive: each adds a variant, none removes one), and the
//! compiler checks each driver against the traits twice: its own
//! implementation, and this delegation. A generic parameter would thread
//! `D: Driver` through every public type of the crate; boxed trait objects
//! cannot have the traits' `async` methods without a box per call.
//!
//! A value of one driver never meets another's: a connection comes from
//! its pool, a statement from its connection, a row from its statement.
//! With no driver feature on, every enum is empty and nothing can be built.

use std::time::Instant;

use futures_util::stream::BoxStream;

use super::column::{ColumnError, Timestamp};
use super::error::DbError;
#[cfg(feature = "tokio-postgres")]
use super::postgres;
use super::seam::{column_readers, AcquireError, Columns, Connection, ListenEvent, Listener, Pool, PoolIdentity, Step};
#[cfg(feature = "sqlx")]
use super::sqlx;

/// `match` on `$value`'s driver, binding its inner value as `$inner`
/// (by reference with `ref`).
macro_rules! each_driver {
    (ref $value:expr, $inner:ident => $body:expr) => {
        match $value {
            #[cfg(feature = "tokio-postgres")]
            Self::Postgres(ref $inner) => $body,
            #[cfg(feature = "sqlx")]
            Self::Sqlx(ref $inner) => $body,
        }
    };
    ($value:expr, $inner:ident => $body:expr) => {
        match $value {
            #[cfg(feature = "tokio-postgres")]
            Self::Postgres($inner) => $body,
            #[cfg(feature = "sqlx")]
            Self::Sqlx($inner) => $body,
        }
    };
}

/// Implements `From<$inner> for $any` (the variant `$variant`), and
/// [`Variant`] to get the inner value back.
macro_rules! variant {
    ($feature:literal, $any:ident :: $variant:ident ($inner:ty)) => {
        #[cfg(feature = $feature)]
        impl From<$inner> for $any {
            fn from(inner: $inner) -> Self {
                Self::$variant(inner)
            }
        }

        #[cfg(feature = $feature)]
        impl Variant<$inner> for $any {
            fn get(&self) -> &$inner {
                #[allow(unreachable_patterns, reason = "one variant when one driver is compiled in")]
                match self {
                    Self::$variant(inner) => inner,
                    _ => unreachable!("a value of one driver never meets another's"),
                }
            }
        }
    };
}

/// The inner value of one driver's variant.
trait Variant<T> {
    /// The inner value.
    ///
    /// # Panics
    /// When the value is of another driver: a value of one driver never
    /// meets another's (a statement comes from its connection).
    fn get(&self) -> &T;
}

variant!("tokio-postgres", AnyConn::Postgres(postgres::PgConn));
variant!("tokio-postgres", AnyStatement::Postgres(postgres::Statement));
variant!("tokio-postgres", AnyRow::Postgres(postgres::Row));
variant!("sqlx", AnyConn::Sqlx(sqlx::SqlxConn));
variant!("sqlx", AnyStatement::Sqlx(sqlx::Statement));
variant!("sqlx", AnyRow::Sqlx(sqlx::Row));

/// A pool of one of the compiled-in drivers.
#[derive(Clone)]
pub(crate) enum AnyPool {
    /// tokio-postgres with deadpool.
    #[cfg(feature = "tokio-postgres")]
    Postgres(postgres::PgPool),
    /// sqlx.
    #[cfg(feature = "sqlx")]
    Sqlx(sqlx::SqlxPool),
}

/// A connection of one of the compiled-in drivers.
#[allow(
    clippy::large_enum_variant,
    reason = "one value per checkout, moved rarely; boxing the common driver's variant would cost an allocation each"
)]
pub(crate) enum AnyConn {
    /// tokio-postgres with deadpool.
    #[cfg(feature = "tokio-postgres")]
    Postgres(postgres::PgConn),
    /// sqlx.
    #[cfg(feature = "sqlx")]
    Sqlx(sqlx::SqlxConn),
}

/// A prepared statement of one of the compiled-in drivers.
pub(crate) enum AnyStatement {
    /// tokio-postgres.
    #[cfg(feature = "tokio-postgres")]
    Postgres(postgres::Statement),
    /// sqlx.
    #[cfg(feature = "sqlx")]
    Sqlx(sqlx::Statement),
}

/// A result row of one of the compiled-in drivers.
pub(crate) enum AnyRow {
    /// tokio-postgres.
    #[cfg(feature = "tokio-postgres")]
    Postgres(postgres::Row),
    /// sqlx.
    #[cfg(feature = "sqlx")]
    Sqlx(sqlx::Row),
}

/// The `LISTEN` connection of one of the compiled-in drivers (configured
/// apart from the pool, of any driver).
#[derive(Clone)]
#[allow(clippy::large_enum_variant, reason = "one value per store, cloned only when a worker starts listening")]
pub(crate) enum AnyListener {
    /// tokio-postgres.
    #[cfg(feature = "tokio-postgres")]
    Postgres(postgres::PgListener),
    /// sqlx.
    #[cfg(feature = "sqlx")]
    Sqlx(sqlx::SqlxListener),
}

impl AnyPool {
    /// The tokio-postgres pool, when it is one.
    #[cfg(feature = "tokio-postgres")]
    pub(crate) fn postgres_mut(&mut self) -> Option<&mut postgres::PgPool> {
        #[allow(unreachable_patterns, reason = "one variant when one driver is compiled in")]
        match self {
            Self::Postgres(p) => Some(p),
            _ => None,
        }
    }
}

#[cfg(test)]
impl AnyPool {
    /// A pool of `max_size` on a fresh database of the test server, of the
    /// first compiled-in driver.
    ///
    /// # Panics
    /// With no driver feature on: there is no database to test.
    pub(crate) async fn fresh(max_size: usize) -> Self {
        #[cfg(feature = "tokio-postgres")]
        return Self::Postgres(postgres::PgPool::new(postgres::testing::fresh_pool(max_size).await));
        #[cfg(not(feature = "tokio-postgres"))]
        panic!("tests of the store need a driver feature ({max_size} connections asked)")
    }

    /// A pool of the first compiled-in driver that never connects.
    ///
    /// # Panics
    /// With no driver feature on.
    pub(crate) fn unreachable() -> Self {
        #[cfg(feature = "tokio-postgres")]
        return Self::Postgres(postgres::PgPool::new(postgres::testing::unreachable_pool()));
        #[cfg(not(feature = "tokio-postgres"))]
        panic!("tests of the store need a driver feature")
    }
}

impl AnyConn {
    /// The tokio-postgres connection, when it is one.
    #[cfg(feature = "tokio-postgres")]
    pub(crate) fn postgres(&self) -> Option<&postgres::PgConn> {
        #[allow(unreachable_patterns, reason = "one variant when one driver is compiled in")]
        match self {
            Self::Postgres(c) => Some(c),
            _ => None,
        }
    }

    /// The sqlx connection, when it is one.
    #[cfg(feature = "sqlx")]
    pub(crate) fn sqlx(&self) -> Option<&sqlx::SqlxConn> {
        #[allow(unreachable_patterns, reason = "one variant when one driver is compiled in")]
        match self {
            Self::Sqlx(c) => Some(c),
            _ => None,
        }
    }
}

impl Pool for AnyPool {
    type Conn = AnyConn;

    async fn acquire(&self) -> Result<AnyConn, AcquireError> {
        each_driver!(ref *self, p => p.acquire().await.map(Into::into))
    }

    fn endpoint(&self) -> Option<String> {
        each_driver!(ref *self, p => p.endpoint())
    }

    fn database(&self) -> Option<String> {
        each_driver!(ref *self, p => p.database())
    }

    fn close_idle_since(&self, since: Instant) -> usize {
        each_driver!(ref *self, p => p.close_idle_since(since))
    }

    fn identity(&self) -> PoolIdentity {
        each_driver!(ref *self, p => p.identity())
    }
}

impl Connection for AnyConn {
    type Statement = AnyStatement;
    type Row = AnyRow;

    fn checked_out(&self) -> Instant {
        each_driver!(ref *self, c => c.checked_out())
    }

    fn holds_named_statements(&self) -> bool {
        each_driver!(ref *self, c => c.holds_named_statements())
    }

    async fn prepare(&self, sql: &str) -> Result<AnyStatement, DbError> {
        each_driver!(ref *self, c => c.prepare(sql).await.map(Into::into))
    }

    async fn flight<'a>(&'a self, steps: &'a [Step<'a, AnyStatement>]) -> Vec<Result<Vec<AnyRow>, DbError>> {
        each_driver!(ref *self, c => {
            let steps: Vec<_> = steps.iter().map(|s| s.with_statement(Variant::get)).collect();
            rows_of(c.flight(&steps).await)
        })
    }

    fn release(self) {
        each_driver!(self, c => c.release());
    }

    fn discard(self) {
        each_driver!(self, c => c.discard());
    }

    fn close_uncancelled(self) {
        each_driver!(self, c => c.close_uncancelled());
    }
}

/// A driver's answers to a flight, its rows wrapped by `any`.
fn rows_of<R: Into<AnyRow>>(answers: Vec<Result<Vec<R>, DbError>>) -> Vec<Result<Vec<AnyRow>, DbError>> {
    answers.into_iter().map(|a| a.map(|rows| rows.into_iter().map(Into::into).collect())).collect()
}

impl<'a, S> Step<'a, S> {
    /// The same step with its prepared statement as `inner` sees it.
    fn with_statement<T>(&self, inner: impl Fn(&'a S) -> &'a T) -> Step<'a, T> {
        match *self {
            Step::Batch(sql) => Step::Batch(sql),
            Step::Query { sql, params, prepared } => Step::Query { sql, params, prepared: prepared.map(inner) },
        }
    }
}

/// The [`Columns`] readers of one type each, `name -> type`, delegated to
/// the row's driver.
macro_rules! delegate_columns {
    ($($name:ident -> $ty:ty;)*) => {$(
        fn $name(&self, idx: usize) -> Result<Option<$ty>, ColumnError> {
            each_driver!(ref *self, r => r.$name(idx))
        }
    )*};
}

impl Columns for AnyRow {
    fn len(&self) -> usize {
        each_driver!(ref *self, r => Columns::len(r))
    }

    column_readers!(delegate_columns);
}

impl Listener for AnyListener {
    async fn listen(&self, channel: &str) -> Result<BoxStream<'static, ListenEvent>, DbError> {
        each_driver!(ref *self, l => l.listen(channel).await)
    }

    async fn notify(&self, channel: &str, payload: &str) -> Result<(), DbError> {
        each_driver!(ref *self, l => l.notify(channel, payload).await)
    }

    fn hosts(&self) -> String {
        each_driver!(ref *self, l => l.hosts())
    }
}
