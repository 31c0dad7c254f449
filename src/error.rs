//! The crate's shared errors: [`ConfigError`], found when something is built,
//! and [`StoreError`], from any step that talks to the database.
//!
//! Both follow the house style (tower-http's): an opaque struct with a
//! `kind()` and a `#[non_exhaustive]` kind enum, no third-party error type in
//! the public signature, and a message that never contains a secret or a
//! payload.

use std::fmt;

/// An invalid configuration (of a layer, a worker, a store configuration, a
/// verifier, a secret), found when it is built rather than on the first
/// delivery.
///
/// [`kind`](Self::kind) says what is wrong; unusable key material also
/// carries the [`KeyMaterialError`] ([`key_material`](Self::key_material),
/// and as the [`source`](std::error::Error::source)). The message names the
/// provider where it matters and never contains a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    kind: ConfigErrorKind,
    message: String,
    key_material: Option<KeyMaterialError>,
}

/// What a [`ConfigError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// Neither a fixed scope nor a resolver, or both.
    Endpoint,
    /// Secrets set beside a resolver (the resolver supplies them).
    SecretsWithResolver,
    /// A scope or provider name that is not 1 to 512 bytes without NUL.
    InvalidName,
    /// Key material that authenticates nothing (see [`ConfigError::key_material`]).
    KeyMaterial,
    /// A fixed secret with leading or trailing whitespace.
    SecretWhitespace,
    /// A schema name that is not a plain lower-case identifier.
    InvalidSchema,
    /// A limit or timeout out of its range (body limit 0, `lock_timeout`, a
    /// worker's concurrency or lease).
    InvalidLimit,
    /// The operator-replay token is shorter than 16 bytes.
    WeakReplayToken,
    /// An inbox integrity key shorter than 32 bytes.
    WeakIntegrityKey,
    /// A verifier's own configuration is inconsistent (the generic HMAC builder).
    InvalidVerifier,
}

impl ConfigError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self::of(ConfigErrorKind::InvalidVerifier, message)
    }

    pub(crate) fn of(kind: ConfigErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), key_material: None }
    }

    pub(crate) fn key_material_of(message: impl Into<String>, e: KeyMaterialError) -> Self {
        Self { kind: ConfigErrorKind::KeyMaterial, message: message.into(), key_material: Some(e) }
    }

    /// What is wrong.
    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }

    /// The key-material problem behind this error, if that is what it is.
    pub fn key_material(&self) -> Option<&KeyMaterialError> {
        self.key_material.as_ref()
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid webhook-idempotency configuration: {}", self.message)
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.key_material.as_ref().map(|e| e as _)
    }
}

/// A database step that failed: no connection, a refused login, a statement
/// the server refused, no answer within the configured deadline, or a schema
/// that is not migrated. Returned by the claim, the inbox's accept, the
/// operator API ([`Admin`](crate::store::admin::Admin)), retention and the
/// migrations.
///
/// `Display` names the step, the SQLSTATE and the server's primary message
/// for errors the server reported (with its detail and hint only for the
/// migrations and the schema check, whose statements carry no event data),
/// and the configured `host:port` for connection errors; never the password,
/// a payload or a signing secret.
#[derive(Debug, Clone)]
pub struct StoreError {
    kind: StoreErrorKind,
    step: String,
    sqlstate: Option<String>,
    detail: String,
    endpoint: Option<String>,
}

/// What a [`StoreError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// No connection to the server: refused, unreachable, name resolution,
    /// TLS, the connection closed, or the pool is closed. `Display` names the
    /// configured `host:port`.
    Unavailable,
    /// The server refused the login: SQLSTATE 28000 (role does not exist, no
    /// `pg_hba.conf` entry) or 28P01 (wrong password).
    Authentication,
    /// The database named in the configuration does not exist: SQLSTATE 3D000.
    DatabaseMissing,
    /// No pooled connection within the pool timeout
    /// ([`StoreConfig::pool_timeout`](crate::store::StoreConfig::pool_timeout)).
    PoolTimeout,
    /// The database did not answer within the step deadline
    /// ([`StoreConfig::database_timeout`](crate::store::StoreConfig::database_timeout));
    /// the connection was discarded, never pooled.
    Timeout,
    /// A statement failed on the server; [`StoreError::sqlstate`] says why
    /// (42501: the role may not create the schema, 3F000: the schema is
    /// missing, 25006: the server is read-only, ...).
    Database,
    /// The schema name is not a plain identifier (lower-case ASCII letters,
    /// digits and `_`, not starting with a digit, at most 63 bytes).
    InvalidSchemaName,
    /// [`check_schema`](crate::store::check_schema): the schema or its tables
    /// do not exist; run [`migrate`](crate::store::migrate) /
    /// [`migrate_schema`](crate::store::migrate_schema) or the SQL files
    /// under `sql/`.
    NotMigrated,
    /// [`check_schema`](crate::store::check_schema): the recorded migrations
    /// are older than [`SCHEMA_VERSION`](crate::store::SCHEMA_VERSION); run
    /// the migrations again.
    Outdated,
}

