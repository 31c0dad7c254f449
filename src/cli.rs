//! What the two commands, `webhook-admin` and `webhook-verify`, share
//! (feature `cli`; hidden from the docs, not API: it may change in any
//! release).
//!
//! One escaping rule for every line they print: text that senders control (event keys, types, errors, payloads)
//! must show an operator exactly what is stored, so two different keys never
//! look the same and no byte can drive the terminal.
//!
//! Escaped, by Unicode general category (Unicode Standard Annex #44,
//! <https://www.unicode.org/reports/tr44/#General_Category_Values>): every
//! control (`Cc`: C0, DEL, C1 such as U+009B CSI), format (`Cf`: bidi marks,
//! overrides and isolates such as U+061C and U+202E, U+00AD soft hyphen,
//! U+180E, U+206A..U+206F, zero-width characters, tag characters
//! U+E0000..U+E007F), separator other than the ASCII space (`Zs`, `Zl`
//! U+2028, `Zp` U+2029), private-use (`Co`), surrogate and unassigned (`Cn`)
//! character; and the default-ignorable characters outside those categories
//! that render as nothing (U+034F, the Hangul fillers U+115F, U+1160, U+3164,
//! U+FFA0, the variation selectors). The backslash is doubled so that an
//! escape can never be spelled by the text itself.

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory as _};

/// Whether `c` is escaped (see the [module docs](self)).
pub fn unsafe_to_print(c: char) -> bool {
    use GeneralCategory as G;
    match c.general_category() {
        G::Control | G::Format | G::LineSeparator | G::ParagraphSeparator | G::PrivateUse | G::Surrogate => true,
        G::Unassigned => true,
        G::SpaceSeparator => c != ' ',
        _ => matches!(
            c,
            '\u{034F}' | '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}'
                | '\u{180B}'..='\u{180D}' | '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}'
        ),
    }
}

/// `text` for a terminal line: each character [`unsafe_to_print`] as a
/// visible `\u{...}` escape (Rust's syntax), a backslash as `\\`, the rest as
/// it is.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if unsafe_to_print(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// A JSON document (as `serde_json` writes it) with every character
/// [`unsafe_to_print`] written as a JSON `\uXXXX` escape (a surrogate pair
/// past U+FFFF, RFC 8259 section 7), so `--json` output read on a terminal
/// cannot lie either. Such characters only stand inside strings, where the
/// escape means the same character: the document parses to the same value.
pub fn json_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if unsafe_to_print(c) && !matches!(c, '\n' | ' ') {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A command-line error of `command` (its subcommands' flags included),
/// worded without any value the user gave.
///
/// clap's own messages quote the rejected value (`invalid value 'whsec_...'
/// for '--repeat'`) or the unexpected argument (a secret typed without its
/// flag); this rebuilds the message from the error kind and the names of the
/// flags `command` defines, which are the only argument text it repeats.
pub fn usage_message(e: &clap::Error, command: &clap::Command) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    fn flags_of(command: &clap::Command, out: &mut Vec<String>) {
        out.extend(command.get_arguments().filter_map(|a| a.get_long()).map(|l| format!("--{l}")));
        for sub in command.get_subcommands() {
            flags_of(sub, out);
        }
    }
    let mut flags = Vec::new();
    flags_of(command, &mut flags);
    let known = |text: &str| -> bool {
        let flag = text.split([' ', '=']).next().unwrap_or_default();
        flags.iter().any(|f| f == flag)
    };
    let names = |kind: ContextKind| -> Vec<String> {
        match e.get(kind) {
            Some(ContextValue::String(s)) => known(s).then(|| s.clone()).into_iter().collect(),
            Some(ContextValue::Strings(v)) => v.iter().filter(|s| known(s)).cloned().collect(),
            _ => Vec::new(),
        }
    };
    let arg = names(ContextKind::InvalidArg).join(", ");
    let arg = if arg.is_empty() { "an argument".to_owned() } else { arg };
    let suggestion = match names(ContextKind::SuggestedArg).as_slice() {
        [] => String::new(),
        s => format!("; did you mean {}?", s.join(" or ")),
    };
    match e.kind() {
        ErrorKind::UnknownArgument => format!(
            "an argument is not one this command takes (not shown, as it may be a secret){suggestion}; \
             give a secret after its own --secret"
        ),
        ErrorKind::InvalidSubcommand => "not a subcommand of this command (not shown, as it may be a secret)".into(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => format!("invalid value (not shown) for {arg}"),
        ErrorKind::MissingRequiredArgument => format!("missing required arguments: {arg}"),
        ErrorKind::NoEquals => format!("{arg} needs its value after '='"),
        ErrorKind::ArgumentConflict => format!("{arg} given more than once or with a conflicting flag"),
        ErrorKind::TooManyValues | ErrorKind::TooFewValues | ErrorKind::WrongNumberOfValues => {
            format!("wrong number of values for {arg}")
        }
        ErrorKind::InvalidUtf8 => "an argument is not valid UTF-8".into(),
        ErrorKind::MissingSubcommand | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            "a subcommand is missing; see --help".into()
        }
        other => format!("invalid arguments ({other})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The characters of the third security review, each escaped in tables
    /// and in JSON.
    const INVISIBLE: &[char] = &[
        '\u{061C}',
        '\u{00AD}',
        '\u{180E}',
        '\u{206A}',
        '\u{206B}',
        '\u{206C}',
        '\u{206D}',
        '\u{206E}',
        '\u{206F}',
        '\u{2028}',
        '\u{2029}',
        '\u{E0001}',
        '\u{E0041}',
        '\u{E007F}',
        '\u{202E}',
        '\u{2066}',
        '\u{200B}',
        '\u{FEFF}',
        '\u{009B}',
        '\u{001B}',
        '\r',
        '\u{0085}',
        '\u{00A0}',
        '\u{3000}',
        '\u{3164}',
        '\u{FE0F}',
        '\u{E000}',
        '\u{0378}',
    ];

    #[test]
    fn every_invisible_control_format_and_separator_character_is_escaped() {
        for &c in INVISIBLE {
            let shown = printable(&format!("a{c}b"));
            assert!(shown.is_ascii(), "{:?} printed raw: {shown:?}", c);
            assert_eq!(shown, format!("a{}b", c.escape_unicode()), "{c:?}");
        }
    }

    #[test]
    fn visible_text_is_unchanged_and_escapes_cannot_be_spelled() {
        for text in ["evt_1Nx", "hello world", "café", "日本語", "emoji 🎉", "ünïcödé-key"] {
            assert_eq!(printable(text), text);
        }
        // A key that spells an escape is told apart from one that holds the character.
        assert_ne!(printable("a\\u{202e}b"), printable("a\u{202E}b"));
    }

    #[test]
    fn json_output_escapes_them_and_parses_to_the_same_value() {
        for &c in INVISIBLE {
            let value = serde_json::json!({ "key": format!("a{c}b"), "list": [format!("{c}")] });
            let text = json_safe(&serde_json::to_string_pretty(&value).unwrap());
            assert!(text.is_ascii(), "{c:?} printed raw in JSON: {text:?}");
            assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), value, "{c:?}");
        }
    }
}
