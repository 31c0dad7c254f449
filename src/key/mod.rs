//! Finding the idempotency key (event key) and event type of a delivery.
//!
//! The key must be equal across every delivery of one event and never a
//! receipt time, a request id generated here or a retry count. Presets use
//! the provider's documented event id; [`HeaderKey`] and [`JsonPointerKey`]
//! cover senders that put it in a header or in the JSON body, and closures
//! with the signature of [`KeyExtractor::extract`] cover the rest.

pub(crate) mod json;
mod pointer;

/// The identity of the event a delivery carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventIdentity {
    /// The idempotency key: equal on every delivery of the event.
    pub key: String,
    /// The event type (`payment_intent.succeeded`, `push`), when the sender
    /// says it.
    pub event_type: Option<String>,
}

/// Extracts the [`EventIdentity`] from a verified delivery.
///
/// Runs after signature verification, so it may trust the bytes it reads.
/// A blanket implementation covers closures
/// `Fn(&http::request::Parts, &[u8]) -> Result<EventIdentity, KeyError>`.
pub trait KeyExtractor: Send + Sync + 'static {
    /// Reads the event key (and type) from the request head or the raw body.
    ///
    /// # Errors
    /// A [`KeyError`] when no key can be found; the layer answers 400.
    fn extract(&self, parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError>;
}

impl<F> KeyExtractor for F
where
    F: Fn(&http::request::Parts, &[u8]) -> Result<EventIdentity, KeyError> + Send + Sync + 'static,
{
    fn extract(&self, parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        self(parts, body)
    }
}

/// Why no event key could be extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyErrorKind {
    /// The header or JSON field holding the key is absent or empty.
    Missing,
    /// The key is present but not a usable value (not a string or number,
    /// not visible ASCII/UTF-8 in a header).
    Invalid,
    /// The body is not JSON, so a JSON pointer cannot be read.
    BodyNotJson,
    /// The key (or event type) is longer than [`MAX_KEY_BYTES`] bytes.
    TooLong,
    /// The key (or event type) contains a NUL byte, which PostgreSQL `text`
    /// cannot store.
    ContainsNul,
    /// The JSON body nests arrays and objects deeper than
    /// [`MAX_JSON_DEPTH`] levels ([`DerivedKey`]).
    TooDeep,
    /// A JSON object in the body names one member twice ([`DerivedKey`]):
    /// which of the two values the event means is ambiguous, and RFC 8785
    /// §3.1 requires I-JSON (RFC 7493 §2.3: names unique).
    DuplicateMember,
    /// The event type is present but empty, longer than [`MAX_KEY_BYTES`]
    /// bytes, or contains NUL.
    InvalidEventType,
}

/// Longest event key, event type and scope accepted, in bytes. The shipped
/// schema enforces the same bound.
pub const MAX_KEY_BYTES: usize = 512;

/// Deepest nesting of JSON arrays and objects [`DerivedKey`] reads, in
/// levels (`[[1]]` has 2); a deeper body is [`KeyErrorKind::TooDeep`]
/// (400). Bounds the stack of the recursive reader and writer.
pub const MAX_JSON_DEPTH: usize = 128;

impl KeyErrorKind {
    /// A stable `snake_case` name for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "key_missing",
            Self::Invalid => "key_invalid",
            Self::BodyNotJson => "body_not_json",
            Self::TooLong => "key_too_long",
            Self::ContainsNul => "key_contains_nul",
            Self::TooDeep => "json_too_deep",
            Self::DuplicateMember => "json_duplicate_member",
            Self::InvalidEventType => "event_type_invalid",
        }
    }
}

kind_error! {
    /// A failed key extraction; the layer answers 400 and stores nothing.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct KeyError(KeyErrorKind);
    /// An error of the given kind.
    fn new();
    /// Why extraction failed.
    fn kind();
    display: |kind, f| write!(f, "no usable event key: {}", kind.as_str());
}

