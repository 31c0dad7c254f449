//! Finding the idempotency key (event key) and event type of a delivery.
//!
//! The key must be equal across every delivery of one event and never a
//! receipt time, a request id generated here or a retry count. Presets use
//! the provider's documented event id; [`HeaderKey`] and [`JsonPointerKey`]
//! cover senders that put it in a header or in the JSON body, and closures
//! with the signature of [`KeyExtractor::extract`] cover the rest.

use std::fmt;

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
}

/// Longest event key, event type and scope accepted, in bytes. The shipped
/// schema enforces the same bound.
pub const MAX_KEY_BYTES: usize = 512;

impl KeyErrorKind {
    /// A stable `snake_case` name for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "key_missing",
            Self::Invalid => "key_invalid",
            Self::BodyNotJson => "body_not_json",
            Self::TooLong => "key_too_long",
            Self::ContainsNul => "key_contains_nul",
        }
    }
}

/// A failed key extraction; the layer answers 400 and stores nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    kind: KeyErrorKind,
}

impl KeyError {
    /// An error of the given kind.
    pub fn new(kind: KeyErrorKind) -> Self {
        Self { kind }
    }

    /// Why extraction failed.
    pub fn kind(&self) -> KeyErrorKind {
        self.kind
    }
}

impl From<KeyErrorKind> for KeyError {
    fn from(kind: KeyErrorKind) -> Self {
        Self::new(kind)
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no usable event key: {}", self.kind.as_str())
    }
}

impl std::error::Error for KeyError {}

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

    /// Also read the event type from header `name`.
    pub fn event_type(mut self, name: http::HeaderName) -> Self {
        self.event_type = Some(name);
        self
    }
}

fn header_str(parts: &http::request::Parts, name: &http::HeaderName) -> Result<Option<String>, KeyError> {
    let mut values = parts.headers.get_all(name).iter();
    let Some(first) = values.next() else { return Ok(None) };
    // Two different values for the one header make the key ambiguous.
    if values.any(|v| v != first) {
        return Err(KeyErrorKind::Invalid.into());
    }
    let s = first.to_str().map_err(|_| KeyErrorKind::Invalid)?.trim();
    Ok((!s.is_empty()).then(|| s.to_owned()))
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
/// The body is parsed with `serde_json`, whose recursion limit (128 nested
/// arrays or objects) protects the stack: a deeper body is
/// [`KeyErrorKind::BodyNotJson`] (400).
#[derive(Debug, Clone)]
#[must_use]
pub struct JsonPointerKey {
    key: String,
    event_type: Option<String>,
}

impl JsonPointerKey {
    /// The key at pointer `key` (`"/id"`, `"/event/id"`). A string is used as
    /// is; an integer as its decimal form.
    pub fn new(key: impl Into<String>) -> Self {
        Self { key: key.into(), event_type: None }
    }

    /// Also read the event type at pointer `pointer`.
    pub fn event_type(mut self, pointer: impl Into<String>) -> Self {
        self.event_type = Some(pointer.into());
        self
    }
}

fn scalar(value: &serde_json::Value) -> Result<String, KeyError> {
    match value {
        serde_json::Value::String(s) if !s.is_empty() => Ok(s.clone()),
        serde_json::Value::String(_) => Err(KeyErrorKind::Missing.into()),
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Ok(n.to_string()),
        _ => Err(KeyErrorKind::Invalid.into()),
    }
}

impl KeyExtractor for JsonPointerKey {
    fn extract(&self, _parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        let doc: serde_json::Value = serde_json::from_slice(body).map_err(|_| KeyErrorKind::BodyNotJson)?;
        let key = scalar(doc.pointer(&self.key).ok_or(KeyErrorKind::Missing)?)?;
        let event_type = match &self.event_type {
            Some(p) => doc.pointer(p).map(scalar).transpose()?,
            None => None,
        };
        Ok(EventIdentity { key, event_type })
    }
}

/// A key for senders that send no event id: `sha256:` and the hex SHA-256
/// of configured stable fields of the delivery.
///
/// Fields are headers, JSON values by pointer, and optionally a digest of
/// the body in canonical JSON (RFC 8785 JCS, so whitespace and key order do
/// not change the key). Integers beyond 2^53, which JCS would round to the
/// nearest double, are hashed exactly. Each field is hashed with its kind and length, so
/// fields cannot run into each other. Never the receipt time, a request id
/// or a retry count: the key must be equal on every delivery of the event.
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

    /// Reads the event type at JSON pointer `pointer`.
    pub fn event_type_json(mut self, pointer: impl Into<String>) -> Self {
        self.event_type = Some(Field::Json(pointer.into()));
        self
    }

    /// Reads the event type from header `name`.
    pub fn event_type_header(mut self, name: http::HeaderName) -> Self {
        self.event_type = Some(Field::Header(name));
        self
    }
}

