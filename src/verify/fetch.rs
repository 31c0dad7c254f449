//! [`KeyFetcher`]: a signing key or certificate the sender publishes at a
//! URL named in the delivery (AWS SNS's `SigningCertURL`), fetched safely
//! and cached.
//!
//! A delivery's URL is attacker-controlled until the signature it leads to
//! has verified, so the fetcher:
//!
//! - checks the URL **before any network access**: `https` only, no user
//!   information, the default port (443), a host matching the allowlist
//!   ([`HostPattern`]), and, where set, a path suffix (`.pem`);
//! - reads at most [`max_bytes`](KeyFetcherBuilder::max_bytes) bytes (64 KiB
//!   by default), within [`timeout`](KeyFetcherBuilder::timeout) (5 s), and
//!   follows no redirect (the transport's job; [`HttpsTransport`] does not);
//! - caches each key for [`max_age`](KeyFetcherBuilder::max_age) (1 hour):
//!   one fetch per URL per period, however many deliveries name it, and one
//!   at a time per URL (concurrent deliveries wait for the one fetch);
//! - fetches at most [`fetches_per_minute`](KeyFetcherBuilder::fetches_per_minute)
//!   times a minute (10) in all, and remembers at most
//!   [`max_keys`](KeyFetcherBuilder::max_keys) URLs (256): a flood of
//!   unauthenticated deliveries naming fresh allowed URLs costs at most that
//!   many requests to the sender's host, and is answered
//!   [`FetchErrorKind::Budget`] (the layer: 503 + `Retry-After`, so a real
//!   sender retries) while keys already cached keep verifying.
//!
//! A verifier that needs a key fetches it in
//! [`Verifier::prepare`](crate::verify::Verifier::prepare), which the layer
//! awaits before verifying, and reads it in `verify` with
//! [`KeyFetcher::cached`]. The network is behind [`KeyTransport`]:
//! [`HttpsTransport`] (reqwest with rustls and the Mozilla roots, feature
//! `aws-sns`), or [`StaticTransport`], a test double that serves fixed bytes
//! and counts its fetches, for offline tests.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

/// Why a key could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FetchErrorKind {
    /// The URL is not one the fetcher may fetch (not `https`, user
    /// information, another port, a host outside the allowlist, another
    /// path): refused before any network access. The layer answers 401.
    NotAllowed,
    /// The fetch budget is spent (too many fetches this minute, or too many
    /// URLs remembered): nothing was fetched. The layer answers 503.
    Budget,
    /// The fetch failed: network, TLS, a status other than 200 (a redirect
    /// included), or no answer within the timeout. The layer answers 503.
    Unavailable,
    /// The answer is over the size cap. The layer answers 503.
    TooLarge,
    /// The answer is not a key of the expected form (the parser refused it).
    /// The layer answers 503.
    Invalid,
}

kind_names!(FetchErrorKind {
    NotAllowed => "key_url_not_allowed",
    Budget => "key_fetch_budget",
    Unavailable => "key_unavailable",
    TooLarge => "key_too_large",
    Invalid => "key_invalid",
});

kind_error! {
    /// A key fetch refused or failed; [`kind`](FetchError::kind) says why.
    /// Never carries the URL's query or the answer's bytes.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct FetchError(FetchErrorKind);
    /// A fetch error of `kind`.
    fn new();
    /// Why the key could not be had.
    fn kind();
    display: |kind, f| write!(f, "fetching the sender's signing key failed: {kind}");
}

/// A boxed future, as [`KeyTransport::get`] returns.
pub type BoxFetch<'a> = Pin<Box<dyn Future<Output = Result<Bytes, FetchError>> + Send + 'a>>;

/// The future [`Verifier::prepare`](crate::verify::Verifier::prepare) returns.
pub type BoxPrepare<'a> = Pin<Box<dyn Future<Output = Result<(), FetchError>> + Send + 'a>>;

