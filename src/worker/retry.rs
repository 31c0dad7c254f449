//! [`RetryPolicy`]: when a failed item runs again.

use std::time::Duration;

/// When a failed item (an inbox event, an outbox effect) runs again: exponential backoff with full jitter
/// (AWS Architecture Blog, "Exponential Backoff And Jitter"): before attempt
/// `n + 1`, a delay drawn uniformly from `[0, min(cap, base × 2^(n-1))]`.
/// After `max_attempts` runs the row is `dead`.
///
/// Defaults: base 1 s, cap 1 h, 10 attempts (about 8.5 minutes of backoff at
/// most before the tenth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The first ceiling of the delay.
    pub base: Duration,
    /// The largest ceiling.
    pub cap: Duration,
    /// Runs of the handler before the row is `dead` (at least 1).
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { base: Duration::from_secs(1), cap: Duration::from_secs(3600), max_attempts: 10 }
    }
}

impl RetryPolicy {
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
}
