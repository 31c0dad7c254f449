use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project_lite::pin_project;

pin_project! {
    /// The response body of [`WebhookService`](super::WebhookService): the
    /// handler's own body, untouched, or a short text body the layer answered
    /// with (a rejection, a replayed duplicate, a retryable failure).
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Layer { #[pin] body: Full<Bytes> },
    }
}

impl<B> ResponseBody<B> {
    pub(crate) fn inner(body: B) -> Self {
        Self { kind: Kind::Inner { body } }
    }

    pub(crate) fn layer(text: &'static str) -> Self {
        Self::bytes(Bytes::from_static(text.as_bytes()))
    }

    pub(crate) fn bytes(body: Bytes) -> Self {
        Self { kind: Kind::Layer { body: Full::new(body) } }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx),
            KindProj::Layer { body } => {
                body.poll_frame(cx).map(|f| f.map(|r| r.map_err(|never: Infallible| match never {})))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Layer { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Layer { body } => body.size_hint(),
        }
    }
}
