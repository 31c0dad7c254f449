//! Reading the request body once, within the layer's limits.

use bytes::{Buf, Bytes, BytesMut};
use http_body::Body;
use http_body_util::BodyExt;

/// The body length the request declares (`Content-Length`), when it is a
/// number: checked against the limit before reading, and the buffer's first
/// capacity hint (see [`read_limited`]).
pub(crate) fn declared_length(headers: &http::HeaderMap) -> Option<u64> {
    headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
}

/// Why the body could not be buffered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// More than the limit arrived (413).
    TooLarge,
    /// The body failed mid-way: the client aborted or the connection broke (400).
    Unavailable,
}

/// Reads `body` into one contiguous buffer of at most `limit` bytes.
///
/// Every frame's bytes are appended to one growing buffer as it arrives and
/// the frame is dropped, so the memory held is about the bytes received
/// (amortised doubling: at most twice that), whatever the framing: a body
/// sent in one-byte chunks costs what the same body in one chunk costs. The
/// buffer starts at the declared `Content-Length` when there is one (already
/// checked against `limit` by the caller), up to [`MAX_RESERVE`]: a sender
/// that declares 25 MB and trickles bytes gets 64 KiB reserved, not 25 MB,
/// and the buffer grows (doubling) with what actually arrives. A body that
/// is a single frame is handed on without a copy.
pub(crate) async fn read_limited<B>(body: B, limit: usize, declared: Option<u64>) -> Result<Bytes, ReadError>
where
    B: Body,
{
    let mut body = std::pin::pin!(body);
    let mut first: Option<Bytes> = None;
    let mut buf: Option<BytesMut> = None;
    let mut len = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| ReadError::Unavailable)?;
        let Ok(mut data) = frame.into_data() else { continue };
        let n = data.remaining();
        len = len.checked_add(n).filter(|&l| l <= limit).ok_or(ReadError::TooLarge)?;
        if n == 0 {
            continue;
        }
        match (&mut first, &mut buf) {
            (None, None) => first = Some(data.copy_to_bytes(n)),
            (Some(_), None) => {
                let head = first.take().unwrap_or_default();
                let mut grow = BytesMut::with_capacity(initial_capacity(declared, limit, head.len() + n));
                grow.extend_from_slice(&head);
                put(&mut grow, &mut data);
                buf = Some(grow);
            }
            (_, Some(grow)) => put(grow, &mut data),
        }
    }
    Ok(match (first, buf) {
        (_, Some(buf)) => buf.freeze(),
        (Some(first), None) => first,
        (None, None) => Bytes::new(),
    })
}

/// The most a body buffer reserves ahead of the bytes received: 64 KiB. The
/// declared `Content-Length` is a claim, not bytes: reserving it whole let
/// unauthenticated senders hold gigabytes of address space with a trickle.
pub(crate) const MAX_RESERVE: usize = 64 * 1024;

/// The buffer's first capacity once a second frame arrives with `received`
/// bytes in hand: the declared length (within `limit`) up to
/// [`MAX_RESERVE`], and never less than what is in hand.
fn initial_capacity(declared: Option<u64>, limit: usize, received: usize) -> usize {
    let hint = declared.and_then(|d| usize::try_from(d).ok()).unwrap_or(0).min(limit).min(MAX_RESERVE);
    hint.max(received)
}

fn put(buf: &mut BytesMut, data: &mut impl Buf) {
    while data.has_remaining() {
        let chunk = data.chunk();
        let n = chunk.len();
        buf.extend_from_slice(chunk);
        data.advance(n);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use http_body::Frame;

    use super::*;

    /// A body of the given frames, then an optional error.
    struct Frames(VecDeque<Result<Bytes, ()>>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|f| f.map(Frame::data).map_err(|()| std::io::Error::other("reset"))))
        }
    }

    fn frames(chunks: &[&'static [u8]]) -> Frames {
        Frames(chunks.iter().map(|c| Ok(Bytes::from_static(c))).collect())
    }

    #[tokio::test]
    async fn reads_within_the_limit() {
        let cases: [(&str, Frames, usize, Option<u64>, Result<&[u8], ReadError>); 7] = [
            ("empty", frames(&[]), 4, None, Ok(b"")),
            ("one frame", frames(&[b"abcd"]), 4, Some(4), Ok(b"abcd")),
            ("one-byte frames", frames(&[b"a", b"b", b"", b"c", b"d"]), 4, None, Ok(b"abcd")),
            ("declared too small", frames(&[b"ab", b"cd"]), 4, Some(1), Ok(b"abcd")),
            ("one past the limit", frames(&[b"ab", b"cde"]), 4, None, Err(ReadError::TooLarge)),
            ("single frame past the limit", frames(&[b"abcde"]), 4, None, Err(ReadError::TooLarge)),
            (
                "reset mid-body",
                Frames([Ok(Bytes::from_static(b"ab")), Err(())].into()),
                4,
                None,
                Err(ReadError::Unavailable),
            ),
        ];
        for (name, body, limit, declared, want) in cases {
            let got = read_limited(body, limit, declared).await;
            assert_eq!(got.as_deref().map_err(|e| *e), want, "{name}");
        }
    }

    #[test]
    fn a_declared_length_reserves_at_most_64_kib_ahead_of_the_bytes() {
        let mib25 = 25 * 1024 * 1024;
        let cases = [
            ("a trickle under a 25 MB claim", Some(mib25 as u64), mib25, 2, MAX_RESERVE),
            ("a small honest body", Some(1_100), mib25, 600, 1_100),
            ("a claim past the limit", Some(u64::MAX), 1_000, 2, 1_000),
            ("no claim", None, mib25, 10, 10),
            ("more in hand than reserved", Some(mib25 as u64), mib25, 100_000, 100_000),
        ];
        for (name, declared, limit, received, want) in cases {
            assert_eq!(initial_capacity(declared, limit, received), want, "{name}");
        }
    }

    #[tokio::test]
    async fn a_single_frame_is_not_copied() {
        static BODY: &[u8] = b"the whole body";
        let got = read_limited(frames(&[BODY]), 64, None).await.unwrap();
        assert_eq!(got.as_ptr(), BODY.as_ptr());
    }
}
