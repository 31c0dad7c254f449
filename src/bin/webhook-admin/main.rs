//! `webhook-admin`: the events table and the outbox for the person on call,
//! through [`Admin`] (statistics, listings, one event or effect in full,
//! requeue, replay, purge, resolving an uncertain effect, the audit table).
//!
//! ```text
//! export DATABASE_URL=postgres://ops@db.internal:5432/app
//! cargo run --features cli --bin webhook-admin -- stats
//! webhook-admin list --state dead --provider stripe --since 2h
//! webhook-admin show stripe default evt_1Nx... --payload
//! webhook-admin requeue --provider stripe --scope default --key evt_1Nx... --dry-run
//! webhook-admin replay --provider stripe --since 30m --force --actor alice
//! webhook-admin purge --older-than 45days --dry-run
//! webhook-admin audit --limit 20 --json
//! webhook-admin outbox stats
//! webhook-admin outbox list --state uncertain
//! webhook-admin outbox show stripe default evt_1Nx... send_receipt --payload
//! webhook-admin outbox resolve stripe default evt_1Nx... send_receipt --as delivered --remote-ref msg_42
//! webhook-admin outbox requeue --effect send_receipt --dry-run
//! webhook-admin outbox purge --older-than 30days
//! ```
//!
//! Durations (`--since`, `--older-than`) are humantime's: `90s`, `15m`,
//! `2h 30m`, `45days`. They count back from the database's clock, which
//! the statements compare with (`purge` prints its cut-off from it); the
//! ages shown beside times (`3 h ago`) are this machine's.
//!
//! Before any command the schema is checked ([`check_schema`]): a schema
//! that is missing or older than this build needs is reported with the
//! advice to run the migrations, and nothing else runs.
//!
//! Exit status: 0 done; 1 nothing matched (`list` found no row, `show` an
//! unknown key, `requeue`/`replay`/`purge` changed or would change no row);
//! 2 a usage error, no connection, a schema that is not migrated, a failed
//! statement, or `replay` without `--force`.
//!
//! Output: tables for people; `--json` prints one JSON document on standard
//! output (errors as `{"error": kind, "message": ...}` on standard error).
//! Text that senders control (event keys, types, errors, payloads) has its
//! control, format, separator and other invisible characters escaped, in
//! tables and in `--json` alike (one rule with `webhook-verify`, in
//! `src/cli.rs`), so a delivery cannot drive the operator's
//! terminal and two different keys never look the same; a payload that is
//! not printable UTF-8 is shown in base64.
//!
//! The database URL is never printed, nor echoed in argument errors; a
//! connection error names only `host:port/database`. Prefer `DATABASE_URL`
//! to `--database-url`: a command line is visible to other users of the
//! machine. Connections are made without TLS (`sslmode=require` is
//! refused).
//!
//! Every `requeue`, `replay`, `purge` and `outbox resolve` / `requeue` /
//! `purge` that changes rows is recorded by the library in
//! `<schema>.webhook_audit` with `--actor` (default `$USER`,
//! then `$LOGNAME`, else `unknown`); a dry run records nothing.
//!
//! [`Admin`]: webhook_idempotency::store::admin::Admin
//! [`check_schema`]: webhook_idempotency::store::check_schema

use std::process::ExitCode;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::Parser;
use comfy_table::{presets, Table};
use serde_json::{json, Value};
use webhook_idempotency::postgres::deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use webhook_idempotency::store::admin::{Admin, EventDetail, EventRow, Filter};
use webhook_idempotency::store::{check_schema, SCHEMA_VERSION};
use webhook_idempotency::StoreConfig;
use webhook_idempotency::{StoreError, StoreErrorKind};

mod cli;
mod outbox;
mod render;
use cli::*;
use render::*;
use webhook_idempotency::postgres::tokio_postgres::config::{Host, SslMode};
use webhook_idempotency::postgres::tokio_postgres::{Config, NoTls};

/// Inspect and repair the webhook events table (requeue, replay, purge),
/// with every action audited.
/// A command that could not run: exit status 2, `kind` for scripts.
#[derive(Debug)]
struct Fail {
    kind: &'static str,
    message: String,
}

impl Fail {
    fn usage(message: impl Into<String>) -> Self {
        Self { kind: "usage", message: message.into() }
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        let kind = if e.sqlstate().is_some() { "database" } else { "connect" };
        Self { kind, message: e.to_string() }
    }
}

/// What a command that ran found.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Exit status 0.
    Done,
    /// Exit status 1.
    NothingMatched,
}

/// A finished command: what to print and how it ended.
struct Report {
    out: String,
    outcome: Outcome,
}

