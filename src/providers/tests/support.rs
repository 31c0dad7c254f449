//! Test cases shared by the presets.
//!
//! [`TwoHeaders`]: the presets that send the signature and its timestamp in
//! two headers (Slack, Zoom, Twitch, Discord, SendGrid, Standard Webhooks):
//! the cases every such scheme answers alike (valid, tampered, another key,
//! the tolerance's edges, stale, future, a header missing, two timestamps),
//! the scheme's own cases written as changes to a valid delivery, and
//! rotation, tolerance and replay.
//!
//! [`OneHeader`]: the presets that send everything in one signature header
//! (Intercom, Typeform, PagerDuty, Calendly, Paddle, Linear): a case table
//! of header lines and bodies, the cases a body-only scheme answers alike,
//! the cases of a shared-token scheme, and rotation, precheck, replay and
//! tolerance. On it: [`BodyOnly`], a body-only HMAC preset's whole check,
//! and [`KeyValueHeader`], the `t=..,v1=..` family's (Stripe, Calendly, Mux,
//! Buildkite, Paddle).
//!
//! The HMAC presets' finer probes are in [`conformance`](super::conformance).
//! [`sign`] and [`sign_at`] sign as an HMAC preset's facts say.

use std::time::SystemTime;

use crate::providers::HmacPreset;
use crate::test_support::{at, header_lines, request, NOW};
use crate::verify::{Delivery, SigningSecret, Verifier, VerifyErrorKind};

/// The signature header of `facts`' scheme for `body` at `timestamp`
/// (Unix seconds, written in the scheme's unit), signed with `secret`.
pub(crate) fn signer(facts: &'static HmacPreset) -> impl Fn(&SigningSecret, u64, &[u8]) -> String {
    let verifier = facts.verifier();
    move |secret, timestamp, body| verifier.sign(secret, "", timestamp, body)
}

/// The signature header of `facts`' scheme for `body` at `timestamp` (Unix
/// seconds), signed with `secret`.
pub(crate) fn sign_at(facts: &HmacPreset, secret: &SigningSecret, timestamp: u64, body: &[u8]) -> String {
    facts.sign(secret, timestamp, body)
}

/// The signature header of `facts`' body-only scheme for `body`, signed
/// with `secret`.
pub(crate) fn sign(facts: &HmacPreset, secret: &SigningSecret, body: &[u8]) -> String {
    sign_at(facts, secret, 0, body)
}

/// A fixture file's JSON (`tests/fixtures/providers/<preset>/expected.json`)
/// and the secret it names under `"secret"`.
pub(crate) fn fixture(json: &str) -> (serde_json::Value, SigningSecret) {
    let expected: serde_json::Value = serde_json::from_str(json).unwrap();
    let secret = SigningSecret::from(expected["secret"].as_str().unwrap());
    (expected, secret)
}

/// The fixture of a preset, `tests/fixtures/providers/<dir>/`: its
/// `body.json` byte for byte, its `expected.json` and the secret that names
/// under `"secret"`.
pub(crate) fn fixture_files(dir: &str) -> (&'static [u8], serde_json::Value, SigningSecret) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers").join(dir);
    let body = std::fs::read(path.join("body.json")).expect("the fixture's body.json");
    let (expected, secret) = fixture(&std::fs::read_to_string(path.join("expected.json")).expect("expected.json"));
    (Box::leak(body.into_boxed_slice()), expected, secret)
}

/// One delivery of a [`OneHeader`] scheme and the answer `verify` must give:
/// its name, the signature header's lines, the body, the clock (in the
/// scheme's unit) and the verdict.
pub(crate) type TimedCase<'a> = (&'a str, Vec<&'a str>, &'a [u8], u64, Result<(), VerifyErrorKind>);

/// A [`TimedCase`] of a scheme that signs no time: verified at [`NOW`].
pub(crate) type BodyCase<'a> = (&'a str, Vec<&'a str>, &'a [u8], Result<(), VerifyErrorKind>);

/// A scheme under test that reads one signature header.
pub(crate) struct OneHeader {
    verifier: std::sync::Arc<dyn Verifier>,
    header: &'static str,
    /// The time of a clock reading in the scheme's unit (seconds unless
    /// [`OneHeader::millis`]).
    clock: fn(u64) -> SystemTime,
}

fn at_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms)
}

