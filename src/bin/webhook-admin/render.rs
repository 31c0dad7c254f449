//! `webhook-admin`'s rendering: text tables, JSON, times and sender-controlled
//! text made safe for a terminal.

use std::num::NonZeroU8;
use std::time::{Duration, SystemTime};

use base64::Engine as _;

use comfy_table::{presets, Table};
use serde_json::{json, Value};
use time::format_description::well_known::iso8601::{self, EncodedConfig};
use time::format_description::well_known::Iso8601;
use time::OffsetDateTime;
use webhook_idempotency::store::admin::EventRow;

pub(crate) use webhook_idempotency::cli::{printable, unsafe_to_print};

/// A payload as printable text: `("utf8", text)` when it is UTF-8 without
/// control or invisible format characters other than tab and LF (a bare CR
/// would let the payload overwrite what the terminal shows), else
/// `("base64", ...)`.
pub(crate) fn payload_text(bytes: &[u8]) -> (&'static str, String) {
    match std::str::from_utf8(bytes) {
        Ok(s) if !s.chars().any(|c| unsafe_to_print(c) && !matches!(c, '\n' | '\t')) => ("utf8", s.to_owned()),
        _ => ("base64", base64::engine::general_purpose::STANDARD.encode(bytes)),
    }
}

/// `t` in UTC as RFC 3339 to the second (`2026-12-05T02:37:45Z`).
pub(crate) fn time(t: SystemTime) -> String {
    utc_text(t, None)
}

/// `t` in UTC as RFC 3339 to the millisecond (`2026-12-05T02:37:45.191Z`),
/// or `null`.
pub(crate) fn time_json(t: Option<SystemTime>) -> Value {
    t.map_or(Value::Null, |t| utc_text(t, NonZeroU8::new(3)).into())
}

/// `t` in UTC with `digits` decimals of the second, by the `time` crate,
/// which handles every time it represents (±9999 years): before 1970 (a
/// `purge --older-than 60years` cut-off) as after, in the RFC 3339 form for
/// the years 0 to 9999 and in ISO 8601's expanded form (a sign and six
/// digits: `-002974-06-01T00:00:00Z`) outside them. A time past ±9999 years
/// (PostgreSQL holds 4713 BC to 294276 AD) is given in seconds from the
/// Unix epoch.
fn utc_text(t: SystemTime, digits: Option<NonZeroU8>) -> String {
    const fn config(digits: Option<NonZeroU8>, expanded: bool) -> EncodedConfig {
        iso8601::Config::DEFAULT
            .set_year_is_six_digits(expanded)
            .set_time_precision(iso8601::TimePrecision::Second { decimal_digits: digits })
            .encode()
    }
    const SECONDS: [EncodedConfig; 2] = [config(None, false), config(None, true)];
    const MILLIS: [EncodedConfig; 2] = [config(NonZeroU8::new(3), false), config(NonZeroU8::new(3), true)];
    let since_epoch = match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(after) => time::Duration::try_from(after).ok(),
        Err(before) => time::Duration::try_from(before.duration()).ok().map(|d| -d),
    };
    let Some(at) = since_epoch.and_then(|d| OffsetDateTime::UNIX_EPOCH.checked_add(d)) else {
        let secs = since_epoch.map_or_else(|| format!("{t:?}"), |d| d.whole_seconds().to_string());
        return format!("{secs} s from the Unix epoch");
    };
    let text = match digits {
        None => at.format(&Iso8601::<{ SECONDS[0] }>).or_else(|_| at.format(&Iso8601::<{ SECONDS[1] }>)),
        Some(_) => at.format(&Iso8601::<{ MILLIS[0] }>).or_else(|_| at.format(&Iso8601::<{ MILLIS[1] }>)),
    };
    text.unwrap_or_else(|e| format!("{at} ({e})"))
}

/// A duration for people, to the second: `30 days`, `1 day 2 h`, `3 h 5 min`,
/// `45 s` (at most the two largest units).
pub(crate) fn duration_text(d: Duration) -> String {
    let secs = d.as_secs();
    let units = [(86_400, "day"), (3_600, "h"), (60, "min"), (1, "s")];
    let mut parts = Vec::new();
    let mut left = secs;
    for (size, name) in units {
        let n = left / size;
        left %= size;
        if n > 0 && parts.len() < 2 {
            parts.push(match (name, n) {
                ("day", 1) => "1 day".to_owned(),
                ("day", n) => format!("{n} days"),
                (name, n) => format!("{n} {name}"),
            });
        } else if !parts.is_empty() {
            break;
        }
    }
    if parts.is_empty() {
        "0 s".to_owned()
    } else {
        parts.join(" ")
    }
}