/// The network under a [`KeyFetcher`]: one `GET` of an already allowed URL.
pub trait KeyTransport: Send + Sync + 'static {
    /// The body of a `200` answer to `GET url`, at most `max_bytes` bytes.
    ///
    /// # Errors
    /// [`FetchErrorKind::Unavailable`] for a network or TLS failure or any
    /// status but 200 (redirects are not followed), and
    /// [`FetchErrorKind::TooLarge`] past `max_bytes`.
    fn get(&self, url: &http::Uri, max_bytes: usize) -> BoxFetch<'_>;
}

/// A host the fetcher may fetch from: an exact name (`cert.example.com`), or
/// a pattern whose `*` stands for one DNS label of letters, digits and `-`,
/// and whose `{region}` stands for one AWS region name only (letters, then
/// `-`-separated words, then `-` and digits: `us-east-1`, `us-gov-west-1`,
/// `cn-north-1`; not `s3` nor `s3-us-west-2`, so an S3 bucket's website
/// name such as `sns.s3.amazonaws.com` never matches
/// `sns.{region}.amazonaws.com`). Compared in ASCII lower case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern(String);

impl HostPattern {
    /// The pattern `pattern` (see the type's docs).
    pub fn new(pattern: impl Into<String>) -> Self {
        Self(pattern.into().to_ascii_lowercase())
    }

    /// Whether `host` matches.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        let (mut want, mut got) = (self.0.split('.'), host.split('.'));
        loop {
            match (want.next(), got.next()) {
                (None, None) => return true,
                (Some("*"), Some(label)) => {
                    let ok = !label.is_empty() && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
                    if !ok {
                        return false;
                    }
                }
                (Some("{region}"), Some(label)) if aws_region(label) => {}
                (Some(w), Some(g)) if w == g && !g.is_empty() => {}
                _ => return false,
            }
        }
    }
}

/// An AWS region name: two letters, one or more `-word`s, `-` and digits.
fn aws_region(label: &str) -> bool {
    let parts: Vec<&str> = label.split('-').collect();
    let letters = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase());
    parts.len() >= 3
        && parts[0].len() == 2
        && letters(parts[0])
        && parts[1..parts.len() - 1].iter().all(|p| letters(p))
        && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
        && !parts[parts.len() - 1].is_empty()
}

/// One URL's fetch lock: held while the URL is fetched, so concurrent
/// deliveries naming it wait for the one fetch.
type Turn = Arc<tokio::sync::Mutex<()>>;

/// Fetches, checks and caches the keys a sender publishes (see the
/// [module docs](self)). `K` is the parsed key (a certificate's public
/// key); clones share one cache.
pub struct KeyFetcher<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for KeyFetcher<K> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

impl<K> std::fmt::Debug for KeyFetcher<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyFetcher").field("hosts", &self.inner.hosts).finish_non_exhaustive()
    }
}

struct Inner<K> {
    hosts: Vec<HostPattern>,
    path_prefix: Option<&'static str>,
    path_suffix: Option<&'static str>,
    max_bytes: usize,
    timeout: Duration,
    max_age: Duration,
    fetches_per_minute: u32,
    max_keys: usize,
    parse: Box<dyn Fn(&[u8]) -> Option<K> + Send + Sync>,
    transport: Arc<dyn KeyTransport>,
    /// The keys fetched, by URL, with when.
    keys: Mutex<HashMap<String, (Arc<K>, Instant)>>,
    /// The URLs being fetched.
    turns: Mutex<HashMap<String, Turn>>,
    /// The current minute's start and the fetches made in it.
    budget: Mutex<(Instant, u32)>,
}

/// Builds a [`KeyFetcher`]: [`KeyFetcher::builder`].
#[must_use]
pub struct KeyFetcherBuilder<K> {
    inner: Inner<K>,
}

