//! `timed_verifier!`: the shell of a preset written as code whose one
//! setting is the tolerance of its signed time (Linear, Recurly, Mailgun, and
//! the public-key Discord and SendGrid). The HMAC-family presets are data
//! (`providers::HmacPreset`) and use no macro.

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
