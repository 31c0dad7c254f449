//! The crate's shared errors: [`ConfigError`], found when something is built,
//! and [`StoreError`], from any step that talks to the database (public at
//! the crate root), [`KeyMaterialError`] (public in [`verify`](crate::verify)),
//! and [`Cause`], the chain of causes every error with one writes (the crate
//! docs, "Errors", say how it reads).

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// How a driver writes one error of its own in a chain ([`Cause::of`]):
/// `Some(Some(text))` that text (a server error without its detail),
/// `Some(None)` left out (a wrapper whose source says it all), `None` as
/// any other error.
pub(crate) type Describe = fn(&(dyn Error + 'static)) -> Option<Option<String>>;

/// The texts of `e`'s chain, `e` first: one line each, a text the previous
/// one contains left out (a pool's error that writes its backend's error
/// itself, then that error); `own` says how to write the errors a driver
/// knows.
fn texts(e: &(dyn Error + 'static), own: Describe) -> Vec<String> {
    let mut texts: Vec<String> = Vec::new();
    let mut next = Some(e);
    while let Some(e) = next {
        next = e.source();
        let Some(text) = own(e).unwrap_or_else(|| describe(e)) else { continue };
        if texts.last().is_some_and(|last| last.contains(&text)) {
            continue;
        }
        texts.push(text);
    }
    texts
}

/// One error's own text on one line, or `None` when it has none.
fn describe(e: &(dyn Error + 'static)) -> Option<String> {
    let text = e.to_string();
    let text = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ");
    (!text.is_empty()).then_some(text)
}

/// One cause in the chain of a crate error ([`StoreError`], `CommitError`,
/// `TxError`): the text of a driver error (or of the I/O, TLS or server
/// error behind it), kept as text so the crate's errors stay `Clone` and
/// expose no third-party type, its own cause as its
/// [`source`](Error::source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cause {
    message: String,
    source: Option<Arc<Cause>>,
}

impl Cause {
    /// A cause with this text and no source.
    pub(crate) fn new(message: impl Into<String>) -> Arc<Self> {
        Arc::new(Self { message: message.into(), source: None })
    }

    /// `e`'s chain as causes, one line each, a text the previous one
    /// contains left out, `own` writing the errors of a driver (its server
    /// errors without their detail, its wrappers left out); `None` when it
    /// has no text.
    pub(crate) fn of(e: &(dyn Error + 'static), own: Describe) -> Option<Arc<Self>> {
        Self::from_texts(texts(e, own))
    }

    /// `message` in front of `source`'s chain.
    pub(crate) fn with_source(message: impl Into<String>, source: Option<Arc<Self>>) -> Arc<Self> {
        Arc::new(Self { message: message.into(), source })
    }

    fn from_texts(texts: Vec<String>) -> Option<Arc<Self>> {
        texts.into_iter().rev().fold(None, |source, message| Some(Self::with_source(message, source)))
    }

    /// Writes `": "` and each cause from `cause` on, leaving out one that
    /// `written` (the message so far) already ends with.
    pub(crate) fn write_chain(f: &mut fmt::Formatter<'_>, written: &str, cause: Option<&Self>) -> fmt::Result {
        let mut last = written.to_owned();
        let mut next = cause;
        while let Some(c) = next {
            if !last.contains(&c.message) {
                write!(f, ": {}", c.message)?;
                last.clone_from(&c.message);
            }
            next = c.source.as_deref();
        }
        Ok(())
    }

    /// Writes this cause, then `": "` and each of its sources.
    pub(crate) fn write_whole(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        Self::write_chain(f, &self.message, self.source.as_deref())
    }

    /// `cause` as a `source()` value.
    pub(crate) fn as_source(cause: &Option<Arc<Self>>) -> Option<&(dyn Error + 'static)> {
        cause.as_deref().map(|c| c as _)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for Cause {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Self::as_source(&self.source)
    }
}

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
    /// A scope or provider name that is not 1 to 512 bytes without NUL, a
    /// provider named `idempotency-key` (reserved for the Idempotency-Key
    /// layer's rows, [`idempotency_key::PROVIDER`](crate::idempotency_key::PROVIDER)),
    /// or a worker's provider filter no compiled preset has.
    InvalidName,
    /// Key material that authenticates nothing (see [`ConfigError::key_material`]).
    KeyMaterial,
    /// A fixed secret with leading or trailing whitespace.
    SecretWhitespace,
    /// A schema name that is not a plain lower-case identifier.
    InvalidSchema,
    /// A credential header (`set-cookie`, `authorization`, ...) among the
    /// `Idempotency-Key` layer's replay headers without its explicit opt-in
    /// ([`IdempotencyKeyLayerBuilder::allow_credential_replay_headers`](crate::idempotency_key::IdempotencyKeyLayerBuilder::allow_credential_replay_headers)).
    CredentialReplayHeader,
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
        let own = format!("invalid webhook-idempotency configuration: {}", self.message);
        f.write_str(&own)?;
        write_sources(f, &own, self.key_material.as_ref().map(|e| e as _))
    }
}

/// Writes `": "` and each text of `source`'s chain (see [`Cause::of`]) that
/// `own`, the message written so far, does not already contain.
fn write_sources(f: &mut fmt::Formatter<'_>, own: &str, source: Option<&(dyn Error + 'static)>) -> fmt::Result {
    let Some(source) = source else { return Ok(()) };
    let mut last = own.to_owned();
    for text in texts(source, |_| None) {
        if !last.contains(&text) {
            write!(f, ": {text}")?;
            last = text;
        }
    }
    Ok(())
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
/// `Display` names the step and the configured `host:port` for connection
/// errors and timeouts, then the whole chain of causes, `": "`-separated: the driver's
/// error and what is behind it (`Connection refused (os error 111)`, a
/// certificate the client does not trust, `server does not support TLS`,
/// the deadline that passed), or the server's severity, primary message and
/// SQLSTATE for errors the server reported (`ERROR: cannot execute INSERT in
/// a read-only transaction (SQLSTATE 25006)`, `FATAL: password
/// authentication failed for user "app" (SQLSTATE 28P01)`; with its detail
/// and hint only for the migrations and the schema check, whose statements
/// carry no event data). Never the password, a payload or a signing secret.
///
/// The causes are also the [`source`](std::error::Error::source) chain (as
/// text: no driver type is exposed); a reporter that prints the sources
/// after the message (anyhow's `{:#}`, eyre) shows them twice.
#[derive(Debug, Clone)]
pub struct StoreError {
    kind: StoreErrorKind,
    step: String,
    sqlstate: Option<String>,
    detail: String,
    endpoint: Option<String>,
    source: Option<Arc<Cause>>,
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
    /// ([`StoreConfig::pool_timeout`](crate::StoreConfig::pool_timeout)).
    PoolTimeout,
    /// The database did not answer within the step deadline
    /// ([`StoreConfig::database_timeout`](crate::StoreConfig::database_timeout));
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
    /// do not exist; run [`migrate`](crate::migrate) or the SQL files
    /// under `sql/`.
    NotMigrated,
    /// [`check_schema`](crate::store::check_schema): the recorded migrations
    /// are older than [`SCHEMA_VERSION`](crate::store::SCHEMA_VERSION); run
    /// the migrations again.
    Outdated,
    /// [`colocate`](crate::store::colocate): the table is already a Citus
    /// table of another kind (a reference table, distributed by another
    /// column, or not colocated with the claims); nothing was changed.
    NotColocated,
    /// Synchronous replication is configured and the standby did not
    /// confirm, within the database timeout, the commit of the stored outcome
    /// a duplicate would be answered from (or the confirming commit failed):
    /// the layers answer 503 + `Retry-After`, never the stored outcome; a
    /// later delivery checks again. See
    /// [`StoreConfig::synchronous_replication`](crate::StoreConfig::synchronous_replication).
    Unconfirmed,
}

impl StoreError {
    /// An error of `kind` in `step` ("claim", "migrate: BEGIN", ...).
    pub(crate) fn new(kind: StoreErrorKind, step: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { kind, step: step.into(), sqlstate: None, detail: detail.into(), endpoint: None, source: None }
    }

    setters! {
        /// The same error caused by `cause` (its chain follows the message).
        pub(crate) fn with_cause(cause: Option<Arc<Cause>>) => source = cause;

        /// The same error with the server's SQLSTATE.
        pub(crate) fn with_sqlstate(code: impl Into<String>) => sqlstate = Some(code.into());

        /// The same error naming the configured server, `host:port` (for
        /// connection errors, raised before a session existed).
        pub(crate) fn with_endpoint(endpoint: Option<String>) => endpoint = endpoint;
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
        use fmt::Write as _;
        let mut own = format!("webhook-idempotency store: {} failed", self.step);
        if let Some(endpoint) = &self.endpoint {
            write!(own, " (server {endpoint})")?;
        }
        if let (Some(code), None) = (&self.sqlstate, &self.source) {
            write!(own, ": SQLSTATE {code}")?; // a server error as the cause names it
        }
        if !self.detail.is_empty() {
            write!(own, ": {}", self.detail)?;
        }
        f.write_str(&own)?;
        Cause::write_chain(f, &own, self.source.as_deref())
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Cause::as_source(&self.source)
    }
}

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
    /// A shared token or an HTTP Basic password shorter than
    /// [`MIN_CREDENTIAL_BYTES`](crate::verify::generic::MIN_CREDENTIAL_BYTES)
    /// (16) bytes, or an empty Basic password: the credential alone
    /// authenticates any delivery, so it must not be guessable
    /// ([`TokenHeaderVerifier`](crate::verify::generic::TokenHeaderVerifier),
    /// [`BasicAuthVerifier`](crate::verify::generic::BasicAuthVerifier)).
    WeakCredential,
}

kind_names!(KeyMaterialErrorKind {
    NoSecret => "no_secret",
    Empty => "empty_secret",
    OnlyPrefix => "only_prefix",
    Malformed => "malformed_secret",
    TooShort => "secret_too_short",
    TooLong => "secret_too_long",
    InvalidPublicKey => "invalid_public_key",
    WeakCredential => "weak_credential",
});

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

    /// The same error for the secret at `index` of the whole list (a
    /// verifier that checks its secrets one by one, as GitLab's two kinds).
    #[cfg_attr(not(feature = "gitlab"), allow(dead_code))]
    pub(crate) fn at(self, index: usize) -> Self {
        Self { index: Some(index), ..self }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a message and an optional source, as drivers build them.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<dyn Error + Send + Sync>>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn a_chain_names_every_cause_once_on_one_line() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let refused_text = refused.to_string();
        // A pool's Backend(e) writes e itself; the driver's error does not write its cause.
        let pg = Layer("error connecting to server", Some(Box::new(refused)));
        let pool = Layer("Error occurred while creating a new object: error connecting to server", Some(Box::new(pg)));
        let text = texts(&pool, |_| None).join(": ");
        assert_eq!(
            text,
            format!("Error occurred while creating a new object: error connecting to server: {refused_text}")
        );
        let hook = Layer("`post_create` hook failed: x\n", Some(Box::new(Layer("line one\nline two", None))));
        assert_eq!(texts(&hook, |_| None).join(": "), "`post_create` hook failed: x: line one; line two");
    }

    #[test]
    fn a_store_error_writes_its_causes_and_returns_them_as_sources() {
        let pg = Layer("error connecting to server", Some(Box::new(Layer("Connection refused (os error 111)", None))));
        let e = StoreError::new(StoreErrorKind::Unavailable, "claim", "")
            .with_cause(Cause::of(&pg, |_| None))
            .with_endpoint(Some("127.0.0.1:1".into()));
        assert_eq!(
            e.to_string(),
            "webhook-idempotency store: claim failed (server 127.0.0.1:1): error connecting to server: Connection \
             refused (os error 111)"
        );
        let sources: Vec<String> = std::iter::successors(e.source(), |s: &&(dyn Error + 'static)| (*s).source())
            .map(ToString::to_string)
            .collect();
        assert_eq!(sources, ["error connecting to server", "Connection refused (os error 111)"]);
        let own = StoreError::new(StoreErrorKind::PoolTimeout, "claim", "no connection");
        assert_eq!(own.to_string(), "webhook-idempotency store: claim failed: no connection");
        assert!(own.source().is_none());
    }

    #[test]
    fn a_config_error_writes_its_key_material_error_once() {
        let km = KeyMaterialError::new(KeyMaterialErrorKind::Empty, Some(0), "set the secret");
        let with_text = ConfigError::key_material_of(format!("stripe layer: {km}"), km.clone());
        assert_eq!(
            with_text.to_string(),
            "invalid webhook-idempotency configuration: stripe layer: signing secret #1 is unusable (empty_secret): \
             set the secret"
        );
        let without = ConfigError::key_material_of("stripe layer", km);
        assert_eq!(
            without.to_string(),
            "invalid webhook-idempotency configuration: stripe layer: signing secret #1 is unusable (empty_secret): \
             set the secret"
        );
    }
}
