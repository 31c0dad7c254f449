//! A statement-text check of the Citus rules (not the evidence: the
//! `citus` integration tests run the crate on a real cluster): every statement of
//! the request and worker paths that touches a tenant table filters by
//! `scope` (a router query, one shard) or inserts it, and every primary key
//! or unique key in `sql/*.sql` includes `scope` (Citus requires the
//! distribution column in each of them). OPERATIONS.md, "Distributed
//! PostgreSQL", says what else changes.
//!
//! Not on those paths, and not checked here: retention's sweeps and the
//! admin's listings and actions (`store::retention`, `store::admin`), which
//! span every scope on purpose (multi-shard statements, run rarely), and
//! the migration bookkeeping (`webhook_schema_migrations`, one row per
//! migration: a reference table).

use super::TENANT_TABLES;
use crate::store::inbox::{accept_sql, InboxRows};
use crate::store::outbox::{enqueue_sql, OutboxRows, OutboxSql};
use crate::store::queue::statement_texts;
use crate::store::statements::Statements;
use crate::store::IsolationLevel;

/// Statements of those paths that do not route by `scope`, each with why.
const EXCEPTIONS: &[(&str, &str)] = &[
    (
        "inbox queue: lease",
        "`$4::text IS NULL OR scope = $4`: with the scope bound (a worker given one, or a worker serving every \
         scope on Citus, which leases scope by scope) Citus prunes it to one shard",
    ),
    ("outbox queue: lease", "as the inbox's lease"),
    (
        "layer: claim (lookup first)",
        "off Citus only: an `INSERT ... SELECT` that takes the advisory lock in its `WHERE`; on Citus the claim is \
         `claim (on Citus, routed)` after `claim's advisory lock (on Citus)`",
    ),
    ("layer: claim (claim first, guarded)", "as the lookup-first claim"),
    (
        "outbox: delivered",
        "`$8::text IS NULL OR o.scope = $8`: a batch's rows matched to an array by identity do not prune; on Citus \
         the marker sends one statement per scope with `$8` bound, which Citus prunes to one shard",
    ),
    ("inbox queue: due_scopes", "reads the scopes with due rows over every shard, without FOR UPDATE"),
    ("outbox queue: due_scopes", "as the inbox's"),
];

/// Every statement of the request path (the claim, the inbox's accept, the
/// handler's enqueue, business keys and versions) and of the workers (both
/// queues' statements and the outbox's own ends), named.
fn request_and_worker_statements(schema: &str) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = Vec::new();
    let s = Statements::new(schema, IsolationLevel::ReadCommitted);
    for (name, sql) in [
        ("claim (lookup first)", s.claim),
        ("claim (claim first, guarded)", s.claim_guarded),
        ("claim (on Citus, routed)", s.claim_routed),
        ("claim's advisory lock (on Citus)", s.claim_lock),
        ("lookup", s.lookup),
        ("set_status", s.set_status),
        ("record_failure", s.record_failure),
    ] {
        all.push((format!("layer: {name}"), sql));
    }
    all.push(("inbox: accept".into(), accept_sql(schema)));
    all.push(("outbox: enqueue".into(), enqueue_sql(schema)));
    all.push(("actions: claim_action".into(), crate::store::actions::claim_action_sql(schema)));
    all.push(("actions: apply_if_newer".into(), crate::store::actions::apply_if_newer_sql(schema)));
    for (name, sql) in statement_texts::<InboxRows>(schema) {
        all.push((format!("inbox queue: {name}"), sql));
    }
    for (name, sql) in statement_texts::<OutboxRows>(schema) {
        all.push((format!("outbox queue: {name}"), sql));
    }
    let OutboxSql { delivered, uncertain, resend } = OutboxSql::new(schema);
    for (name, sql) in [("delivered", delivered), ("uncertain", uncertain), ("resend", resend)] {
        all.push((format!("outbox: {name}"), sql));
    }
    all
}