/// Checks a key, type or scope fits the store: 1 to [`MAX_KEY_BYTES`] bytes,
/// no NUL.
pub(crate) fn validate(value: &str) -> Result<(), KeyErrorKind> {
    if value.is_empty() {
        Err(KeyErrorKind::Missing)
    } else if value.len() > MAX_KEY_BYTES {
        Err(KeyErrorKind::TooLong)
    } else if value.contains('\0') {
        Err(KeyErrorKind::ContainsNul)
    } else {
        Ok(())
    }
}

/// The event key (and optionally the type) from request headers.
#[derive(Debug, Clone)]
#[must_use]
pub struct HeaderKey {
    key: http::HeaderName,
    event_type: Option<http::HeaderName>,
}

impl HeaderKey {
    /// The key from header `key` (for example `X-GitHub-Delivery`).
    pub fn new(key: http::HeaderName) -> Self {
        Self { key, event_type: None }
    }

    setters! {
        /// Also read the event type from header `name`.
        pub fn event_type(name: http::HeaderName) => event_type = Some(name);
    }
}

/// The one value of header `name`, trimmed: `None` when absent or blank;
/// [`KeyErrorKind::Invalid`] for two different values (the key would be
/// ambiguous) or one that is not visible ASCII.
pub(crate) fn header_str(
    parts: &http::request::Parts,
    name: impl http::header::AsHeaderName,
) -> Result<Option<String>, KeyError> {
    let mut values = parts.headers.get_all(name).iter();
    let Some(first) = values.next() else { return Ok(None) };
    // Two different values for the one header make the key ambiguous.
    if values.any(|v| v != first) {
        return Err(KeyErrorKind::Invalid.into());
    }
    let s = first.to_str().map_err(|_| KeyErrorKind::Invalid)?.trim();
    Ok((!s.is_empty()).then(|| s.to_owned()))
}

/// The non-empty string at JSON Pointer `pointer` in `body`, if the body is
/// JSON and has one there: the event type of the presets that read it so.
#[cfg(any(feature = "twitch", feature = "standard-webhooks"))]
pub(crate) fn json_text(body: &[u8], pointer: &str) -> Option<String> {
    let doc = serde_json::from_slice::<serde_json::Value>(body).ok()?;
    doc.pointer(pointer)?.as_str().filter(|t| !t.is_empty()).map(str::to_owned)
}

impl KeyExtractor for HeaderKey {
    fn extract(&self, parts: &http::request::Parts, _body: &[u8]) -> Result<EventIdentity, KeyError> {
        let key = header_str(parts, &self.key)?.ok_or(KeyErrorKind::Missing)?;
        let event_type = match &self.event_type {
            Some(name) => header_str(parts, name)?,
            None => None,
        };
        Ok(EventIdentity { key, event_type })
    }
}

/// The event key (and optionally the type) from the JSON body, by JSON
/// Pointer (RFC 6901), for example `/id` and `/type` for Stripe.
///
/// **Key encoding.** A string is the key as it is (`"evt_1"` → `evt_1`);
/// an integer (64-bit, signed or unsigned) is [`INTEGER_KEY_PREFIX`] and its
/// decimal form (`42` → `#int:42`), so the string `"42"` and the integer
/// `42` are two keys. A string that itself begins with `#` gets one more `#`
/// in front (`"#int:42"` → `##int:42`): no string can then spell an
/// integer's key, and every other string keeps its plain text. Any other
/// value (a fraction, an integer beyond 64 bits, `true`, an object) is
/// [`KeyErrorKind::Invalid`]. The event type is always the plain text.
///
/// The body is read in one streaming pass with `serde_json`, copying only
/// the values the pointers name. Values off the pointers' paths are skipped
/// without recursion (nesting costs no stack); along a path, serde_json's
/// recursion limit (128 nested arrays or objects) applies. A body that is
/// not JSON is [`KeyErrorKind::BodyNotJson`] (400). Of duplicate members the last one
/// counts, as in `serde_json` and JavaScript's `JSON.parse`, so the key is
/// the id a handler reading the body sees.
#[derive(Debug, Clone)]
#[must_use]
pub struct JsonPointerKey {
    key: String,
    event_type: Option<String>,
}

