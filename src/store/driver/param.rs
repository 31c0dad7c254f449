//! [`Param`], the crate's own statement parameter: every driver binds it.

use std::time::SystemTime;

/// A statement parameter, driver-neutral. Each variant is of one PostgreSQL
/// type, which a driver sends along with unnamed statements (behind a
/// transaction-mode pooler), where no prepared statement says it.
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
}