impl Report {
    fn new(out: String, matched: bool) -> Self {
        Self { out, outcome: if matched { Outcome::Done } else { Outcome::NothingMatched } }
    }
}

/// `host:port/database` of `config`: never the user or password.
fn target(config: &Config) -> String {
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match h {
                Host::Tcp(name) => format!("{name}:{port}"),
                Host::Unix(path) => format!("{}:{port}", path.display()),
            }
        })
        .collect();
    let hosts = if hosts.is_empty() { "localhost:5432".to_owned() } else { hosts.join(",") };
    let db = config.get_dbname().or(config.get_user()).unwrap_or("postgres");
    format!("{hosts}/{db}")
}

fn connect(url: Option<&str>) -> Result<(Pool, String), Fail> {
    let url = url.ok_or_else(|| Fail::usage("give the database: set DATABASE_URL or pass --database-url"))?;
    // The parser's message may quote the URL: it is not shown.
    let mut config: Config = url
        .parse()
        .map_err(|_| Fail::usage("DATABASE_URL / --database-url is not a PostgreSQL URL or key=value string"))?;
    if config.get_ssl_mode() == SslMode::Require {
        return Err(Fail::usage(
            "sslmode=require: webhook-admin connects without TLS; run it where the database is reachable without TLS",
        ));
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    let target = target(&config);
    let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    let pool = Pool::builder(manager).max_size(2).build().map_err(|e| Fail::usage(format!("pool: {e}")))?;
    Ok((pool, target))
}

fn schema_failure(e: &StoreError, schema: &str, target: &str) -> Fail {
    let (kind, message) = match e.kind() {
        StoreErrorKind::NotMigrated => (
            "not_migrated",
            format!(
                "schema {schema} on {target} is not migrated ({e}).\nIf your tables live under another schema, \
                 pass --schema <name> (or WEBHOOK_SCHEMA); otherwise run the migrations first \
                 (webhook_idempotency::migrate with this schema, or the SQL files under sql/), then webhook-admin again."
            ),
        ),
        StoreErrorKind::Outdated => (
            "outdated",
            format!(
                "schema {schema} on {target} is older than webhook-admin needs (version {SCHEMA_VERSION}) ({e}).\n\
                 Run the migrations first (webhook_idempotency::migrate with this schema, or the SQL files under sql/), then \
                 webhook-admin again."
            ),
        ),
        StoreErrorKind::Unavailable | StoreErrorKind::PoolTimeout => {
            ("connect", format!("cannot connect to {target}: {e}"))
        }
        StoreErrorKind::Authentication => ("authentication", format!("the server at {target} refused the login: {e}")),
        StoreErrorKind::DatabaseMissing => ("database_missing", format!("no such database at {target}: {e}")),
        StoreErrorKind::InvalidSchemaName => ("usage", format!("--schema: {e}")),
        _ => ("database", format!("schema check on {target}: {e}")),
    };
    Fail { kind, message }
}

fn actor(given: Option<String>) -> Result<String, Fail> {
    if let Some(a) = given {
        let a = a.trim();
        return if a.is_empty() { Err(Fail::usage("--actor is empty")) } else { Ok(a.to_owned()) };
    }
    Ok(["USER", "LOGNAME"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .map(|v| v.trim().to_owned())
        .find(|v| !v.is_empty())
        .unwrap_or_else(|| {
            eprintln!(
                "webhook-admin: note: neither $USER nor $LOGNAME is set; recording the actor as \"unknown\" \
                 (pass --actor NAME, as cron jobs and containers should)"
            );
            "unknown".to_owned()
        }))
}

async fn stats(admin: &Admin, as_json: bool) -> Result<Report, Fail> {
    let s = admin.stats().await?;
    if as_json {
        let v = json!({
            "by_state": s.by_state.iter().map(|(p, sc, st, n)| json!({"provider": p, "scope": sc, "state": st, "rows": n})).collect::<Vec<_>>(),
            "oldest_pending_secs": s.oldest_pending.map(|d| d.as_secs_f64()),
            "attempts": s.attempts.iter().map(|(a, n)| json!({"attempts": a, "rows": n})).collect::<Vec<_>>(),
            "failures_last_hour": s.failures_last_hour,
            "due": s.due.iter().map(|b| json!({
                "provider": b.provider, "scope": b.scope, "rows": b.rows,
                "oldest_due_secs": b.oldest_due.as_secs_f64(),
                "last_run_secs": b.last_run.map(|d| d.as_secs_f64()), "unserved": b.unserved,
            })).collect::<Vec<_>>(),
        });
        return Ok(Report::new(json_text(&v), true));
    }
    let mut out = String::from("Rows by provider, scope and state\n");
    if s.by_state.is_empty() {
        out.push_str("(no rows)\n");
    } else {
        let mut t = table(&["provider", "scope", "state", "rows"]);
        for (p, sc, st, n) in &s.by_state {
            t.add_row(vec![printable(p), printable(sc), st.clone(), n.to_string()]);
        }
        out.push_str(&format!("{t}\n"));
    }
    let oldest = s.oldest_pending.map_or_else(|| "none pending".to_owned(), duration_text);
    out.push_str(&format!("Oldest pending: {oldest}\n"));
    out.push_str("Attempts (rows that ran at least once)\n");
    if s.attempts.is_empty() {
        out.push_str("(none)\n");
    } else {
        let mut t = table(&["attempts", "rows"]);
        for (a, n) in &s.attempts {
            t.add_row(vec![a.to_string(), n.to_string()]);
        }
        out.push_str(&format!("{t}\n"));
    }
    out.push_str(&format!("Failures in the last hour: {}\n", s.failures_last_hour));
    if !s.due.is_empty() {
        let secs = duration_text;
        out.push_str("Inbox rows due now (unserved: no row of theirs ran while the oldest waited)\n");
        let mut t = table(&["provider", "scope", "due", "oldest due", "last run", "unserved"]);
        for b in &s.due {
            let last = b.last_run.map_or_else(|| "never".to_owned(), |d| format!("{} ago", secs(d)));
            let unserved = if b.unserved { "UNSERVED" } else { "" };
            t.add_row(vec![
                printable(&b.provider),
                printable(&b.scope),
                b.rows.to_string(),
                secs(b.oldest_due),
                last,
                unserved.to_owned(),
            ]);
        }
        out.push_str(&format!("{t}\n"));
    }
    Ok(Report::new(out, true))
}

async fn list(admin: &Admin, state: State, f: ListFilter, limit: u32, as_json: bool) -> Result<Report, Fail> {
    let filter = Filter { provider: f.of.provider, scope: f.of.scope, key: None, since: f.since };
    let rows = admin.list(state.as_str(), &filter, limit as usize).await?;
    let out = if as_json {
        json_text(&Value::Array(rows.iter().map(row_json).collect()))
    } else if rows.is_empty() {
        format!("no {} rows match\n", state.as_str())
    } else {
        let more = if rows.len() == limit as usize {
            format!(" (first {limit}: raise --limit for more)")
        } else {
            String::new()
        };
        format!("{}\n{} {} rows, oldest first{more}\n", rows_table(&rows), rows.len(), state.as_str())
    };
    Ok(Report::new(out, !rows.is_empty()))
}

fn detail_json(d: &EventDetail) -> Value {
    let mut v = row_json(&d.row);
    let map = v.as_object_mut().expect("an object");
    map.insert("completed_at".into(), time_json(d.completed_at));
    map.insert("run_at".into(), time_json(d.run_at));
    map.insert("locked_until".into(), time_json(d.locked_until));
    map.insert("payload_bytes".into(), d.payload_bytes.into());
    if let Some(p) = &d.payload {
        let (encoding, data) = payload_text(p);
        map.insert("payload".into(), json!({"encoding": encoding, "data": data}));
    }
    v
}

async fn show(
    admin: &Admin,
    provider: &str,
    scope: &str,
    key: &str,
    payload: bool,
    as_json: bool,
) -> Result<Report, Fail> {
    let Some(d) = admin.show(provider, scope, key, payload).await? else {
        let out = if as_json {
            "null\n".to_owned()
        } else {
            format!("no event {} / {} / {}\n", printable(provider), printable(scope), printable(key))
        };
        return Ok(Report::new(out, false));
    };
    if as_json {
        return Ok(Report::new(json_text(&detail_json(&d)), true));
    }
    let r = &d.row;
    let dash = || "-".to_owned();
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED);
    let payload_line = match (d.payload_bytes, &d.payload) {
        (None, _) => "none stored (synchronous mode)".to_owned(),
        (Some(n), None) => format!("{n} bytes (--payload prints it)"),
        (Some(n), Some(_)) => format!("{n} bytes"),
    };
    let fields = [
        ("provider", printable(&r.provider)),
        ("scope", printable(&r.scope)),
        ("key", printable(&r.key)),
        ("type", r.event_type.as_deref().map_or_else(dash, printable)),
        ("state", r.state.clone()),
        ("attempts", r.attempts.to_string()),
        ("last status", r.response_status.map_or_else(dash, |s| s.to_string())),
        ("last error", r.last_error.as_deref().map_or_else(dash, printable)),
        ("received", ago(r.received_at)),
        ("last failed", opt_time(r.last_failed_at)),
        ("completed", opt_time(d.completed_at)),
        ("run at", opt_time(d.run_at)),
        ("locked until", opt_time(d.locked_until)),
        ("payload", payload_line),
    ];
    let out = detail_text(t, fields, d.payload.as_deref().map(|p| (None, p)));
    Ok(Report::new(out, true))
}

/// `requeue` or `replay`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Requeue,
    Replay,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Requeue => "requeue",
            Self::Replay => "replay",
        }
    }

    fn states(self) -> &'static [&'static str] {
        match self {
            Self::Requeue => &["dead", "failed"],
            Self::Replay => &["done"],
        }
    }
}