impl<K: Send + Sync + 'static> KeyFetcher<K> {
    /// A fetcher over `transport` for the hosts `hosts` (at least one), whose
    /// answers `parse` turns into keys (`None`: not a key of the expected
    /// form). Defaults: 64 KiB, 5 s, cached 1 hour, 10 fetches a minute, 256
    /// URLs.
    pub fn builder(
        hosts: impl IntoIterator<Item = HostPattern>,
        transport: impl KeyTransport,
        parse: impl Fn(&[u8]) -> Option<K> + Send + Sync + 'static,
    ) -> KeyFetcherBuilder<K> {
        KeyFetcherBuilder {
            inner: Inner {
                hosts: hosts.into_iter().collect(),
                path_prefix: None,
                path_suffix: None,
                max_bytes: 64 * 1024,
                timeout: Duration::from_secs(5),
                max_age: Duration::from_secs(3600),
                fetches_per_minute: 10,
                max_keys: 256,
                parse: Box::new(parse),
                transport: Arc::new(transport),
                keys: Mutex::new(HashMap::new()),
                turns: Mutex::new(HashMap::new()),
                budget: Mutex::new((Instant::now(), 0)),
            },
        }
    }

    /// `url` checked against the fetcher's rules, without any network
    /// access.
    ///
    /// # Errors
    /// [`FetchErrorKind::NotAllowed`] (see the [module docs](self)).
    pub fn allowed(&self, url: &str) -> Result<http::Uri, FetchError> {
        let refused = || FetchError::new(FetchErrorKind::NotAllowed);
        let uri: http::Uri = url.parse().map_err(|_| refused())?;
        let authority = uri.authority().ok_or_else(refused)?;
        let https = uri.scheme_str() == Some("https");
        let plain = !authority.as_str().contains('@') && matches!(authority.port_u16(), None | Some(443));
        let host_ok = self.inner.hosts.iter().any(|h| h.matches(authority.host()));
        let path = uri.path();
        let path_ok = self.inner.path_prefix.is_none_or(|p| path.starts_with(p))
            && self.inner.path_suffix.is_none_or(|s| path.ends_with(s))
            && uri.query().is_none()
            && !url.contains('#');
        if https && plain && host_ok && path_ok {
            Ok(uri)
        } else {
            Err(refused())
        }
    }

    /// The key at `url`, from the cache when fetched within the maximum age,
    /// else fetched now (one fetch per URL at a time; see the
    /// [module docs](self) for the limits).
    ///
    /// # Errors
    /// A [`FetchError`]; nothing is cached then.
    pub async fn get(&self, url: &str) -> Result<Arc<K>, FetchError> {
        let uri = self.allowed(url)?;
        if let Some(key) = self.fresh(url) {
            return Ok(key);
        }
        let turn = {
            let mut turns = lock(&self.inner.turns);
            if turns.len() >= self.inner.max_keys && !turns.contains_key(url) {
                return self.stale_or(url, FetchErrorKind::Budget.into());
            }
            Arc::clone(turns.entry(url.to_owned()).or_default())
        };
        // Forgets the URL's turn when no one else waits on it, however this
        // call ends: answered, failed, or dropped mid-fetch (a client gone).
        let _forget = ForgetTurn { fetcher: self, url, turn: &turn };
        let _turn = turn.lock().await;
        match self.fresh(url) {
            // Fetched by the delivery this one waited for.
            Some(key) => Ok(key),
            None => match self.fetch(url, &uri).await {
                Ok(key) => Ok(key),
                Err(e) => self.stale_or(url, e),
            },
        }
    }

    /// The key kept for `url` past its maximum age, when a new one cannot be
    /// had (the budget spent, the host failing): a sender's certificate at one
    /// URL does not change, so the old one still verifies; else `error`.
    fn stale_or(&self, url: &str, error: FetchError) -> Result<Arc<K>, FetchError> {
        match self.cached(url) {
            Some(key) => {
                tracing::warn!(
                    reason = error.kind().as_str(),
                    "a key past its maximum age is used: no new one could be had"
                );
                Ok(key)
            }
            None => Err(error),
        }
    }

    /// Fetches, parses and caches the key at `uri`.
    async fn fetch(&self, url: &str, uri: &http::Uri) -> Result<Arc<K>, FetchError> {
        self.spend()?;
        let fetch = self.inner.transport.get(uri, self.inner.max_bytes);
        let bytes = tokio::time::timeout(self.inner.timeout, fetch)
            .await
            .map_err(|_| FetchError::new(FetchErrorKind::Unavailable))??;
        if bytes.len() > self.inner.max_bytes {
            return Err(FetchErrorKind::TooLarge.into());
        }
        let key = Arc::new((self.inner.parse)(&bytes).ok_or(FetchError::new(FetchErrorKind::Invalid))?);
        let mut keys = lock(&self.inner.keys);
        if keys.len() >= self.inner.max_keys {
            let max_age = self.inner.max_age;
            keys.retain(|_, (_, at)| at.elapsed() < max_age);
        }
        if keys.len() >= self.inner.max_keys && !keys.contains_key(url) {
            return Err(FetchErrorKind::Budget.into());
        }
        keys.insert(url.to_owned(), (Arc::clone(&key), Instant::now()));
        Ok(key)
    }

    /// Puts the key `bytes` (as the sender serves it) in the cache for `url`,
    /// as if fetched now: a key known in advance (a certificate saved from
    /// the sender, an offline check, a test). Spends no fetch.
    ///
    /// # Errors
    /// [`FetchErrorKind::NotAllowed`] for a URL the fetcher would not fetch,
    /// [`FetchErrorKind::Invalid`] for bytes that are not a key.
    pub fn insert(&self, url: &str, bytes: &[u8]) -> Result<(), FetchError> {
        self.allowed(url)?;
        let key = Arc::new((self.inner.parse)(bytes).ok_or(FetchError::new(FetchErrorKind::Invalid))?);
        lock(&self.inner.keys).insert(url.to_owned(), (key, Instant::now()));
        Ok(())
    }

    /// The key at `url` if cached, whatever its age, without waiting or
    /// fetching: what a verifier's `verify` reads after its `prepare` ran
    /// [`get`](Self::get) (which refreshed it, or kept it when no new one
    /// could be had).
    pub fn cached(&self, url: &str) -> Option<Arc<K>> {
        lock(&self.inner.keys).get(url).map(|(key, _)| Arc::clone(key))
    }

    /// The key at `url` if cached within the maximum age.
    fn fresh(&self, url: &str) -> Option<Arc<K>> {
        let keys = lock(&self.inner.keys);
        let (key, at) = keys.get(url)?;
        (at.elapsed() < self.inner.max_age).then(|| Arc::clone(key))
    }

    /// Takes one fetch from this minute's budget.
    fn spend(&self) -> Result<(), FetchError> {
        let mut budget = lock(&self.inner.budget);
        if budget.0.elapsed() >= Duration::from_secs(60) {
            *budget = (Instant::now(), 0);
        }
        if budget.1 >= self.inner.fetches_per_minute {
            tracing::warn!("the key fetch budget of this minute is spent; refusing further fetches");
            return Err(FetchErrorKind::Budget.into());
        }
        budget.1 += 1;
        Ok(())
    }
}

