//! The declarations an HMAC preset is written in: the verifier type, the
//! constructor with its registry entry, and both from the preset's facts.

/// The verifier type of an HMAC preset: a named wrapper of the generic
/// [`HmacVerifier`](crate::verify::generic::HmacVerifier) that the builder
/// expression after `=` describes (the scheme as a specification of the
/// generic verifier), with [`Verifier`](crate::verify::Verifier) delegated
/// to it. `fn new() at DEFAULT_TOLERANCE; fn tolerance();` gives a scheme
/// that signs a timestamp its constructor at the module's
/// `DEFAULT_TOLERANCE` and a `tolerance` setter; `fn new();` a scheme
/// without one its constructor.
#[allow(unused_macros)] // unused without an HMAC preset
macro_rules! hmac_verifier {
    ($(#[$attr:meta])* pub struct $name:ident;) => {
        $(#[$attr])*
        #[derive(Debug, Clone)]
        #[must_use]
        pub struct $name {
            inner: $crate::verify::generic::HmacVerifier,
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl $crate::verify::Verifier for $name {
            fn precheck(&self, parts: &http::request::Parts) -> Result<(), $crate::verify::VerifyError> {
                self.inner.precheck(parts)
            }

            fn verify(&self, delivery: &$crate::verify::Delivery<'_>) -> Result<(), $crate::verify::VerifyError> {
                self.inner.verify(delivery)
            }
        }
    };
    ($(#[$attr:meta])* pub struct $name:ident = $spec:expr; $(#[$new:meta])* fn new();) => {
        hmac_verifier! { $(#[$attr])* pub struct $name; }

        impl $name {
            $(#[$new])*
            pub fn new() -> Self {
                Self { inner: $spec.build().expect("a valid fixed configuration") }
            }
        }
    };
    (
        $(#[$attr:meta])* pub struct $name:ident = $spec:expr;
        $(#[$new:meta])* fn new() at DEFAULT_TOLERANCE;
        $(#[$tolerance:meta])* fn tolerance();
    ) => {
        hmac_verifier! { $(#[$attr])* pub struct $name; }

        impl $name {
            $(#[$new])*
            pub fn new() -> Self {
                Self::with_tolerance(DEFAULT_TOLERANCE)
            }

            $(#[$tolerance])*
            pub fn tolerance(self, tolerance: std::time::Duration) -> Self {
                Self::with_tolerance(tolerance)
            }

            fn with_tolerance(tolerance: std::time::Duration) -> Self {
                Self { inner: $spec.tolerance(tolerance).build().expect("a valid fixed configuration") }
            }
        }
    };
}

/// The shell of a preset verifier whose one setting is the tolerance of its
/// signed time: the struct (holding the `tolerance`), `Default`, `new()` at
/// the module's `DEFAULT_TOLERANCE` and the `tolerance` setter. The module
/// implements [`Verifier`](crate::verify::Verifier) for it, reading
/// `self.tolerance`; with `scheme: <type>;`, a public-key scheme
/// (`providers::public_key::Scheme`), the macro implements it.
#[allow(unused_macros)] // unused without such a preset
macro_rules! timed_verifier {
    (
        $(#[$attr:meta])* pub struct $name:ident; $(#[$new:meta])* fn new(); $(#[$tolerance:meta])* fn tolerance();
        scheme: $scheme:ty;
    ) => {
        timed_verifier! { $(#[$attr])* pub struct $name; $(#[$new])* fn new(); $(#[$tolerance])* fn tolerance(); }

        impl $crate::verify::Verifier for $name {
            /// A public-key signature: verified on the blocking pool.
            fn costly(&self, _parts: &http::request::Parts) -> bool {
                true
            }

            /// Every secret must be a public key of the scheme, in the text the
            /// module docs give: a wrong one would otherwise fail every delivery
            /// as a signature mismatch. Parses each once (cached on the secret).
            ///
            /// # Errors
            /// [`KeyMaterialErrorKind::NoSecret`](crate::verify::KeyMaterialErrorKind::NoSecret),
            /// [`KeyMaterialErrorKind::Empty`](crate::verify::KeyMaterialErrorKind::Empty), or
            /// [`KeyMaterialErrorKind::InvalidPublicKey`](crate::verify::KeyMaterialErrorKind::InvalidPublicKey).
            fn check_secrets(
                &self,
                secrets: &[$crate::verify::SigningSecret],
            ) -> Result<(), $crate::verify::KeyMaterialError> {
                super::public_key::check_secrets::<$scheme>(secrets)
            }

            fn precheck(&self, parts: &http::request::Parts) -> Result<(), $crate::verify::VerifyError> {
                <$scheme as super::public_key::Scheme>::signed(parts).map(drop)
            }

            fn verify(&self, delivery: &$crate::verify::Delivery<'_>) -> Result<(), $crate::verify::VerifyError> {
                super::public_key::verify::<$scheme>(delivery, self.tolerance)
            }
        }
    };
    ($(#[$attr:meta])* pub struct $name:ident; $(#[$new:meta])* fn new(); $(#[$tolerance:meta])* fn tolerance();) => {
        $(#[$attr])*
        #[derive(Debug, Clone)]
        #[must_use]
        pub struct $name {
            tolerance: std::time::Duration,
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl $name {
            $(#[$new])*
            pub fn new() -> Self {
                Self { tolerance: DEFAULT_TOLERANCE }
            }

            $(#[$tolerance])*
            pub fn tolerance(mut self, tolerance: std::time::Duration) -> Self {
                self.tolerance = tolerance;
                self
            }
        }
    };
}

/// A preset's constructor, `Provider::<name>()` (defined in the preset's
/// module, with its docs), and its registry entry, `PRESET`: an HMAC preset
/// named by the module's `NAME` (also its Cargo feature), kept for its
/// `REPLAY_WINDOW`, reading `headers`, whose example delivery carries the
/// headers `signed` makes.
#[allow(unused_macros)] // unused without an HMAC preset
macro_rules! preset {
    (
        $(#[$doc:meta])*
        fn $ctor:ident() = $provider:expr;
        headers: [$($header:expr),* $(,)?],
        signed: $signed:expr $(,)?
    ) => {
        impl $crate::provider::Provider {
            $(#[$doc])*
            pub fn $ctor() -> Self {
                $provider
            }
        }

        /// The registry entry of this preset (see [`REGISTRY`](super::REGISTRY)).
        pub(crate) const PRESET: super::PresetInfo = super::PresetInfo::new(
            NAME,
            NAME,
            REPLAY_WINDOW,
            &[$($header),*],
            |_| $crate::provider::Provider::$ctor(),
            super::ExampleOf::Signed($signed),
        );
    };
}

/// An HMAC preset whole, from its facts: `NAME` (also its Cargo feature),
/// `SIGNATURE_HEADER`, `REPLAY_WINDOW`, the verifier type (as
/// [`hmac_verifier!`] makes it), `sign` (the header value the scheme gives,
/// computed by the verifier's own specification:
/// [`HmacVerifier::sign`](crate::verify::generic::HmacVerifier::sign)), the
/// constructor `Provider::<name>()` and the registry entry `PRESET`, whose
/// example carries the signature header alone (`headers: [...];` lists more
/// headers the preset reads, `signed: <closure>;` makes an example with more
/// headers than the signature, `example_id_header: <header>;` one whose
/// event id travels in that header beside the signature).
///
/// A scheme that sends its signed time in a header of its own names it after
/// the signature header, `timestamp_header: "...";` (made `TIMESTAMP_HEADER`,
/// for the verifier's specification, `headers:` and `signed:` to use).
///
/// A scheme that signs a time states its tolerance, `tolerance: <Duration>;`
/// (made `DEFAULT_TOLERANCE`, with the docs written above it): its verifier is
/// built at that tolerance with a `tolerance` setter, and its `sign` takes the time, `sign(secret,
/// timestamp, body)` (Unix seconds); a scheme that signs the body only has
/// `sign(secret, body)`. `sign: by hand;` leaves `sign` to the module, for a
/// scheme whose signed time is not whole Unix seconds or that signs more than
/// the generic specification knows (its example then needs `signed:`). The
/// docs of `new`, `tolerance` and `sign` are the same for every preset and
/// made here.
#[allow(unused_macros)] // unused without an HMAC preset
macro_rules! hmac_preset {
    (
        name: $name:literal;
        $(#[$header_doc:meta])* header: $header:literal;
        $(#[$timestamp_doc:meta])* timestamp_header: $timestamp:literal;
        $($rest:tt)*
    ) => {
        $(#[$timestamp_doc])*
        pub const TIMESTAMP_HEADER: &str = $timestamp;
        hmac_preset! { name: $name; $(#[$header_doc])* header: $header; $($rest)* }
    };
    (
        name: $name:literal;
        $(#[$header_doc:meta])* header: $header:literal;
        $(#[$window_doc:meta])* replay_window: $window:expr;
        $(#[$attr:meta])* pub struct $verifier:ident = $spec:expr;
        $($rest:tt)*
    ) => {
        /// The preset's name: the claim's `provider` column and the CLI's `--provider` value.
        pub const NAME: &str = $name;
        $(#[$header_doc])*
        pub const SIGNATURE_HEADER: &str = $header;
        $(#[$window_doc])*
        pub const REPLAY_WINDOW: std::time::Duration = $window;
        hmac_preset! { @verifier $header; [$(#[$attr])*] $verifier = $spec; $($rest)* }
    };
    (
        @verifier $header:literal; [$(#[$attr:meta])*] $verifier:ident = $spec:expr;
        $(#[$tolerance_doc:meta])* tolerance: $tolerance:expr; $($rest:tt)*
    ) => {
        $(#[$tolerance_doc])*
        pub const DEFAULT_TOLERANCE: std::time::Duration = $tolerance;
        hmac_verifier! {
            $(#[$attr])* pub struct $verifier = $spec;
            /// A verifier at the preset's tolerance, [`DEFAULT_TOLERANCE`].
            fn new() at DEFAULT_TOLERANCE;
            /// Sets how far, in both directions, the signed timestamp may be
            /// from the clock (default [`DEFAULT_TOLERANCE`]).
            fn tolerance();
        }
        hmac_preset! { @sign timed $header; $verifier; $($rest)* }
    };
    (@verifier $header:literal; [$(#[$attr:meta])*] $verifier:ident = $spec:expr; $($rest:tt)*) => {
        hmac_verifier! {
            $(#[$attr])* pub struct $verifier = $spec;
            #[doc = concat!("A verifier for `", $header, "`, as the module docs describe the scheme.")]
            fn new();
        }
        hmac_preset! { @sign body $header; $verifier; $($rest)* }
    };
    (@sign $kind:ident $header:literal; $verifier:ident; sign: by hand; $(#[$doc:meta])* fn $ctor:ident() = $provider:expr;
        $(headers: [$($more:expr),* $(,)?];)?
        signed: $signed:expr;
    ) => {
        preset! {
            $(#[$doc])*
            fn $ctor() = $provider;
            headers: [SIGNATURE_HEADER $($(, $more)*)?],
            signed: $signed,
        }
    };
    (@sign timed $header:literal; $verifier:ident; $($rest:tt)*) => {
        #[doc = concat!(
            "The `", $header, "` value the sender sends for `body` at `timestamp` (Unix seconds) ",
            "signed with `secret`, made by [`", stringify!($verifier), "`]'s own specification ",
            "([`HmacVerifier::sign`](crate::verify::generic::HmacVerifier::sign)). For tests and fixtures."
        )]
        pub fn sign(secret: &$crate::verify::SigningSecret, timestamp: u64, body: &[u8]) -> String {
            $verifier::new().inner.sign(secret, "", timestamp, body)
        }
        hmac_preset! { @preset |s, _, at, b| vec![(SIGNATURE_HEADER, sign(s, super::unix_seconds(at), b))]; $($rest)* }
    };
    (@sign body $header:literal; $verifier:ident; $($rest:tt)*) => {
        #[doc = concat!(
            "The `", $header, "` value the sender sends for `body` signed with `secret`, made by [`",
            stringify!($verifier), "`]'s own specification ",
            "([`HmacVerifier::sign`](crate::verify::generic::HmacVerifier::sign)). For tests and fixtures."
        )]
        pub fn sign(secret: &$crate::verify::SigningSecret, body: &[u8]) -> String {
            $verifier::new().inner.sign(secret, "", 0, body)
        }
        hmac_preset! { @preset |s, _, _, b| vec![(SIGNATURE_HEADER, sign(s, b))]; $($rest)* }
    };
    (
        @preset $default:expr; $(#[$doc:meta])* fn $ctor:ident() = $provider:expr;
        $(headers: [$($header:expr),* $(,)?];)?
        $(signed: $signed:expr;)?
        $(example_id_header: $id:expr;)?
    ) => {
        preset! {
            $(#[$doc])*
            fn $ctor() = $provider;
            headers: [SIGNATURE_HEADER $($(, $header)*)?],
            signed: hmac_preset!(@signed $default; [$($signed)?] [$($id)?]),
        }
    };
    // The example's headers: the preset's own `signed`, else the signature
    // alone, or the signature and the example's event id in `$id`.
    (@signed $default:expr; [] []) => { $default };
    (@signed $default:expr; [$signed:expr] []) => { $signed };
    (@signed $default:expr; [] [$id:expr]) => {
        |s, id, at, b| {
            let mut headers = ($default)(s, id, at, b);
            headers.push(($id, id.to_owned()));
            headers
        }
    };
}
