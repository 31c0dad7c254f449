//! The `webhook-admin` command, run as a process against a database prepared
//! through the library (`Inbox::accept` creates the rows, SQL sets states).
#![cfg(feature = "cli")]

use std::process::Output;

use serde_json::Value;
use tokio_postgres::config::Host;
use webhook_idempotency::store::inbox::{Inbox, RequestHead};
use webhook_idempotency::ScopedEvent;

use crate::support::*;

const EVENTS: &str = "webhook_idempotency.webhook_events";

/// A key=value connection string for `config` (the child gets it as
/// `DATABASE_URL`).
fn conninfo(config: &tokio_postgres::Config) -> String {
    let mut parts = Vec::new();
    if let Some(host) = config.get_hosts().first() {
        parts.push(match host {
            Host::Tcp(h) => format!("host={h}"),
            Host::Unix(p) => format!("host={}", p.display()),
        });
    }
    if let Some(port) = config.get_ports().first() {
        parts.push(format!("port={port}"));
    }
    if let Some(user) = config.get_user() {
        parts.push(format!("user={user}"));
    }
    if let Some(pw) = config.get_password() {
        parts.push(format!("password={}", String::from_utf8_lossy(pw)));
    }
    if let Some(db) = config.get_dbname() {
        parts.push(format!("dbname={db}"));
    }
    parts.join(" ")
}

pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }

    fn error_kind(&self) -> String {
        let v: Value =
            serde_json::from_str(&self.stderr).unwrap_or_else(|e| panic!("stderr is not JSON ({e}): {}", self.stderr));
        v["error"].as_str().unwrap_or_default().to_owned()
    }
}

/// Runs the built `webhook-admin` with `DATABASE_URL` = `url` (none when
/// `None`) and `$USER` = `user`.
async fn admin_with(url: Option<&str>, user: &str, args: &[&str]) -> Run {
    admin_in(tokio::process::Command::new(env!("CARGO_BIN_EXE_webhook-admin")), url, user, args).await
}