/// Removes a URL's turn from the map when its last waiter is done.
struct ForgetTurn<'a, K> {
    fetcher: &'a KeyFetcher<K>,
    url: &'a str,
    turn: &'a Turn,
}

impl<K> Drop for ForgetTurn<'_, K> {
    fn drop(&mut self) {
        let mut turns = lock(&self.fetcher.inner.turns);
        // The map's and this call's: no one else waits on this URL.
        if Arc::strong_count(self.turn) == 2 {
            turns.remove(self.url);
        }
    }
}

/// The guard of `mutex`, poisoned or not (its data stays consistent: every
/// critical section is one insert, remove or read).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl<K: Send + Sync + 'static> KeyFetcherBuilder<K> {
    setters! {
        /// Only URLs whose path starts with `prefix` (`/SimpleNotificationService-`).
        pub fn path_prefix(prefix: &'static str) => inner.path_prefix = Some(prefix);
        /// Only URLs whose path ends with `suffix` (`.pem`).
        pub fn path_suffix(suffix: &'static str) => inner.path_suffix = Some(suffix);
        /// The most bytes an answer may have (default 64 KiB).
        pub fn max_bytes(bytes: usize) => inner.max_bytes = bytes;
        /// How long one fetch may take (default 5 s).
        pub fn timeout(timeout: Duration) => inner.timeout = timeout;
        /// How long a fetched key is used before it is fetched again (default 1 hour).
        pub fn max_age(age: Duration) => inner.max_age = age;
        /// The most fetches a minute, all URLs together (default 10).
        pub fn fetches_per_minute(fetches: u32) => inner.fetches_per_minute = fetches;
        /// The most URLs remembered at once (default 256).
        pub fn max_keys(keys: usize) => inner.max_keys = keys;
    }

    /// The fetcher.
    pub fn build(self) -> KeyFetcher<K> {
        KeyFetcher { inner: Arc::new(self.inner) }
    }
}

/// A [`KeyTransport`] for offline tests: serves fixed bytes per URL (any
/// other URL: [`FetchErrorKind::Unavailable`], as a 404), after an optional
/// delay, and counts the fetches it served.
#[derive(Debug, Clone, Default)]
pub struct StaticTransport {
    answers: Arc<HashMap<String, Bytes>>,
    delay: Duration,
    fetches: Arc<AtomicUsize>,
}

impl StaticTransport {
    /// Serves `answers` (URL → body).
    pub fn new(answers: impl IntoIterator<Item = (String, Bytes)>) -> Self {
        Self { answers: Arc::new(answers.into_iter().collect()), ..Self::default() }
    }

    setters! {
        /// Waits `delay` before each answer (a slow host).
        pub fn delay(delay: Duration) => delay = delay;
    }

    /// How many `GET`s it has answered or refused so far.
    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

impl KeyTransport for StaticTransport {
    fn get(&self, url: &http::Uri, max_bytes: usize) -> BoxFetch<'_> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        let answer = self.answers.get(&url.to_string()).cloned();
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            let bytes = answer.ok_or(FetchError::new(FetchErrorKind::Unavailable))?;
            if bytes.len() > max_bytes {
                return Err(FetchErrorKind::TooLarge.into());
            }
            Ok(bytes)
        })
    }
}

