//! `webhook-admin`'s command line: the commands, their arguments and their
//! help text (clap).

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use webhook_idempotency::store::DEFAULT_SCHEMA;

#[derive(Parser, Debug)]
#[command(
    name = "webhook-admin",
    version,
    after_help = "Exit status: 0 done (or, with --dry-run, something would change); 1 nothing matched \
                  (no such key, no row to requeue, replay or purge); 2 usage, connection or schema error."
)]
pub(crate) struct Cli {
    /// The PostgreSQL URL (postgres://user:password@host:port/db). Prefer the
    /// environment variable: a command line is visible to other users.
    /// Never printed.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, global = true, value_name = "URL")]
    pub(crate) database_url: Option<String>,
    /// The schema holding the tables (the one given to `migrate_schema` or
    /// `StoreConfig::schema`).
    #[arg(long, env = "WEBHOOK_SCHEMA", default_value = DEFAULT_SCHEMA, global = true)]
    pub(crate) schema: String,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Rows by provider, scope and state; the oldest pending row's age; the
    /// attempts distribution; failures in the last hour.
    Stats,
    /// Rows in one state, oldest first.
    List {
        /// The state to list.
        #[arg(long, value_enum)]
        state: State,
        #[command(flatten)]
        filter: ListFilter,
        /// The most rows printed.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        limit: u32,
    },
    /// One event in full.
    Show {
        /// The provider.
        provider: String,
        /// The scope.
        scope: String,
        /// The event key.
        key: String,
        /// Print the stored payload too (UTF-8 text when printable, else
        /// base64).
        #[arg(long)]
        payload: bool,
    },
    /// Put dead or failed rows that have a stored payload back to pending,
    /// due now, with a fresh attempt budget.
    Requeue(Action),
    /// Run done events again from their stored payload: their effects repeat,
    /// so it needs --force (or --dry-run).
    Replay {
        #[command(flatten)]
        action: Action,
        /// Replay for real (the handler runs again for every matching event).
        #[arg(long)]
        force: bool,
    },
    /// Delete done and failed rows received more than --older-than ago
    /// (never pending, running or dead ones).
    Purge {
        /// The age, e.g. 45days, 72h.
        #[arg(long, value_parser = duration, value_name = "DURATION")]
        older_than: Duration,
        /// Count what would go; delete nothing.
        #[arg(long)]
        dry_run: bool,
        /// Purge even rows of providers whose documented replay window is
        /// longer than the age (a replay of such an event runs it again).
        #[arg(long)]
        allow_short_window: bool,
        /// Who acts, recorded in the audit table (default: $USER, $LOGNAME,
        /// else "unknown").
        #[arg(long)]
        actor: Option<String>,
    },
    /// The audit table, newest first.
    Audit {
        /// The most rows printed.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        limit: u32,
    },
}

/// `list`'s filter.
#[derive(Args, Debug)]
pub(crate) struct ListFilter {
    /// Only this provider.
    #[arg(long)]
    pub(crate) provider: Option<String>,
    /// Only this scope.
    #[arg(long)]
    pub(crate) scope: Option<String>,
    /// Only rows received at most this long ago, e.g. 2h, 30m.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub(crate) since: Option<Duration>,
}

/// `requeue`'s and `replay`'s target and options.
#[derive(Args, Debug)]
pub(crate) struct Action {
    /// Only this provider.
    #[arg(long)]
    pub(crate) provider: Option<String>,
    /// Only this scope.
    #[arg(long)]
    pub(crate) scope: Option<String>,
    /// One event: needs --provider and --scope.
    #[arg(long, requires_all = ["provider", "scope"])]
    pub(crate) key: Option<String>,
    /// Only rows received at most this long ago, e.g. 2h, 30m.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub(crate) since: Option<Duration>,
    /// Every row in the state the action takes (no filter).
    #[arg(long, conflicts_with_all = ["provider", "scope", "key", "since"])]
    pub(crate) all: bool,
    /// Show the count and the matching rows; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Who acts, recorded in the audit table (default: $USER, $LOGNAME,
    /// else "unknown").
    #[arg(long)]
    pub(crate) actor: Option<String>,
    /// The most matching rows a dry run lists (each is checked for a stored
    /// payload, one query per row).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) limit: u32,
}

/// The row states (`sql/001_webhook_events.sql`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Pending,
    Running,
    Done,
    Failed,
    Dead,
}

impl State {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Dead => "dead",
        }
    }
}

pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{e} (examples: 90s, 15m, 2h, 45days)"))
}
