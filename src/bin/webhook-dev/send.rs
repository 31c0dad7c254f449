//! `webhook-dev send`: one event of a preset, signed and delivered as its
//! sender does, with the scenario flags.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use webhook_idempotency::cli::{json_safe, printable};
use webhook_idempotency::dev::{self, Delivery};
use webhook_idempotency::providers::{self, KeyKind};

/// A usage error: its message, exit status 2.
#[derive(Debug)]
pub(crate) struct Usage(pub(crate) String);

/// The usage error for a preset name that is not compiled in. The name is
/// not echoed: it may be a secret given in the wrong place.
pub(crate) fn unknown_preset(_name: &str) -> Usage {
    let known: Vec<_> = providers::all().iter().map(|p| p.name).collect();
    Usage(format!("unknown preset; known: {}", known.join(", ")))
}

/// The flags of `send` (and of each line of a scenario file).
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct SendArgs {
    /// The preset (stripe, github, standard-webhooks, ...; `webhook-dev
    /// fixtures` lists them).
    pub(crate) preset: String,
    /// Where to send: an absolute URL (default
    /// `http://127.0.0.1:3000/webhooks/<preset>`, the quickstart's route).
    /// In a scenario file, a path is joined to `--base`.
    #[arg(long, value_name = "URL")]
    pub(crate) to: Option<String>,
    /// The signing secret, as the receiver is configured (default
    /// `$<PRESET>_WEBHOOK_SECRET`, else the preset's test key, which the
    /// quickstart serves with); for a public-key scheme the private key.
    /// Never printed. Prefer the variable: a command line is visible to the
    /// machine's other users.
    #[arg(long, value_name = "SECRET", allow_hyphen_values = true)]
    pub(crate) secret: Option<String>,
    /// A named fixture of the preset (default: its first).
    #[arg(long, value_name = "NAME", conflicts_with = "body")]
    pub(crate) fixture: Option<String>,
    /// Your own body (a captured delivery), sent byte for byte.
    #[arg(long, value_name = "FILE")]
    pub(crate) body: Option<PathBuf>,
    /// The same event ids on every run with the same preset and `--fixture`
    /// (or `--body`), instead of fresh ones; give a SEED to keep several
    /// such events apart. Bodies that carry the event's time still differ
    /// between runs.
    #[arg(long, value_name = "SEED", num_args = 0..=1, default_missing_value = "same-event")]
    pub(crate) same_event: Option<String>,
    /// The URL the sender signs, where the receiver is configured with
    /// another than `--to` (behind a tunnel or a proxy): Twilio, Square,
    /// HubSpot, Trello and Mandrill sign it. Its path and query are sent.
    #[arg(long, value_name = "URL")]
    pub(crate) signed_url: Option<String>,
    /// One more header, `Name: value` (repeatable): an event-type header
    /// beside `--body`. It never replaces a header the scheme writes.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub(crate) headers: Vec<String>,
    /// Deliveries of the event, one after the other (a redelivery: same
    /// event ids, signed anew).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) repeat: u32,
    /// Copies of each delivery in flight at once.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub(crate) concurrent: u32,
    /// Signed this many seconds ago (a stale timestamp).
    #[arg(long, value_name = "SECONDS", conflicts_with = "future")]
    pub(crate) stale: Option<u64>,
    /// Signed this many seconds ahead (a clock running fast).
    #[arg(long, value_name = "SECONDS")]
    pub(crate) future: Option<u64>,
    /// A rotation of the signing secret from OLD_SECRET to `--secret`: both
    /// signatures where the scheme carries several in one header (Stripe,
    /// Standard Webhooks, Svix, ...), else signed with OLD_SECRET alone.
    /// Never printed.
    #[arg(long, value_name = "OLD_SECRET", allow_hyphen_values = true)]
    pub(crate) rotate: Option<String>,
    /// One byte changed after signing (in the body, or in a shared-token
    /// scheme's token).
    #[arg(long)]
    pub(crate) tamper: bool,
    /// Two events about one object, the newer delivered first.
    #[arg(long)]
    pub(crate) out_of_order: bool,
    /// The body trickled over this many seconds.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=600))]
    pub(crate) slow_body: Option<u64>,
    /// The answer each delivery must get: `2xx`, `4xx`, `5xx`, a status
    /// (`409`) or a comma-separated list (`401,403`). Without it any answer
    /// passes.
    #[arg(long, value_name = "STATUS")]
    pub(crate) expect: Option<Expect>,
    /// Seconds to wait for each answer (after the `--slow-body` seconds).
    #[arg(long, value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(crate) timeout: u64,
    /// Print one JSON document instead of lines.
    #[arg(long)]
    pub(crate) json: bool,
}

