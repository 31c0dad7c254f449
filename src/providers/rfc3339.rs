//! RFC 3339 `date-time` text, for the presets that sign a timestamp written
//! that way (Box, Twitch, Zendesk).

use time::format_description::well_known::Rfc3339;

/// An RFC 3339 `date-time` (RFC 3339 section 5.6) as Unix seconds, the
/// fraction dropped, with the `time` crate; `None` for anything else,
/// impossible dates included.
pub(crate) fn parse(text: &str) -> Option<i64> {
    time::OffsetDateTime::parse(text, &Rfc3339).ok().map(time::OffsetDateTime::unix_timestamp)
}

/// `unix_seconds` as RFC 3339 UTC, `YYYY-MM-DDTHH:MM:SSZ`, for test and
/// example deliveries; empty past year 9999.
pub(crate) fn format(unix_seconds: u64) -> String {
    i64::try_from(unix_seconds)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    /// `time`'s RFC 3339 parser as the presets use it: offsets, fractions
    /// (dropped), a lower-case `t`/`z` and a space for the `T` (RFC 3339
    /// section 5.6 allows both), leap seconds, and impossible dates refused.
    #[test]
    fn parses_offsets_and_refuses_the_rest() {
        let cases: &[(&str, Option<i64>)] = &[
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2023-11-14T22:13:20Z", Some(1_700_000_000)),
            ("2023-11-14T22:13:20.123456789Z", Some(1_700_000_000)),
            ("2023-11-14T22:13:20.5z", Some(1_700_000_000)),
            ("2023-11-14t22:13:20Z", Some(1_700_000_000)),
            ("2023-11-15T00:13:20+02:00", Some(1_700_000_000)),
            ("2023-11-14T17:13:20-05:00", Some(1_700_000_000)),
            ("2024-06-10T06:13:20Z", Some(1_718_000_000)),
            ("2024-06-10T06:13:20+00:00", Some(1_718_000_000)),
            ("2024-06-09T23:13:20-07:00", Some(1_718_000_000)),
            ("2024-06-10T06:13:20.999Z", Some(1_718_000_000)),
            ("2024-06-10T06:13:20", None),
            ("1718000000", None),
            ("2024-02-30T00:00:00Z", None),
            ("2000-02-29T00:00:00Z", Some(951_782_400)),
            ("1969-12-31T23:59:59Z", Some(-1)),
            // A leap second reads as the last nanosecond of :59.
            ("2016-12-31T23:59:60Z", Some(1_483_228_799)),
            ("9999-12-31T23:59:59Z", Some(253_402_300_799)),
            ("2023-02-29T00:00:00Z", None),
            ("1900-02-29T00:00:00Z", None),
            ("2023-04-31T00:00:00Z", None),
            ("2023-13-01T00:00:00Z", None),
            ("2023-00-01T00:00:00Z", None),
            ("2023-11-14T24:00:00Z", None),
            ("2023-11-14T22:60:00Z", None),
            ("2023-11-14T22:13:61Z", None),
            ("2023-11-14 22:13:20Z", Some(1_700_000_000)),
            ("2023-11-14T22:13:20", None),
            ("2023-11-14T22:13:20.Z", None),
            ("2023-11-14T22:13:20+0200", None),
            ("2023-11-14T22:13:20+24:00", None),
            ("2023-11-14T22:13:20ZZ", None),
            ("2023-11-14T22:13Z", None),
            ("+023-11-14T22:13:20Z", None),
            ("2023-1a-14T22:13:20Z", None),
            ("1700000000", None),
            ("", None),
            ("\u{ff12}\u{ff10}\u{ff12}\u{ff13}-11-14T22:13:20Z", None),
        ];
        for (text, want) in cases {
            assert_eq!(super::parse(text), *want, "{text}");
        }
        for secs in [0, 1, 951_782_400, 1_700_000_000, 1_718_000_000, 253_402_300_799] {
            assert_eq!(super::parse(&super::format(secs)), i64::try_from(secs).ok(), "{secs}");
        }
        assert_eq!(super::format(1_700_000_000), "2023-11-14T22:13:20Z");
        // Far past year 9999: empty, so not parsable back, and no panic.
        assert_eq!(super::format(u64::MAX), "");
    }
}