/// [`admin_with`] for the command `cmd` that runs `webhook-admin` (itself,
/// or under `faketime`).
async fn admin_in(mut cmd: tokio::process::Command, url: Option<&str>, user: &str, args: &[&str]) -> Run {
    cmd.args(args).env_remove("DATABASE_URL").env_remove("LOGNAME").env("USER", user);
    if let Some(url) = url {
        cmd.env("DATABASE_URL", url);
    }
    let Output { status, stdout, stderr } = cmd.output().await.expect("run webhook-admin");
    Run {
        code: status.code().expect("exited"),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

pub(crate) async fn admin(db: &TestDb, args: &[&str]) -> Run {
    admin_with(Some(&conninfo(&db.config)), "ops-test", args).await
}

/// A database with one row per state, all accepted through the inbox:
/// `p1` pending, `r1` running, `d1` done, `f1` failed (an hour's failure),
/// `x1` dead, `x2` dead with a binary payload, `sync1` dead without a
/// payload (synchronous mode), `o1` pending from provider `other`.
async fn prepared() -> TestDb {
    let db = TestDb::new().await;
    let inbox = Inbox::new(db.pool.clone()).unwrap();
    let head = RequestHead { method: "POST".into(), uri: "/".into(), headers: vec![] };
    let rows: [(&str, &str, &[u8]); 8] = [
        ("acme", "p1", b"{\"id\":\"p1\"}"),
        ("acme", "r1", b"{\"id\":\"r1\"}"),
        ("acme", "d1", b"{\"id\":\"d1\"}"),
        ("acme", "f1", b"{\"id\":\"f1\"}"),
        ("acme", "x1", b"{\"id\":\"x1\"}"),
        ("acme", "x2", b"\xff\x00\x1b[2J"),
        ("acme", "sync1", b"{}"),
        ("other", "o1", b"{}"),
    ];
    for (provider, key, payload) in rows {
        let event = ScopedEvent::new(provider, "s", key).event_type("invoice.paid");
        assert!(inbox.accept(&event, payload, &head).await.unwrap());
    }
    let c = db.pool.get().await.unwrap();
    c.batch_execute(&format!(
        "UPDATE {EVENTS} SET state = 'running', attempts = 1 WHERE event_key = 'r1';
         UPDATE {EVENTS} SET state = 'done', attempts = 1, response_status = 200, completed_at = now()
             WHERE event_key = 'd1';
         UPDATE {EVENTS} SET state = 'failed', attempts = 2, response_status = 500,
             last_error = 'handler answered 500', last_failed_at = now() WHERE event_key = 'f1';
         UPDATE {EVENTS} SET state = 'dead', attempts = 5, last_error = 'handler answered 503',
             last_failed_at = now() - interval '2 hours' WHERE event_key IN ('x1', 'x2');
         UPDATE {EVENTS} SET state = 'dead', attempts = 5, payload = NULL WHERE event_key = 'sync1';"
    ))
    .await
    .unwrap();
    db
}

/// Every row as `key:state:attempts`, and the audit rows: what a dry run
/// must leave as it was.
async fn snapshot(db: &TestDb) -> (String, i64) {
    let rows = db
        .scalar_text(&format!(
            "SELECT string_agg(event_key || ':' || state || ':' || attempts, ',' ORDER BY event_key) FROM {EVENTS}"
        ))
        .await;
    (rows, db.scalar("SELECT count(*) FROM webhook_idempotency.webhook_audit").await)
}

async fn state_of(db: &TestDb, key: &str) -> Option<String> {
    db.event_row(key).await.map(|r| r.0)
}

#[tokio::test]
async fn read_commands_print_tables_with_exit_status() {
    let db = prepared().await;
    let cases: Vec<(&str, Vec<&str>, i32, &[&str], &[&str])> = vec![
        (
            "stats",
            vec!["stats"],
            0,
            &["Rows by provider, scope and state", "dead", "Oldest pending:", "Failures in the last hour: 1"],
            &[],
        ),
        (
            "list dead",
            vec!["list", "--state", "dead"],
            0,
            &["x1", "x2", "sync1", "handler answered 503"],
            &["f1", "d1"],
        ),
        ("list by provider", vec!["list", "--state", "pending", "--provider", "other"], 0, &["o1"], &["p1"]),
        ("list with a limit", vec!["list", "--state", "dead", "--limit", "1"], 0, &["x1", "raise --limit"], &["x2"]),
        ("list since 1s finds none", vec!["list", "--state", "done", "--since", "0s"], 1, &[], &["d1"]),
        ("list of an empty state", vec!["list", "--state", "pending", "--scope", "nope"], 1, &[], &[]),
        (
            "show without payload",
            vec!["show", "acme", "s", "f1"],
            0,
            &["failed", "handler answered 500", "500", "--payload prints it"],
            &["{\"id\":\"f1\"}"],
        ),
        (
            "show with payload",
            vec!["show", "acme", "s", "f1", "--payload"],
            0,
            &["payload (UTF-8)", "{\"id\":\"f1\"}"],
            &[],
        ),
        ("show a binary payload", vec!["show", "acme", "s", "x2", "--payload"], 0, &["base64", "/wAbWzJK"], &[]),
        ("show without a stored payload", vec!["show", "acme", "s", "sync1"], 0, &["none stored"], &[]),
        ("show an unknown key", vec!["show", "acme", "s", "nope"], 1, &["no event"], &[]),
        ("audit, empty", vec!["audit"], 0, &["no audit rows"], &[]),
    ];
    for (name, args, code, present, absent) in cases {
        let run = admin(&db, &args).await;
        assert_eq!(run.code, code, "{name}: {}{}", run.stdout, run.stderr);
        for needle in present {
            assert!(run.stdout.contains(needle), "{name}: {needle:?} missing in\n{}", run.stdout);
        }
        for needle in absent {
            assert!(!run.stdout.contains(needle), "{name}: {needle:?} present in\n{}", run.stdout);
        }
        assert!(!run.stdout.contains('\u{1b}'), "{name}: a raw escape reached the terminal");
    }
}

#[tokio::test]
async fn json_output_parses() {
    let db = prepared().await;
    let cases: Vec<(&str, Vec<&str>, i32, fn(&Value) -> bool)> = vec![
        ("stats", vec!["stats", "--json"], 0, |v| {
            v["failures_last_hour"] == 1
                && v["oldest_pending_secs"].is_number()
                && v["by_state"].as_array().is_some_and(|a| {
                    a.iter().any(|r| r["provider"] == "acme" && r["state"] == "dead" && r["rows"] == 3)
                })
                && v["attempts"].as_array().is_some_and(|a| a.iter().any(|r| r["attempts"] == 5 && r["rows"] == 3))
        }),
        ("list", vec!["list", "--state", "dead", "--json"], 0, |v| {
            let keys: Vec<&str> = v.as_array().unwrap().iter().filter_map(|r| r["key"].as_str()).collect();
            keys.len() == 3 && ["x1", "x2", "sync1"].iter().all(|k| keys.contains(k))
        }),
        ("list, nothing", vec!["list", "--state", "done", "--provider", "other", "--json"], 1, |v| {
            v.as_array().is_some_and(Vec::is_empty)
        }),
        ("show", vec!["show", "acme", "s", "d1", "--json"], 0, |v| {
            v["state"] == "done"
                && v["response_status"] == 200
                && v["completed_at"].is_string()
                && v.get("payload").is_none()
        }),
        ("show, payload", vec!["show", "acme", "s", "x2", "--payload", "--json"], 0, |v| {
            v["payload"]["encoding"] == "base64" && v["payload"]["data"] == "/wAbWzJK" && v["payload_bytes"] == 6
        }),
        ("show, unknown", vec!["show", "acme", "s", "nope", "--json"], 1, Value::is_null),
        ("requeue dry run", vec!["requeue", "--all", "--dry-run", "--json"], 0, |v| {
            v["rows"] == 3 && v["dry_run"] == true && v["matching"].as_array().is_some_and(|a| a.len() == 3)
        }),
        ("audit", vec!["audit", "--json"], 0, |v| v.as_array().is_some_and(Vec::is_empty)),
    ];
    for (name, args, code, check) in cases {
        let run = admin(&db, &args).await;
        assert_eq!(run.code, code, "{name}: {}{}", run.stdout, run.stderr);
        let v = run.json();
        assert!(check(&v), "{name}: {v:#}");
    }
}

#[tokio::test]
async fn dry_runs_change_nothing_and_list_what_would_change() {
    let db = prepared().await;
    let c = db.pool.get().await.unwrap();
    c.execute(&format!("UPDATE {EVENTS} SET received_at = now() - interval '2 days' WHERE event_key = 'd1'"), &[])
        .await
        .unwrap();
    drop(c);
    let before = snapshot(&db).await;
    let cases: Vec<(&str, Vec<&str>, i32, &[&str], &[&str])> = vec![
        // f1, x1, x2; not sync1 (no payload to run).
        (
            "requeue all",
            vec!["requeue", "--all", "--dry-run"],
            0,
            &["would change 3 rows", "f1", "x1", "x2"],
            &["sync1"],
        ),
        (
            "requeue one key",
            vec!["requeue", "--provider", "acme", "--scope", "s", "--key", "x1", "--dry-run"],
            0,
            &["would change 1 rows", "x1"],
            &["x2"],
        ),
        (
            "requeue a done key",
            vec!["requeue", "--provider", "acme", "--scope", "s", "--key", "d1", "--dry-run"],
            1,
            &["would change 0 rows", "nothing matched", "the event is done"],
            &[],
        ),
        (
            "requeue without a payload",
            vec!["requeue", "--provider", "acme", "--scope", "s", "--key", "sync1", "--dry-run"],
            1,
            &["no stored payload"],
            &[],
        ),
        (
            "replay needs no --force to look",
            vec!["replay", "--provider", "acme", "--dry-run"],
            0,
            &["would change 1 rows", "d1"],
            &[],
        ),
        (
            "purge",
            vec!["purge", "--older-than", "1day", "--dry-run", "--allow-short-window"],
            0,
            &["would delete 1 done or failed rows"],
            &[],
        ),
        ("purge, nothing that old", vec!["purge", "--older-than", "30days", "--dry-run"], 1, &["would delete 0"], &[]),
    ];
    for (name, args, code, present, absent) in cases {
        let run = admin(&db, &args).await;
        assert_eq!(run.code, code, "{name}: {}{}", run.stdout, run.stderr);
        for needle in present {
            assert!(run.stdout.contains(needle), "{name}: {needle:?} missing in\n{}", run.stdout);
        }
        for needle in absent {
            assert!(!run.stdout.contains(needle), "{name}: {needle:?} present in\n{}", run.stdout);
        }
        assert_eq!(snapshot(&db).await, before, "{name}: a dry run changed rows or wrote an audit row");
    }
}

#[tokio::test]
async fn actions_change_rows_and_are_audited() {
    let db = prepared().await;
    let c = db.pool.get().await.unwrap();
    c.execute(&format!("UPDATE {EVENTS} SET received_at = now() - interval '2 days' WHERE event_key = 'f1'"), &[])
        .await
        .unwrap();
    drop(c);
    let url = conninfo(&db.config);
    let one = |key: &'static str| -> Vec<&'static str> { vec!["--provider", "acme", "--scope", "s", "--key", key] };
    let with = |mut a: Vec<&'static str>, b: &[&'static str]| {
        a.extend_from_slice(b);
        a
    };
    // (name, $USER, args, exit, the row and the state it must be in after).
    let cases: Vec<(&str, &str, Vec<&str>, i32, Option<(&str, Option<&str>)>)> = vec![
        (
            "requeue one key",
            "u",
            with(with(vec!["requeue"], &one("x1")), &["--actor", "alice"]),
            0,
            Some(("x1", Some("pending"))),
        ),
        ("requeue it again: nothing left", "u", with(vec!["requeue"], &one("x1")), 1, Some(("x1", Some("pending")))),
        ("replay without --force is refused", "u", with(vec!["replay"], &one("d1")), 2, Some(("d1", Some("done")))),
        (
            "replay with --force, actor from $USER",
            "bob",
            with(with(vec!["replay"], &one("d1")), &["--force"]),
            0,
            Some(("d1", Some("pending"))),
        ),
        (
            "purge",
            "u",
            vec!["purge", "--older-than", "1day", "--allow-short-window", "--actor", "carol"],
            0,
            Some(("f1", None)),
        ),
        (
            "purge again: nothing left",
            "u",
            vec!["purge", "--older-than", "1day", "--allow-short-window", "--actor", "carol"],
            1,
            None,
        ),
    ];
    for (name, user, args, code, after) in cases {
        let run = admin_with(Some(&url), user, &args).await;
        assert_eq!(run.code, code, "{name}: {}{}", run.stdout, run.stderr);
        if let Some((key, state)) = after {
            assert_eq!(state_of(&db, key).await.as_deref(), state, "{name}");
        }
    }
    assert_eq!(db.event_row("x1").await.map(|r| r.1), Some(0), "a requeue starts a fresh attempt budget");
    let audit = admin(&db, &["audit", "--json"]).await;
    assert_eq!(audit.code, 0, "{}", audit.stderr);
    let rows: Vec<(String, String, i64, Value)> = audit
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["actor"].as_str().unwrap().to_owned(),
                r["action"].as_str().unwrap().to_owned(),
                r["rows"].as_i64().unwrap(),
                r["filter"].clone(),
            )
        })
        .collect();
    let summary: Vec<(&str, &str, i64)> = rows.iter().map(|r| (r.0.as_str(), r.1.as_str(), r.2)).collect();
    // Newest first; real runs that changed nothing are recorded too (the
    // default actor is $USER); the refused replay is not.
    assert_eq!(
        summary,
        [
            ("carol", "purge", 0),
            ("carol", "purge", 1),
            ("bob", "replay", 1),
            ("u", "requeue", 0),
            ("alice", "requeue", 1)
        ],
    );
    assert_eq!(rows[2].3["key"], "d1", "the audit row keeps the filter");
    // Whatever --actor says, each row names the role the command logged in as.
    let role = db.config.get_user().unwrap().to_owned();
    let json = audit.json();
    let roles: Vec<&str> = json.as_array().unwrap().iter().map(|r| r["db_role"].as_str().unwrap()).collect();
    assert_eq!(roles, [role.as_str(); 5], "the session's role on every row");
    let table = admin(&db, &["audit"]).await;
    assert!(table.stdout.contains("alice") && table.stdout.contains("requeue"), "{}", table.stdout);
    assert!(table.stdout.contains("db role") && table.stdout.contains(&role), "{}", table.stdout);
}

