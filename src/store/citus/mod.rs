//! Distributed PostgreSQL (Citus): what [`migrate`](crate::migrate) does
//! when the `citus` extension is installed in the database.
//!
//! The tenant tables ([`TENANT_TABLES`]) are hash-distributed by `scope`
//! and colocated with `webhook_events` (`create_distributed_table(t,
//! 'scope', colocate_with => ...)`): one scope's rows of every table sit on
//! one shard, so every statement that names its scope runs on one worker
//! (a router query) and the claim's transaction with the handler's writes
//! on colocated tables commits on one node. The migration bookkeeping
//! ([`REFERENCE_TABLES`]) is a reference table, copied to every node. The
//! operators' audit trail stays a plain table on the coordinator (see
//! [`REFERENCE_TABLES`] for why). Citus docs, "Choosing Distribution Column"
//! and "Creating and Modifying Distributed Objects".
//!
//! On a database where the extension is installed, each migration file is
//! sent one statement at a time: Citus forwards a DDL statement to the
//! workers as the text it received, and a multi-statement text that alters
//! a distributed or reference table fails there (`42601 cannot insert
//! multiple commands into a prepared statement`).
//!
//! OPERATIONS.md, "Distributed PostgreSQL (Citus)", says what was tested on
//! a real cluster and what a user's own tables need.

#[cfg(test)]
mod texts;

use super::driver::{DbError, Param, TxConn};

/// The tables distributed by `scope`, colocated with the first.
pub(crate) const TENANT_TABLES: &[&str] = &[
    "webhook_events",
    "webhook_outbox",
    "webhook_actions",
    "webhook_versions",
    "webhook_body_digests",
    "webhook_request_keys",
];

/// The tables copied to every node: one row per migration.
///
/// Not the operators' audit trail, `webhook_audit`: its trigger records the
/// role the writing session logged in as (`session_user`), and on a
/// reference table it would run on every copy, where Citus's connections
/// to the workers log in as the coordinator session's *current* role
/// (after a `SET ROLE`, another role): the copies would disagree. It stays
/// a plain table on the coordinator, written in the same transaction as the
/// action it records (Citus commits both together).
pub(crate) const REFERENCE_TABLES: &[&str] = &["webhook_schema_migrations"];

/// Whether the `citus` extension is installed in the database `tx` is on.
pub(crate) async fn installed(tx: &TxConn) -> Result<bool, DbError> {
    let rows = tx.query("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')", &[]).await?;
    Ok(rows[0].get(0))
}

/// Distributes `schema`'s tenant tables by `scope` (colocated) and makes its
/// migration bookkeeping a reference table, each only if it is not yet (an
/// already distributed schema is left as it is: safe to run again, and
/// tables a later migration adds are distributed on the next run). Runs in
/// the migration's transaction `tx`.
pub(crate) async fn distribute(tx: &TxConn, schema: &str) -> Result<(), DbError> {
    // Citus docs: DDL and distribution in one transaction block run over one
    // connection per worker.
    tx.batch("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'").await?;
    let anchor = format!("{schema}.{}", TENANT_TABLES[0]);
    for table in TENANT_TABLES {
        let name = format!("{schema}.{table}");
        if !is_citus_table(tx, &name).await? {
            let colocate = if name == anchor { "default".to_owned() } else { anchor.clone() };
            tx.query(
                "SELECT create_distributed_table($1::text::regclass, 'scope', colocate_with => $2)",
                &[Param::Text(&name), Param::Text(&colocate)],
            )
            .await?;
        }
    }
    for table in REFERENCE_TABLES {
        let name = format!("{schema}.{table}");
        if !is_citus_table(tx, &name).await? {
            tx.query("SELECT create_reference_table($1::text::regclass)", &[Param::Text(&name)]).await?;
            // The rows were copied to every node; the coordinator's local
            // copy of them is no longer read.
            tx.query("SELECT truncate_local_data_after_distributing_table($1::text::regclass)", &[Param::Text(&name)])
                .await?;
        }
    }
    Ok(())
}

/// Where a user's table stands after [`colocate`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Colocation {
    /// Distributed now, by the given column, colocated with the claims.
    Distributed,
    /// It already was, by that column and colocated: nothing done.
    Already,
    /// It is in Citus's metadata another way (a reference table, another
    /// column, another colocation group): nothing done; says how.
    Elsewhere(String),
}