/// The rows `kind` would change: those in its states with a stored payload,
/// oldest first, at most `limit`.
async fn matching(admin: &Admin, kind: Kind, filter: &Filter, limit: usize) -> Result<Vec<EventRow>, Fail> {
    let mut rows = Vec::new();
    for state in kind.states() {
        for r in admin.list(state, filter, limit).await? {
            // The library acts only on rows with a payload (inbox mode).
            let stored = admin.show(&r.provider, &r.scope, &r.key, false).await?;
            if stored.is_some_and(|d| d.payload_bytes.is_some()) {
                rows.push(r);
            }
        }
    }
    rows.sort_by_key(|r| r.received_at);
    rows.truncate(limit);
    Ok(rows)
}

async fn act(admin: &Admin, kind: Kind, a: Action, force: bool, as_json: bool) -> Result<Report, Fail> {
    let filter = Filter { provider: a.of.provider, scope: a.of.scope, key: a.key, since: a.since };
    if filter == Filter::default() && !a.all {
        return Err(Fail::usage(format!(
            "{} needs a target: --provider/--scope/--key/--since, or --all for every matching row",
            kind.name()
        )));
    }
    if kind == Kind::Replay && !force && !a.dry_run {
        return Err(Fail {
            kind: "force_required",
            message: "replay runs the handler again for done events, so their effects repeat: add --force \
                      (or --dry-run to see what would run)"
                .into(),
        });
    }
    let actor = actor(a.actor)?;
    let n = match kind {
        Kind::Requeue => admin.requeue(&filter, a.dry_run, &actor).await?,
        Kind::Replay => admin.replay(&filter, a.dry_run, &actor).await?,
    };
    let rows = if a.dry_run { matching(admin, kind, &filter, a.limit as usize).await? } else { Vec::new() };
    let name = kind.name();
    if as_json {
        let mut v = json!({"action": name, "dry_run": a.dry_run, "rows": n, "actor": actor});
        if a.dry_run {
            v["matching"] = Value::Array(rows.iter().map(row_json).collect());
        }
        return Ok(Report::new(json_text(&v), n > 0));
    }
    let taken = kind.states().join(" or ");
    let mut out = if a.dry_run {
        format!("dry run: {name} would change {n} rows ({taken}, with a stored payload); nothing changed\n")
    } else {
        let what = match kind {
            Kind::Requeue => "back to pending, due now",
            Kind::Replay => "back to pending: they run again",
        };
        format!("{name}: {n} rows {what} (actor {}; recorded in the audit table)\n", printable(&actor))
    };
    if !rows.is_empty() {
        out.push_str(&format!("{}\n", rows_table(&rows)));
        if (rows.len() as u64) < n {
            out.push_str(&format!("(first {} of {n}: raise --limit for more)\n", rows.len()));
        }
    }
    if n == 0 {
        out.push_str(&format!("nothing matched: {name} takes {taken} rows with a stored payload\n"));
        if let (Some(p), Some(s), Some(k)) = (&filter.provider, &filter.scope, &filter.key) {
            match admin.show(p, s, k, false).await? {
                None => out.push_str("hint: no such event\n"),
                Some(d) if d.payload_bytes.is_none() => out.push_str(&format!(
                    "hint: the event is {} with no stored payload (synchronous mode): the sender's retry runs it\n",
                    d.row.state
                )),
                Some(d) => out.push_str(&format!("hint: the event is {}\n", d.row.state)),
            }
        }
    }
    Ok(Report::new(out, n > 0))
}