impl OneHeader {
    /// The verifier of `preset` (built without a URL), reading its first
    /// header, the signature header.
    pub(crate) fn preset(preset: &super::PresetInfo) -> Self {
        let verifier = preset.provider(None).expect("a preset without a URL").verifier_shared();
        Self { verifier, header: preset.headers()[0], clock: at }
    }

    /// The verifier of the HMAC preset `facts`, reading its signature header.
    pub(crate) fn of(facts: &'static HmacPreset) -> Self {
        Self { verifier: std::sync::Arc::new(facts.verifier()), header: facts.scheme.header, clock: at }
    }

    /// Clock readings in Unix milliseconds instead.
    pub(crate) fn millis(mut self) -> Self {
        self.clock = at_ms;
        self
    }

    /// `verify`'s verdict, as its kind, on `body` with one header line per
    /// value of `lines`, `secrets` configured, at `now`.
    pub(crate) fn check(
        &self,
        lines: &[&str],
        body: &[u8],
        secrets: &[SigningSecret],
        now: u64,
    ) -> Result<(), VerifyErrorKind> {
        self.verify(&header_lines(self.header, lines), body, secrets, now, false)
    }

    fn verify(
        &self,
        p: &http::request::Parts,
        body: &[u8],
        secrets: &[SigningSecret],
        now: u64,
        replay: bool,
    ) -> Result<(), VerifyErrorKind> {
        let d = Delivery::new(p, body, secrets, (self.clock)(now));
        self.verifier.verify(&if replay { d.without_timestamp_check() } else { d }).map_err(|e| e.kind())
    }

    /// The precheck's verdict on one header line per value of `lines`.
    pub(crate) fn precheck(&self, lines: &[&str]) -> Result<(), VerifyErrorKind> {
        self.verifier.precheck(&header_lines(self.header, lines)).map_err(|e| e.kind())
    }

    /// Each case's verdict with `secret` configured.
    #[track_caller]
    pub(crate) fn check_timed(&self, secret: &SigningSecret, cases: &[TimedCase<'_>]) {
        for (name, lines, body, now, want) in cases {
            assert_eq!(self.check(lines, body, std::slice::from_ref(secret), *now), *want, "{name}");
        }
    }

    /// Each case's verdict with `secret` configured, at [`NOW`].
    #[track_caller]
    pub(crate) fn check_cases(&self, secret: &SigningSecret, cases: &[BodyCase<'_>]) {
        for (name, lines, body, want) in cases {
            assert_eq!(self.check(lines, body, std::slice::from_ref(secret), NOW), *want, "{name}");
        }
    }

    /// The cases a body-only scheme answers alike: `good` (the header for
    /// `body` by the configured secret) verifies, alone, twice, or after
    /// `by_other` (another secret's); `by_other` alone and `good` over
    /// `tampered` find no match; no header is missing.
    pub(crate) fn body_only_common<'a>(
        good: &'a str,
        by_other: &'a str,
        body: &'a [u8],
        tampered: &'a [u8],
    ) -> Vec<BodyCase<'a>> {
        use VerifyErrorKind::{MissingHeader, NoMatchingSignature};
        vec![
            ("valid", vec![good], body, Ok(())),
            ("same header twice", vec![good, good], body, Ok(())),
            ("second line matches", vec![by_other, good], body, Ok(())),
            ("tampered body", vec![good], tampered, Err(NoMatchingSignature)),
            ("wrong secret", vec![by_other], body, Err(NoMatchingSignature)),
            ("missing", vec![], body, Err(MissingHeader)),
        ]
    }

    /// A shared-token scheme (GitLab, Telegram), whose header is `sign` of
    /// the configured secret, `token`: it verifies, twice too, and over
    /// `another_body` as well (the scheme signs no body); a missing header is
    /// missing, an empty one or a second, different token malformed. Then
    /// `own`, the scheme's cases, with `token` configured; then rotation and
    /// the precheck ([`OneHeader::check_rotation_and_precheck`], the empty
    /// value failing it).
    #[track_caller]
    pub(crate) fn check_shared_token(
        &self,
        sign: fn(&SigningSecret) -> String,
        token: &str,
        [body, another_body]: [&[u8]; 2],
        own: &[BodyCase<'_>],
    ) {
        use VerifyErrorKind::{MalformedHeader, MissingHeader};
        let secret = SigningSecret::from(token);
        let good = sign(&secret);
        let g = good.as_str();
        let common: Vec<BodyCase<'_>> = vec![
            ("valid", vec![g], body, Ok(())),
            ("same line twice", vec![g, g], body, Ok(())),
            // The documented limit: the body is not signed.
            ("another body", vec![g], another_body, Ok(())),
            ("missing", vec![], body, Err(MissingHeader)),
            ("empty", vec![""], body, Err(MalformedHeader)),
            ("two tokens", vec![g, "other"], body, Err(MalformedHeader)),
        ];
        self.check_cases(&secret, &common);
        self.check_cases(&secret, own);
        let (old, new) = (SigningSecret::from("old-token"), SigningSecret::from("new-token"));
        self.check_rotation_and_precheck([&old, &new], &sign(&new), b"{}", NOW, "");
    }