/// The [`KeyTransport`] over HTTPS: reqwest with rustls and the Mozilla
/// roots (webpki-roots), no redirects followed (a redirect is an answer
/// other than 200: refused), no proxy from the environment, `https` only,
/// the answer read up to the size cap. Its client is made at the first
/// fetch (a failure then is [`FetchErrorKind::Unavailable`]).
#[cfg(feature = "aws-sns")]
#[derive(Debug, Clone, Default)]
pub struct HttpsTransport {
    client: Arc<std::sync::OnceLock<Option<reqwest::Client>>>,
}

#[cfg(feature = "aws-sns")]
impl HttpsTransport {
    /// The transport.
    pub fn new() -> Self {
        Self::default()
    }

    /// The transport trusting `root` (DER) beside the Mozilla roots: a
    /// local test server's certificate authority.
    #[cfg(test)]
    fn trusting(root: &[u8]) -> Self {
        let transport = Self::default();
        let certificate = reqwest::Certificate::from_der(root).expect("a DER certificate");
        let client = Self::builder().add_root_certificate(certificate).build().expect("a client");
        transport.client.set(Some(client)).expect("a fresh transport");
        transport
    }

    /// The client's settings: no redirect, no proxy, `https` only.
    fn builder() -> reqwest::ClientBuilder {
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).no_proxy().https_only(true)
    }

    fn client(&self) -> Option<&reqwest::Client> {
        self.client
            .get_or_init(|| {
                let built = Self::builder().build();
                built.inspect_err(|e| tracing::error!(error = %e, "the HTTPS client for key fetches failed")).ok()
            })
            .as_ref()
    }
}