/// RFC 8785 writes every number as an IEEE 754 double, so integers beyond
/// 2^53 that differ only in their low digits (snowflake ids) would hash
/// equal. Such integers are replaced by a tagged string of their exact
/// decimal form before canonicalization.
fn exact_integers(value: &serde_json::Value) -> std::borrow::Cow<'_, serde_json::Value> {
    use serde_json::Value;
    use std::borrow::Cow;
    const EXACT: u64 = 1 << 53;
    match value {
        Value::Number(n)
            if n.as_u64().is_some_and(|u| u > EXACT) || n.as_i64().is_some_and(|i| i.unsigned_abs() > EXACT) =>
        {
            Cow::Owned(Value::String(format!("\u{0}integer:{n}")))
        }
        Value::Array(items) => {
            let mapped: Vec<_> = items.iter().map(exact_integers).collect();
            if mapped.iter().all(|m| matches!(m, Cow::Borrowed(_))) {
                Cow::Borrowed(value)
            } else {
                Cow::Owned(Value::Array(mapped.into_iter().map(Cow::into_owned).collect()))
            }
        }
        Value::Object(map) => {
            if map.values().all(|v| matches!(exact_integers(v), Cow::Borrowed(_))) {
                Cow::Borrowed(value)
            } else {
                Cow::Owned(Value::Object(
                    map.iter().map(|(k, v)| (k.clone(), exact_integers(v).into_owned())).collect(),
                ))
            }
        }
        _ => Cow::Borrowed(value),
    }
}

fn canonical(value: &serde_json::Value) -> Result<Vec<u8>, KeyError> {
    serde_jcs::to_vec(&*exact_integers(value)).map_err(|_| KeyErrorKind::Invalid.into())
}

impl KeyExtractor for DerivedKey {
    fn extract(&self, parts: &http::request::Parts, body: &[u8]) -> Result<EventIdentity, KeyError> {
        use sha2::{Digest, Sha256};
        let needs_json = self.fields.iter().chain(&self.event_type).any(|f| !matches!(f, Field::Header(_)));
        let doc: Option<serde_json::Value> =
            if needs_json { Some(serde_json::from_slice(body).map_err(|_| KeyErrorKind::BodyNotJson)?) } else { None };
        if self.fields.is_empty() {
            return Err(KeyErrorKind::Missing.into());
        }
        let mut hash = Sha256::new();
        for field in &self.fields {
            let (tag, bytes): (u8, Vec<u8>) = match field {
                Field::Header(name) => (b'h', header_str(parts, name)?.ok_or(KeyErrorKind::Missing)?.into_bytes()),
                Field::Json(pointer) => {
                    let value = doc.as_ref().and_then(|d| d.pointer(pointer)).ok_or(KeyErrorKind::Missing)?;
                    (b'j', canonical(value)?)
                }
                Field::CanonicalBody => {
                    let doc = doc.as_ref().ok_or(KeyErrorKind::BodyNotJson)?;
                    (b'b', Sha256::digest(canonical(doc)?).to_vec())
                }
            };
            hash.update([tag]);
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(&bytes);
        }
        let event_type = match &self.event_type {
            Some(Field::Header(name)) => header_str(parts, name)?,
            Some(Field::Json(pointer)) => doc.as_ref().and_then(|d| d.pointer(pointer)).map(scalar).transpose()?,
            Some(Field::CanonicalBody) | None => None,
        };
        Ok(EventIdentity { key: format!("sha256:{}", hex::encode(hash.finalize())), event_type })
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
            ("integer id", br#"{"id":42}"#, Ok(("42", None))),
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

    #[test]
    fn validate_bounds() {
        assert_eq!(validate(""), Err(KeyErrorKind::Missing));
        assert_eq!(validate(&"a".repeat(MAX_KEY_BYTES)), Ok(()));
        assert_eq!(validate(&"a".repeat(MAX_KEY_BYTES + 1)), Err(KeyErrorKind::TooLong));
        assert_eq!(validate("a\0b"), Err(KeyErrorKind::ContainsNul));
    }
}