    /// Rotation and secrets for `header`, the header for `body` at `now` by
    /// the secret `new`: `old` and `new` configured verify, `old` alone
    /// finds no match, no secret fails `NoSecret`; the precheck passes
    /// `header`, fails no header as missing and `malformed` as malformed.
    #[track_caller]
    pub(crate) fn check_rotation_and_precheck(
        &self,
        [old, new]: [&SigningSecret; 2],
        header: &str,
        body: &[u8],
        now: u64,
        malformed: &str,
    ) {
        assert_eq!(self.check(&[header], body, &[old.clone(), new.clone()], now), Ok(()));
        assert_eq!(
            self.check(&[header], body, std::slice::from_ref(old), now),
            Err(VerifyErrorKind::NoMatchingSignature)
        );
        assert_eq!(self.check(&[header], body, &[], now), Err(VerifyErrorKind::NoSecret));
        assert_eq!(self.precheck(&[header]), Ok(()));
        assert_eq!(self.precheck(&[]), Err(VerifyErrorKind::MissingHeader));
        assert_eq!(self.precheck(&[malformed]), Err(VerifyErrorKind::MalformedHeader));
    }

    /// For a scheme that signs a time: `header` (valid for `body` by
    /// `secret` at `now`) fails at `late`, past the tolerance, but passes an
    /// operator replay there, which still checks the signature; `wide`, the
    /// verifier with a tolerance reaching `late`, accepts it.
    #[track_caller]
    pub(crate) fn check_replay_and_tolerance(
        &self,
        wide: impl Verifier,
        (header, body, secret): (&str, &[u8], &SigningSecret),
        [now, late]: [u64; 2],
    ) {
        let p = header_lines(self.header, &[header]);
        let secrets = std::slice::from_ref(secret);
        assert_eq!(self.verify(&p, body, secrets, now, false), Ok(()));
        assert!(self.verify(&p, body, secrets, late, false).is_err());
        assert_eq!(self.verify(&p, body, secrets, late, true), Ok(()));
        let tampered = [body, b" "].concat();
        assert_eq!(self.verify(&p, &tampered, secrets, late, true), Err(VerifyErrorKind::NoMatchingSignature));
        let wide = Self { verifier: std::sync::Arc::new(wide), header: self.header, clock: self.clock };
        assert_eq!(wide.verify(&p, body, secrets, late, false), Ok(()));
    }
}

/// A scheme of the `t=..,v1=..` family (Stripe, Calendly, Mux, Buildkite,
/// Paddle): one header listing a timestamp entry and signature entries,
/// `key=value` items split by `separator`, over `{timestamp}<sep>{body}`.
pub(crate) struct KeyValueHeader {
    one: OneHeader,
    /// The timestamp's key (`t`), the signature's (`v1`) and one the scheme
    /// does not read, ignored beside a good signature (`v0`).
    keys: [&'static str; 3],
    separator: char,
    /// The preset's default tolerance, in seconds.
    tolerance: u64,
    /// The facts' `sign(secret, timestamp, body)`: the header.
    sign: Box<dyn Fn(&SigningSecret, u64, &[u8]) -> String>,
}

impl KeyValueHeader {
    /// The scheme of the HMAC preset `facts`, with `keys` (the timestamp's,
    /// the signature's, and one it ignores), its separator and tolerance.
    pub(crate) fn of(facts: &'static HmacPreset, keys: [&'static str; 3]) -> Self {
        let separator = facts.scheme.separator.expect("a key=value list");
        let tolerance = facts.scheme.tolerance.expect("a signed time").duration.as_secs();
        Self { one: OneHeader::of(facts), keys, separator, tolerance, sign: Box::new(signer(facts)) }
    }