/// An `--expect` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expect(Vec<(u16, u16)>);

impl std::str::FromStr for Expect {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        s.split(',')
            .map(|part| match part.trim().to_ascii_lowercase().as_str() {
                class @ ("1xx" | "2xx" | "3xx" | "4xx" | "5xx") => {
                    let first = u16::from(class.as_bytes()[0] - b'0') * 100;
                    Ok((first, first + 99))
                }
                code => match code.parse::<u16>() {
                    Ok(code) if (100..=599).contains(&code) => Ok((code, code)),
                    _ => Err(format!("`{code}` is not 2xx, 4xx, 5xx or a status from 100 to 599")),
                },
            })
            .collect::<Result<_, _>>()
            .map(Expect)
    }
}

impl Expect {
    fn accepts(&self, status: u16) -> bool {
        self.0.iter().any(|(low, high)| (*low..=*high).contains(&status))
    }
}

/// One delivery's outcome.
#[derive(Debug, serde::Serialize)]
struct Outcome {
    step: usize,
    event: String,
    status: Option<u16>,
    replayed: bool,
    ms: u64,
    answer: String,
    matched: bool,
}

/// The deliveries `args` asks for, each event's copies in order.
fn events(args: &SendArgs, key: &str) -> Result<Vec<Delivery>, Usage> {
    let name = providers::find(&args.preset).ok_or_else(|| unknown_preset(&args.preset))?.name;
    let usage = |e: webhook_idempotency::dev::DevError| Usage(e.to_string());
    let mut event = Delivery::new(name, key).map_err(usage)?;
    if let Some(fixture) = &args.fixture {
        // The name is not echoed: it may be a secret given to the wrong flag.
        event = event.fixture(fixture).map_err(|_| {
            Usage(format!("{name} has no such --fixture (not shown); it has: {}", dev::fixtures(name).join(", ")))
        })?;
    }
    if let Some(path) = &args.body {
        // The path is not echoed: it may be a secret given to the wrong flag.
        let bytes = std::fs::read(path).map_err(|e| Usage(format!("cannot read --body: {}", e.kind())))?;
        event = event.body(bytes);
    }
    if let Some(seed) = &args.same_event {
        event = event.seeded(seed);
    }
    let url = args.to.clone().unwrap_or_else(|| format!("http://127.0.0.1:3000/webhooks/{name}"));
    event = event.url(url.clone());
    if let Some(signed) = &args.signed_url {
        event = event.signed_url(signed.clone());
    }
    for header in &args.headers {
        // The text is not echoed: it may be a secret given to the wrong flag.
        let (name, value) = header
            .split_once(':')
            .filter(|(n, _)| http::HeaderName::try_from(n.trim()).is_ok())
            .ok_or_else(|| Usage("a --header is not `Name: value` (not shown)".into()))?;
        event = event.header(name.trim(), value.trim());
    }
    if let Some(old) = &args.rotate {
        // Its own check first, so that an error names the key it is about.
        let alone = Delivery::new(name, old.clone()).map_err(usage)?.url(url.clone());
        if let Err(e) = alone.signed() {
            if matches!(e.kind(), dev::DevErrorKind::Sign(providers::SignErrorKind::Key)) {
                return Err(Usage(format!("--rotate: {e}")));
            }
        }
        event = event.rotated_from(old.clone());
    }
    if args.tamper {
        event = event.tampered();
    }
    Ok(if args.out_of_order { vec![event.next_of_object(), event] } else { vec![event] })
}

