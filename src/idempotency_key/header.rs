//! Reading the `Idempotency-Key` header.
//!
//! The draft defines the field as an RFC 8941 Item whose value is a String
//! (`Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`; IETF httpapi,
//! "The Idempotency-Key HTTP Header Field", draft -07, section 2.1; RFC 8941
//! section 3.3.3). Clients in practice send the bare value
//! (`Idempotency-Key: 8e03978e-...`, as Stripe's and Adyen's SDKs do), so
//! both forms are read:
//! - quoted: `"` then printable ASCII (0x20–0x7E) with `\"` and `\\` as the
//!   only escapes, then `"`; nothing may follow but spaces (parameters,
//!   `;a=1`, are refused rather than silently dropped);
//! - bare: printable ASCII without spaces, quotes or backslashes.
//!
//! Either way the key is the unquoted text, 1 to [`MAX_KEY_BYTES`] bytes.
//! A field sent twice (two header lines, or one line with a list) is
//! refused: the request has no single key.

use http::HeaderMap;

/// The longest key accepted: 255 bytes (the column's limit; Stripe allows
/// 255 characters, <https://docs.stripe.com/api/idempotent_requests>).
pub const MAX_KEY_BYTES: usize = 255;

/// Why the header could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyProblem {
    /// No `Idempotency-Key` header.
    Missing,
    /// Not a string item or bare key of 1 to 255 printable ASCII bytes, or
    /// sent more than once.
    Malformed(&'static str),
}

/// The key of `headers`' `Idempotency-Key` field.
pub(crate) fn read(headers: &HeaderMap) -> Result<String, KeyProblem> {
    let mut values = headers.get_all("idempotency-key").iter();
    let value = values.next().ok_or(KeyProblem::Missing)?;
    if values.next().is_some() {
        return Err(KeyProblem::Malformed("the Idempotency-Key header is sent more than once"));
    }
    parse(value.as_bytes())
}

/// One field value: a quoted string item or a bare key (see the module docs).
pub(crate) fn parse(raw: &[u8]) -> Result<String, KeyProblem> {
    let value = trim(raw);
    let key = match value.first() {
        Some(b'"') => unquote(value)?,
        Some(_) => {
            let bare = |b: &u8| (0x21..=0x7e).contains(b) && !matches!(b, b'"' | b'\\' | b',');
            if !value.iter().all(bare) {
                return Err(KeyProblem::Malformed(
                    "a bare Idempotency-Key must be printable ASCII without spaces, quotes, backslashes or commas",
                ));
            }
            value.to_vec()
        }
        None => return Err(KeyProblem::Malformed("the Idempotency-Key header is empty")),
    };
    if key.is_empty() {
        return Err(KeyProblem::Malformed("the Idempotency-Key is empty"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(KeyProblem::Malformed("the Idempotency-Key is longer than 255 bytes"));
    }
    // Only printable ASCII got here.
    String::from_utf8(key).map_err(|_| KeyProblem::Malformed("the Idempotency-Key is not ASCII"))
}

fn trim(raw: &[u8]) -> &[u8] {
    let start = raw.iter().position(|b| *b != b' ' && *b != b'\t').unwrap_or(raw.len());
    let end = raw.iter().rposition(|b| *b != b' ' && *b != b'\t').map_or(start, |i| i + 1);
    &raw[start..end]
}

/// RFC 8941 section 4.2.5, "Parsing a String".
fn unquote(value: &[u8]) -> Result<Vec<u8>, KeyProblem> {
    let mut key = Vec::with_capacity(value.len());
    let mut bytes = value[1..].iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(&escaped @ (b'"' | b'\\')) => key.push(escaped),
                _ => return Err(KeyProblem::Malformed("the quoted Idempotency-Key has an invalid escape")),
            },
            b'"' => {
                return match bytes.as_slice().is_empty() {
                    true => Ok(key),
                    false => Err(KeyProblem::Malformed(
                        "the Idempotency-Key has text after its closing quote (parameters are not accepted)",
                    )),
                };
            }
            0x20..=0x7e => key.push(b),
            _ => return Err(KeyProblem::Malformed("the quoted Idempotency-Key has a byte outside printable ASCII")),
        }
    }
    Err(KeyProblem::Malformed("the quoted Idempotency-Key has no closing quote"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drafts_string_item_and_the_bare_form_give_the_same_key() {
        let uuid = "8e03978e-40d5-43e8-bc93-6894a57f9324";
        assert_eq!(parse(format!("\"{uuid}\"").as_bytes()), Ok(uuid.to_owned()));
        assert_eq!(parse(uuid.as_bytes()), Ok(uuid.to_owned()));
        assert_eq!(parse(format!("  \"{uuid}\" ").as_bytes()), Ok(uuid.to_owned()));
    }

    #[test]
    fn escapes_and_spaces_inside_quotes_are_read_as_rfc_8941_strings() {
        assert_eq!(parse(br#""a \"b\" \\ c""#), Ok(r#"a "b" \ c"#.to_owned()));
        assert!(matches!(parse(br#""a\nb""#), Err(KeyProblem::Malformed(_))));
        assert!(matches!(parse(br#""open"#), Err(KeyProblem::Malformed(_))));
        assert!(matches!(parse(br#""k";p=1"#), Err(KeyProblem::Malformed(_))));
        assert!(matches!(parse("\"caf\u{e9}\"".as_bytes()), Err(KeyProblem::Malformed(_))));
    }

    #[test]
    fn keys_are_one_to_255_bytes_and_bare_keys_have_no_spaces() {
        assert!(matches!(parse(b""), Err(KeyProblem::Malformed(_))));
        assert!(matches!(parse(b"\"\""), Err(KeyProblem::Malformed(_))));
        assert_eq!(parse("k".repeat(255).as_bytes()).map(|k| k.len()), Ok(255));
        assert!(matches!(parse("k".repeat(256).as_bytes()), Err(KeyProblem::Malformed(_))));
        assert!(matches!(parse(b"two words"), Err(KeyProblem::Malformed(_))));
        assert!(matches!(parse(b"a,b"), Err(KeyProblem::Malformed(_))));
    }

    #[test]
    fn a_missing_or_repeated_header_has_no_key() {
        let mut headers = HeaderMap::new();
        assert_eq!(read(&headers), Err(KeyProblem::Missing));
        headers.append("idempotency-key", "a".parse().unwrap());
        assert_eq!(read(&headers), Ok("a".to_owned()));
        headers.append("idempotency-key", "b".parse().unwrap());
        assert!(matches!(read(&headers), Err(KeyProblem::Malformed(_))));
    }
}
