//! Driver-neutral statement parameters and result rows.

use bytes::BytesMut;
use std::time::SystemTime;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type};

/// A statement parameter, driver-neutral. Each variant knows its PostgreSQL
/// type, which unnamed statements (behind a transaction-mode pooler) send
/// along.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Param<'a> {
    /// `text`.
    Text(&'a str),
    /// `text` or NULL.
    OptText(Option<&'a str>),
    /// `bytea`.
    Bytes(&'a [u8]),
    /// `bytea` or NULL.
    OptBytes(Option<&'a [u8]>),
    /// `boolean`.
    Bool(bool),
    /// `smallint`.
    I16(i16),
    /// `smallint` or NULL.
    OptI16(Option<i16>),
    /// `integer`.
    I32(i32),
    /// `bigint`.
    I64(i64),
    /// `double precision`.
    F64(f64),
    /// `double precision` or NULL.
    OptF64(Option<f64>),
    /// `timestamptz`.
    Time(SystemTime),
    /// `timestamptz` or NULL.
    OptTime(Option<SystemTime>),
    /// `text[]` or NULL.
    OptTexts(Option<&'a [String]>),
    /// `text[]` whose elements may be NULL.
    TextList(&'a [Option<String>]),
}

impl<'a> Param<'a> {
    /// An event's identity and type: `$1 scope, $2 provider, $3 key, $4
    /// event type`, the first parameters of the claim's and the inbox's
    /// statements.
    pub(crate) fn event(event: &'a crate::event::ScopedEvent) -> [Self; 4] {
        [
            Self::Text(event.scope()),
            Self::Text(event.provider()),
            Self::Text(event.key()),
            Self::OptText(event.get_event_type()),
        ]
    }

    pub(super) fn ty(&self) -> Type {
        match self {
            Self::Text(_) | Self::OptText(_) => Type::TEXT,
            Self::Bytes(_) | Self::OptBytes(_) => Type::BYTEA,
            Self::Bool(_) => Type::BOOL,
            Self::I16(_) | Self::OptI16(_) => Type::INT2,
            Self::I32(_) => Type::INT4,
            Self::I64(_) => Type::INT8,
            Self::F64(_) | Self::OptF64(_) => Type::FLOAT8,
            Self::Time(_) | Self::OptTime(_) => Type::TIMESTAMPTZ,
            Self::OptTexts(_) | Self::TextList(_) => Type::TEXT_ARRAY,
        }
    }

    fn value(&self) -> &(dyn ToSql + Sync) {
        match self {
            Self::Text(v) => v,
            Self::OptText(v) => v,
            Self::Bytes(v) => v,
            Self::OptBytes(v) => v,
            Self::Bool(v) => v,
            Self::I16(v) => v,
            Self::OptI16(v) => v,
            Self::I32(v) => v,
            Self::I64(v) => v,
            Self::F64(v) => v,
            Self::OptF64(v) => v,
            Self::Time(v) => v,
            Self::OptTime(v) => v,
            Self::OptTexts(v) => v,
            Self::TextList(v) => v,
        }
    }
}

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        self.value().to_sql_checked(ty, out)
    }

    fn accepts(_: &Type) -> bool {
        true // checked per value in `to_sql_checked`
    }

    fn to_sql_checked(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        self.value().to_sql_checked(ty, out)
    }
}

/// A result row, read by column position.
pub(crate) struct Row(pub(super) tokio_postgres::Row);

impl Row {
    /// Column `idx`, as `T` (`String`, `Option<String>`, `i16`, `i32`, `i64`,
    /// `f64`, `bool`, `Vec<u8>`, `SystemTime`, or their `Option`s).
    ///
    /// # Panics
    /// When the column does not exist or is not of that type: the statement
    /// text and its reader are written together.
    pub(crate) fn get<'a, T: FromSql<'a>>(&'a self, idx: usize) -> T {
        self.0.get(idx)
    }

    /// Column `idx` as `T`, or `None` when it does not exist or is not of
    /// that type (rows a statement may not have produced itself).
    pub(crate) fn try_get<'a, T: FromSql<'a>>(&'a self, idx: usize) -> Option<T> {
        self.0.try_get(idx).ok()
    }

    /// The number of columns.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}
