//! Declarative macros shared across the crate's modules.

/// An error that carries only its kind: `pub struct $error { kind }` (with
/// the attributes and docs given, derives included), its `kind()` accessor
/// (docs given), `From<$kind>`, `Display` (the expression after
/// `display:`, with the kind bound to the first name and the formatter to
/// the second) and `std::error::Error`. `fn new();` first adds a public
/// constructor (docs given).
macro_rules! kind_error {
    (
        $(#[$attr:meta])*
        pub struct $error:ident($kind:ty);
        $(#[$new_doc:meta])* fn new();
        $($rest:tt)*
    ) => {
        kind_error! { $(#[$attr])* pub struct $error($kind); $($rest)* }

        impl $error {
            $(#[$new_doc])*
            pub fn new(kind: $kind) -> Self {
                Self { kind }
            }
        }
    };
    (
        $(#[$attr:meta])*
        pub struct $error:ident($kind:ty);
        $(#[$kind_doc:meta])* fn kind();
        display: |$k:ident, $f:ident| $display:expr;
    ) => {
        $(#[$attr])*
        pub struct $error {
            kind: $kind,
        }

        impl $error {
            $(#[$kind_doc])*
            pub fn kind(&self) -> $kind {
                self.kind
            }
        }

        impl From<$kind> for $error {
            fn from(kind: $kind) -> Self {
                Self { kind }
            }
        }

        impl std::fmt::Display for $error {
            fn fmt(&self, $f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let $k = self.kind;
                $display
            }
        }

        impl std::error::Error for $error {}
    };
}

/// `as_str`, a kind's stable `snake_case` name for logs and metric labels
/// (one `Variant => "name"` per variant), and `Display` writing that name.
macro_rules! kind_names {
    ($kind:ident { $($variant:ident => $name:literal),* $(,)? }) => {
        impl $kind {
            /// A stable `snake_case` name for logs and metric labels.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }
        }

        impl std::fmt::Display for $kind {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// Builder setters, one line of code each, written as
/// `pub fn name(mut self, args..) -> Self { ..; self }` with the docs and
/// attributes given:
/// - `$(#[doc])* pub fn name(arg: Type, ..) => field.path = value;` stores
///   `value` in `self.field.path`;
/// - `$(#[doc])* pub fn name(arg: Type, ..) => field.setter(args..);` hands
///   the arguments to the by-value setter of the builder in `self.field`.
macro_rules! setters {
    () => {};
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),+) => $($field:ident).+ = $value:expr;
        $($rest:tt)*
    ) => {
        $(#[$attr])*
        $vis fn $name(mut self, $($arg: $ty),+) -> Self {
            self.$($field).+ = $value;
            self
        }

        setters! { $($rest)* }
    };
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),+) => $field:ident.$setter:ident($($pass:expr),*);
        $($rest:tt)*
    ) => {
        $(#[$attr])*
        $vis fn $name(mut self, $($arg: $ty),+) -> Self {
            self.$field = self.$field.$setter($($pass),*);
            self
        }

        setters! { $($rest)* }
    };
}

/// The `tower::Service` impl of a layer's service, a newtype over
/// [`Wrapped`](crate::layer::service::Wrapped): the bounds on the inner
/// service and the bodies (one contract for every layer of the crate),
/// always ready, the response future [`ResponseFuture`](crate::layer::ResponseFuture).
/// `call` is the block given, with the `Wrapped` bound to the first name and
/// the request to the second; `bounds: { ... },` adds the service's own
/// bounds (the Idempotency-Key service reads the response body, so it needs
/// its error as a `BoxError`).
macro_rules! wrapped_service {
    ($service:ident, $(bounds: { $($bounds:tt)* },)? |$wrapped:ident, $req:ident| $call:block) => {
        impl<S, ReqBody, ResBody> tower_service::Service<http::Request<ReqBody>> for $service<S>
        where
            S: tower_service::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>
                + Clone
                + Send
                + 'static,
            S::Future: Send + 'static,
            S::Error: Send + 'static,
            ReqBody: http_body::Body + From<bytes::Bytes> + Send + 'static,
            ReqBody::Data: Send,
            ReqBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
            ResBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
            $($($bounds)*)?
        {
            type Response = http::Response<$crate::layer::ResponseBody<ResBody>>;
            type Error = S::Error;
            type Future = $crate::layer::ResponseFuture<ResBody, S::Error>;

            /// Always ready: the inner service's readiness is awaited inside
            /// the response future, and only for requests that reach it.
            fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn call(&mut self, $req: http::Request<ReqBody>) -> Self::Future {
                let $wrapped = &mut self.0;
                $call
            }
        }
    };
}