/// `t` and how long ago it was (or how soon it is, for `run_at` and
/// `locked_until`), by this machine's clock, to the second.
pub(crate) fn ago(t: SystemTime) -> String {
    let whole = duration_text;
    match SystemTime::now().duration_since(t) {
        Ok(age) => format!("{} ({} ago)", time(t), whole(age)),
        Err(ahead) => format!("{} (in {})", time(t), whole(ahead.duration())),
    }
}

pub(crate) fn opt_time(t: Option<SystemTime>) -> String {
    t.map_or_else(|| "-".to_owned(), ago)
}

pub(crate) fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED);
    t.set_header(header.to_vec());
    t
}

/// One row in full: `fields` as rows of `t`, then the payload, if shown,
/// after a line saying how it is printed (with its content type, if known).
pub(crate) fn detail_text(
    mut t: Table,
    fields: impl IntoIterator<Item = (&'static str, String)>,
    payload: Option<(Option<&str>, &[u8])>,
) -> String {
    for (name, value) in fields {
        t.add_row(vec![name.to_owned(), value]);
    }
    let mut out = format!("{t}\n");
    if let Some((content_type, bytes)) = payload {
        let (encoding, data) = payload_text(bytes);
        let label = if encoding == "utf8" { "UTF-8" } else { "not printable UTF-8, base64" };
        let label = match content_type {
            Some(content_type) => format!("{}, {label}", printable(content_type)),
            None => label.to_owned(),
        };
        out.push_str(&format!("payload ({label}):\n{data}\n"));
    }
    out
}

pub(crate) fn shorten(text: &str, max: usize) -> String {
    let text = printable(text);
    if text.chars().count() <= max {
        text
    } else {
        text.chars().take(max.saturating_sub(1)).chain(['…']).collect()
    }
}

pub(crate) fn row_json(r: &EventRow) -> Value {
    json!({
        "provider": r.provider,
        "scope": r.scope,
        "key": r.key,
        "event_type": r.event_type,
        "state": r.state,
        "attempts": r.attempts,
        "last_error": r.last_error,
        "response_status": r.response_status,
        "received_at": time_json(Some(r.received_at)),
        "last_failed_at": time_json(r.last_failed_at),
    })
}

pub(crate) fn rows_table(rows: &[EventRow]) -> String {
    let mut t = table(&[
        "provider",
        "scope",
        "key",
        "type",
        "state",
        "attempts",
        "status",
        "received",
        "last failed",
        "last error",
    ]);
    for r in rows {
        t.add_row(vec![
            printable(&r.provider),
            printable(&r.scope),
            printable(&r.key),
            r.event_type.as_deref().map_or_else(|| "-".into(), printable),
            r.state.clone(),
            r.attempts.to_string(),
            r.response_status.map_or_else(|| "-".into(), |s| s.to_string()),
            time(r.received_at),
            r.last_failed_at.map_or_else(|| "-".into(), time),
            r.last_error.as_deref().map_or_else(|| "-".into(), |e| shorten(e, 60)),
        ]);
    }
    t.to_string()
}

pub(crate) fn json_text(v: &Value) -> String {
    let mut s = webhook_idempotency::cli::json_safe(&serde_json::to_string_pretty(v).unwrap_or_default());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_before_1970_and_before_year_0_are_written_not_panicked_on() {
        let epoch = SystemTime::UNIX_EPOCH;
        let secs = Duration::from_secs;
        // As humantime wrote them, where it could (after 1970).
        for t in [epoch, epoch + secs(1_796_438_265) + Duration::from_millis(191), epoch + secs(253_402_300_799)] {
            assert_eq!(time(t), humantime::format_rfc3339_seconds(t).to_string());
            assert_eq!(time_json(Some(t)), json!(humantime::format_rfc3339_millis(t).to_string()));
        }
        let cases = [
            (epoch - secs(97_017_733) - Duration::from_millis(664), "1966-12-05T02:37:46Z", "1966-12-05T02:37:46.336Z"),
            (epoch - secs(62_167_219_200), "0000-01-01T00:00:00Z", "0000-01-01T00:00:00.000Z"),
            (epoch - secs(62_167_219_201), "-000001-12-31T23:59:59Z", "-000001-12-31T23:59:59.000Z"),
        ];
        for (t, seconds, millis) in cases {
            assert_eq!((time(t), time_json(Some(t))), (seconds.to_owned(), json!(millis)));
        }
        assert_eq!(time(epoch + secs(400_000 * 31_556_952)), "12622780800000 s from the Unix epoch");
    }

    #[test]
    fn durations_read_as_words() {
        for (secs, want) in [
            (0, "0 s"),
            (45, "45 s"),
            (185, "3 min 5 s"),
            (3 * 3_600 + 300, "3 h 5 min"),
            (86_400, "1 day"),
            (86_400 + 7_200 + 5, "1 day 2 h"),
            (30 * 86_400, "30 days"),
            (3 * 86_400 + 59, "3 days"),
        ] {
            assert_eq!(duration_text(Duration::from_secs(secs)), want, "{secs} s");
        }
    }
}
