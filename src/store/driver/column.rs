//! The column values the seam hands over whatever the driver:
//! [`Timestamp`], the crate's own `timestamptz`, and [`ColumnError`].

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A `timestamptz` as PostgreSQL keeps it: microseconds, here counted from
/// the Unix epoch (PostgreSQL counts from 2000-01-01 00:00 UTC in its
/// binary format: [`from_postgres`](Self::from_postgres)). Each driver reads
/// it as it can (tokio-postgres from the binary value, sqlx from its raw
/// bytes), so no driver's time type crosses the seam.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Timestamp {
    unix_micros: i64,
}

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01 00:00 UTC).
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;

impl Timestamp {
    /// From PostgreSQL's binary `timestamptz`: microseconds since
    /// 2000-01-01 00:00 UTC (`infinity` and `-infinity` are `i64::MAX` and
    /// `i64::MIN`, kept at the ends of the range).
    pub(crate) fn from_postgres(micros: i64) -> Self {
        Self { unix_micros: micros.saturating_add(POSTGRES_EPOCH_MICROS) }
    }

    /// From PostgreSQL's binary `timestamptz` value: 8 bytes, big-endian.
    ///
    /// # Errors
    /// A value of another length.
    pub(crate) fn from_postgres_bytes(raw: &[u8]) -> Result<Self, ColumnError> {
        let raw: [u8; 8] =
            raw.try_into().map_err(|_| ColumnError::new(format!("a timestamptz of {} bytes, not 8", raw.len())))?;
        Ok(Self::from_postgres(i64::from_be_bytes(raw)))
    }

    /// The same instant as a `SystemTime`.
    ///
    /// # Errors
    /// An instant the platform's `SystemTime` cannot hold (`infinity`).
    pub(crate) fn to_system_time(self) -> Result<SystemTime, ColumnError> {
        let magnitude = Duration::from_micros(self.unix_micros.unsigned_abs());
        let at =
            if self.unix_micros >= 0 { UNIX_EPOCH.checked_add(magnitude) } else { UNIX_EPOCH.checked_sub(magnitude) };
        at.ok_or_else(|| ColumnError::new("a timestamptz past what SystemTime holds"))
    }
}

/// A column that is not there, not of the type read, or NULL where a value
/// was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ColumnError {
    message: String,
}

impl ColumnError {
    /// An error saying what is wrong.
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }
}

impl fmt::Display for ColumnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ColumnError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_from_postgres() {
        let cases: &[(&str, i64, Option<SystemTime>)] = &[
            ("PostgreSQL's epoch", 0, Some(UNIX_EPOCH + Duration::from_secs(946_684_800))),
            ("the Unix epoch", -POSTGRES_EPOCH_MICROS, Some(UNIX_EPOCH)),
            (
                "before 1970",
                -POSTGRES_EPOCH_MICROS - 1_500_000,
                UNIX_EPOCH.checked_sub(Duration::from_micros(1_500_000)),
            ),
            ("with microseconds", 1, Some(UNIX_EPOCH + Duration::from_micros(946_684_800_000_001))),
        ];
        for (name, micros, want) in cases {
            let got = Timestamp::from_postgres_bytes(&micros.to_be_bytes()).unwrap().to_system_time().ok();
            assert_eq!(got, *want, "{name}");
        }
        assert!(Timestamp::from_postgres_bytes(&[0; 4]).is_err(), "4 bytes");
    }
}