/// Hash-distributes the user's `table` by `column`, colocated with
/// `schema`'s `webhook_events` (so a row whose `column` holds a claim's
/// scope sits on that claim's shard), unless it already is. Runs in `tx`.
pub(crate) async fn colocate(tx: &TxConn, schema: &str, table: &str, column: &str) -> Result<Colocation, DbError> {
    let anchor = format!("{schema}.{}", TENANT_TABLES[0]);
    let sql = "SELECT p.partmethod::text, coalesce(column_to_column_name(p.logicalrelid, p.partkey), ''),
                      p.colocationid = a.colocationid
               FROM pg_dist_partition p, pg_dist_partition a
               WHERE p.logicalrelid = $1::text::regclass AND a.logicalrelid = $2::text::regclass";
    let rows = tx.query(sql, &[Param::Text(table), Param::Text(&anchor)]).await?;
    if let Some(row) = rows.first() {
        let (method, by, same_group): (String, String, bool) = (row.get(0), row.get(1), row.get(2));
        return Ok(if method == "h" && by == column && same_group {
            Colocation::Already
        } else if method == "h" {
            Colocation::Elsewhere(format!(
                "{table} is distributed by {by}{}",
                if same_group { String::new() } else { format!(", not colocated with {anchor}") }
            ))
        } else {
            Colocation::Elsewhere(format!("{table} is a Citus table of another kind (partition method {method})"))
        });
    }
    tx.query(
        "SELECT create_distributed_table($1::text::regclass, $2, colocate_with => $3)",
        &[Param::Text(table), Param::Text(column), Param::Text(&anchor)],
    )
    .await?;
    Ok(Colocation::Distributed)
}

/// Whether `table` is in Citus's metadata (distributed or reference).
async fn is_citus_table(tx: &TxConn, table: &str) -> Result<bool, DbError> {
    let sql = "SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = $1::text::regclass)";
    Ok(tx.query(sql, &[Param::Text(table)]).await?[0].get(0))
}

/// The statements of `sql`, in order, each without its `;`: split at
/// semicolons outside quotes (`'...'`, `"..."`, `$tag$...$tag$`) and
/// comments (`-- ...`, nested `/* ... */`); pieces holding only whitespace
/// and comments are left out. PostgreSQL docs, "Lexical Structure".
pub(crate) fn statements(sql: &str) -> Vec<&str> {
    let bytes = sql.as_bytes();
    let (mut out, mut start, mut i, mut code) = (Vec::new(), 0, 0, false);
    let mut push = |from: usize, to: usize, code: bool| {
        if code {
            out.push(sql[from..to].trim());
        }
    };
    while i < bytes.len() {
        match bytes[i] {
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i = sql[i..].find('\n').map_or(bytes.len(), |n| i + n);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let mut depth = 0usize;
                while i < bytes.len() {
                    if sql[i..].starts_with("/*") {
                        depth += 1;
                        i += 2;
                    } else if sql[i..].starts_with("*/") {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                continue;
            }
            quote @ (b'\'' | b'"') => {
                code = true;
                i += 1;
                // A doubled quote inside is an escaped one: it closes and
                // reopens, which this loop reads the same way.
                while i < bytes.len() && bytes[i] != quote {
                    i += 1;
                }
            }
            b'$' => {
                code = true;
                let tag_end = sql[i + 1..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map(|n| i + 1 + n)
                    .filter(|&end| bytes[end] == b'$');
                if let Some(end) = tag_end {
                    let tag = &sql[i..=end];
                    i = sql[end + 1..].find(tag).map_or(bytes.len(), |n| end + 1 + n + tag.len() - 1);
                }
            }
            b';' => {
                push(start, i, code);
                start = i + 1;
                code = false;
            }
            c if !c.is_ascii_whitespace() => code = true,
            _ => {}
        }
        i += 1;
    }
    push(start, bytes.len(), code);
    out
}

#[cfg(test)]
mod tests {
    use super::statements;

    #[test]
    fn statements_split_at_semicolons_outside_quotes_and_comments() {
        let sql = "-- a comment; not a statement\nCREATE TABLE a (x text DEFAULT ';');\n\
                   /* block; /* nested; */ still; */ SELECT \"semi;colon\" FROM a;\n\
                   CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql;\n\
                   SELECT $1 || 'it''s; fine';  -- trailing\n  ;\n-- only a comment\n";
        assert_eq!(
            statements(sql),
            [
                "-- a comment; not a statement\nCREATE TABLE a (x text DEFAULT ';')",
                "/* block; /* nested; */ still; */ SELECT \"semi;colon\" FROM a",
                "CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql",
                "SELECT $1 || 'it''s; fine'",
            ]
        );
    }

    #[test]
    fn every_shipped_migration_splits_into_statements_that_parse_alone() {
        for (version, sql) in crate::store::migrate::MIGRATIONS {
            let parts = statements(sql);
            assert!(!parts.is_empty(), "migration {version}");
            for part in parts {
                let opens = part.matches("$$").count();
                assert!(opens % 2 == 0, "migration {version}: a dollar quote split apart: {part}");
                assert!(!part.ends_with(';'), "migration {version}: {part}");
            }
        }
    }
}
