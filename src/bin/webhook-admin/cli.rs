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
    /// The schema holding the tables (the one given to `StoreConfig::schema`
    /// for `migrate`).
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
        #[command(flatten)]
        purge: PurgeArgs,
        /// Purge even rows of providers whose retention window (the preset's
        /// documented replay window; 30 days for a provider without a
        /// preset) is longer than the age (a replay of such an event runs it
        /// again).
        #[arg(long)]
        allow_short_window: bool,
    },
    /// The audit table, newest first.
    Audit {
        /// The most rows printed.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        limit: u32,
    },
    /// The outbox: external effects waiting, delivered, uncertain or dead.
    Outbox {
        #[command(subcommand)]
        command: OutboxCommand,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum OutboxCommand {
    /// Effects by name and state; how long the oldest due effect has waited;
    /// uncertain effects waiting for an operator.
    Stats,
    /// Effects in one state, oldest first, with their last error.
    List {
        /// The state to list.
        #[arg(long, value_enum)]
        state: EffectState,
        #[command(flatten)]
        filter: EffectTarget,
        /// The most rows printed.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        limit: u32,
    },
    /// One effect in full, with its downstream key.
    Show {
        #[command(flatten)]
        id: EffectIdArgs,
        /// Print the payload too (UTF-8 text when printable, else base64).
        #[arg(long)]
        payload: bool,
    },
    /// Resolve one uncertain effect as you found it at the remote (ask the
    /// remote by the downstream key `show` prints).
    Resolve {
        #[command(flatten)]
        id: EffectIdArgs,
        /// delivered (the remote did it), dead (it must not happen), or
        /// resend (it did not happen: call again with the same key).
        #[arg(long = "as", value_enum)]
        resolution: ResolveAs,
        /// The remote's reference, with --as delivered.
        #[arg(long)]
        remote_ref: Option<String>,
        /// Why, with --as dead (recorded as the last error).
        #[arg(long, required_if_eq("resolution", "dead"))]
        reason: Option<String>,
        /// Check that the effect is uncertain; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Who acts, recorded in the audit table (default: $USER, $LOGNAME,
        /// else "unknown").
        #[arg(long)]
        actor: Option<String>,
    },
    /// Put dead effects back to pending, due now, with a fresh attempt
    /// budget: they are called again with the same downstream key.
    Requeue {
        #[command(flatten)]
        filter: EffectTarget,
        /// Every dead effect (no filter).
        #[arg(long, conflicts_with_all = ["provider", "scope", "key", "effect"])]
        all: bool,
        /// Count what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Who acts, recorded in the audit table.
        #[arg(long)]
        actor: Option<String>,
    },
    /// Delete delivered effects delivered more than --older-than ago (never
    /// pending, running, uncertain or dead ones).
    Purge(PurgeArgs),
}

/// What a purge deletes, and who asks.
#[derive(Args, Debug)]
pub(crate) struct PurgeArgs {
    /// The age, e.g. 30days, 72h.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub(crate) older_than: Duration,
    /// Count what would go; delete nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Who acts, recorded in the audit table (default: $USER, $LOGNAME,
    /// else "unknown").
    #[arg(long)]
    pub(crate) actor: Option<String>,
    /// Only this scope's rows (default: every scope). On Citus, a purge per
    /// scope stays on one shard.
    #[arg(long)]
    pub(crate) scope: Option<String>,
}

/// Which provider and scope: each one given must match.
#[derive(Args, Debug)]
pub(crate) struct ProviderScope {
    /// Only this provider.
    #[arg(long)]
    pub(crate) provider: Option<String>,
    /// Only this scope.
    #[arg(long)]
    pub(crate) scope: Option<String>,
}

/// Which effects: every part given must match.
#[derive(Args, Debug)]
pub(crate) struct EffectTarget {
    #[command(flatten)]
    pub(crate) of: ProviderScope,
    /// Only this event key (for provider idempotency-key, the client's
    /// Idempotency-Key: its requests' effects are stored as KEY#CLAIM_ID).
    #[arg(long)]
    pub(crate) key: Option<String>,
    /// Only this effect name.
    #[arg(long)]
    pub(crate) effect: Option<String>,
}

/// One effect's identity.
#[derive(Args, Debug)]
pub(crate) struct EffectIdArgs {
    /// The provider of the event that decided it.
    pub(crate) provider: String,
    /// The scope.
    pub(crate) scope: String,
    /// The event key.
    pub(crate) key: String,
    /// The effect's name.
    pub(crate) effect: String,
    /// Which of the event's effects of that name (0 to 2147483647).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=i32::MAX as i64))]
    pub(crate) ordinal: u32,
}

/// The outbox row states (`sql/006_outbox.sql`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EffectState {
    Pending,
    Running,
    Done,
    Uncertain,
    Dead,
}

impl EffectState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Done => "done",
            Self::Uncertain => "uncertain",
            Self::Dead => "dead",
        }
    }
}

/// How `outbox resolve` ends an uncertain effect.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResolveAs {
    Delivered,
    Dead,
    Resend,
}

/// `list`'s filter.
#[derive(Args, Debug)]
pub(crate) struct ListFilter {
    #[command(flatten)]
    pub(crate) of: ProviderScope,
    /// Only rows received at most this long ago, e.g. 2h, 30m.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub(crate) since: Option<Duration>,
}

/// `requeue`'s and `replay`'s target and options.
#[derive(Args, Debug)]
pub(crate) struct Action {
    #[command(flatten)]
    pub(crate) of: ProviderScope,
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

/// clap's message with every argument that may hold the database URL (or
/// its password) replaced: a mistyped `--database-url=...` is an unknown
/// argument that clap would quote whole.
pub(crate) fn redacted(message: &str) -> String {
    // clap lists the arguments given in its usage line, `--database-url`
    // among them when `DATABASE_URL` is set: it reads as if it were required.
    let mut message = message.replace(" --database-url <URL>", "");
    for arg in std::env::args_os().skip(1) {
        let arg = arg.to_string_lossy().into_owned();
        let lower = arg.to_ascii_lowercase();
        if lower.contains("://") || lower.contains("password") || lower.contains('@') {
            message = message.replace(&arg, "<not shown>");
        }
    }
    message
}

/// Writes `text`, ignoring a closed pipe (`webhook-admin list | head`).
pub(crate) fn emit(mut to: impl std::io::Write, text: &str) {
    let _ = to.write_all(text.as_bytes());
    let _ = to.flush();
}