async fn purge(
    admin: &Admin,
    older_than: Duration,
    dry_run: bool,
    actor: String,
    as_json: bool,
) -> Result<Report, Fail> {
    // The cut-off as a time (humantime's duration text reads "30days"), on
    // the database's clock, which the purge compares with: this machine's
    // may be skewed from it.
    let cutoff = admin.cutoff(older_than).await?;
    let n = admin.purge(older_than, dry_run, &actor).await?;
    let age = time(cutoff);
    let out = if as_json {
        json_text(&json!({
            "action": "purge", "dry_run": dry_run, "rows": n, "actor": actor, "older_than_secs": older_than.as_secs(),
            "cutoff": time_json(Some(cutoff)),
        }))
    } else if dry_run {
        format!("dry run: purge would delete {n} done or failed rows received before {age}; nothing changed\n")
    } else {
        format!(
            "purge: {n} done or failed rows received before {age} deleted (actor {}; recorded in the audit \
             table)\n",
            printable(&actor)
        )
    };
    Ok(Report::new(out, n > 0))
}

async fn audit(admin: &Admin, limit: u32, as_json: bool) -> Result<Report, Fail> {
    let rows = admin.audit(limit as usize).await?;
    if as_json {
        let v: Vec<Value> = rows
            .iter()
            .map(|r| {
                let filter: Value = serde_json::from_str(&r.filter).unwrap_or_else(|_| r.filter.clone().into());
                json!({
                    "at": time_json(Some(r.at)), "actor": r.actor, "db_role": r.db_role, "action": r.action,
                    "filter": filter, "rows": r.rows,
                })
            })
            .collect();
        return Ok(Report::new(json_text(&Value::Array(v)), true));
    }
    if rows.is_empty() {
        return Ok(Report::new("no audit rows\n".into(), true));
    }
    let mut t = table(&["at", "actor", "db role", "action", "rows", "filter"]);
    for r in &rows {
        let role = r.db_role.as_deref().map_or_else(|| "-".to_owned(), printable);
        t.add_row(vec![
            time(r.at),
            printable(&r.actor),
            role,
            r.action.clone(),
            r.rows.to_string(),
            printable(&r.filter),
        ]);
    }
    Ok(Report::new(format!("{t}\n"), true))
}