#[tokio::test]
async fn schema_and_usage_errors_exit_2() {
    let db = prepared().await;
    let url = conninfo(&db.config);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let refused = format!("postgres://ops:s3cret-pw@127.0.0.1:{closed}/app");
    let typo = format!("--databse-url={refused}");
    let tls = format!("{url} sslmode=require");
    // (name, DATABASE_URL, args, the error kind printed with --json).
    let cases: Vec<(&str, Option<&str>, Vec<&str>, &str)> = vec![
        ("schema missing", Some(&url), vec!["stats", "--schema", "elsewhere"], "not_migrated"),
        ("invalid schema name", Some(&url), vec!["stats", "--schema", "Bad-Name"], "usage"),
        ("no database given", None, vec!["stats"], "usage"),
        ("TLS required", Some(&tls), vec!["stats"], "usage"),
        ("connection refused", Some(&refused), vec!["stats"], "connect"),
        ("replay without --force", Some(&url), vec!["replay", "--all"], "force_required"),
        ("requeue without a target", Some(&url), vec!["requeue"], "usage"),
    ];
    for (name, database, args, kind) in cases {
        let run = admin_with(database, "u", &[args.as_slice(), &["--json"]].concat()).await;
        assert_eq!(run.code, 2, "{name}: {}{}", run.stdout, run.stderr);
        assert_eq!(run.error_kind(), kind, "{name}: {}", run.stderr);
        let human = admin_with(database, "u", &args).await;
        assert_eq!(human.code, 2, "{name}");
        assert!(human.stderr.starts_with(&format!("webhook-admin: {kind}:")), "{name}: {}", human.stderr);
        for out in [&run.stdout, &run.stderr, &human.stdout, &human.stderr] {
            assert!(!out.contains("s3cret-pw"), "{name}: the password was printed: {out}");
        }
    }
    // clap's own errors: a flag that needs others, a mistyped flag, and a
    // stray URL that clap would quote with its password.
    for (name, args) in [
        ("--key without --provider and --scope", vec!["requeue", "--key", "x1"]),
        ("a mistyped flag holding the URL", vec!["stats", typo.as_str()]),
        ("the URL without its flag", vec!["stats", refused.as_str()]),
        ("an unknown state", vec!["list", "--state", "lost"]),
    ] {
        let run = admin_with(Some(&url), "u", &args).await;
        assert_eq!(run.code, 2, "{name}: {}{}", run.stdout, run.stderr);
        assert!(!run.stderr.contains("s3cret-pw"), "{name}: the password was printed: {}", run.stderr);
    }
    // With DATABASE_URL set, clap's usage line does not show `--database-url`
    // as if it were required (second first-use review).
    let run = admin_with(Some(&url), "u", &["list"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--state"), "names what is missing: {}", run.stderr);
    assert!(!run.stderr.contains("--database-url"), "usage without --database-url: {}", run.stderr);
}

#[tokio::test]
async fn an_unmigrated_or_outdated_schema_is_named_with_the_advice_to_migrate() {
    let db = TestDb::new().await;
    let c = db.pool.get().await.unwrap();
    let newest = webhook_idempotency::store::SCHEMA_VERSION;
    c.execute("DELETE FROM webhook_idempotency.webhook_schema_migrations WHERE version = $1", &[&newest])
        .await
        .unwrap();
    drop(c);
    let run = admin(&db, &["stats", "--json"]).await;
    assert_eq!((run.code, run.error_kind().as_str()), (2, "outdated"), "{}", run.stderr);
    let c = db.pool.get().await.unwrap();
    c.batch_execute("DROP SCHEMA webhook_idempotency CASCADE").await.unwrap();
    drop(c);
    for args in [vec!["stats"], vec!["list", "--state", "dead"], vec!["requeue", "--all"], vec!["audit"]] {
        let run = admin(&db, &args).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.starts_with("webhook-admin: not_migrated:"), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("migrat"), "{args:?}: says to run the migrations: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: nothing ran: {}", run.stdout);
    }
}

#[tokio::test]
async fn purge_refuses_an_age_inside_a_provider_s_replay_window() {
    // A Stripe row 10 days old: Stripe's replay window is 30 days.
    let db = TestDb::new().await;
    db.pool
        .get()
        .await
        .unwrap()
        .batch_execute(&format!(
            "INSERT INTO {EVENTS} (scope, provider, event_key, state, received_at)
             VALUES ('s', 'stripe', 'evt_10d', 'done', now() - interval '10 days')"
        ))
        .await
        .unwrap();
    let cases: [(&str, Vec<&str>, i32, &str); 4] = [
        ("inside the window", vec!["purge", "--older-than", "1day", "--dry-run"], 2, "stripe"),
        ("inside the window, for real", vec!["purge", "--older-than", "7days", "--actor", "carol"], 2, "stripe"),
        ("older than the window", vec!["purge", "--older-than", "31days", "--dry-run"], 1, "would delete 0"),
        ("overridden", vec!["purge", "--older-than", "1day", "--dry-run", "--allow-short-window"], 0, "would delete 1"),
    ];
    for (name, args, code, needle) in cases {
        let run = admin(&db, &args).await;
        assert_eq!(run.code, code, "{name}: {}{}", run.stdout, run.stderr);
        assert!(format!("{}{}", run.stdout, run.stderr).contains(needle), "{name}: {}{}", run.stdout, run.stderr);
    }
    // Nothing was deleted.
    let left: i64 =
        db.pool.get().await.unwrap().query_one(&format!("SELECT count(*) FROM {EVENTS}"), &[]).await.unwrap().get(0);
    assert_eq!(left, 1);
}

/// Input from the third reliability review: `purge --older-than 1d` deleted a
/// custom provider's rows 3 and 10 days old while `Retention` keeps providers
/// without a preset for the default window (30 days). One rule for both now.
#[tokio::test]
async fn purge_keeps_providers_without_a_preset_for_the_default_window() {
    let db = TestDb::new().await;
    db.pool
        .get()
        .await
        .unwrap()
        .batch_execute(&format!(
            "INSERT INTO {EVENTS} (scope, provider, event_key, state, received_at)
             VALUES ('s', 'acme', 'a3', 'done', now() - interval '3 days'),
                    ('s', 'acme', 'a10', 'failed', now() - interval '10 days'),
                    ('s', 'acme', 'a40', 'done', now() - interval '40 days')"
        ))
        .await
        .unwrap();
    let count = || async {
        let c = db.pool.get().await.unwrap();
        c.query_one(&format!("SELECT count(*) FROM {EVENTS}"), &[]).await.unwrap().get::<_, i64>(0)
    };
    let run = admin(&db, &["purge", "--older-than", "1day", "--actor", "carol"]).await;
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("acme (30 days)"), "names the provider and its window: {}", run.stderr);
    assert_eq!(count().await, 3, "refused: nothing deleted");
    // Past the default window the purge goes ahead and takes only the old row.
    let run = admin(&db, &["purge", "--older-than", "31days", "--actor", "carol"]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(count().await, 2);
}

/// Breaker of the issue 33 fixes: `webhook-admin purge` formatted its
/// cut-off with humantime, which panics on a time before 1970 ("all times
/// should be after the epoch"): `--older-than 60years` ran the purge (and,
/// without `--dry-run`, its audit row), then panicked printing the report
/// (exit 101, no report). The cut-off is written by the `time` crate: before
/// 1970 in the plain, `--dry-run` and `--json` forms, and before year 0 in
/// ISO 8601's expanded form (`-00297x-...`), with the report's exit code.
#[tokio::test]
async fn purge_reports_a_cutoff_before_1970_or_before_year_0_instead_of_panicking() {
    let db = TestDb::new().await;
    let year = |older_than_years: i64| {
        let db = &db;
        async move {
            let sql = format!(
                "SELECT extract(year FROM (now() - make_interval(secs => {older_than_years} * 31557600.0)) AT TIME ZONE 'UTC')::int::text"
            );
            db.scalar_text(&sql).await
        }
    };
    let sixty = year(60).await;
    let cases = [
        (vec!["purge", "--older-than", "60years", "--dry-run"], format!("received before {sixty}-")),
        (vec!["--json", "purge", "--older-than", "60years", "--dry-run"], format!("\"cutoff\": \"{sixty}-")),
        (vec!["purge", "--older-than", "60years", "--actor", "carol"], format!("received before {sixty}-")),
        (vec!["purge", "--older-than", "5000years", "--dry-run"], "received before -00".to_owned()),
    ];
    for (args, cutoff) in cases {
        let run = admin(&db, &args).await;
        assert!(!run.stderr.contains("panicked"), "{args:?}: {}", run.stderr);
        assert_eq!(run.code, 1, "{args:?}: nothing that old, exit 1: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains(&cutoff), "{args:?}: {cutoff:?} in {}", run.stdout);
    }
    assert_eq!(db.scalar("SELECT count(*) FROM webhook_idempotency.webhook_audit").await, 1, "the real purge audited");
}

/// The `faketime` binary (Debian's package `faketime`, libfaketime), if one
/// is installed.
fn faketime() -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join("faketime"))
        .find(|p| p.is_file())
}

