//! The key extractors (JSON pointer, header, derived with canonical JSON) on
//! arbitrary bodies and header values: must never panic, and an extracted
//! key is never empty.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webhook_idempotency::key::{DerivedKey, HeaderKey, JsonPointerKey, KeyExtractor};

fuzz_target!(|data: &[u8]| {
    let (value, body) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&[][..], data),
    };
    let mut req = http::Request::builder();
    if let Ok(v) = http::HeaderValue::from_bytes(value) {
        req = req.header("x-id", v.clone()).header("x-type", v);
    }
    let parts = req.body(()).unwrap().into_parts().0;
    let name = http::HeaderName::from_static("x-id");
    let extractors: Vec<Box<dyn KeyExtractor>> = vec![
        Box::new(JsonPointerKey::new("/id").event_type("/type")),
        Box::new(JsonPointerKey::new("/event/id").event_type("/a/0/b")),
        Box::new(HeaderKey::new(name.clone()).event_type(http::HeaderName::from_static("x-type"))),
        Box::new(DerivedKey::new().json("/id").json("/created_at").header(name.clone())),
        Box::new(DerivedKey::new().canonical_body().event_type_json("/type")),
    ];
    for x in &extractors {
        if let Ok(identity) = x.extract(&parts, body) {
            assert!(!identity.key.is_empty());
        }
    }
});