    /// [`KeyValueHeader::of`] in Stripe's layout, `t=<time>,v1=<hex>`
    /// (`v0` is ignored).
    pub(crate) fn t_v1(facts: &'static HmacPreset) -> Self {
        Self::of(facts, ["t", "v1", "v0"])
    }

    /// The cases every scheme of the family answers alike, for a body
    /// signed at [`NOW`] by the secret configured (another secret signs the
    /// first half of a rotation header): valid, two signatures, an unknown
    /// key, the header twice, the tolerance's edges and past them, tampered,
    /// a wrong signature, missing, no timestamp, no signature, two
    /// timestamps. Then the scheme's own cases, which `own` makes from the
    /// good header, over the same body at [`NOW`]; then rotation and the
    /// precheck ([`OneHeader::check_rotation_and_precheck`], `malformed`
    /// failing it), an operator replay and a wider tolerance
    /// ([`OneHeader::check_replay_and_tolerance`]; `wide` is the verifier at
    /// twice the tolerance).
    #[track_caller]
    pub(crate) fn check(&self, malformed: &str, wide: impl Verifier, own: impl FnOnce(&str) -> Vec<OwnCase>) {
        use VerifyErrorKind::{
            MalformedHeader, MissingHeader, NoMatchingSignature, TimestampInFuture, TimestampTooOld,
        };
        let (secret, other) = (SigningSecret::from("key-value-secret"), SigningSecret::from("another-secret"));
        let body: &[u8] = br#"{"id":"evt_1","type":"t"}"#;
        let ([t, v, unknown], sep, tol) = (self.keys, self.separator, self.tolerance);
        let good = (self.sign)(&secret, NOW, body);
        let good_sig = &good[good.find(&format!("{v}=")).expect("a signature entry")..];
        let rotated = format!("{}{sep}{good_sig}", (self.sign)(&other, NOW, body));
        let with_unknown = format!("{good}{sep}{unknown}={}", "a".repeat(64));
        let zeros = format!("{t}={NOW}{sep}{v}={}", "0".repeat(64));
        let (no_timestamp, no_signature) = (format!("{v}=00"), format!("{t}=1"));
        let two_timestamps = format!("{t}={}{sep}{good}", NOW + 1);
        let tampered = [body, b" "].concat();
        let g = &good;
        let mut cases: Vec<TimedCase<'_>> = vec![
            ("valid", vec![g], body, NOW, Ok(())),
            ("two signatures during rotation", vec![&rotated], body, NOW, Ok(())),
            ("unknown key ignored", vec![&with_unknown], body, NOW, Ok(())),
            ("same header twice", vec![g, g], body, NOW, Ok(())),
            ("edge past", vec![g], body, NOW + tol, Ok(())),
            ("edge future", vec![g], body, NOW - tol, Ok(())),
            ("stale", vec![g], body, NOW + tol + 1, Err(TimestampTooOld)),
            ("future", vec![g], body, NOW - tol - 1, Err(TimestampInFuture)),
            ("tampered body", vec![g], &tampered, NOW, Err(NoMatchingSignature)),
            ("wrong signature", vec![&zeros], body, NOW, Err(NoMatchingSignature)),
            ("missing", vec![], body, NOW, Err(MissingHeader)),
            ("no timestamp", vec![&no_timestamp], body, NOW, Err(MalformedHeader)),
            ("no signature", vec![&no_signature], body, NOW, Err(NoMatchingSignature)),
            ("two timestamps", vec![&two_timestamps], body, NOW, Err(MalformedHeader)),
        ];
        let own = own(&good);
        cases.extend(
            own.iter().map(|(name, lines, want)| (*name, lines.iter().map(String::as_str).collect(), body, NOW, *want)),
        );
        self.one.check_timed(&secret, &cases);
        self.one.check_rotation_and_precheck([&other, &secret], &good, body, NOW, malformed);
        self.one.check_replay_and_tolerance(wide, (&good, body, &secret), [NOW, NOW + 2 * tol]);
    }
}