/// Input from the fourth reliability review: `purge` printed its cut-off
/// from the application's clock while its statements compare with the
/// database's. `webhook-admin` runs under `faketime` 15 days ahead of the
/// database (its own clock, the one `ago` shows, is shown to be skewed):
/// the printed cut-off is the database's `now() - 31 days` (before: 16
/// days ago, which would have named the 20-day-old row as deleted), and the
/// purge takes the 40-day-old row and keeps the 20-day-old one, as the
/// database's clock says.
#[tokio::test]
async fn purge_cutoff_and_what_it_deletes_follow_the_database_clock_under_a_skewed_application_clock() {
    let Some(faketime) = faketime() else {
        println!("skipped: faketime is not installed (Debian: apt-get install faketime)");
        return;
    };
    let db = TestDb::new().await;
    db.execute(&format!(
        "INSERT INTO {EVENTS} (scope, provider, event_key, state, received_at)
         VALUES ('s', 'stripe', 'evt_40d', 'done', now() - interval '40 days'),
                ('s', 'stripe', 'evt_20d', 'done', now() - interval '20 days')"
    ))
    .await;
    let url = conninfo(&db.config);
    let skewed = |args: &[&str]| {
        let mut cmd = tokio::process::Command::new(&faketime);
        cmd.args(["-f", "+15d", env!("CARGO_BIN_EXE_webhook-admin")]);
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let url = url.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            admin_in(cmd, Some(&url), "ops-test", &args).await
        }
    };
    // The application's clock is 15 days ahead: the 40-day-old row looks 55 days old.
    let shown = skewed(&["show", "stripe", "s", "evt_40d"]).await;
    assert!(shown.stdout.contains("(55 days ago)"), "the skew applies: {}{}", shown.stdout, shown.stderr);

    // The text report names the database's cut-off (its date: the run takes a moment).
    let c = db.pool.get().await.unwrap();
    let day: String = c
        .query_one("SELECT to_char((now() - interval '31 days') AT TIME ZONE 'UTC', 'YYYY-MM-DD')", &[])
        .await
        .unwrap()
        .get(0);
    let dry = skewed(&["purge", "--older-than", "31days", "--dry-run"]).await;
    assert!(
        dry.stdout.contains("would delete 1 done or failed rows received before ") && dry.stdout.contains(&day),
        "the database's cut-off, {day}: {}{}",
        dry.stdout,
        dry.stderr
    );

    let run = skewed(&["purge", "--older-than", "31days", "--actor", "carol", "--json"]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let report = run.json();
    assert_eq!(report["rows"], 1, "{report}");
    let cutoff = report["cutoff"].as_str().unwrap_or_else(|| panic!("no cutoff: {report}")).to_owned();
    let off: f64 = c
        .query_one(
            "SELECT abs(extract(epoch FROM $1::text::timestamptz - (now() - interval '31 days')))::float8",
            &[&cutoff],
        )
        .await
        .unwrap()
        .get(0);
    assert!(off < 60.0, "the cut-off {cutoff} is the database's now() - 31 days, not the application's: {off} s off");
    drop(c);
    let left = db.scalar_text(&format!("SELECT string_agg(event_key, ',' ORDER BY event_key) FROM {EVENTS}")).await;
    assert_eq!(left, "evt_20d", "purged by the database's clock");
}

