//! A strict JSON reader and the canonical encoding behind [`super::DerivedKey`].
//!
//! One pass over the body builds a tree whose numbers keep their literal
//! text, whose strings are decoded and whose object members are sorted by the
//! UTF-16 code units of their names (RFC 8785 §3.2.3) with duplicate names
//! refused. Time is linear in the body (plus the sort of each object's
//! members), and nesting is bounded by [`super::MAX_JSON_DEPTH`], so neither
//! the stack nor the running time depends on an attacker's choice of shape.
//!
//! The grammar is RFC 8259's, exactly: no comments, no trailing commas, no
//! leading zeros, no lone surrogates in `\u` escapes, UTF-8 only, nothing but
//! whitespace after the value.

use std::borrow::Cow;

use super::{KeyErrorKind, MAX_JSON_DEPTH};

/// A parsed JSON value; borrows from the body where no escape forces a copy.
#[derive(Debug)]
pub(crate) enum Node<'a> {
    Null,
    Bool(bool),
    /// The literal's text, checked against the RFC 8259 number grammar.
    Number(&'a str),
    String(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    /// Members sorted by the UTF-16 code units of their names; names unique.
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

/// Parses `body` as one JSON value.
///
/// # Errors
/// [`KeyErrorKind::BodyNotJson`] for anything that is not RFC 8259 JSON in
/// UTF-8, [`KeyErrorKind::TooDeep`] past [`MAX_JSON_DEPTH`] nested arrays
/// and objects, [`KeyErrorKind::DuplicateMember`] for an object naming one
/// member twice (after unescaping).
pub(crate) fn parse(body: &[u8]) -> Result<Node<'_>, KeyErrorKind> {
    let text = std::str::from_utf8(body).map_err(|_| KeyErrorKind::BodyNotJson)?;
    let mut p = Parser { text, bytes: body, pos: 0 };
    let value = p.value(0)?;
    p.skip_ws();
    if p.pos == body.len() {
        Ok(value)
    } else {
        Err(KeyErrorKind::BodyNotJson)
    }
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn eat(&mut self, literal: &str) -> Result<(), KeyErrorKind> {
        if self.bytes[self.pos..].starts_with(literal.as_bytes()) {
            self.pos += literal.len();
            Ok(())
        } else {
            Err(KeyErrorKind::BodyNotJson)
        }
    }

    /// A value at `depth` enclosing arrays and objects.
    fn value(&mut self, depth: usize) -> Result<Node<'a>, KeyErrorKind> {
        self.skip_ws();
        match self.peek().ok_or(KeyErrorKind::BodyNotJson)? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(Node::String),
            b't' => self.eat("true").map(|()| Node::Bool(true)),
            b'f' => self.eat("false").map(|()| Node::Bool(false)),
            b'n' => self.eat("null").map(|()| Node::Null),
            b'-' | b'0'..=b'9' => self.number().map(Node::Number),
            _ => Err(KeyErrorKind::BodyNotJson),
        }
    }

    /// The elements of the array or object opening at `pos`, read by
    /// `element` and separated by commas up to `close` (`]` or `}`).
    fn elements<T>(
        &mut self,
        depth: usize,
        close: u8,
        mut element: impl FnMut(&mut Self) -> Result<T, KeyErrorKind>,
    ) -> Result<Vec<T>, KeyErrorKind> {
        if depth > MAX_JSON_DEPTH {
            return Err(KeyErrorKind::TooDeep);
        }
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(close) {
            self.pos += 1;
            return Ok(items);
        }
        loop {
            items.push(element(self)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok(items);
                }
                _ => return Err(KeyErrorKind::BodyNotJson),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Node<'a>, KeyErrorKind> {
        Ok(Node::Array(self.elements(depth, b']', |p| p.value(depth))?))
    }

    fn object(&mut self, depth: usize) -> Result<Node<'a>, KeyErrorKind> {
        let mut members = self.elements(depth, b'}', |p| {
            p.skip_ws();
            if p.peek() != Some(b'"') {
                return Err(KeyErrorKind::BodyNotJson);
            }
            let name = p.string()?;
            p.skip_ws();
            p.eat(":")?;
            Ok((name, p.value(depth)?))
        })?;
        // RFC 8785 §3.2.3: sort by the names' UTF-16 code units. Stable, so
        // equal names end up next to each other.
        members.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
        if members.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(KeyErrorKind::DuplicateMember);
        }
        Ok(Node::Object(members))
    }

    /// A string; `pos` is at its opening quote.
    fn string(&mut self) -> Result<Cow<'a, str>, KeyErrorKind> {
        self.pos += 1;
        let mut start = self.pos;
        let mut owned: Option<String> = None;
        loop {
            let b = self.peek().ok_or(KeyErrorKind::BodyNotJson)?;
            match b {
                b'"' => {
                    let tail = &self.text[start..self.pos];
                    self.pos += 1;
                    return Ok(match owned {
                        None => Cow::Borrowed(tail),
                        Some(mut s) => {
                            s.push_str(tail);
                            Cow::Owned(s)
                        }
                    });
                }
                b'\\' => {
                    let s = owned.get_or_insert_with(String::new);
                    s.push_str(&self.text[start..self.pos]);
                    self.pos += 1;
                    let escape = self.peek().ok_or(KeyErrorKind::BodyNotJson)?;
                    self.pos += 1;
                    match escape {
                        b'"' => s.push('"'),
                        b'\\' => s.push('\\'),
                        b'/' => s.push('/'),
                        b'b' => s.push('\u{8}'),
                        b'f' => s.push('\u{c}'),
                        b'n' => s.push('\n'),
                        b'r' => s.push('\r'),
                        b't' => s.push('\t'),
                        b'u' => s.push(self.unicode_escape()?),
                        _ => return Err(KeyErrorKind::BodyNotJson),
                    }
                    start = self.pos;
                }
                0x00..=0x1f => return Err(KeyErrorKind::BodyNotJson),
                // The body is valid UTF-8, and `"` and `\` never occur inside
                // a multi-byte sequence, so slicing at them is safe.
                _ => self.pos += 1,
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, KeyErrorKind> {
        let digits = self.bytes.get(self.pos..self.pos + 4).ok_or(KeyErrorKind::BodyNotJson)?;
        let mut n = 0;
        for &d in digits {
            n = n * 16 + char::from(d).to_digit(16).ok_or(KeyErrorKind::BodyNotJson)?;
        }
        self.pos += 4;
        Ok(n)
    }

    /// The character of a `\u` escape (`\u` already read), joining a
    /// surrogate pair; a lone surrogate is not JSON text a string can hold.
    fn unicode_escape(&mut self) -> Result<char, KeyErrorKind> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                self.eat("\\u")?;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(KeyErrorKind::BodyNotJson);
                }
                0x1_0000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            _ => first,
        };
        char::from_u32(code).ok_or(KeyErrorKind::BodyNotJson)
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Result<&'a str, KeyErrorKind> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(KeyErrorKind::BodyNotJson),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(KeyErrorKind::BodyNotJson);
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(KeyErrorKind::BodyNotJson);
            }
        }
        Ok(&self.text[start..self.pos])
    }
}

