//! [`RetryPolicy`]: when a failed item runs again, and for how long.

use std::time::Duration;

/// When a failed item (an inbox event, an outbox effect) runs again, and how
/// long it keeps being retried.
///
/// **Budget.** A failed item is retried for [`retry_for`](Self::retry_for)
/// from when it was received (an inbox event: `received_at`; an outbox
/// effect: `created_at`; an operator's requeue starts a new budget): a retry
/// is never scheduled past that deadline (the last one runs at it), and a
/// run that fails at or after it makes the row `dead`. The attempt count is
/// a second, coarse bound ([`max_attempts`](Self::max_attempts)): whichever
/// is reached first. An outage shorter than the budget loses nothing: the
/// run after it ends succeeds.
///
/// **Backoff.** Exponential with full jitter (AWS Architecture Blog,
/// "Exponential Backoff And Jitter"): before attempt `n + 1`, a delay drawn
/// uniformly from `[0, min(cap, base × 2^(n-1))]`.
///
/// **Defaults** ([`RetryPolicy::default`]): retry for up to **3 days**,
/// backoff capped at **1 hour** (base 1 s), at most 200 runs. The sender got
/// its 2xx when the row was stored and will not retry on its own, so the
/// inbox's budget should be at least the sender's own retry span:
///
/// | sender | its own retries (after a non-2xx) |
/// |---|---|
/// | Stripe (live mode) | up to 3 days, exponential backoff |
/// | GitHub | none (manual redelivery of the last 3 days) |
/// | Shopify | 8 tries over 4 hours (since September 2024; 19 over 48 h before) |
/// | Slack | 3 retries, the last about 5 minutes after the first attempt |
/// | Svix / Standard Webhooks | 8 attempts over about 28 hours |
///
/// The default's 3 days match the longest of them; with a 1 h cap a
/// failing row runs about 160 times in that span (a run every 30 minutes on
/// average once the backoff reaches its cap), under the 200-run bound.
///
/// A count-based policy as before: [`RetryPolicy::attempts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The first ceiling of the delay.
    pub base: Duration,
    /// The largest ceiling.
    pub cap: Duration,
    /// Runs of the handler before the row is `dead` whatever its age (at
    /// least 1).
    pub max_attempts: u32,
    /// How long after it was received (or requeued) a failed row is still
    /// retried; past it the row is `dead` (more than zero).
    pub retry_for: Duration,
}

/// The default budget: 3 days.
const DEFAULT_RETRY_FOR: Duration = Duration::from_secs(3 * 24 * 3600);

/// The longest budget the database is given (100 years): `retry_for` beyond
/// it (`Duration::MAX`) means "no time bound".
const LONGEST: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(3600),
            max_attempts: 200,
            retry_for: DEFAULT_RETRY_FOR,
        }
    }
}

impl RetryPolicy {
    /// The default backoff (base 1 s, cap 1 h) retrying for `retry_for`
    /// after the row was received, with no bound on the number of runs.
    pub const fn retry_for(retry_for: Duration) -> Self {
        Self { base: Duration::from_secs(1), cap: Duration::from_secs(3600), max_attempts: u32::MAX, retry_for }
    }

    /// A count-based policy, as this type was before it had a time budget:
    /// `max_attempts` runs with backoff `base`..`cap`, no time bound.
    pub const fn attempts(base: Duration, cap: Duration, max_attempts: u32) -> Self {
        Self { base, cap, max_attempts, retry_for: Duration::MAX }
    }

    /// The same policy with another backoff: first ceiling `base`, largest
    /// `cap`.
    pub const fn with_backoff(self, base: Duration, cap: Duration) -> Self {
        Self { base, cap, ..self }
    }

    /// The same policy with at most `max_attempts` runs.
    pub const fn with_max_attempts(self, max_attempts: u32) -> Self {
        Self { max_attempts, ..self }
    }

    /// The ceiling of the delay after run `attempt` (1-based) failed:
    /// `min(cap, base × 2^(attempt-1))`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(31));
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A delay after run `attempt` failed: uniform in `[0, ceiling(attempt)]`.
    pub fn delay(&self, attempt: u32) -> Duration {
        self.ceiling(attempt).mul_f64(fastrand::f64())
    }

    /// The time budget as a log line shows it: `"none"` when the policy has
    /// no time bound (`retry_for` of 100 years or more, `Duration::MAX` from
    /// [`attempts`](Self::attempts)), else the duration (`"259200s"`).
    pub(crate) fn retry_for_shown(&self) -> String {
        if self.retry_for >= LONGEST {
            "none".to_owned()
        } else {
            format!("{:?}", self.retry_for)
        }
    }

    /// The run limit as a log line shows it: `"none"` for `u32::MAX`.
    pub(crate) fn max_attempts_shown(&self) -> String {
        if self.max_attempts == u32::MAX {
            "none".to_owned()
        } else {
            self.max_attempts.to_string()
        }
    }

    /// The budget as the statements take it (`retry_for` at most 100 years).
    pub(crate) fn budget(&self) -> crate::store::queue::Budget {
        crate::store::queue::Budget {
            max_attempts: self.max_attempts,
            retry_for: self.retry_for.min(LONGEST),
            base: self.base.min(LONGEST),
            cap: self.cap.min(LONGEST),
        }
    }
}
