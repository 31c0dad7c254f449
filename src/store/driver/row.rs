//! [`Row`], a result row whatever the driver, and [`FromColumn`], the
//! crate's own column decoder: the protocol modules read `row.get::<T>(i)`
//! for the types they use, and each driver reads those types through the
//! seam's [`Columns`], so no driver's decoding trait (`FromSql`, `Decode`)
//! is named above the seam.

use std::time::SystemTime;

use super::any::AnyRow;
use super::column::{ColumnError, Timestamp};
use super::error::DbError;
use super::seam::Columns;

/// A result row, read by column position.
pub(crate) struct Row(AnyRow);

impl Row {
    /// Column `idx`, as `T` (`&str`, `String`, `&[u8]`, `Vec<u8>`, `bool`,
    /// `i16`, `i32`, `i64`, `f64`, `SystemTime`, [`Timestamp`],
    /// `Vec<String>`, `Vec<Option<String>>`, or their `Option`s for a
    /// column that may be NULL).
    ///
    /// # Panics
    /// When the column does not exist, is not of that type, or is NULL for
    /// a `T` that is not an `Option`: the statement text and its reader are
    /// written together.
    pub(crate) fn get<'a, T: FromColumn<'a>>(&'a self, idx: usize) -> T {
        T::from_column(&self.0, idx).unwrap_or_else(|e| panic!("reading column {idx}: {e}"))
    }

    /// Column `idx` as `T`, or `None` when it does not exist or is not of
    /// that type (rows a statement may not have produced itself).
    pub(crate) fn try_get<'a, T: FromColumn<'a>>(&'a self, idx: usize) -> Option<T> {
        T::from_column(&self.0, idx).ok()
    }

    /// The number of columns.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// The rows of one answer of a flight, as [`Row`]s; a missing answer (a
/// driver that answered fewer steps than it was sent) is a broken
/// connection.
pub(super) fn rows(answer: Option<Result<Vec<AnyRow>, DbError>>) -> Result<Vec<Row>, DbError> {
    let answer = answer.unwrap_or_else(|| Err(DbError::connection(None)))?;
    Ok(answer.into_iter().map(Row).collect())
}

/// A type a column is read as ([`Row::get`]).
pub(crate) trait FromColumn<'a>: Sized {
    /// Column `idx` of `row`.
    ///
    /// # Errors
    /// The column does not exist, is of another type, or is NULL where `Self`
    /// cannot be.
    fn from_column(row: &'a impl Columns, idx: usize) -> Result<Self, ColumnError>;
}

/// A column value that may be NULL: read as itself ([`FromColumn`] fails
/// on NULL) or as its `Option`.
pub(crate) trait Nullable<'a>: Sized {
    /// Column `idx` of `row`, `None` for NULL.
    ///
    /// # Errors
    /// As [`FromColumn::from_column`].
    fn read(row: &'a impl Columns, idx: usize) -> Result<Option<Self>, ColumnError>;
}

impl<'a, T: Nullable<'a>> FromColumn<'a> for T {
    fn from_column(row: &'a impl Columns, idx: usize) -> Result<Self, ColumnError> {
        T::read(row, idx)?.ok_or_else(|| ColumnError::new("NULL where a value was expected"))
    }
}

impl<'a, T: Nullable<'a>> FromColumn<'a> for Option<T> {
    fn from_column(row: &'a impl Columns, idx: usize) -> Result<Self, ColumnError> {
        T::read(row, idx)
    }
}

/// `Nullable` for types the seam reads directly, each by its method.
macro_rules! nullable {
    ($($ty:ty => $read:ident;)*) => {$(
        impl<'a> Nullable<'a> for $ty {
            fn read(row: &'a impl Columns, idx: usize) -> Result<Option<Self>, ColumnError> {
                row.$read(idx)
            }
        }
    )*};
}