/// A scheme under test and one valid delivery of `body` at [`NOW`].
pub(crate) struct TwoHeaders<'a> {
    verifier: Box<dyn Verifier>,
    signature_header: &'static str,
    timestamp_header: &'static str,
    /// Headers every delivery carries besides those two (a message id).
    pub(crate) fixed: Vec<(&'static str, String)>,
    /// The verifier's tolerance, in seconds: 300 unless set.
    pub(crate) tolerance: u64,
    pub(crate) body: &'a [u8],
    /// The timestamp header's text for [`NOW`].
    pub(crate) timestamp: String,
    /// The signature header for `body` at [`NOW`] by `key`, and by `other_key`.
    pub(crate) good: String,
    pub(crate) by_other: String,
    /// The secret (or public key) configured, and another one.
    pub(crate) key: SigningSecret,
    pub(crate) other_key: SigningSecret,
}

/// The secrets [`TwoHeaders::hmac`] signs with.
fn hmac_keys() -> [SigningSecret; 2] {
    [SigningSecret::from("two-headers-secret"), SigningSecret::from("another-secret")]
}

/// One delivery and the answer `verify` must give.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    name: &'static str,
    signatures: Vec<String>,
    timestamps: Vec<String>,
    upper_case_names: bool,
    body: Vec<u8>,
    now: u64,
    want: Result<(), VerifyErrorKind>,
    want_precheck: Option<Result<(), VerifyErrorKind>>,
}

impl Case {
    setters! {
        /// Sends these signature header lines instead.
        pub(crate) fn signatures(lines: &[&str]) => signatures = lines.iter().map(|s| (*s).to_owned()).collect();
    }

    /// Sends this signature header instead.
    pub(crate) fn signature(self, line: &str) -> Self {
        self.signatures(&[line])
    }

    setters! {
        /// Sends these timestamp header lines instead.
        pub(crate) fn timestamps(lines: &[&str]) => timestamps = lines.iter().map(|s| (*s).to_owned()).collect();
    }

    /// Sends this timestamp header instead.
    pub(crate) fn timestamp(self, line: &str) -> Self {
        self.timestamps(&[line])
    }

    setters! {
        /// Sends this body instead.
        pub(crate) fn body(body: &[u8]) => body = body.to_vec();

        /// Verifies at `now` (Unix seconds) instead of [`NOW`].
        pub(crate) fn at(now: u64) => now = now;

        /// Must fail with `kind`.
        pub(crate) fn fails(kind: VerifyErrorKind) => want = Err(kind);
    }

    /// The precheck must answer `want` (by default it fails what `verify`
    /// fails as a missing or malformed header, and passes the rest).
    pub(crate) fn precheck(mut self, want: Result<(), VerifyErrorKind>) -> Self {
        self.want_precheck = Some(want);
        self
    }
}