async fn run(cli: Cli) -> Result<Report, Fail> {
    let (pool, target) = connect(cli.database_url.as_deref())?;
    let schema = cli.schema.as_str();
    let store = StoreConfig::new(pool).schema(schema);
    check_schema(&store).await.map_err(|e| schema_failure(&e, schema, &target))?;
    let admin = Admin::new(store).map_err(|e| Fail::usage(format!("--schema: {e}")))?;
    let as_json = cli.json;
    match cli.command {
        Command::Stats => stats(&admin, as_json).await,
        Command::List { state, filter, limit } => list(&admin, state, filter, limit, as_json).await,
        Command::Show { provider, scope, key, payload } => {
            show(&admin, &provider, &scope, &key, payload, as_json).await
        }
        Command::Requeue(a) => act(&admin, Kind::Requeue, a, false, as_json).await,
        Command::Replay { action, force } => act(&admin, Kind::Replay, action, force, as_json).await,
        Command::Purge { purge: PurgeArgs { older_than, dry_run, actor: who, scope }, allow_short_window } => {
            let admin = admin.clone().purge_scope(scope);
            if !allow_short_window {
                let inside = admin.inside_replay_windows(older_than).await?;
                if !inside.is_empty() {
                    let named: Vec<String> =
                        inside.iter().map(|(p, w)| format!("{} ({})", printable(p), duration_text(*w))).collect();
                    return Err(Fail::usage(format!(
                        "refusing: --older-than {} is shorter than the replay window of {}: a replay of a purged \
                         event would run it again; choose a longer age, or pass --allow-short-window",
                        duration_text(older_than),
                        named.join(", ")
                    )));
                }
            }
            purge(&admin, older_than, dry_run, actor(who)?, as_json).await
        }
        Command::Audit { limit } => audit(&admin, limit, as_json).await,
        Command::Outbox { command } => outbox::run(&admin, command, as_json).await,
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => e.exit(),
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            cli::emit(std::io::stderr(), &e.render().to_string());
            return ExitCode::from(2);
        }
        Err(e) => {
            cli::emit(std::io::stderr(), &cli::redacted(&e.render().to_string()));
            return ExitCode::from(2);
        }
    };
    let as_json = cli.json;
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("webhook-admin: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(report) => {
            cli::emit(std::io::stdout().lock(), &report.out);
            match report.outcome {
                Outcome::Done => ExitCode::SUCCESS,
                Outcome::NothingMatched => ExitCode::from(1),
            }
        }
        Err(fail) => {
            let text = if as_json {
                json_text(&json!({"error": fail.kind, "message": fail.message}))
            } else {
                format!("webhook-admin: {}: {}\n", fail.kind, printable(&fail.message))
            };
            cli::emit(std::io::stderr().lock(), &text);
            ExitCode::from(2)
        }
    }
}
