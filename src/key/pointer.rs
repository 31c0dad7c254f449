//! JSON Pointer (RFC 6901) look-ups in one streaming pass over a body,
//! without building the document: only the values the pointers name are
//! copied, everything else is skipped (`serde::de::IgnoredAny`, which
//! serde_json reads without recursion: nesting costs no stack). The whole
//! body is still parsed and checked (syntax, trailing bytes; the values on a
//! pointer's path within serde_json's 128-level recursion limit), and of
//! duplicate members the last one counts, as `serde_json::Value::pointer`
//! over a parsed document would answer.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// What a pointer names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// A string (possibly empty).
    Str(String),
    /// A 64-bit integer (signed or unsigned), in decimal.
    Int(String),
    /// Anything else: a fraction or an integer beyond 64 bits, `true`,
    /// `null`, an object, an array.
    Other,
}

/// The values at `pointers` (each `""` or `/`-separated, `~0`/`~1`
/// escapes), `None` where a pointer names nothing; `Err` when the body is not
/// JSON (or nested deeper than 128 levels).
pub(crate) fn find<const N: usize>(body: &[u8], pointers: [&str; N]) -> Result<[Option<Found>; N], ()> {
    let paths: Vec<Option<Vec<String>>> = pointers.iter().map(|p| segments(p)).collect();
    let mut found: [Option<Found>; N] = std::array::from_fn(|_| None);
    let active: Vec<Target<'_>> =
        paths.iter().enumerate().filter_map(|(slot, p)| p.as_deref().map(|path| Target { slot, path })).collect();
    let mut de = serde_json::Deserializer::from_slice(body);
    Walk { targets: &active, found: &mut found }.deserialize(&mut de).map_err(drop)?;
    de.end().map_err(drop)?;
    Ok(found)
}

/// RFC 6901 reference tokens; `None` for a pointer that is neither empty
/// nor starts with `/` (it names nothing).
fn segments(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    Some(rest.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect())
}

/// An array index token: digits, no sign, no leading zero (RFC 6901 §4).
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
        return None;
    }
    token.parse().ok()
}

/// A pointer still being followed: the segments left, and where its answer
/// goes.
#[derive(Clone, Copy)]
struct Target<'p> {
    slot: usize,
    path: &'p [String],
}

/// Follows `targets` into the value being read.
struct Walk<'a, 'p> {
    targets: &'a [Target<'p>],
    found: &'a mut [Option<Found>],
}

impl<'p> Walk<'_, 'p> {
    /// Records `what` for every target that ends here.
    fn leaf(&mut self, what: impl Fn() -> Found) {
        for t in self.targets.iter().filter(|t| t.path.is_empty()) {
            self.found[t.slot] = Some(what());
        }
    }

    /// The targets that continue into member or element `token`, one
    /// segment further; a later occurrence of the same member replaces
    /// what an earlier one gave (their slots are cleared).
    fn enter(&mut self, matches: impl Fn(&str) -> bool) -> Vec<Target<'p>> {
        let next: Vec<Target<'p>> = self
            .targets
            .iter()
            .filter(|t| t.path.first().is_some_and(|s| matches(s)))
            .map(|t| Target { slot: t.slot, path: &t.path[1..] })
            .collect();
        for t in &next {
            self.found[t.slot] = None;
        }
        next
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.targets.is_empty() {
            d.deserialize_ignored_any(IgnoredAny).map(drop)
        } else {
            d.deserialize_any(self)
        }
    }
}

impl<'de> Visitor<'de> for Walk<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<(), E> {
        self.leaf(|| Found::Str(v.to_owned()));
        Ok(())
    }

    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<(), E> {
        self.leaf(|| Found::Int(v.to_string()));
        Ok(())
    }

    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<(), E> {
        self.leaf(|| Found::Int(v.to_string()));
        Ok(())
    }

    fn visit_f64<E: de::Error>(mut self, _: f64) -> Result<(), E> {
        self.leaf(|| Found::Other);
        Ok(())
    }

    fn visit_bool<E: de::Error>(mut self, _: bool) -> Result<(), E> {
        self.leaf(|| Found::Other);
        Ok(())
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<(), E> {
        self.leaf(|| Found::Other);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.leaf(|| Found::Other);
        while let Some(name) = map.next_key_seed(MemberName(self.targets))? {
            match name {
                Some(name) => {
                    let targets = self.enter(|s| s == name);
                    map.next_value_seed(Walk { targets: &targets, found: &mut *self.found })?;
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.leaf(|| Found::Other);
        let mut i = 0usize;
        loop {
            let targets = self.enter(|s| index(s) == Some(i));
            if seq.next_element_seed(Walk { targets: &targets, found: &mut *self.found })?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }
}

/// Reads a member name, keeping it only when some target continues through
/// it (compared without allocating when it is not).
struct MemberName<'a, 'p>(&'a [Target<'p>]);

impl<'de> DeserializeSeed<'de> for MemberName<'_, '_> {
    type Value = Option<String>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for MemberName<'_, '_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<String>, E> {
        Ok(self.0.iter().any(|t| t.path.first().is_some_and(|s| s == v)).then(|| v.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streaming reader answers what `serde_json::Value::pointer` over
    /// the parsed document answers.
    #[test]
    fn answers_as_value_pointer_does() {
        let bodies = [
            r#"{"id":"evt_1","type":"a.b","data":{"object":{"id":7,"list":[1,{"x":"y"}]}}}"#,
            r#"{"id":"first","id":"last"}"#,
            r#"{"id":{"deep":1},"id":"last"}"#,
            r#"{"id":"last-wins","id":{"x":1}}"#,
            r#"{"a/b":{"c~d":"escaped"},"":"empty name","n":-42,"f":1.5,"big":18446744073709551616,"t":true,"z":null,"e":""}"#,
            r#"[10,20,{"k":"v"}]"#,
            r#""top""#,
        ];
        let pointers = [
            "",
            "/id",
            "/type",
            "/data/object/id",
            "/data/object/list/1/x",
            "/data/object/list/01",
            "/a~1b/c~0d",
            "/",
            "/n",
            "/f",
            "/big",
            "/t",
            "/z",
            "/e",
            "/2/k",
            "/0",
            "/+0",
            "/3",
            "/id/deep",
            "id",
            "/missing",
        ];
        for body in bodies {
            let doc: serde_json::Value = serde_json::from_str(body).unwrap();
            for pointer in pointers {
                let expected = doc.pointer(pointer).map(|v| match v {
                    serde_json::Value::String(s) => Found::Str(s.clone()),
                    serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Found::Int(n.to_string()),
                    _ => Found::Other,
                });
                let [got] = find(body.as_bytes(), [pointer]).unwrap();
                assert_eq!(got, expected, "{pointer} in {body}");
            }
        }
    }

    #[test]
    fn refuses_what_is_not_json() {
        let unclosed = format!(r#"{{"id":"x","deep":{}1}}"#, "[".repeat(100_000));
        for body in ["", "{", r#"{"id":"x"} trailing"#, r#"{"id":"x",}"#, unclosed.as_str()] {
            assert!(find(body.as_bytes(), ["/id"]).is_err(), "{body:.40}");
        }
    }

    /// Skipped values are read without recursion: nesting costs no stack.
    #[test]
    fn deep_nesting_outside_the_pointers_is_read_without_recursion() {
        let n = 100_000;
        let body = format!(r#"{{"deep":{}1{},"id":"evt_deep"}}"#, "[".repeat(n), "]".repeat(n));
        assert_eq!(find(body.as_bytes(), ["/id"]).unwrap(), [Some(Found::Str("evt_deep".into()))]);
    }
}