impl JsonPointerKey {
    /// The key at pointer `key` (`"/id"`, `"/event/id"`), encoded as the
    /// [type docs](Self) say: a string as it is, an integer tagged.
    pub fn new(key: impl Into<String>) -> Self {
        Self { key: key.into(), event_type: None }
    }

    setters! {
        /// Also read the event type at pointer `pointer`.
        pub fn event_type(pointer: impl Into<String>) => event_type = Some(pointer.into());
    }
}

fn scalar(value: pointer::Found) -> Result<String, KeyError> {
    match value {
        pointer::Found::Str(s) if !s.is_empty() => Ok(s),
        pointer::Found::Str(_) => Err(KeyErrorKind::Missing.into()),
        pointer::Found::Int(n) => Ok(n),
        pointer::Found::Other => Err(KeyErrorKind::Invalid.into()),
    }
}

/// What [`JsonPointerKey`] puts before an integer key's decimal form.
pub const INTEGER_KEY_PREFIX: &str = "#int:";

/// A [`JsonPointerKey`] key: injective over non-empty strings and integers.
fn pointer_key(value: pointer::Found) -> Result<String, KeyError> {
    match value {
        pointer::Found::Str(s) if s.starts_with('#') => Ok(format!("#{s}")),
        pointer::Found::Int(n) => Ok(format!("{INTEGER_KEY_PREFIX}{n}")),
        other => scalar(other),
    }
}

impl KeyExtractor for JsonPointerKey {
    fn extract(&self, _parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        // One streaming pass: only the two values are copied, never the
        // rest of the body (a 1 MiB delivery stays 1 MiB in memory).
        let type_pointer = self.event_type.as_deref().unwrap_or("");
        let [key, event_type] =
            pointer::find(body, [self.key.as_str(), type_pointer]).map_err(|()| KeyErrorKind::BodyNotJson)?;
        let key = pointer_key(key.ok_or(KeyErrorKind::Missing)?)?;
        let event_type = match self.event_type {
            Some(_) => event_type.map(scalar).transpose()?,
            None => None,
        };
        Ok(EventIdentity { key, event_type })
    }
}

