//! Test helpers shared by the verifier and preset tests: a fixed clock and
//! request heads built from header lists.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The tests' "now": 2023-11-14T22:13:20Z, in Unix seconds.
pub(crate) const NOW: u64 = 1_700_000_000;

/// A recorded fixture under `tests/fixtures/providers/`, `path` (for
/// example `twilio/sdk.json`), read as JSON into `T`.
#[track_caller]
pub(crate) fn fixture_json<T: serde::de::DeserializeOwned>(path: &str) -> T {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers").join(path);
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The time `secs` Unix seconds.
pub(crate) fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// A `POST /` request head with `headers` (raw value bytes, in order;
/// repeated names become repeated lines).
pub(crate) fn request<V: AsRef<[u8]>>(headers: &[(&str, V)]) -> http::request::Parts {
    let mut parts = http::Request::post("/").body(()).unwrap().into_parts().0;
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
        parts.headers.append(name, http::HeaderValue::from_bytes(value.as_ref()).unwrap());
    }
    parts
}

/// A `method uri` request head with `headers`, for the schemes that sign the
/// URL (Twilio, HubSpot).
pub(crate) fn request_to(method: &str, uri: &str, headers: &[(&str, &str)]) -> http::request::Parts {
    let mut b = http::Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap().into_parts().0
}

/// One delivery of a scheme that signs the URL (Twilio, HubSpot) and the
/// verdict it must get: its name, method, path and query, headers, body and
/// the secrets configured. A table states each case as what it changes in
/// the valid delivery ([`UrlCase::valid`], [`UrlCase::case`]).
#[derive(Clone, Debug)]
#[allow(dead_code)] // used by the URL-signing presets' tests
pub(crate) struct UrlCase<'a> {
    name: &'a str,
    method: &'a str,
    uri: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    body: &'a [u8],
    secrets: &'a [crate::verify::SigningSecret],
    want: Result<(), crate::verify::VerifyErrorKind>,
}

#[allow(dead_code)] // used by the URL-signing presets' tests
impl<'a> UrlCase<'a> {
    /// The valid delivery, named "valid": must verify.
    pub(crate) fn valid(
        method: &'a str,
        uri: &'a str,
        headers: Vec<(&'a str, &'a str)>,
        body: &'a [u8],
        secrets: &'a [crate::verify::SigningSecret],
    ) -> Self {
        Self { name: "valid", method, uri, headers, body, secrets, want: Ok(()) }
    }

    /// This delivery, named `name`: must verify unless changed.
    pub(crate) fn case(&self, name: &'a str) -> Self {
        Self { name, want: Ok(()), ..self.clone() }
    }

    /// Sent with this method instead.
    pub(crate) fn method(self, method: &'a str) -> Self {
        Self { method, ..self }
    }

    /// Sent to this path and query instead.
    pub(crate) fn uri(self, uri: &'a str) -> Self {
        Self { uri, ..self }
    }

    /// Sent with these headers instead.
    pub(crate) fn headers(self, headers: Vec<(&'a str, &'a str)>) -> Self {
        Self { headers, ..self }
    }

    /// Sent with this body instead.
    pub(crate) fn body(self, body: &'a [u8]) -> Self {
        Self { body, ..self }
    }

    /// Verified with these secrets configured instead.
    pub(crate) fn secrets(self, secrets: &'a [crate::verify::SigningSecret]) -> Self {
        Self { secrets, ..self }
    }

    /// Must fail with `kind`.
    pub(crate) fn fails(self, kind: crate::verify::VerifyErrorKind) -> Self {
        Self { want: Err(kind), ..self }
    }

    /// Asserts `verify(head, body, secrets)`'s verdict on each case.
    #[track_caller]
    pub(crate) fn check_all(
        cases: &[Self],
        verify: impl Fn(
            &http::request::Parts,
            &[u8],
            &[crate::verify::SigningSecret],
        ) -> Result<(), crate::verify::VerifyErrorKind>,
    ) {
        for case in cases {
            let p = request_to(case.method, case.uri, &case.headers);
            assert_eq!(verify(&p, case.body, case.secrets), case.want, "{}", case.name);
        }
    }
}

/// A `POST /` request head with one line of header `name` per value, in
/// order.
pub(crate) fn header_lines(name: &str, values: &[&str]) -> http::request::Parts {
    request(&values.iter().map(|v| (name, *v)).collect::<Vec<_>>())
}

/// A `POST /` request head with one line of `first` per value of
/// `first_values`, then one line of `second` per value of `second_values`.
#[allow(dead_code)] // used by the two-header presets' tests
pub(crate) fn two_header_lines(
    first: &str,
    first_values: &[&str],
    second: &str,
    second_values: &[&str],
) -> http::request::Parts {
    let first = first_values.iter().map(|v| (first, *v));
    request(&first.chain(second_values.iter().map(|v| (second, *v))).collect::<Vec<_>>())
}

/// [`request`] for text header values.
pub(crate) fn headers(list: &[(&str, &str)]) -> http::request::Parts {
    request(list)
}

/// The identity `provider`'s key extractor reads from `body` under `parts`.
///
/// # Panics
/// When it finds none.
pub(crate) fn identity(
    provider: &crate::providers::Provider,
    parts: &http::request::Parts,
    body: &[u8],
) -> crate::key::EventIdentity {
    provider.extractor_ref().extract(parts, body).expect("an identity")
}

/// Asserts the event key and type `provider`'s key extractor reads from
/// `body` under a request head without headers.
#[track_caller]
pub(crate) fn assert_body_identity(
    provider: &crate::providers::Provider,
    body: &[u8],
    key: &str,
    event_type: Option<&str>,
) {
    let id = identity(provider, &headers(&[]), body);
    assert_eq!((id.key.as_str(), id.event_type.as_deref()), (key, event_type));
}

/// Checks that the part of the file `file` (from the crate's root) between
/// the marks `start` and `end` is `generated`, or, with `UPDATE_DOCS` set,
/// writes it there: the docs' generated tables.
///
/// # Panics
/// When a mark is missing, or the part differs without `UPDATE_DOCS`.
#[track_caller]
#[allow(dead_code)] // used by the tests of the generated tables
pub(crate) fn generated_section(file: &str, start: &str, end: &str, generated: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let from = text.find(start).unwrap_or_else(|| panic!("{file}: no mark {start}")) + start.len();
    let to = from + text[from..].find(end).unwrap_or_else(|| panic!("{file}: no mark {end}"));
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, format!("{}{generated}{}", &text[..from], &text[to..])).unwrap();
    } else {
        assert!(
            text[from..to] == *generated,
            "{file}: the generated part differs; run with UPDATE_DOCS=1:\n{generated}"
        );
    }
}