impl<'a> Node<'a> {
    /// The value at JSON Pointer `pointer` (RFC 6901), resolved as
    /// `serde_json::Value::pointer` does.
    pub(crate) fn pointer(&self, pointer: &str) -> Option<&Node<'a>> {
        if pointer.is_empty() {
            return Some(self);
        }
        let rest = pointer.strip_prefix('/')?;
        rest.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).try_fold(self, |node, token| match node {
            Node::Object(members) => members.iter().find(|(name, _)| *name == token).map(|(_, v)| v),
            Node::Array(items) => {
                if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
                    return None;
                }
                items.get(token.parse::<usize>().ok()?)
            }
            _ => None,
        })
    }
}

/// Appends the canonical encoding of `node` to `out`.
///
/// This is RFC 8785 (JCS) except for numbers, which are written from their
/// exact decimal value in the ECMAScript `Number::toString` layout that JCS
/// uses for doubles; see [`number`].
///
/// # Errors
/// [`KeyErrorKind::Invalid`] for a number whose exponent has more than 15
/// digits.
pub(crate) fn write_canonical(node: &Node<'_>, out: &mut Vec<u8>) -> Result<(), KeyErrorKind> {
    match node {
        Node::Null => out.extend_from_slice(b"null"),
        Node::Bool(true) => out.extend_from_slice(b"true"),
        Node::Bool(false) => out.extend_from_slice(b"false"),
        Node::Number(text) => number(text, out)?,
        Node::String(s) => string(s, out),
        Node::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out)?;
            }
            out.push(b']');
        }
        Node::Object(members) => {
            out.push(b'{');
            for (i, (name, value)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(name, out);
                out.push(b':');
                write_canonical(value, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// RFC 8785 §3.2.2.2: `"` and `\` escaped, U+0008, U+0009, U+000A, U+000C
/// and U+000D as `\b \t \n \f \r`, other controls below U+0020 as `\u00xx`
/// (lowercase hex), everything else as its UTF-8.
fn string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0x00..=0x1f => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// Writes the number literal `text` (RFC 8259 grammar, already checked) as
/// its exact decimal value: with the significant digits `s` (no leading or
/// trailing zeros, `k` of them) and the value `0.s × 10^n`, the layout is
/// ECMAScript's `Number::toString` (ECMA-262 §6.1.6.1.20), which RFC 8785
/// §3.2.2.3 applies to the shortest digits of a double. So every literal
/// whose exact value is what a double's shortest form spells (`1`, `1.5`,
/// `1e2`, `0.1`, any integer up to 2^53) is written exactly as RFC 8785
/// writes it, and any other literal (`9007199254740993`,
/// `1.0000000000000001`, `1e400`) keeps its exact value instead of being
/// rounded onto a neighbour's encoding. Zero is `0` whatever its sign.
fn number(text: &str, out: &mut Vec<u8>) -> Result<(), KeyErrorKind> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], &unsigned[i + 1..]),
        None => (unsigned, "0"),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let (exp_negative, exp_digits) = match exponent.as_bytes().first() {
        Some(b'-') => (true, &exponent[1..]),
        Some(b'+') => (false, &exponent[1..]),
        _ => (false, exponent),
    };
    let exp_digits = exp_digits.trim_start_matches('0');
    if exp_digits.len() > 15 {
        return Err(KeyErrorKind::Invalid);
    }
    let exp = exp_digits.parse::<i64>().unwrap_or(0);
    let exp = if exp_negative { -exp } else { exp };

    // Significant digits and the position of the decimal point among them.
    let all: Vec<u8> = int.bytes().chain(frac.bytes()).collect();
    let leading = all.iter().take_while(|&&d| d == b'0').count();
    let digits = &all[leading..];
    let digits = &digits[..digits.len() - digits.iter().rev().take_while(|&&d| d == b'0').count()];
    if digits.is_empty() {
        out.push(b'0');
        return Ok(());
    }
    let k = digits.len() as i64;
    let n = int.len() as i64 - leading as i64 + exp;
    if negative {
        out.push(b'-');
    }
    if k <= n && n <= 21 {
        out.extend_from_slice(digits);
        out.resize(out.len() + (n - k) as usize, b'0');
    } else if 0 < n && n <= 21 {
        out.extend_from_slice(&digits[..n as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-n) as usize, b'0');
        out.extend_from_slice(digits);
    } else {
        out.push(digits[0]);
        if k > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if n - 1 < 0 { b'-' } else { b'+' });
        out.extend_from_slice((n - 1).unsigned_abs().to_string().as_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> Result<String, KeyErrorKind> {
        let mut out = Vec::new();
        write_canonical(&parse(text.as_bytes())?, &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn numbers() {
        let cases: &[(&str, &str, &str)] = &[
            ("zero", "0", "0"),
            ("negative zero", "-0.0e7", "0"),
            ("small integer", "42", "42"),
            ("float one", "1.0", "1"),
            ("exponent", "1E2", "100"),
            ("fraction", "12.50", "12.5"),
            ("small fraction", "0.000001", "0.000001"),
            ("smaller fraction", "0.0000001", "1e-7"),
            ("2^53", "9007199254740992", "9007199254740992"),
            ("2^53 + 1 exact", "9007199254740993", "9007199254740993"),
            ("beyond u64", "18446744073709551617", "18446744073709551617"),
            ("1e21", "1000000000000000000000", "1e+21"),
            ("21 digits", "100000000000000000000", "100000000000000000000"),
            ("over-precise", "1.0000000000000001", "1.0000000000000001"),
            ("huge exponent", "-2.5e400", "-2.5e+400"),
            ("exponent with zeros", "5e-0000000000000000000001", "0.5"),
        ];
        for (name, text, want) in cases {
            assert_eq!(canonical(text).as_deref(), Ok(*want), "{name}");
        }
        assert_eq!(canonical("1e1234567890123456"), Err(KeyErrorKind::Invalid), "exponent beyond 15 digits");
    }

    #[test]
    fn grammar() {
        let cases: &[(&str, &[u8], Result<&str, KeyErrorKind>)] = &[
            (
                "sorted by UTF-16",
                "{\"\u{e000}\":1,\"\u{10000}\":2,\"b\":3}".as_bytes(),
                Ok("{\"b\":3,\"\u{10000}\":2,\"\u{e000}\":1}"),
            ),
            ("escapes", br#""\u0041\/\ud83d\ude00\u001f\u007f""#, Ok("\"A/\u{1f600}\\u001f\u{7f}\"")),
            ("whitespace", b" \t\r\n[ 1 , {} ] \n", Ok("[1,{}]")),
            ("duplicate member", br#"{"a":1,"a":1}"#, Err(KeyErrorKind::DuplicateMember)),
            ("duplicate after unescaping", br#"{"a":1,"\u0061":2}"#, Err(KeyErrorKind::DuplicateMember)),
            ("nested duplicate", br#"[{"x":{"b":1,"b":2}}]"#, Err(KeyErrorKind::DuplicateMember)),
            ("lone high surrogate", br#""\ud800""#, Err(KeyErrorKind::BodyNotJson)),
            ("lone low surrogate", br#""\udc00""#, Err(KeyErrorKind::BodyNotJson)),
            ("raw control", b"\"a\x01\"", Err(KeyErrorKind::BodyNotJson)),
            ("leading zero", b"01", Err(KeyErrorKind::BodyNotJson)),
            ("bare point", b"1.", Err(KeyErrorKind::BodyNotJson)),
            ("trailing comma", b"[1,]", Err(KeyErrorKind::BodyNotJson)),
            ("trailing text", b"{} x", Err(KeyErrorKind::BodyNotJson)),
            ("empty", b"", Err(KeyErrorKind::BodyNotJson)),
            ("not utf-8", b"\"\xff\"", Err(KeyErrorKind::BodyNotJson)),
            ("bad escape", br#""\x""#, Err(KeyErrorKind::BodyNotJson)),
            ("unclosed", b"[1", Err(KeyErrorKind::BodyNotJson)),
        ];
        for (name, body, want) in cases {
            let got = parse(body).and_then(|n| {
                let mut out = Vec::new();
                write_canonical(&n, &mut out).map(|()| String::from_utf8(out).unwrap())
            });
            assert_eq!(got.as_deref().map_err(|e| *e), *want, "{name}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

        /// On short token soups (no exponents, so no number out of a
        /// double's range), this reader accepts exactly what `serde_json`
        /// accepts, except that it refuses duplicate member names.
        #[test]
        fn accepts_what_serde_json_accepts(tokens in proptest::collection::vec(proptest::sample::select(&[
            "{", "}", "[", "]", ",", ":", " ", "\"a\"", "\"b\"", "\"", "\\", "\\u00e9", "\\ud83d", "\\ude00", "\\ud83d\\ude00", "\\n",
            "\\x", "1", "0", "-", ".", "true", "null", "\u{1}", "\u{e9}",
        ][..]), 0..14)) {
            let text = tokens.concat();
            let ours = parse(text.as_bytes()).map(|_| ());
            let theirs = serde_json::from_str::<serde_json::Value>(&text).map(|_| ());
            match ours {
                Err(KeyErrorKind::DuplicateMember) => proptest::prop_assert!(theirs.is_ok(), "{}", text),
                _ => proptest::prop_assert_eq!(ours.is_ok(), theirs.is_ok(), "{}", text),
            }
        }
    }

    #[test]
    fn depth_limit() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(nested(MAX_JSON_DEPTH).as_bytes()).is_ok());
        assert_eq!(parse(nested(MAX_JSON_DEPTH + 1).as_bytes()).unwrap_err(), KeyErrorKind::TooDeep);
        let objects = format!("{}1{}", r#"{"a":"#.repeat(MAX_JSON_DEPTH + 1), "}".repeat(MAX_JSON_DEPTH + 1));
        assert_eq!(parse(objects.as_bytes()).unwrap_err(), KeyErrorKind::TooDeep);
    }

    #[test]
    fn pointers() {
        let doc = parse(br#"{"a/b":{"m~n":[10,20]},"":0}"#).unwrap();
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("whole", "", Some(r#"{"":0,"a/b":{"m~n":[10,20]}}"#)),
            ("escaped", "/a~1b/m~0n/1", Some("20")),
            ("empty name", "/", Some("0")),
            ("leading zero index", "/a~1b/m~0n/01", None),
            ("plus index", "/a~1b/m~0n/+1", None),
            ("no slash", "a", None),
            ("absent", "/x", None),
        ];
        for (name, pointer, want) in cases {
            let got = doc.pointer(pointer).map(|n| {
                let mut out = Vec::new();
                write_canonical(n, &mut out).unwrap();
                String::from_utf8(out).unwrap()
            });
            assert_eq!(got.as_deref(), *want, "{name}");
        }
    }
}
