//! RFC 3339 `date-time` text, for the presets that sign a timestamp written
//! that way (Box, Zendesk).

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
    #[test]
    fn parses_offsets_and_refuses_the_rest() {
        let cases: &[(&str, Option<i64>)] = &[
            ("2024-06-10T06:13:20Z", Some(1_718_000_000)),
            ("2024-06-10T06:13:20+00:00", Some(1_718_000_000)),
            ("2024-06-09T23:13:20-07:00", Some(1_718_000_000)),
            ("2024-06-10T06:13:20.999Z", Some(1_718_000_000)),
            ("2024-06-10T06:13:20", None),
            ("1718000000", None),
            ("2024-02-30T00:00:00Z", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(super::parse(text), *want, "{text}");
        }
        assert_eq!(super::format(1_718_000_000), "2024-06-10T06:13:20Z");
        assert_eq!(super::parse(&super::format(0)), Some(0));
        assert_eq!(super::format(u64::MAX), "");
    }
}
