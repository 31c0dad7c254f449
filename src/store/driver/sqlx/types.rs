//! The crate's [`Param`]s as sqlx arguments, and `timestamptz` in its binary
//! form both ways (PostgreSQL docs, "Date/Time Types": microseconds since
//! 2000-01-01 00:00 UTC, as an 8-byte big-endian integer).

use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgArguments, PgTypeInfo, PgValueFormat, PgValueRef, Postgres};
use sqlx::Arguments;

use crate::store::driver::column::Timestamp;
use crate::store::driver::param::Param;

/// A `timestamptz` as the crate reads it.
pub(super) struct PgTimestamp(pub(super) Timestamp);

/// A `timestamptz` parameter.
struct SendTime(SystemTime);

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01 UTC).
const POSTGRES_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;

impl sqlx::Type<Postgres> for PgTimestamp {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_name("timestamptz")
    }
}

impl sqlx::Type<Postgres> for SendTime {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_name("timestamptz")
    }
}

impl<'r> sqlx::Decode<'r, Postgres> for PgTimestamp {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        match value.format() {
            PgValueFormat::Binary => Ok(Self(Timestamp::from_postgres_bytes(value.as_bytes()?)?)),
            // Rows come in binary from the extended protocol, the only one
            // whose rows the crate reads.
            PgValueFormat::Text => Err("a timestamptz in text format".into()),
        }
    }
}

impl sqlx::Encode<'_, Postgres> for SendTime {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        let unix_micros = match self.0.duration_since(UNIX_EPOCH) {
            Ok(after) => i64::try_from(after.as_micros())?,
            Err(before) => -i64::try_from(before.duration().as_micros())?,
        };
        let micros = unix_micros.checked_sub(POSTGRES_EPOCH_UNIX_MICROS).ok_or("a timestamptz out of range")?;
        buf.extend_from_slice(&micros.to_be_bytes());
        Ok(IsNull::No)
    }
}

/// `params` as sqlx's arguments, each with its PostgreSQL type (sent with
/// an unnamed statement, where no prepared statement says it).
///
/// # Errors
/// A value sqlx cannot encode (a time out of PostgreSQL's range).
pub(super) fn arguments(params: &[Param<'_>]) -> Result<PgArguments, String> {
    let mut args = PgArguments::default();
    for param in params {
        let added = match *param {
            Param::Text(v) => args.add(v),
            Param::OptText(v) => args.add(v),
            Param::Bytes(v) => args.add(v),
            Param::OptBytes(v) => args.add(v),
            Param::Bool(v) => args.add(v),
            Param::I16(v) => args.add(v),
            Param::OptI16(v) => args.add(v),
            Param::I32(v) => args.add(v),
            Param::I64(v) => args.add(v),
            Param::F64(v) => args.add(v),
            Param::OptF64(v) => args.add(v),
            Param::Time(v) => args.add(SendTime(v)),
            Param::OptTime(v) => args.add(v.map(SendTime)),
            Param::OptTexts(v) => args.add(v),
            Param::TextList(v) => args.add(v),
        };
        added.map_err(|e| format!("a parameter sqlx could not encode: {e}"))?;
    }
    Ok(args)
}