impl StoreError {
    /// An error of `kind` in `step` ("claim", "migrate: BEGIN", ...).
    pub(crate) fn new(kind: StoreErrorKind, step: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { kind, step: step.into(), sqlstate: None, detail: detail.into(), endpoint: None }
    }

    /// The same error with the server's SQLSTATE.
    pub(crate) fn with_sqlstate(mut self, code: impl Into<String>) -> Self {
        self.sqlstate = Some(code.into());
        self
    }

    /// The same error naming the configured server, `host:port` (for
    /// connection errors, raised before a session existed).
    pub(crate) fn with_endpoint(mut self, endpoint: Option<String>) -> Self {
        self.endpoint = endpoint;
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// The five-character SQLSTATE the server answered with (PostgreSQL docs,
    /// Appendix A "PostgreSQL Error Codes"), if any: `3D000` database missing,
    /// `28P01` wrong password, `42501` insufficient privilege, ...
    pub fn sqlstate(&self) -> Option<&str> {
        self.sqlstate.as_deref()
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "webhook-idempotency store: {} failed", self.step)?;
        if let Some(endpoint) = &self.endpoint {
            write!(f, " (server {endpoint})")?;
        }
        if let Some(code) = &self.sqlstate {
            write!(f, ": SQLSTATE {code}")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for StoreError {}

/// Why configured key material cannot authenticate deliveries. See
/// [`KeyMaterialError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyMaterialErrorKind {
    /// No secret is configured at all.
    NoSecret,
    /// A secret of zero bytes (what `${VAR}` gives for an unset variable):
    /// anyone can compute an HMAC with an empty key.
    Empty,
    /// A secret that is only a provider prefix (a bare `whsec_`), so no key
    /// follows it.
    OnlyPrefix,
    /// Not in the format the provider issues (a missing `whsec_` prefix,
    /// text that is not base64, a private key where a public one belongs).
    Malformed,
    /// Fewer key bytes than the provider's documented minimum.
    TooShort,
    /// More key bytes than the provider's documented maximum.
    TooLong,
    /// A public key that does not decode to a valid key (Ed25519, P-256).
    InvalidPublicKey,
}

impl KeyMaterialErrorKind {
    /// A stable `snake_case` name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSecret => "no_secret",
            Self::Empty => "empty_secret",
            Self::OnlyPrefix => "only_prefix",
            Self::Malformed => "malformed_secret",
            Self::TooShort => "secret_too_short",
            Self::TooLong => "secret_too_long",
            Self::InvalidPublicKey => "invalid_public_key",
        }
    }
}

impl fmt::Display for KeyMaterialErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Unusable key material, from [`Verifier::check_secrets`](crate::verify::Verifier::check_secrets): which secret (its
/// position in the configured list) and why, with a hint; never the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyMaterialError {
    kind: KeyMaterialErrorKind,
    index: Option<usize>,
    hint: &'static str,
}

impl KeyMaterialError {
    /// An error of `kind` about the secret at `index` (0-based; `None` for
    /// the list as a whole), with a short `hint` on how to fix it.
    pub fn new(kind: KeyMaterialErrorKind, index: Option<usize>, hint: &'static str) -> Self {
        Self { kind, index, hint }
    }

    /// Why the key material is unusable.
    pub fn kind(&self) -> KeyMaterialErrorKind {
        self.kind
    }

    /// The position of the offending secret in the configured list, 0-based.
    pub fn index(&self) -> Option<usize> {
        self.index
    }
}

impl fmt::Display for KeyMaterialError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "signing secret #{} is unusable ({}): {}", i + 1, self.kind, self.hint),
            None => write!(f, "signing secrets unusable ({}): {}", self.kind, self.hint),
        }
    }
}

impl std::error::Error for KeyMaterialError {}