/// `sql` with runs of whitespace as one space.
fn squeeze(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `sql` routes by `scope`: an equality on it with a parameter
/// (`scope = $1`, not an optional `$4::text IS NULL OR scope = $4`), or an
/// insert of `VALUES` that writes it (`INSERT INTO t (scope, ...) VALUES`). A row-wise match
/// against a set of rows (`(o.scope, ...) = (d.scope, ...)`) does not:
/// Citus sends it to every shard.
fn routes_by_scope(sql: &str) -> bool {
    let sql = squeeze(sql);
    // An insert into a tenant table is routed when it writes `scope` from
    // `VALUES`: `INSERT ... SELECT` with no distributed table in its `FROM`
    // runs through the coordinator (its rows sent back as an intermediate
    // result, a two-phase commit), whatever its `WHERE` filters.
    let insert = TENANT_TABLES.iter().find_map(|t| {
        let into = format!("INSERT INTO webhook_idempotency.{t} ");
        sql.find(&into).map(|at| &sql[at + into.len()..])
    });
    if let Some(rest) = insert {
        let writes_scope = rest.find('(').is_some_and(|open| rest[open + 1..].trim_start().starts_with("scope"));
        let values = rest.find(')').is_some_and(|close| rest[close + 1..].trim_start().starts_with("VALUES"));
        return writes_scope && values;
    }
    let mut rest = sql.as_str();
    while let Some(at) = rest.find("scope = $") {
        // The column's table alias (`p.scope`) is not what decides.
        let before = rest[..at].trim_end_matches(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if !before.trim_end().ends_with(" OR") {
            return true;
        }
        rest = &rest[at + 1..];
    }
    false
}

fn touches_a_tenant_table(sql: &str) -> bool {
    TENANT_TABLES.iter().any(|t| sql.contains(&format!(".{t}")))
}

#[test]
fn every_request_and_worker_statement_routes_by_scope_except_the_listed_ones() {
    let statements = request_and_worker_statements("webhook_idempotency");
    let names: Vec<&str> = statements.iter().map(|(n, _)| n.as_str()).collect();
    for (exception, _) in EXCEPTIONS {
        assert!(names.contains(exception), "the exception {exception:?} names no statement: {names:?}");
    }
    let mut unrouted = Vec::new();
    for (name, sql) in &statements {
        if !touches_a_tenant_table(sql) {
            continue;
        }
        let excepted = EXCEPTIONS.iter().any(|(n, _)| n == name);
        match (routes_by_scope(sql), excepted) {
            (true, true) => panic!("{name} routes by scope now: drop it from EXCEPTIONS"),
            (false, false) => unrouted.push(format!("{name}: {}", squeeze(sql))),
            _ => {}
        }
    }
    assert!(unrouted.is_empty(), "statements that neither filter by nor insert scope:\n{}", unrouted.join("\n"));
    assert!(statements.len() >= 25, "every statement gathered: {names:?}");
}

#[test]
fn the_scope_check_tells_a_filter_from_an_optional_one() {
    assert!(routes_by_scope("UPDATE x.webhook_events SET a = 1 WHERE scope = $1 AND provider = $2"));
    assert!(!routes_by_scope("SELECT * FROM x.webhook_events WHERE ($4::text IS NULL OR scope = $4)"));
    assert!(!routes_by_scope("SELECT * FROM x.webhook_events p WHERE ($4::text IS NULL OR p.scope = $4)"));
    assert!(!routes_by_scope("DELETE FROM x.webhook_events WHERE received_at < $1"));
    assert!(routes_by_scope("INSERT INTO webhook_idempotency.webhook_actions (scope, action) VALUES ($1, $2)"));
    assert!(!routes_by_scope("INSERT INTO webhook_idempotency.webhook_actions (action, scope) VALUES ($1, $2)"));
    assert!(!routes_by_scope(
        "INSERT INTO webhook_idempotency.webhook_actions (scope, action) SELECT $1, $2 WHERE NOT EXISTS \
         (SELECT FROM webhook_idempotency.webhook_actions WHERE scope = $1)"
    ));
    assert!(!routes_by_scope(
        "UPDATE x.webhook_outbox o SET state = 'done' FROM unnest($1::text[]) AS d(scope) WHERE o.scope = d.scope"
    ));
}

/// The column lists of every `PRIMARY KEY` and `UNIQUE` in `sql`, with the
/// table each belongs to (inline `col type PRIMARY KEY` gives that column).
fn keys(sql: &str) -> Vec<(String, String)> {
    let mut keys = Vec::new();
    let mut table = String::new();
    for line in sql.lines().map(str::trim) {
        if line.starts_with("--") {
            continue;
        }
        let upper = line.to_uppercase();
        if let Some(at) = upper.find("CREATE TABLE") {
            let head = line[at..].trim_end_matches('(').trim_end();
            table = head.split_whitespace().last().unwrap_or_default().to_owned();
        }
        if upper.starts_with("CREATE UNIQUE INDEX") {
            let cols = line.rsplit_once('(').map(|(_, c)| c.trim_end_matches([')', ';'])).unwrap_or_default();
            keys.push((line.to_owned(), cols.to_owned()));
            continue;
        }
        for keyword in ["PRIMARY KEY", "UNIQUE"] {
            if let Some(at) = upper.find(keyword) {
                let after = line[at + keyword.len()..].trim_start();
                let cols = if let Some(list) = after.strip_prefix('(') {
                    list.split(')').next().unwrap_or_default().to_owned()
                } else {
                    line.split_whitespace().next().unwrap_or_default().to_owned()
                    // inline on a column
                };
                keys.push((table.clone(), cols));
            }
        }
    }
    keys
}

#[test]
fn every_primary_and_unique_key_includes_scope_except_the_migration_bookkeeping() {
    let mut found = Vec::new();
    for (version, sql) in crate::store::migrate::MIGRATIONS {
        for (table, cols) in keys(sql) {
            let has_scope = cols.split(',').any(|c| c.trim() == "scope");
            // One row per migration, shared by every tenant: a reference table on Citus.
            let excepted = table.ends_with("webhook_schema_migrations");
            assert!(has_scope || excepted, "migration {version}: {table} has a key ({cols}) without scope");
            found.push((table, cols));
        }
    }
    for table in TENANT_TABLES {
        assert!(
            found.iter().any(|(t, cols)| t.ends_with(table) && cols.contains("scope")),
            "{table}'s primary key was found: {found:?}"
        );
    }
}
