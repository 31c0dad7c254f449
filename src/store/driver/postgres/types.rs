//! The crate's parameter and column types as tokio-postgres writes and
//! reads them: [`Param`] as `ToSql`, a row's columns as the seam's
//! [`Columns`].

use bytes::BytesMut;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type};
use tokio_postgres::Row;

use crate::store::driver::column::{ColumnError, Timestamp};
use crate::store::driver::param::Param;
use crate::store::driver::seam::{column_readers, Columns};

/// The PostgreSQL type of `p`, sent with unnamed statements.
pub(super) fn of(p: &Param<'_>) -> Type {
    match p {
        Param::Text(_) | Param::OptText(_) => Type::TEXT,
        Param::Bytes(_) | Param::OptBytes(_) => Type::BYTEA,
        Param::Bool(_) => Type::BOOL,
        Param::I16(_) | Param::OptI16(_) => Type::INT2,
        Param::I32(_) => Type::INT4,
        Param::I64(_) => Type::INT8,
        Param::F64(_) | Param::OptF64(_) => Type::FLOAT8,
        Param::Time(_) | Param::OptTime(_) => Type::TIMESTAMPTZ,
        Param::OptTexts(_) | Param::TextList(_) => Type::TEXT_ARRAY,
    }
}

fn value<'p>(p: &'p Param<'_>) -> &'p (dyn ToSql + Sync) {
    match p {
        Param::Text(v) => v,
        Param::OptText(v) => v,
        Param::Bytes(v) => v,
        Param::OptBytes(v) => v,
        Param::Bool(v) => v,
        Param::I16(v) => v,
        Param::OptI16(v) => v,
        Param::I32(v) => v,
        Param::I64(v) => v,
        Param::F64(v) => v,
        Param::OptF64(v) => v,
        Param::Time(v) => v,
        Param::OptTime(v) => v,
        Param::OptTexts(v) => v,
        Param::TextList(v) => v,
    }
}

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        value(self).to_sql_checked(ty, out)
    }

    fn accepts(_: &Type) -> bool {
        true // checked per value in `to_sql_checked`
    }

    fn to_sql_checked(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        value(self).to_sql_checked(ty, out)
    }
}

/// A `timestamptz` read from its binary value (microseconds since
/// 2000-01-01 UTC, big-endian), never through tokio-postgres's `SystemTime`.
impl<'a> FromSql<'a> for Timestamp {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Timestamp::from_postgres_bytes(raw)?)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMPTZ
    }
}

/// Column `idx` of `row` as `T`.
fn get<'a, T: FromSql<'a>>(row: &'a Row, idx: usize) -> Result<Option<T>, ColumnError> {
    row.try_get::<_, Option<T>>(idx).map_err(|e| ColumnError::new(format!("column {idx}: {e}")))
}

/// The [`Columns`] readers, `name -> type`: each through `FromSql`.
macro_rules! read_columns {
    ($($name:ident -> $ty:ty;)*) => {$(
        fn $name(&self, idx: usize) -> Result<Option<$ty>, ColumnError> {
            get(self, idx)
        }
    )*};
}

impl Columns for Row {
    fn len(&self) -> usize {
        Row::len(self)
    }

    column_readers!(read_columns);
}
