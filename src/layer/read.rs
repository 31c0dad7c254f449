//! The first steps of a delivery: the method, the size limit, the encoding,
//! the signature headers' shape, then the body, buffered once and decoded.
//! Each refusal is made before anything costlier runs.

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue};

use super::answer::Answer;
use super::buffer::{declared_length, read_limited, ReadError};
use super::config::Config;
use super::rejection::RejectionKind;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The request head and its body as the verifier must see it, or the
/// layer's refusal.
pub(crate) async fn read<ReqBody, B>(
    config: &Config,
    mut parts: Parts,
    body: ReqBody,
) -> Result<(Parts, Bytes), Box<Answer<B>>>
where
    ReqBody: http_body::Body,
    ReqBody::Error: Into<BoxError>,
{
    allowed_method(config, &parts)?;
    // 1. Size limit, from Content-Length before reading.
    let declared = declared_length(&parts.headers);
    if declared.is_some_and(|len| len > config.body_limit as u64) {
        return Err(config.refuse(RejectionKind::BodyTooLarge, "declared_too_large").into());
    }
    // Content-Encoding: identity, or gzip when decoding is enabled; else 415.
    let gzip = content_encoding(&parts.headers, config.gzip_limit.is_some())
        .map_err(|()| config.refuse(RejectionKind::UnsupportedEncoding, "content_encoding"))?;
    // Signature headers that cannot pass: 401 before reading the body.
    if let Err(e) = config.provider.verifier_ref().precheck(&parts) {
        if e.kind() == crate::verify::VerifyErrorKind::MissingHeader {
            tracing::debug!(
                "no {} signature header: a request the provider did not sign, or a route that should not be \
                 behind this layer",
                config.provider.name()
            );
        }
        return Err(config.refuse(RejectionKind::InvalidSignature, e.kind().as_str()).into());
    }
    // 2. Buffer once, into one buffer; the limit also holds while streaming.
    let read = tokio::time::timeout(config.body_timeout, read_limited(body, config.body_limit, declared))
        .await
        .map_err(|_| config.refuse(RejectionKind::BodyTimeout, "body_timeout"))?;
    let body = match read {
        Ok(body) => body,
        Err(ReadError::TooLarge) => return Err(config.refuse(RejectionKind::BodyTooLarge, "body_too_large").into()),
        Err(ReadError::Unavailable) => {
            let reason = crate::verify::VerifyErrorKind::BodyUnavailable.as_str();
            return Err(config.refuse(RejectionKind::BodyUnreadable, reason).into());
        }
    };
    let (true, Some(limit)) = (gzip, config.gzip_limit) else { return Ok((parts, body)) };
    // gzip: verified and handed on decoded, within the inflated-size cap.
    // Inflating costs CPU in proportion to the inflated size (up to about
    // 1000:1 over the bytes received): it runs on the blocking pool, never on
    // an async worker thread.
    let inflated = tokio::task::spawn_blocking(move || inflate(&body, limit)).await;
    match inflated.unwrap_or(Err(Inflate::Corrupt)) {
        Ok(decoded) => {
            parts.headers.remove(header::CONTENT_ENCODING);
            parts.headers.remove(header::CONTENT_LENGTH);
            Ok((parts, decoded))
        }
        Err(Inflate::TooLarge) => Err(config.refuse(RejectionKind::BodyTooLarge, "inflated_too_large").into()),
        Err(Inflate::Corrupt) => Err(config.refuse(RejectionKind::BodyUnreadable, "gzip_corrupt").into()),
    }
}

/// Methods the provider never sends: 405 + `Allow` before anything else (a
/// layer put on a whole router shows up here, not as a 401 on every page).
fn allowed_method<B>(config: &Config, parts: &Parts) -> Result<(), Box<Answer<B>>> {
    let methods = config.provider.allowed_methods();
    if methods.contains(&parts.method) {
        return Ok(());
    }
    tracing::debug!(
        "{} webhooks are not sent with this method: is the layer on the webhook route only (route_layer)?",
        config.provider.name()
    );
    let mut answer = config.refuse(RejectionKind::MethodNotAllowed, "method_not_allowed");
    let allow = methods.iter().map(http::Method::as_str).collect::<Vec<_>>().join(", ");
    if let Ok(allow) = HeaderValue::from_str(&allow) {
        answer.response.headers_mut().insert(header::ALLOW, allow);
    }
    Err(answer.into())
}

/// Whether the body is gzip (`Ok(true)`), identity (`Ok(false)`), or in an
/// encoding the layer does not decode (`Err`). Every `Content-Encoding` line
/// counts, as one comma-separated list (RFC 9110, section 5.3): `identity`
/// entries are ignored, one `gzip` (or `x-gzip`) is accepted when `gzip` is
/// enabled, anything else (a second `gzip` included) is refused.
fn content_encoding(headers: &http::HeaderMap, gzip_enabled: bool) -> Result<bool, ()> {
    let mut gzip = false;
    for line in headers.get_all(header::CONTENT_ENCODING) {
        for coding in line.as_bytes().split(|&b| b == b',').map(<[u8]>::trim_ascii) {
            if coding.is_empty() || coding.eq_ignore_ascii_case(b"identity") {
                continue;
            }
            let is_gzip = coding.eq_ignore_ascii_case(b"gzip") || coding.eq_ignore_ascii_case(b"x-gzip");
            if !is_gzip || !gzip_enabled || gzip {
                return Err(());
            }
            gzip = true;
        }
    }
    Ok(gzip)
}

enum Inflate {
    TooLarge,
    Corrupt,
}

/// Decodes a gzip body, stopping one byte past `limit` decoded bytes.
fn inflate(body: &[u8], limit: usize) -> Result<Bytes, Inflate> {
    use std::io::Read as _;
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    // Every member (RFC 1952 allows several); bytes after the last member
    // that do not form one are corrupt.
    flate2::read::MultiGzDecoder::new(body).take(cap).read_to_end(&mut out).map_err(|_| Inflate::Corrupt)?;
    if out.len() > limit {
        Err(Inflate::TooLarge)
    } else {
        Ok(out.into())
    }
}