/// The key `send` signs with, and what it prints about it: `--secret`, the
/// preset's variable, or a public-key scheme's test key.
fn key(args: &SendArgs) -> Result<(String, Option<String>), Usage> {
    let preset = providers::find(&args.preset).ok_or_else(|| unknown_preset(&args.preset))?;
    let var = format!("{}_WEBHOOK_SECRET", preset.name.to_uppercase().replace('-', "_"));
    let given = match (&args.secret, std::env::var(&var)) {
        (Some(secret), _) => Some((secret.clone(), "--secret".to_owned())),
        (None, Ok(secret)) => Some((secret, format!("${var}"))),
        (None, Err(_)) => None,
    };
    if let Some((secret, from)) = given {
        // An empty key signs nothing a receiver could be configured with
        // (an empty variable in a `.env` file, `--secret "$UNSET"`).
        if secret.is_empty() {
            return Err(Usage(format!("{from} is empty")));
        }
        if secret.trim() != secret {
            eprintln!("webhook-dev: {from} has leading or trailing whitespace: it is used byte for byte");
        }
        return Ok((secret, None));
    }
    match preset.test_key() {
        Some(test) => Ok((test.to_owned(), Some(var))),
        None => Err(Usage(format!("{} is signed with the sender's own key: it cannot be sent", preset.name))),
    }
}

/// Whether `args` can be sent: the preset, the key, the fixture or body
/// file, the URL, signed once without sending (a scenario checks every
/// step before the first is sent).
pub(crate) fn check(args: &SendArgs) -> Result<(), Usage> {
    let (key, _) = key(args)?;
    for event in events(args, &key)? {
        event.signed().map_err(|e| Usage(e.to_string()))?;
        event.origin().map_err(|e| Usage(e.to_string()))?;
    }
    Ok(())
}

/// What one `send` did.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Report {
    preset: String,
    deliveries: Vec<Outcome>,
    ok: bool,
    /// The public key a receiver verifies the test private key's
    /// signatures with, when `send` signed with it.
    receiver_public_key: Option<String>,
}

impl Report {
    /// The report as lines, each starting with `prefix`.
    pub(crate) fn print(&self, prefix: &str) {
        if let Some(public) = &self.receiver_public_key {
            let var = format!("{}_PUBLIC_KEY", self.preset.to_uppercase().replace('-', "_"));
            println!("{prefix}signed with the crate's test private key: the receiver verifies with {var}={public}");
        }
        for o in &self.deliveries {
            let status = o.status.map_or_else(|| "no answer".to_owned(), |s| s.to_string());
            let replayed = if o.replayed { " (replayed)" } else { "" };
            let mark = if o.matched { "" } else { "  <- not as expected" };
            let (event, answer) = (printable(&o.event), printable(&o.answer));
            println!("{prefix}#{} {} {event} {status}{replayed} {} ms {answer}{mark}", o.step, self.preset, o.ms);
        }
    }
}

/// Signs and sends what `args` asks for.
pub(crate) async fn execute(args: &SendArgs) -> Result<Report, Usage> {
    let (key, test_key) = key(args)?;
    let events = events(args, &key)?;
    let preset = providers::find(&args.preset).ok_or_else(|| unknown_preset(&args.preset))?;
    let receiver_public_key = match (&test_key, events[0].receiver_key()) {
        (_, Err(e)) => return Err(Usage(e.to_string())),
        (Some(_), Ok(public)) if preset.key == KeyKind::PublicKey => Some(public),
        _ => None,
    };
    if let (Some(var), false) = (&test_key, args.json) {
        eprintln!("webhook-dev: no --secret and no ${var}: signed with the preset's test key (PresetInfo::test_key)");
    }
    if let Some(seconds) = args.stale.or(args.future) {
        // A scheme that signs no time is signed the same at any time: say so
        // rather than let `--stale 3600 --expect 4xx` fail without a reason.
        let now = SystemTime::now();
        let shifted =
            if args.stale.is_some() { now - Duration::from_secs(seconds) } else { now + Duration::from_secs(seconds) };
        let at = |t| events[0].clone().at(t).signed().ok().map(|ex| (ex.parts.headers, ex.body));
        if at(now) == at(shifted) {
            eprintln!(
                "webhook-dev: {} signs no timestamp: --stale and --future change nothing a receiver can check",
                preset.name
            );
        }
    }
    let deliveries = deliver(args, &events).await?;
    let ok = deliveries.iter().all(|o| o.matched);
    Ok(Report { preset: events[0].preset().to_owned(), deliveries, ok, receiver_public_key })
}

