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