/// A key for senders that send no event id: `sha256:` and the hex SHA-256
/// of configured stable fields of the delivery.
///
/// Fields are headers, JSON values by pointer, and optionally a digest of
/// the body in canonical JSON, so whitespace, key order and escapes do not
/// change the key. Each field is hashed with its kind and length, so fields
/// cannot run into each other. Never the receipt time, a request id or a
/// retry count: the key must be equal on every delivery of the event.
///
/// **Canonical JSON.** RFC 8785 (JCS): members sorted by the UTF-16 code
/// units of their names, no whitespace, strings in JCS's escaping, except
/// that numbers keep their exact value: a number is written from the
/// literal's exact decimal digits in the layout JCS uses for doubles
/// (ECMAScript `Number::toString`). Where the literal's value is what a
/// double's shortest form spells (`1`, `1.0`, `1e2`, `0.1`, integers up to
/// 2^53) the result is byte for byte JCS; other numbers (snowflake ids above
/// 2^53, integers beyond 64 bits, `1.0000000000000001`) are not rounded onto
/// a neighbour's encoding. The encoding is injective: two JSON values
/// differing in type or in value (strings after unescaping, numbers as exact
/// decimals, `-0` equal to `0`) never share one.
///
/// **Strict reading.** The body must be RFC 8259 JSON in UTF-8 nesting at
/// most [`MAX_JSON_DEPTH`] levels ([`KeyErrorKind::TooDeep`]) and naming
/// no object member twice ([`KeyErrorKind::DuplicateMember`]: which value
/// counts is ambiguous, and two events differing only in a duplicate would
/// otherwise share a key); both are 400. Reading and encoding take time
/// linear in the body (and sorting each object's members).
///
/// **The key's bytes** (stable: a stored claim must match the next
/// version's key): `sha256:` and the lower-case hex SHA-256 over each field
/// in the order configured, each as its kind (one byte: `h` a header, `j` a
/// JSON value, `b` the body digest), its length (8 bytes, big-endian) and
/// its bytes: the header's value, the value's canonical JSON, or the
/// SHA-256 of the body's canonical JSON. `scripts/fixtures/formula.py`
/// computes it on its own for the presets' fixtures.
///
/// Provider and scope are not hashed: the claim's identity is
/// `(provider, scope, key)` already.
///
/// **When a body digest is wrong:** senders that put delivery-specific
/// values in the body (a delivery timestamp, an attempt counter, a
/// per-delivery signature) make every retry a new key. Use stable fields
/// instead (the resource id and the event's own time), or the body digest
/// only for senders that resend byte-identical batches.
///
/// ```
/// use webhook_idempotency::key::{DerivedKey, KeyExtractor};
///
/// let key = DerivedKey::new().json("/event").json("/created_at").json("/payload/uri").event_type_json("/event");
/// let parts = http::Request::new(()).into_parts().0;
/// let a = key.extract(&parts, br#"{"event":"invitee.created","created_at":"2026-01-01T00:00:00Z","payload":{"uri":"u"}}"#).unwrap();
/// let b = key.extract(&parts, br#"{ "payload": {"uri": "u"}, "created_at": "2026-01-01T00:00:00Z", "event": "invitee.created" }"#).unwrap();
/// assert_eq!(a.key, b.key);
/// assert!(a.key.starts_with("sha256:"));
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct DerivedKey {
    fields: Vec<Field>,
    event_type: Option<Field>,
}

#[derive(Debug, Clone)]
enum Field {
    Header(http::HeaderName),
    Json(String),
    CanonicalBody,
}

impl DerivedKey {
    /// A derived key with no fields yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds header `name` (must be present, same value on every delivery).
    pub fn header(mut self, name: http::HeaderName) -> Self {
        self.fields.push(Field::Header(name));
        self
    }

    /// Adds the JSON value at `pointer` (RFC 6901), in canonical form.
    pub fn json(mut self, pointer: impl Into<String>) -> Self {
        self.fields.push(Field::Json(pointer.into()));
        self
    }

    /// Adds the SHA-256 of the whole body in canonical JSON (RFC 8785).
    pub fn canonical_body(mut self) -> Self {
        self.fields.push(Field::CanonicalBody);
        self
    }

    setters! {
        /// Reads the event type at JSON pointer `pointer`.
        pub fn event_type_json(pointer: impl Into<String>) => event_type = Some(Field::Json(pointer.into()));

        /// Reads the event type from header `name`.
        pub fn event_type_header(name: http::HeaderName) => event_type = Some(Field::Header(name));
    }
}

fn canonical(value: &json::Node<'_>) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::new();
    json::write_canonical(value, &mut out)?;
    Ok(out)
}

/// An event type read from the body: a non-empty string, or an integer's
/// literal text.
fn node_scalar(value: &json::Node<'_>) -> Result<String, KeyError> {
    match value {
        json::Node::String(s) if !s.is_empty() => Ok(s.clone().into_owned()),
        json::Node::String(_) => Err(KeyErrorKind::Missing.into()),
        json::Node::Number(n) if !n.contains(['.', 'e', 'E']) => Ok((*n).to_owned()),
        _ => Err(KeyErrorKind::Invalid.into()),
    }
}

impl DerivedKey {
    fn needs_json(&self) -> bool {
        self.fields.iter().chain(&self.event_type).any(|f| !matches!(f, Field::Header(_)))
    }