#[cfg(feature = "aws-sns")]
impl KeyTransport for HttpsTransport {
    fn get(&self, url: &http::Uri, max_bytes: usize) -> BoxFetch<'_> {
        let url = url.to_string();
        Box::pin(async move {
            let unavailable = |_| FetchError::new(FetchErrorKind::Unavailable);
            let client = self.client().ok_or(FetchError::new(FetchErrorKind::Unavailable))?;
            let mut response = client.get(url).send().await.map_err(unavailable)?;
            if response.status() != reqwest::StatusCode::OK {
                return Err(FetchErrorKind::Unavailable.into());
            }
            if response.content_length().is_some_and(|n| n > max_bytes as u64) {
                return Err(FetchErrorKind::TooLarge.into());
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(unavailable)? {
                if body.len() + chunk.len() > max_bytes {
                    return Err(FetchErrorKind::TooLarge.into());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Bytes::from(body))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-a.pem";

    fn transport(urls: &[&str], body: &'static [u8]) -> StaticTransport {
        StaticTransport::new(urls.iter().map(|u| ((*u).to_owned(), Bytes::from_static(body))))
    }

    fn fetcher(transport: &StaticTransport) -> KeyFetcherBuilder<Vec<u8>> {
        let parse = |b: &[u8]| (!b.starts_with(b"not")).then(|| b.to_vec());
        KeyFetcher::builder([HostPattern::new("sns.*.amazonaws.com")], transport.clone(), parse)
            .path_prefix("/SimpleNotificationService-")
            .path_suffix(".pem")
    }

    #[test]
    fn host_patterns() {
        let p = HostPattern::new("sns.*.amazonaws.com");
        assert!(p.matches("sns.us-east-1.amazonaws.com") && p.matches("SNS.EU-WEST-3.AMAZONAWS.COM"));
        for host in ["sns.amazonaws.com", "sns.a.b.amazonaws.com", "sns..amazonaws.com", "sns.x_y.amazonaws.com"] {
            assert!(!p.matches(host), "{host}");
        }
        for host in ["sns.us-east-1.amazonaws.com.evil.example", "evil.sns.us-east-1.amazonaws.com"] {
            assert!(!p.matches(host), "{host}");
        }
        assert!(HostPattern::new("keys.example.com").matches("keys.example.com"));
        let aws = HostPattern::new("sns.{region}.amazonaws.com");
        for host in
            ["sns.us-east-1.amazonaws.com", "sns.us-gov-west-1.amazonaws.com", "sns.ap-southeast-2.amazonaws.com"]
        {
            assert!(aws.matches(host), "{host}");
        }
        // S3 website names of a bucket called `sns`: anyone may own it.
        for host in [
            "sns.s3.amazonaws.com",
            "sns.s3-us-west-2.amazonaws.com",
            "sns.s3-external-1.amazonaws.com",
            "sns.x.amazonaws.com",
        ] {
            assert!(!aws.matches(host), "{host}");
        }
    }

    /// A delivery whose fetch is dropped mid-way (its client gone) leaves no
    /// turn behind: 300 such drops do not fill the 256 remembered URLs.
    #[tokio::test(start_paused = true)]
    async fn dropped_fetches_leave_nothing_behind() {
        let urls: Vec<String> = (0..300)
            .map(|i| format!("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-{i}.pem"))
            .collect();
        let all: Vec<&str> = urls.iter().map(String::as_str).chain([URL]).collect();
        let served = transport(&all, b"key").delay(Duration::from_secs(3));
        let f = fetcher(&served).fetches_per_minute(1_000).build();
        for url in &urls {
            let dropped = tokio::time::timeout(Duration::from_millis(10), f.get(url)).await;
            assert!(dropped.is_err(), "the fetch was still running when dropped");
        }
        assert!(lock(&f.inner.turns).is_empty(), "no turn left behind");
        assert_eq!(f.get(URL).await.unwrap().as_slice(), b"key");
    }

    /// A key past its maximum age is still used when no new one can be had
    /// (the host failing, the budget spent): the sender's certificate at one
    /// URL does not change.
    #[tokio::test]
    async fn a_stale_key_is_served_when_no_new_one_can_be_had() {
        let served = transport(&[URL], b"key");
        let f = fetcher(&served).max_age(Duration::ZERO).fetches_per_minute(1).build();
        assert_eq!(f.get(URL).await.unwrap().as_slice(), b"key");
        assert_eq!(f.get(URL).await.unwrap().as_slice(), b"key", "the budget spent: the stale key");
        assert_eq!(served.fetches(), 1);
    }

    /// `http://`, another host, user information, another port, a query,
    /// another path, a relative URL: refused before any network access.
    #[tokio::test]
    async fn urls_outside_the_rules_are_refused_without_a_fetch() {
        let served = transport(&[URL], b"key");
        let f = fetcher(&served).build();
        for url in [
            "http://sns.us-east-1.amazonaws.com/SimpleNotificationService-a.pem",
            "https://evil.example/SimpleNotificationService-a.pem",
            "https://sns.us-east-1.amazonaws.com@evil.example/x.pem",
            "https://x@sns.us-east-1.amazonaws.com/SimpleNotificationService-a.pem",
            "https://sns.us-east-1.amazonaws.com:444/SimpleNotificationService-a.pem",
            "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-a.pem?redirect=x",
            "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-a.pem.txt",
            "https://sns.us-east-1.amazonaws.com/other/SimpleNotificationService-a.pem",
            "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-a.pem#x",
            "/SimpleNotificationService-a.pem",
            "",
        ] {
            assert_eq!(f.get(url).await.unwrap_err().kind(), FetchErrorKind::NotAllowed, "{url}");
        }
        assert_eq!(served.fetches(), 0);
        assert_eq!(f.get(URL).await.unwrap().as_slice(), b"key");
    }

    /// 1,000 deliveries at once naming one URL: one fetch; later ones read
    /// the cache; a zero maximum age fetches again.
    #[tokio::test]
    async fn one_fetch_for_a_thousand_deliveries() {
        let served = transport(&[URL], b"key").delay(Duration::from_millis(50));
        let f = fetcher(&served).build();
        let all = futures_util::future::join_all((0..1000).map(|_| f.get(URL))).await;
        assert!(all.iter().all(|k| k.as_ref().is_ok_and(|k| k.as_slice() == b"key")));
        assert_eq!(served.fetches(), 1);
        assert!(f.cached(URL).is_some());
        let stale = fetcher(&served).max_age(Duration::ZERO).build();
        stale.get(URL).await.unwrap();
        stale.get(URL).await.unwrap();
        assert_eq!(served.fetches(), 3, "a key past its maximum age is fetched again");
    }

    /// A flood of deliveries naming fresh allowed URLs: at most the budget's
    /// fetches, the rest refused, the cached key still served.
    #[tokio::test]
    async fn a_flood_of_fresh_urls_spends_only_the_budget() {
        let urls: Vec<String> = (0..200)
            .map(|i| format!("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-{i}.pem"))
            .collect();
        let mut all: Vec<&str> = urls.iter().map(String::as_str).collect();
        all.push(URL);
        let served = transport(&all, b"key");
        let f = fetcher(&served).fetches_per_minute(10).build();
        f.get(URL).await.unwrap();
        let results = futures_util::future::join_all(urls.iter().map(|u| f.get(u))).await;
        let fetched = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(fetched, 9, "the budget's 10 fetches, one spent on the first key");
        assert!(results.iter().filter_map(|r| r.as_ref().err()).all(|e| e.kind() == FetchErrorKind::Budget));
        assert_eq!(served.fetches(), 10);
        assert!(f.get(URL).await.is_ok(), "the cached key is still served");
        // Remembered URLs are bounded too.
        let few = fetcher(&served).max_keys(2).build();
        few.get(&urls[0]).await.unwrap();
        few.get(&urls[1]).await.unwrap();
        assert_eq!(few.get(&urls[2]).await.unwrap_err().kind(), FetchErrorKind::Budget);
    }

    /// Oversized, slow, missing or unparsable answers: refused, nothing
    /// cached, within the timeout.
    #[tokio::test(start_paused = true)]
    async fn oversized_slow_missing_and_invalid_answers_are_refused() {
        static BIG: [u8; 65 * 1024] = [b'k'; 65 * 1024];
        let f = fetcher(&transport(&[URL], &BIG)).build();
        assert_eq!(f.get(URL).await.unwrap_err().kind(), FetchErrorKind::TooLarge);
        assert!(f.cached(URL).is_none());
        let slow = transport(&[URL], b"key").delay(Duration::from_secs(60));
        let f = fetcher(&slow).timeout(Duration::from_secs(5)).build();
        let started = tokio::time::Instant::now();
        assert_eq!(f.get(URL).await.unwrap_err().kind(), FetchErrorKind::Unavailable);
        assert_eq!(started.elapsed(), Duration::from_secs(5), "refused at the timeout");
        let missing = fetcher(&transport(&[], b"key")).build();
        assert_eq!(missing.get(URL).await.unwrap_err().kind(), FetchErrorKind::Unavailable);
        let invalid = fetcher(&transport(&[URL], b"not a key")).build();
        assert_eq!(invalid.get(URL).await.unwrap_err().kind(), FetchErrorKind::Invalid);
        assert!(invalid.cached(URL).is_none());
    }

    /// A local HTTPS server (its own certificate authority) answering each
    /// connection with `answer`, bytes as written; the hosts it was asked
    /// for are counted by the caller through `served`.
    #[cfg(feature = "aws-sns")]
    async fn https_server(answer: Vec<u8>) -> (std::net::SocketAddr, Vec<u8>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let der = certified.cert.der().to_vec();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, answer) = (acceptor.clone(), answer.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                    let mut head = [0u8; 4096];
                    let _ = tls.read(&mut head).await;
                    let _ = tls.write_all(&answer).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        (addr, der)
    }

    /// Over real HTTPS: a 200 is the key; a redirect to another host is
    /// refused without following it; an answer over the cap, declared or
    /// streamed, is refused; plain `http` is never fetched.
    #[cfg(feature = "aws-sns")]
    #[tokio::test]
    async fn the_https_transport_follows_no_redirect_and_caps_the_answer() {
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nkey".to_vec();
        let moved = b"HTTP/1.1 302 Found\r\nlocation: https://127.0.0.2:1/other.pem\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec();
        let big =
            [b"HTTP/1.1 200 OK\r\ncontent-length: 70000\r\nconnection: close\r\n\r\n".to_vec(), vec![b'k'; 70_000]]
                .concat();
        let streamed = [b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".to_vec(), vec![b'k'; 70_000]].concat();
        for (answer, want) in [
            (ok, Ok(&b"key"[..])),
            (moved, Err(FetchErrorKind::Unavailable)),
            (big, Err(FetchErrorKind::TooLarge)),
            (streamed, Err(FetchErrorKind::TooLarge)),
        ] {
            let (addr, root) = https_server(answer).await;
            let transport = HttpsTransport::trusting(&root);
            let url: http::Uri = format!("https://localhost:{}/key.pem", addr.port()).parse().unwrap();
            let got = transport.get(&url, 64 * 1024).await.map(|b| b.to_vec()).map_err(|e| e.kind());
            assert_eq!(got, want.map(<[u8]>::to_vec), "{want:?}");
        }
        let plain: http::Uri = "http://localhost:1/key.pem".parse().unwrap();
        let got = HttpsTransport::new().get(&plain, 1024).await.map_err(|e| e.kind());
        assert_eq!(got, Err(FetchErrorKind::Unavailable));
    }
}