nullable! {
    &'a str => text;
    &'a [u8] => bytes;
    bool => boolean;
    i16 => int2;
    i32 => int4;
    i64 => int8;
    f64 => float8;
    Timestamp => timestamp;
    Vec<Option<String>> => texts;
}

impl<'a> Nullable<'a> for String {
    fn read(row: &'a impl Columns, idx: usize) -> Result<Option<Self>, ColumnError> {
        Ok(row.text(idx)?.map(str::to_owned))
    }
}

impl<'a> Nullable<'a> for Vec<u8> {
    fn read(row: &'a impl Columns, idx: usize) -> Result<Option<Self>, ColumnError> {
        Ok(row.bytes(idx)?.map(<[u8]>::to_vec))
    }
}

impl<'a> Nullable<'a> for SystemTime {
    fn read(row: &'a impl Columns, idx: usize) -> Result<Option<Self>, ColumnError> {
        row.timestamp(idx)?.map(Timestamp::to_system_time).transpose()
    }
}

/// A `text[]` without NULL elements.
impl<'a> Nullable<'a> for Vec<String> {
    fn read(row: &'a impl Columns, idx: usize) -> Result<Option<Self>, ColumnError> {
        let Some(texts) = row.texts(idx)? else { return Ok(None) };
        texts.into_iter().collect::<Option<Vec<String>>>().map(Some).ok_or_else(|| ColumnError::new("a NULL element"))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use crate::store::testing;

    /// Every type the protocol reads, from a real server through the
    /// compiled-in driver: values, NULLs as `None`, a `timestamptz` before
    /// 1970 with microseconds (the crate's own `Timestamp`, not the driver's
    /// time type), `text[]` with and without NULL elements; a column read as
    /// the wrong type or a NULL read as a value is `None` from `try_get`.
    #[tokio::test]
    async fn the_column_decoder_reads_every_type_the_protocol_reads() {
        let store = testing::fresh(1).await;
        let sql = "SELECT 'x'::text, NULL::text, '\\x0102'::bytea, true, 2::int2, 3::int4, 4::int8, 1.5::float8,
                          '1969-12-31 23:59:58.750001+00'::timestamptz, NULL::timestamptz,
                          ARRAY['a', NULL]::text[], ARRAY['a', 'b']::text[], '2024-01-02 03:04:05.123456+00'::timestamptz";
        let rows = testing::execute(&store, sql, &[]).await;
        let row = &rows[0];
        assert_eq!(row.len(), 13);
        assert_eq!((row.get::<&str>(0), row.get::<String>(0)), ("x", "x".to_owned()));
        assert_eq!(row.get::<Option<&str>>(1), None);
        assert_eq!((row.get::<&[u8]>(2), row.get::<Vec<u8>>(2)), (&[1u8, 2][..], vec![1, 2]));
        assert!(row.get::<bool>(3));
        assert_eq!((row.get::<i16>(4), row.get::<i32>(5), row.get::<i64>(6)), (2, 3, 4));
        assert!((row.get::<f64>(7) - 1.5).abs() < f64::EPSILON);
        let before_1970 = UNIX_EPOCH - Duration::from_micros(1_249_999);
        assert_eq!(row.get::<SystemTime>(8), before_1970);
        assert_eq!(row.get::<Option<SystemTime>>(9), None);
        assert_eq!(row.get::<Vec<Option<String>>>(10), [Some("a".to_owned()), None]);
        assert_eq!(row.get::<Vec<String>>(11), ["a", "b"]);
        let later = UNIX_EPOCH + Duration::from_micros(1_704_164_645_123_456);
        assert_eq!(row.get::<SystemTime>(12), later);
        // Not of that type, NULL, a NULL element, no such column: no value.
        assert_eq!(row.try_get::<i64>(0), None);
        assert_eq!(row.try_get::<&str>(1), None);
        assert_eq!(row.try_get::<Vec<String>>(10), None);
        assert_eq!(row.try_get::<bool>(13), None);
    }
}