    /// [`KeyExtractor::extract`] on a body already read by [`json::parse`]
    /// (`None` when the fields need no body).
    pub(crate) fn extract_parsed(
        &self,
        parts: &http::request::Parts,
        doc: Option<&json::Node<'_>>,
    ) -> Result<EventIdentity, KeyError> {
        use sha2::{Digest, Sha256};
        if self.fields.is_empty() {
            return Err(KeyErrorKind::Missing.into());
        }
        let mut hash = Sha256::new();
        for field in &self.fields {
            let (tag, bytes): (u8, Vec<u8>) = match field {
                Field::Header(name) => (b'h', header_str(parts, name)?.ok_or(KeyErrorKind::Missing)?.into_bytes()),
                Field::Json(pointer) => {
                    let value = doc.and_then(|d| d.pointer(pointer)).ok_or(KeyErrorKind::Missing)?;
                    (b'j', canonical(value)?)
                }
                Field::CanonicalBody => {
                    let doc = doc.ok_or(KeyErrorKind::BodyNotJson)?;
                    (b'b', Sha256::digest(canonical(doc)?).to_vec())
                }
            };
            hash.update([tag]);
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(&bytes);
        }
        let event_type = match &self.event_type {
            Some(Field::Header(name)) => header_str(parts, name)?,
            Some(Field::Json(pointer)) => doc.and_then(|d| d.pointer(pointer)).map(node_scalar).transpose()?,
            Some(Field::CanonicalBody) | None => None,
        };
        Ok(EventIdentity { key: format!("sha256:{}", hex::encode(hash.finalize())), event_type })
    }
}

