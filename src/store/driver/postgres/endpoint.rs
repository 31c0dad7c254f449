//! `host:port` of a pool's configuration, for connection errors.
//!
//! deadpool-postgres keeps the `tokio_postgres::Config` private; its `Debug`
//! output (which redacts the password as `Some(_)`) is the only public view.
//! Only the `host` and `port` fields are taken from it. A driver that exposes
//! its configuration (sqlx's `PgConnectOptions::get_host`) reads it directly.

use deadpool_postgres::Pool;

/// `host:port` of the pool's connection configuration, comma-separated when
/// it names several hosts; `None` when it cannot be read.
pub(super) fn of_pool(pool: &Pool) -> Option<String> {
    from_debug(&format!("{:?}", pool.manager()))
}

/// The database a pool's configuration names, as a key: `host:port` and the
/// database name (the user's when none is set) as its `Debug` shows them;
/// `None` when it cannot be read.
pub(super) fn database_of(pool: &Pool) -> Option<String> {
    let debug = format!("{:?}", pool.manager());
    let field = |name: &str| {
        let start = debug.find(&format!(" {name}: "))? + name.len() + 3;
        let rest = &debug[start..];
        Some(&rest[..rest.find(", ")?])
    };
    let name = field("dbname").filter(|d| *d != "None").or_else(|| field("user"))?;
    Some(format!("{}/{name}", from_debug(&debug)?))
}

fn from_debug(debug: &str) -> Option<String> {
    fn list<'a>(debug: &'a str, field: &str) -> Option<Vec<&'a str>> {
        let start = debug.find(&format!(" {field}: ["))? + field.len() + 4;
        let rest = &debug[start..];
        let inner = &rest[..rest.find(']')?];
        Some(inner.split(", ").map(str::trim).filter(|s| !s.is_empty()).collect())
    }
    let hosts: Vec<String> = list(debug, "host")?
        .into_iter()
        .map(|h| {
            let h = h.strip_prefix("Tcp(").or_else(|| h.strip_prefix("Unix(")).unwrap_or(h);
            h.trim_end_matches(')').trim_matches('"').to_owned()
        })
        .collect();
    let ports = list(debug, "port").unwrap_or_default();
    let port_at = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or("5432");
    let hosts = if hosts.is_empty() { vec!["localhost".to_owned()] } else { hosts };
    Some(hosts.iter().enumerate().map(|(i, h)| format!("{h}:{}", port_at(i))).collect::<Vec<_>>().join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_from_the_pools_config() {
        let cases: &[(&str, &str, &str)] = &[
            ("one TCP host", "postgresql://app:hunter2@db.internal:6543/app", "db.internal:6543"),
            ("default port", "postgresql://app:hunter2@127.0.0.1/app", "127.0.0.1:5432"),
            ("two hosts, one port", "host=a,b port=5433 user=app password=hunter2", "a:5433,b:5433"),
            ("two hosts, two ports", "host=a,b port=1,2 user=app", "a:1,b:2"),
            ("unix socket", "host=/run/postgresql port=5432 user=app", "/run/postgresql:5432"),
        ];
        for (name, url, want) in cases {
            let config: tokio_postgres::Config = url.parse().unwrap();
            let manager = deadpool_postgres::Manager::new(config, tokio_postgres::NoTls);
            let debug = format!("{manager:?}");
            assert_eq!(from_debug(&debug).as_deref(), Some(*want), "{name}: {debug}");
            assert!(!debug.contains("hunter2"), "{name}: the pool's Debug shows the password");
        }
    }

    #[test]
    fn database_from_the_pools_config() {
        let of = |url: &str| {
            let config: tokio_postgres::Config = url.parse().unwrap();
            let manager = deadpool_postgres::Manager::new(config, tokio_postgres::NoTls);
            database_of(&Pool::builder(manager).build().unwrap())
        };
        let a = of("postgresql://app:hunter2@db.internal:6543/app");
        assert_eq!(a.as_deref(), Some("db.internal:6543/Some(\"app\")"));
        assert_eq!(of("host=db.internal port=6543 dbname=app user=other"), a, "the same database");
        assert_ne!(of("postgresql://app@db.internal:6543/other"), a, "another database");
        assert_ne!(of("postgresql://app@db.internal:6544/app"), a, "another server");
        assert_eq!(of("host=db.internal port=6543 user=app").as_deref(), Some("db.internal:6543/Some(\"app\")"));
    }
}