const OUTBOX: &str = "webhook_idempotency.webhook_outbox";

/// The outbox commands on rows written as `WebhookTx::enqueue` writes them
/// (SQL sets their states): `u1` uncertain without a reconciliation, `x1`
/// dead, `d1` delivered 40 days ago, `p1` pending.
#[tokio::test]
async fn outbox_commands_list_show_resolve_requeue_and_purge_with_audit() {
    let db = TestDb::new().await;
    db.execute(&format!(
        "INSERT INTO {OUTBOX} (scope, provider, event_key, effect, state, attempts, last_error, run_at,
                               uncertain_since, delivered_at, payload, content_type)
         SELECT scope, provider, key, effect, state, attempts, last_error, run_at, uncertain_since, delivered_at,
                convert_to('{{\"order\":\"' || key || '\"}}', 'UTF8'), 'application/json'
         FROM (VALUES ('s', 'stripe', 'u1', 'send_receipt', 'uncertain', 1, 'timed out after sending', NULL::timestamptz,
                       now(), NULL::timestamptz),
                      ('s', 'stripe', 'x1', 'send_receipt', 'dead', 5, '422 from the remote', NULL, NULL, NULL),
                      ('s', 'stripe', 'd1', 'send_receipt', 'done', 1, NULL, NULL, NULL, now() - interval '40 days'),
                      ('s', 'stripe', 'p1', 'ship_parcel', 'pending', 0, NULL, now(), NULL, NULL))
              AS v(scope, provider, key, effect, state, attempts, last_error, run_at, uncertain_since, delivered_at);"
    ))
    .await;
    let state = |key: &'static str| {
        let db = &db;
        async move { db.scalar_text(&format!("SELECT state FROM {OUTBOX} WHERE event_key = '{key}'")).await }
    };
    let key_u1 = webhook_idempotency::outbox::downstream_key("s", "stripe", "u1", "send_receipt", 0);
    let u1 = ["stripe", "s", "u1", "send_receipt"];
    let with = |a: &[&'static str], b: &[&'static str]| -> Vec<&'static str> { a.iter().chain(b).copied().collect() };
    // (name, args, exit, stdout must contain)
    let cases: Vec<(&str, Vec<&str>, i32, Vec<String>)> = vec![
        ("stats", vec!["outbox", "stats"], 0, vec!["send_receipt".into(), "waiting for an operator: 1".into()]),
        (
            "list uncertain",
            vec!["outbox", "list", "--state", "uncertain"],
            0,
            vec!["u1".into(), "timed out after sending".into()],
        ),
        ("list nothing", vec!["outbox", "list", "--state", "running"], 1, vec!["no running effects match".into()]),
        (
            "show with the downstream key",
            with(&["outbox", "show"], &with(&u1, &["--payload"])),
            0,
            vec![key_u1.clone(), "{\"order\":\"u1\"}".into()],
        ),
        ("show unknown", vec!["outbox", "show", "stripe", "s", "nope", "send_receipt"], 1, vec!["no effect".into()]),
        (
            "resolve dry run",
            with(&["outbox", "resolve"], &with(&u1, &["--as", "delivered", "--dry-run"])),
            0,
            vec!["dry run".into()],
        ),
        ("resolve dead needs a reason", with(&["outbox", "resolve"], &with(&u1, &["--as", "dead"])), 2, vec![]),
        (
            "resolve delivered",
            with(
                &["outbox", "resolve"],
                &with(&u1, &["--as", "delivered", "--remote-ref", "msg_42", "--actor", "alice"]),
            ),
            0,
            vec!["marked delivered".into()],
        ),
        ("resolve again: not uncertain", with(&["outbox", "resolve"], &with(&u1, &["--as", "delivered"])), 1, vec![]),
        ("requeue needs a target", vec!["outbox", "requeue"], 2, vec![]),
        (
            "requeue dry run",
            vec!["outbox", "requeue", "--effect", "send_receipt", "--dry-run"],
            0,
            vec!["would change 1".into()],
        ),
        (
            "requeue",
            vec!["outbox", "requeue", "--all", "--actor", "bob"],
            0,
            vec!["1 dead effects back to pending".into()],
        ),
        (
            "purge",
            vec!["outbox", "purge", "--older-than", "30days", "--actor", "carol"],
            0,
            vec!["1 delivered effects deleted".into()],
        ),
        ("purge again", vec!["outbox", "purge", "--older-than", "30days"], 1, vec![]),
    ];
    for (name, args, code, wants) in cases {
        let run = admin(&db, &args).await;
        assert_eq!(run.code, code, "{name}: {}{}", run.stdout, run.stderr);
        for want in wants {
            assert!(run.stdout.contains(&want), "{name}: {want:?} not in {}", run.stdout);
        }
    }
    assert_eq!(state("u1").await, "done");
    assert_eq!(db.scalar_text(&format!("SELECT remote_ref FROM {OUTBOX} WHERE event_key = 'u1'")).await, "msg_42");
    assert_eq!(state("x1").await, "pending");
    assert_eq!(db.scalar(&format!("SELECT count(*) FROM {OUTBOX} WHERE event_key = 'd1'")).await, 0);
    let audit = db
        .scalar_text("SELECT string_agg(actor || ':' || action || ':' || rows, ',' ORDER BY at) FROM webhook_idempotency.webhook_audit")
        .await;
    // Every action that ran is recorded, those that changed nothing too; dry runs are not.
    assert_eq!(
        audit,
        "alice:outbox_resolve:1,ops-test:outbox_resolve:0,bob:outbox_requeue:1,carol:outbox_purge:1,ops-test:outbox_purge:0"
    );
    let json = admin(&db, &["--json", "outbox", "list", "--state", "done"]).await.json();
    assert_eq!(json[0]["downstream_key"], key_u1.as_str());
    assert_eq!(json[0]["remote_ref"], "msg_42");
}