impl KeyExtractor for DerivedKey {
    fn extract(&self, parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let doc = if self.needs_json() { Some(json::parse(body)?) } else { None };
        self.extract_parsed(parts, doc.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(headers: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::builder();
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn json_pointer_cases() {
        let x = JsonPointerKey::new("/id").event_type("/type");
        let cases: &[(&str, &[u8], Result<(&str, Option<&str>), KeyErrorKind>)] = &[
            ("string id", br#"{"id":"evt_1","type":"t"}"#, Ok(("evt_1", Some("t")))),
            ("integer id", br#"{"id":42}"#, Ok(("#int:42", None))),
            ("digit string id", br#"{"id":"42"}"#, Ok(("42", None))),
            ("negative integer id", br#"{"id":-42}"#, Ok(("#int:-42", None))),
            ("u64 id", br#"{"id":18446744073709551615}"#, Ok(("#int:18446744073709551615", None))),
            ("string spelling an integer key", br##"{"id":"#int:42"}"##, Ok(("##int:42", None))),
            ("string starting with #", br##"{"id":"#"}"##, Ok(("##", None))),
            ("integer type stays plain", br#"{"id":"a","type":7}"#, Ok(("a", Some("7")))),
            ("beyond 64 bits", br#"{"id":18446744073709551616}"#, Err(KeyErrorKind::Invalid)),
            ("exponent", br#"{"id":1e2}"#, Err(KeyErrorKind::Invalid)),
            ("bool", br#"{"id":true}"#, Err(KeyErrorKind::Invalid)),
            ("last duplicate counts", br#"{"id":"a","id":"b"}"#, Ok(("b", None))),
            ("missing", br#"{"type":"t"}"#, Err(KeyErrorKind::Missing)),
            ("empty", br#"{"id":""}"#, Err(KeyErrorKind::Missing)),
            ("object", br#"{"id":{}}"#, Err(KeyErrorKind::Invalid)),
            ("float", br#"{"id":1.5}"#, Err(KeyErrorKind::Invalid)),
            ("not json", b"id=evt_1", Err(KeyErrorKind::BodyNotJson)),
            ("invalid utf-8", b"\xff\xfe", Err(KeyErrorKind::BodyNotJson)),
        ];
        for (name, body, want) in cases {
            let got = x.extract(&parts(&[]), body);
            let got = got.as_ref().map(|i| (i.key.as_str(), i.event_type.as_deref())).map_err(|e| e.kind());
            assert_eq!(got, *want, "{name}");
        }
    }

    #[test]
    fn header_cases() {
        let x =
            HeaderKey::new(http::HeaderName::from_static("x-id")).event_type(http::HeaderName::from_static("x-type"));
        let cases: &[(&str, Vec<(&str, &str)>, Result<(&str, Option<&str>), KeyErrorKind>)] = &[
            ("both", vec![("x-id", "a"), ("x-type", "push")], Ok(("a", Some("push")))),
            ("no type", vec![("X-Id", "a")], Ok(("a", None))),
            ("missing", vec![], Err(KeyErrorKind::Missing)),
            ("blank", vec![("x-id", "  ")], Err(KeyErrorKind::Missing)),
            ("same twice", vec![("x-id", "a"), ("x-id", "a")], Ok(("a", None))),
            ("two values", vec![("x-id", "a"), ("x-id", "b")], Err(KeyErrorKind::Invalid)),
        ];
        for (name, headers, want) in cases {
            let got = x.extract(&parts(headers), b"");
            let got = got.as_ref().map(|i| (i.key.as_str(), i.event_type.as_deref())).map_err(|e| e.kind());
            assert_eq!(got, *want, "{name}");
        }
    }

    #[test]
    fn derived_key_cases() {
        let k = DerivedKey::new().json("/resource/id").header(http::HeaderName::from_static("x-src"));
        let p = parts(&[("x-src", "acme")]);
        let base = k.extract(&p, br#"{"resource":{"id":7},"noise":1}"#).unwrap().key;
        let same = k.extract(&p, br#"{"noise":2, "resource": {"id": 7}}"#).unwrap().key;
        assert_eq!(base, same, "other fields, whitespace and order do not matter");
        assert_ne!(base, k.extract(&p, br#"{"resource":{"id":8}}"#).unwrap().key, "the field does");
        assert_ne!(base, k.extract(&parts(&[("x-src", "other")]), br#"{"resource":{"id":7}}"#).unwrap().key);
        assert_eq!(k.extract(&parts(&[]), br#"{"resource":{"id":7}}"#).unwrap_err().kind(), KeyErrorKind::Missing);
        assert_eq!(k.extract(&p, br#"{"resource":{}}"#).unwrap_err().kind(), KeyErrorKind::Missing);
        assert_eq!(k.extract(&p, b"not json").unwrap_err().kind(), KeyErrorKind::BodyNotJson);
        // Fields are length-prefixed: ("ab","c") and ("a","bc") differ.
        let two =
            DerivedKey::new().header(http::HeaderName::from_static("x-a")).header(http::HeaderName::from_static("x-b"));
        let ab_c = two.extract(&parts(&[("x-a", "ab"), ("x-b", "c")]), b"").unwrap().key;
        let a_bc = two.extract(&parts(&[("x-a", "a"), ("x-b", "bc")]), b"").unwrap().key;
        assert_ne!(ab_c, a_bc);
        // A canonical body digest ignores formatting, not content.
        let body_key = DerivedKey::new().canonical_body();
        let x = body_key.extract(&p, br#"[{"a":1,"b":[1,2]}]"#).unwrap().key;
        assert_eq!(x, body_key.extract(&p, b"[ { \"b\": [1, 2], \"a\": 1.0 } ]").unwrap().key);
        assert_ne!(x, body_key.extract(&p, br#"[{"a":1,"b":[2,1]}]"#).unwrap().key);
        assert_eq!(DerivedKey::new().extract(&p, b"{}").unwrap_err().kind(), KeyErrorKind::Missing);
        // Snowflake-sized integers differing in their low digits stay apart.
        let id = DerivedKey::new().json("/object/id");
        let one = id.extract(&p, br#"{"object":{"id":1180000000000000001}}"#).unwrap().key;
        let two = id.extract(&p, br#"{"object":{"id":1180000000000000002}}"#).unwrap().key;
        assert_ne!(one, two);
        let nested = |b: &[u8]| body_key.extract(&p, b).unwrap().key;
        assert_ne!(nested(br#"[{"id":9007199254740993}]"#), nested(br#"[{"id":9007199254740992}]"#));
        assert_ne!(nested(br#"{"id":-9007199254740993}"#), nested(br#"{"id":-9007199254740992}"#));
    }

    /// Security review item 8: pairs of different events that used to share
    /// a derived key.
    #[test]
    fn derived_key_is_injective_on_former_collisions() {
        let p = parts(&[]);
        let id = DerivedKey::new().json("/id");
        let body = DerivedKey::new().canonical_body();
        let cases: &[(&str, &DerivedKey, &[u8], &[u8])] = &[
            (
                "integer vs its old internal tag",
                &id,
                br#"{"id":9007199254740993}"#,
                br#"{"id":"\u0000integer:9007199254740993"}"#,
            ),
            ("beyond 64 bits", &id, br#"{"id":18446744073709551616}"#, br#"{"id":18446744073709551617}"#),
            ("beyond 64 bits, negative", &id, br#"{"id":-18446744073709551616}"#, br#"{"id":-18446744073709551617}"#),
            ("over-precise fraction", &id, br#"{"id":1.0000000000000001}"#, br#"{"id":1}"#),
            ("underflow", &id, br#"{"id":1e-400}"#, br#"{"id":0}"#),
            (
                "2^60 exact vs its double's spelling",
                &id,
                br#"{"id":1152921504606847000}"#,
                br#"{"id":1.152921504606846976e18}"#,
            ),
            ("string vs integer", &id, br#"{"id":"42"}"#, br#"{"id":42}"#),
            ("null vs string", &id, br#"{"id":null}"#, br#"{"id":"null"}"#),
            ("nested big integer", &body, br#"{"a":[{"b":9007199254740993}]}"#, br#"{"a":[{"b":9007199254740992}]}"#),
        ];
        for (name, key, a, b) in cases {
            let (a, b) = (key.extract(&p, a).unwrap().key, key.extract(&p, b).unwrap().key);
            assert_ne!(a, b, "{name}");
        }
        let same: &[(&str, &DerivedKey, &[u8], &[u8])] = &[
            ("integer spellings", &id, br#"{"id":100}"#, br#"{"id":1.00E+2}"#),
            ("big integer spellings", &id, br#"{"id":18446744073709551617}"#, br#"{"id":1.8446744073709551617e19}"#),
            ("zero signs", &id, br#"{"id":0}"#, br#"{"id":-0.0}"#),
            ("string escapes", &id, br#"{"id":"a/\u00e9"}"#, "{\"id\":\"a\\/\u{e9}\"}".as_bytes()),
        ];
        for (name, key, a, b) in same {
            assert_eq!(key.extract(&p, a).unwrap().key, key.extract(&p, b).unwrap().key, "{name}");
        }
        // Duplicate members are refused anywhere in the body, not resolved.
        let cases: &[(&str, &[u8])] = &[
            ("top level", br#"{"id":"a","amount":100,"amount":999}"#),
            ("nested", br#"{"id":"a","x":[{"k":1,"k":1}]}"#),
            ("escaped name", br#"{"id":"a","amount":1,"\u0061mount":1}"#),
        ];
        for (name, b) in cases {
            for key in [&id, &body] {
                assert_eq!(key.extract(&p, b).unwrap_err().kind(), KeyErrorKind::DuplicateMember, "{name}");
            }
        }
    }

    /// The encoding is RFC 8785 byte for byte wherever a number's literal is
    /// its double's shortest form, so keys of ordinary bodies are the ones
    /// `serde_jcs` gives.
    #[test]
    fn canonical_matches_jcs_for_ordinary_numbers() {
        let cases: &[(&str, &str)] = &[
            (
                "mixed",
                "{\"b\":[1,2.5,-0.001,1e30,null,true,\"x\\u0001\\n\\\"\u{e9}\u{1f600}\\u007f\"],\"a\":{\"z\":1,\"\u{e000}\":2,\"\u{10000}\":3}}",
            ),
            (
                "zoom-like",
                r#"{"event":"meeting.started","payload":{"account_id":"a","object":{"id":85,"uuid":"u=="}},"event_ts":1700000000123}"#,
            ),
            ("small and large", "[0.000001,0.0000001,123456789012345680000,1e21,9007199254740992,-5e-324]"),
        ];
        for (name, text) in cases {
            let node = json::parse(text.as_bytes()).unwrap();
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(canonical(&node).unwrap(), serde_jcs::to_vec(&value).unwrap(), "{name}");
        }
    }

    proptest::proptest! {
        /// Any double written in its shortest form, and any integer up to
        /// 2^53, is encoded exactly as RFC 8785 (`serde_jcs`) encodes it.
        #[test]
        fn canonical_is_jcs_for_doubles(
            x in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO,
            i in -(1i64 << 53)..=(1i64 << 53),
        ) {
            for value in [serde_json::json!(x), serde_json::json!(i)] {
                let text = value.to_string();
                let node = json::parse(text.as_bytes()).unwrap();
                proptest::prop_assert_eq!(canonical(&node).unwrap(), serde_jcs::to_vec(&value).unwrap(), "{}", text);
            }
        }
    }

    /// Security review item 7: nesting used to cost 2^depth.
    #[test]
    fn derived_key_depth() {
        let p = parts(&[]);
        let key = DerivedKey::new().canonical_body();
        let nested = |depth: usize| {
            format!("{}9007199254740993{}", r#"{"payload":"#.repeat(depth), "}".repeat(depth)).into_bytes()
        };
        let cases: &[(&str, usize, Result<(), KeyErrorKind>)] = &[
            ("24 deep (7 s before)", 24, Ok(())),
            ("at the limit", MAX_JSON_DEPTH, Ok(())),
            ("one past the limit", MAX_JSON_DEPTH + 1, Err(KeyErrorKind::TooDeep)),
            ("1000 deep", 1000, Err(KeyErrorKind::TooDeep)),
            ("100000 deep", 100_000, Err(KeyErrorKind::TooDeep)),
        ];
        for (name, depth, want) in cases {
            let got = key.extract(&p, &nested(*depth)).map(|_| ()).map_err(|e| e.kind());
            assert_eq!(got, *want, "{name}");
        }
        // Time: the 24-deep body against a flat body of the same size, both
        // measured in this run; a loose bound (the old code took ~10^5 times).
        let deep = nested(24);
        let flat = format!(r#"{{"payload":"{}","n":9007199254740993}}"#, "x".repeat(deep.len() - 35)).into_bytes();
        let time = |body: &[u8]| {
            let start = std::time::Instant::now();
            for _ in 0..200 {
                key.extract(&p, body).unwrap();
            }
            start.elapsed()
        };
        let (flat_time, deep_time) = (time(&flat), time(&deep));
        println!("200 extractions of {} bytes: flat {flat_time:?}, 24 deep {deep_time:?}", deep.len());
        assert!(deep_time < flat_time * 50 + std::time::Duration::from_millis(20), "{deep_time:?} vs {flat_time:?}");
    }

    #[test]
    fn validate_bounds() {
        assert_eq!(validate(""), Err(KeyErrorKind::Missing));
        assert_eq!(validate(&"a".repeat(MAX_KEY_BYTES)), Ok(()));
        assert_eq!(validate(&"a".repeat(MAX_KEY_BYTES + 1)), Err(KeyErrorKind::TooLong));
        assert_eq!(validate("a\0b"), Err(KeyErrorKind::ContainsNul));
    }
}