/// `webhook-dev send`: whether every answer matched.
pub(crate) async fn run(args: SendArgs) -> Result<bool, Usage> {
    let report = execute(&args).await?;
    if args.json {
        println!("{}", json_safe(&serde_json::to_string(&report).expect("a report serialises")));
    } else {
        report.print("");
    }
    Ok(report.ok)
}

/// Sends every delivery of `events`: `repeat` rounds of `concurrent` copies
/// of each event, in order.
async fn deliver(args: &SendArgs, events: &[Delivery]) -> Result<Vec<Outcome>, Usage> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // The clock runs from the request's start: a trickled body's seconds come on top.
        .timeout(Duration::from_secs(args.timeout + args.slow_body.unwrap_or(0)))
        .build()
        .map_err(|e| Usage(format!("an HTTP client: {e}")))?;
    let mut outcomes = Vec::new();
    for event in events {
        for _ in 0..args.repeat {
            let copies = (0..args.concurrent).map(|_| one(&client, args, event));
            for outcome in futures_util::future::join_all(copies).await {
                let mut outcome = outcome?;
                outcome.step = outcomes.len() + 1;
                outcomes.push(outcome);
            }
        }
    }
    Ok(outcomes)
}

/// Signs `event` now (shifted by `--stale` / `--future`) and sends it.
async fn one(client: &reqwest::Client, args: &SendArgs, event: &Delivery) -> Result<Outcome, Usage> {
    let now = SystemTime::now();
    let at = match (args.stale, args.future) {
        (Some(s), _) => now - Duration::from_secs(s),
        (_, Some(s)) => now + Duration::from_secs(s),
        _ => now,
    };
    let signed = event.clone().at(at).signed().map_err(|e| Usage(e.to_string()))?;
    let event_key =
        signed.provider.identify(&signed.parts, &signed.body).map_or_else(|_| event.header_id(), |id| id.key);
    let origin = event.origin().map_err(|e| Usage(e.to_string()))?;
    let mut request = client.post(format!("{origin}{}", signed.parts.uri));
    for (name, value) in &signed.parts.headers {
        if name != http::header::HOST {
            request = request.header(name.as_str(), value.as_bytes());
        }
    }
    let body = signed.body;
    request = match args.slow_body {
        Some(seconds) => request.body(reqwest::Body::wrap_stream(trickle(body, Duration::from_secs(seconds)))),
        None => request.body(body),
    };
    let started = Instant::now();
    let answer = request.send().await;
    let (status, replayed, text) = match answer {
        Ok(mut res) => {
            let status = res.status().as_u16();
            let replayed = res.headers().contains_key("idempotent-replayed");
            // Only the start of the answer is shown: an endless answer is not read to its end.
            let mut head = Vec::new();
            while head.len() < ANSWER_READ {
                match res.chunk().await {
                    Ok(Some(chunk)) => head.extend_from_slice(&chunk),
                    _ => break,
                }
            }
            let text = String::from_utf8_lossy(&head);
            (Some(status), replayed, text.trim_end().chars().take(200).collect())
        }
        Err(e) => (None, false, format!("error: {}", error_chain(&e, args.timeout))),
    };
    let matched = match (&args.expect, status) {
        (_, None) => false,
        (Some(expect), Some(status)) => expect.accepts(status),
        (None, Some(_)) => true,
    };
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(Outcome { step: 0, event: event_key, status, replayed, ms, answer: text, matched })
}

/// How much of an answer's body is read (its first 200 characters are shown).
const ANSWER_READ: usize = 4096;

/// Why a request got no answer, with its causes (reqwest's own message
/// names only the URL): `connection refused`, `timed out after 30 s`, ...
fn error_chain(e: &reqwest::Error, timeout: u64) -> String {
    if e.is_timeout() {
        return format!("no answer within --timeout {timeout} s");
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// `body` as a stream of ten pieces spread over `over`.
fn trickle(
    body: Vec<u8>,
    over: Duration,
) -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static {
    const PIECES: usize = 10;
    let size = body.len().div_ceil(PIECES).max(1);
    let pieces: Vec<bytes::Bytes> = body.chunks(size).map(bytes::Bytes::copy_from_slice).collect();
    let pause = over / u32::try_from(pieces.len().max(1)).unwrap_or(1);
    futures_util::stream::unfold(pieces.into_iter(), move |mut rest| async move {
        let piece = rest.next()?;
        tokio::time::sleep(pause).await;
        Some((Ok(piece), rest))
    })
}