/// Input from the third security review: U+061C, U+00AD, U+180E,
/// U+206A..206F, U+2028/2029, tag characters and C1 controls were printed raw
/// by `list` and `--json` (two different keys could look the same), and
/// `webhook-verify` escaped less than `webhook-admin`. One escaping rule now
/// (`src/cli.rs`), in tables, JSON and both tools.
#[tokio::test]
async fn invisible_and_bidi_characters_are_escaped_in_tables_json_and_both_tools() {
    const SEEN: &[char] = &[
        '\u{061C}',
        '\u{00AD}',
        '\u{180E}',
        '\u{206A}',
        '\u{206F}',
        '\u{2028}',
        '\u{2029}',
        '\u{E0041}',
        '\u{202E}',
        '\u{009B}',
        '\u{00A0}',
        '\u{200B}',
    ];
    let db = TestDb::new().await;
    let c = db.pool.get().await.unwrap();
    let keys: Vec<String> = SEEN.iter().map(|ch| format!("evt{ch}1")).collect();
    for key in &keys {
        c.execute(
            &format!(
                "INSERT INTO {EVENTS} (scope, provider, event_key, event_type, state, last_error)
                 VALUES ('s', 'acme', $1, $1, 'done', $1)"
            ),
            &[key],
        )
        .await
        .unwrap();
    }
    drop(c);
    let raw = |text: &str| SEEN.iter().copied().find(|ch| text.contains(*ch));
    let table = admin(&db, &["list", "--state", "done", "--limit", "50"]).await;
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert_eq!(raw(&table.stdout), None, "printed raw in the table:\n{}", table.stdout);
    assert!(table.stdout.contains("evt\\u{61c}1"), "escaped visibly:\n{}", table.stdout);
    let show = admin(&db, &["show", "acme", "s", &keys[0]]).await;
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert_eq!(raw(&show.stdout), None, "printed raw by show:\n{}", show.stdout);
    let json = admin(&db, &["--json", "list", "--state", "done", "--limit", "50"]).await;
    assert_eq!(json.code, 0, "{}", json.stderr);
    assert_eq!(raw(&json.stdout), None, "printed raw in JSON:\n{}", json.stdout);
    let parsed: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let mut listed: Vec<String> =
        parsed.as_array().unwrap().iter().map(|r| r["key"].as_str().unwrap().to_owned()).collect();
    let mut want = keys.clone();
    listed.sort();
    want.sort();
    assert_eq!(listed, want, "the JSON escapes decode to the stored keys");

    // webhook-verify prints the event key with the same rule.
    let secret = webhook_idempotency::verify::SigningSecret::from("whsec_escape");
    for key in &keys {
        let body = serde_json::json!({ "id": key, "type": format!("t{key}") }).to_string();
        let header = format!(
            "stripe-signature: {}",
            webhook_idempotency::providers::stripe::FACTS.sign(&secret, 1_700_000_000, body.as_bytes())
        );
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_webhook-verify"))
            .args(["--provider", "stripe", "--secret", "whsec_escape", "--header", &header, "--body-file", "-"])
            .args(["--now", "1700000000"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use tokio::io::AsyncWriteExt as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(body.as_bytes()).await.unwrap();
        drop(stdin);
        let out = child.wait_with_output().await.unwrap();
        let out = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.starts_with("valid"), "{out}");
        assert_eq!(raw(&out), None, "webhook-verify printed raw:\n{out}");
    }
}