impl<'a> TwoHeaders<'a> {
    /// `verifier` reading `[signature, timestamp]` headers and configured
    /// with `keys[0]`; `sign(i, body)` is the signature header for `body` at
    /// [`NOW`] by the key `keys[i]` stands for (a public key's private key).
    pub(crate) fn new(
        verifier: impl Verifier,
        [signature_header, timestamp_header]: [&'static str; 2],
        body: &'a [u8],
        [key, other_key]: [SigningSecret; 2],
        sign: impl Fn(usize, &[u8]) -> String,
    ) -> Self {
        Self {
            verifier: Box::new(verifier),
            signature_header,
            timestamp_header,
            fixed: vec![],
            tolerance: 300,
            body,
            timestamp: NOW.to_string(),
            good: sign(0, body),
            by_other: sign(1, body),
            key,
            other_key,
        }
    }

    /// [`TwoHeaders::new`] for an HMAC scheme whose `sign(secret, timestamp,
    /// body)` makes the signature header.
    pub(crate) fn hmac(
        verifier: impl Verifier,
        headers: [&'static str; 2],
        body: &'a [u8],
        sign: impl Fn(&SigningSecret, u64, &[u8]) -> String,
    ) -> Self {
        let keys = hmac_keys();
        Self::new(verifier, headers, body, keys.clone(), |i, b| sign(&keys[i], NOW, b))
    }

    /// The HMAC preset `facts`, whose scheme sends a timestamp header: its
    /// verifier, headers, signature, timestamp text (in the scheme's unit)
    /// and tolerance.
    pub(crate) fn facts(facts: &'static HmacPreset, body: &'a [u8]) -> Self {
        let s = &facts.scheme;
        let headers = [s.header, s.timestamp_header.expect("a timestamp header")];
        let mut t = Self::hmac(facts.verifier(), headers, body, signer(facts));
        t.timestamp = facts.verifier().timestamp_text(at(NOW));
        t.tolerance = s.tolerance.expect("a signed time").duration.as_secs();
        t
    }

    /// The valid delivery, named `name`: must verify.
    pub(crate) fn case(&self, name: &'static str) -> Case {
        Case {
            name,
            signatures: vec![self.good.clone()],
            timestamps: vec![self.timestamp.clone()],
            upper_case_names: false,
            body: self.body.to_vec(),
            now: NOW,
            want: Ok(()),
            want_precheck: None,
        }
    }

    /// The cases every two-header scheme answers alike.
    pub(crate) fn common(&self) -> Vec<Case> {
        use VerifyErrorKind::{
            MalformedHeader, MissingHeader, NoMatchingSignature, TimestampInFuture, TimestampTooOld,
        };
        let tolerance = self.tolerance;
        let tampered = [self.body, b" "].concat();
        vec![
            self.case("valid"),
            Case { upper_case_names: true, ..self.case("header names any case") },
            self.case("edge of tolerance, past").at(NOW + tolerance),
            self.case("edge of tolerance, future").at(NOW - tolerance),
            self.case("tampered body").body(&tampered).fails(NoMatchingSignature),
            self.case("other key").signature(&self.by_other).fails(NoMatchingSignature),
            self.case("stale").at(NOW + tolerance + 1).fails(TimestampTooOld),
            self.case("future").at(NOW - tolerance - 1).fails(TimestampInFuture),
            self.case("no signature").signatures(&[]).fails(MissingHeader),
            self.case("no timestamp").timestamps(&[]).fails(MissingHeader),
            self.case("two different timestamps").timestamps(&[&self.timestamp, "1"]).fails(MalformedHeader),
        ]
    }

    /// The request head of `case`.
    fn parts(&self, case: &Case) -> http::request::Parts {
        let name = |n: &'static str| if case.upper_case_names { n.to_ascii_uppercase() } else { n.to_owned() };
        let mut headers: Vec<(String, String)> = self.fixed.iter().map(|(n, v)| (name(n), v.clone())).collect();
        headers.extend(case.signatures.iter().map(|v| (name(self.signature_header), v.clone())));
        headers.extend(case.timestamps.iter().map(|v| (name(self.timestamp_header), v.clone())));
        request(&headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect::<Vec<_>>())
    }

    /// [`TwoHeaders::check`] of the common cases and `own`, the scheme's.
    pub(crate) fn check_with_common(&self, own: &[Case]) {
        self.check(&self.common());
        self.check(own);
    }

    /// `verify`'s answer to each case, and the precheck's: unless the case
    /// says otherwise, what the head alone shows (a header missing or
    /// malformed) fails before the body is read; the rest passes the
    /// precheck.
    pub(crate) fn check(&self, cases: &[Case]) {
        for case in cases {
            let p = self.parts(case);
            let got =
                self.verifier.verify(&Delivery::new(&p, &case.body, std::slice::from_ref(&self.key), at(case.now)));
            assert_eq!(got.map_err(|e| e.kind()), case.want, "{}", case.name);
            let head_only = matches!(case.want, Err(VerifyErrorKind::MissingHeader | VerifyErrorKind::MalformedHeader));
            let want_precheck = case.want_precheck.unwrap_or(if head_only { case.want } else { Ok(()) });
            assert_eq!(self.verifier.precheck(&p).map_err(|e| e.kind()), want_precheck, "{} precheck", case.name);
        }
    }

    /// Rotation (either configured key matches), no key, the tolerance
    /// (`wide` is the verifier with twice the default) and an operator
    /// replay, which skips the age check and nothing else.
    pub(crate) fn check_rotation_tolerance_and_replay(&self, wide: impl Verifier) {
        let p = self.parts(&self.case("valid"));
        let verify = |v: &dyn Verifier, body: &[u8], keys: &[SigningSecret], now: u64, replay: bool| {
            let d = Delivery::new(&p, body, keys, at(now));
            v.verify(&if replay { d.without_timestamp_check() } else { d }).map_err(|e| e.kind())
        };
        let (body, mine, other) = (self.body, std::slice::from_ref(&self.key), &self.other_key);
        let v = &*self.verifier;
        assert_eq!(verify(v, body, &[other.clone(), self.key.clone()], NOW, false), Ok(()));
        assert_eq!(verify(v, body, std::slice::from_ref(other), NOW, false), Err(VerifyErrorKind::NoMatchingSignature));
        assert_eq!(verify(v, body, &[], NOW, false), Err(VerifyErrorKind::NoSecret));
        let late = NOW + 2 * self.tolerance;
        assert_eq!(verify(v, body, mine, late, false), Err(VerifyErrorKind::TimestampTooOld));
        assert_eq!(verify(&wide, body, mine, late, false), Ok(()));
        assert_eq!(verify(v, body, mine, NOW + 86_400, true), Ok(()));
        let tampered = [body, b" "].concat();
        assert_eq!(verify(v, &tampered, mine, NOW + 86_400, true), Err(VerifyErrorKind::NoMatchingSignature));
    }
}

/// One case of a [`BodyOnly`] scheme's own: its name, the signature header's
/// lines and the verdict over the test body.
pub(crate) type OwnCase = (&'static str, Vec<String>, Result<(), VerifyErrorKind>);

/// A body-only one-header HMAC preset under test (Heroku, Vercel, Xero, ...):
/// its facts (or registry entry and `sign`), with the checks every such
/// preset passes.
pub(crate) struct BodyOnly {
    one: OneHeader,
    sign: Box<dyn Fn(&SigningSecret, &[u8]) -> String>,
}

impl BodyOnly {
    /// The body-only HMAC preset `facts`.
    pub(crate) fn of(facts: &'static HmacPreset) -> Self {
        let verifier = facts.verifier();
        Self { one: OneHeader::of(facts), sign: Box::new(move |secret, body| verifier.sign(secret, "", 0, body)) }
    }

    /// A body-only preset written as code (Gitea, Forgejo), whose module's
    /// `sign` is `sign`.
    pub(crate) fn preset(preset: &super::PresetInfo, sign: fn(&SigningSecret, &[u8]) -> String) -> Self {
        Self { one: OneHeader::preset(preset), sign: Box::new(sign) }
    }

    /// The own cases of a scheme that sends the standard padded base64 of
    /// its tag alone, one line per signature (Heroku, WooCommerce, Xero,
    /// QuickBooks): for `good`, the header for `body`, the tag in hex, behind
    /// a `sha256=` prefix or unpadded is malformed, and so is a bad second
    /// line.
    pub(crate) fn base64_alone(good: &str) -> Vec<OwnCase> {
        use crate::verify::Encoding;
        use VerifyErrorKind::MalformedHeader;
        let tag = Encoding::Base64.decode(good).expect("the good header is base64");
        vec![
            ("hex instead of base64", vec![hex::encode(tag)], Err(MalformedHeader)),
            ("sha256= prefix", vec![format!("sha256={good}")], Err(MalformedHeader)),
            ("unpadded base64", vec![good.trim_end_matches('=').to_owned()], Err(MalformedHeader)),
            ("one bad line", vec![good.to_owned(), "abc".to_owned()], Err(MalformedHeader)),
        ]
    }

    /// [`OneHeader::body_only_common`] for `body` (changed: `tampered`)
    /// signed with the secret `secret` (another: `{secret}_other`), then the
    /// scheme's own cases, which `own` makes from the secret and the good
    /// header; then rotation and the precheck
    /// ([`OneHeader::check_rotation_and_precheck`], `malformed` failing it).
    #[track_caller]
    pub(crate) fn check_cases(
        &self,
        secret: &str,
        body: &[u8],
        tampered: &[u8],
        malformed: &str,
        own: impl FnOnce(&SigningSecret, &str) -> Vec<OwnCase>,
    ) {
        let other = SigningSecret::from(format!("{secret}_other"));
        let secret = SigningSecret::from(secret);
        let (good, by_other) = ((self.sign)(&secret, body), (self.sign)(&other, body));
        let own = own(&secret, &good);
        let mut cases = OneHeader::body_only_common(&good, &by_other, body, tampered);
        cases.extend(
            own.iter().map(|(name, lines, want)| (*name, lines.iter().map(String::as_str).collect(), body, *want)),
        );
        self.one.check_cases(&secret, &cases);
        let (old, new) = (SigningSecret::from("old"), SigningSecret::from("new"));
        self.one.check_rotation_and_precheck([&old, &new], &(self.sign)(&new, b"{}"), b"{}", NOW, malformed);
    }
}
