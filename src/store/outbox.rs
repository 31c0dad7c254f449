//! The outbox's rows: effects a handler decided inside its transaction
//! ([`WebhookTx::enqueue`](crate::WebhookTx::enqueue)), kept until an
//! [`OutboxWorker`](crate::outbox::OutboxWorker) delivered them, and their
//! queue kind (the lease, heartbeat and fenced ends are the crate's queue
//! module's; the worker is in [`outbox`](crate::outbox)). The enqueue
//! statement is built here and run by
//! [`WebhookTx::enqueue`](crate::WebhookTx::enqueue) in the handler's
//! transaction.
//!
//! A row's identity is `(scope, provider, event_key, effect, ordinal)`: the
//! event that decided it, and which of its effects. Enqueuing the same
//! identity twice, from a retried handler or a second call, keeps the first
//! row ([`Enqueued::Duplicate`]). The `Idempotency-Key` layer's claims put
//! a claim id after the client's key in `event_key` (`<key>#<32 hex digits>`):
//! a key used again once it expired is a new request whose effects are its
//! own, never the first request's duplicates. A row past ~2 kB has its payload
//! compressed and stored out of line (TOAST, with migration 10's target of
//! 512 bytes) and written once; a smaller one rides in the row (BENCHMARKS.md
//! measures the WAL that costs per delivered effect).

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::driver::{Param, Row};
use super::queue::{self, Leased, QueueKind};
use crate::event::ScopedEvent;

/// Longest effect name, in bytes.
pub const MAX_EFFECT_BYTES: usize = 128;

/// An external effect a handler decides: its name (the registered function
/// that delivers it), its payload, which of the event's effects of that
/// name it is (`ordinal`, default 0), when it may run first, and
/// optionally an ordering key.
///
/// ```
/// use webhook_idempotency::outbox::Effect;
///
/// let receipt = Effect::json("send_receipt", serde_json::json!({ "order": "ord_1", "to": "a@example.com" }));
/// let second = Effect::json("send_receipt", serde_json::json!({ "order": "ord_1", "to": "b@example.com" })).ordinal(1);
/// # drop((receipt, second));
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Effect {
    name: String,
    ordinal: u32,
    payload: Bytes,
    content_type: Cow<'static, str>,
    due: Option<Due>,
    ordering_key: Option<String>,
}

/// When an effect may run first, as the handler said it.
#[derive(Debug, Clone, Copy)]
enum Due {
    /// A time on the application's clock (`Effect::not_before`).
    At(SystemTime),
    /// A delay from the enqueue (`Effect::delay`).
    In(Duration),
}

impl Effect {
    /// The effect `name` with a JSON payload.
    pub fn json(name: impl Into<String>, payload: serde_json::Value) -> Self {
        let payload = Bytes::from(payload.to_string());
        Self::bytes(name, payload, "application/json")
    }

    /// The effect `name` with `payload` as bytes of `content_type`.
    pub fn bytes(
        name: impl Into<String>,
        payload: impl Into<Bytes>,
        content_type: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self {
            name: name.into(),
            ordinal: 0,
            payload: payload.into(),
            content_type: content_type.into(),
            due: None,
            ordering_key: None,
        }
    }

    setters! {
        /// Which of the event's effects named so this is (default 0, at most
        /// `i32::MAX`): a handler that sends two receipts for one event enqueues
        /// ordinals 0 and 1.
        pub fn ordinal(ordinal: u32) => ordinal = ordinal;

        /// Runs no earlier than `delay` after the enqueue (default: as soon as
        /// the transaction commits), measured on the database's clock: the
        /// enqueue stores `statement_timestamp() + delay`, and the workers
        /// compare it with the database's `now()`, so a skew between the
        /// application's clock and the database's does not move it. At most
        /// 253,402,300,799 s (about 8,000 years).
        pub fn delay(delay: Duration) => due = Some(Due::In(delay));

        /// Runs no earlier than `at`, a time on the application's clock (the
        /// clock that computed it): [`WebhookTx::enqueue`](crate::WebhookTx::enqueue) turns it into a delay
        /// from the application's clock when it runs (`at - SystemTime::now()`,
        /// zero for a time past), which the database adds to its own clock, as
        /// [`delay`](Self::delay). So the effect waits the time the application
        /// meant, whatever the two clocks disagree by. Between 1970 and 9999.
        pub fn not_before(at: SystemTime) => due = Some(Due::At(at));

        /// Orders this effect after every effect of the same scope enqueued
        /// before it with the same `key` (an entity: `"pi_3MtwBw"`, an order id):
        /// it is not leased while one of them is unfinished (`pending`,
        /// `running` or `uncertain`, an `uncertain` one waiting for an operator
        /// included); a `done` or `dead` one no longer holds it. So a `refunded`
        /// notice enqueued after a `paid` one is never delivered before it, even
        /// when `paid` failed and waits for its retry. "Before" is the enqueue's
        /// time (`clock_timestamp()` on the database, ties broken by the
        /// effects' identity) among committed effects: an effect enqueued by a
        /// transaction still open is not seen yet, and events processed in any
        /// order (inbox mode) enqueue in that order; order the writes
        /// themselves with [`WebhookTx::apply_if_newer`](crate::WebhookTx::apply_if_newer). At most 512 bytes, not
        /// empty, no NUL. No key (the default): effects run in any order.
        pub fn ordering_key(key: impl Into<String>) => ordering_key = Some(key.into());
    }

    /// The effect's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What [`WebhookTx::enqueue`](crate::WebhookTx::enqueue) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// A new row, committed or rolled back with the transaction.
    Added,
    /// The event already has this effect (same name and ordinal): kept as
    /// it was, nothing written (River's "skipped as duplicate").
    Duplicate,
}

/// [`WebhookTx::enqueue`](crate::WebhookTx::enqueue)'s statement for `effect` of `event` (the SQL under
/// `schema` and its parameters), or `None` when an argument is out of its
/// range (see its errors). A `not_before` becomes a delay from the
/// application's clock now.
pub(crate) fn enqueue_statement<'a>(
    schema: &str,
    event: &'a ScopedEvent,
    effect: &'a Effect,
) -> Option<(String, Vec<Param<'a>>)> {
    if effect.name.is_empty() || effect.name.len() > MAX_EFFECT_BYTES || effect.name.contains('\0') {
        return None;
    }
    let delay = match effect.due {
        None => Duration::ZERO,
        Some(Due::At(at)) if (SystemTime::UNIX_EPOCH..=latest_not_before()).contains(&at) => {
            at.duration_since(SystemTime::now()).unwrap_or_default()
        }
        Some(Due::In(delay)) if delay <= MAX_DELAY => delay,
        Some(_) => return None,
    };
    if effect
        .ordering_key
        .as_ref()
        .is_some_and(|k| k.is_empty() || k.len() > MAX_ORDERING_KEY_BYTES || k.contains('\0'))
    {
        return None;
    }
    let ordinal = i32::try_from(effect.ordinal).ok()?;
    let [s, p, _, _] = Param::event(event);
    let params = vec![
        s,
        p,
        Param::Text(event.effects_key()),
        Param::Text(&effect.name),
        Param::I32(ordinal),
        Param::F64(delay.as_secs_f64()),
        Param::Bytes(&effect.payload),
        Param::Text(&effect.content_type),
        Param::OptText(effect.ordering_key.as_deref()),
    ];
    Some((enqueue_sql(schema), params))
}

/// What [`enqueue_statement`]'s rows say.
pub(crate) fn enqueued(rows: &[Row]) -> Enqueued {
    match rows.first().map(|r| r.get::<i64>(0)) {
        Some(added) if added > 0 => Enqueued::Added,
        _ => Enqueued::Duplicate,
    }
}

/// Longest ordering key, in bytes.
pub const MAX_ORDERING_KEY_BYTES: usize = 512;

/// The latest `not_before` accepted: 9999-12-31T23:59:59Z.
fn latest_not_before() -> SystemTime {
    SystemTime::UNIX_EPOCH + MAX_DELAY
}

/// The longest `delay` accepted: as long as from 1970 to the end of 9999,
/// well within `timestamptz` from any date of this millennium.
const MAX_DELAY: Duration = Duration::from_secs(253_402_300_799);

/// The enqueue: the row with its payload, unless the event already has this
/// effect. `$6` is the delay in seconds, added to the database's clock;
/// `$9` the ordering key, ordered by the enqueue's `clock_timestamp()`.
pub(crate) fn enqueue_sql(schema: &str) -> String {
    format!(
        "WITH row AS (
             INSERT INTO {schema}.webhook_outbox
                 (scope, provider, event_key, effect, ordinal, state, run_at, payload, content_type,
                  ordering_key, ordered_at)
             VALUES ($1, $2, $3, $4, $5, 'pending', statement_timestamp() + make_interval(secs => $6), $7, $8,
                     $9, clock_timestamp())
             ON CONFLICT (scope, provider, event_key, effect, ordinal) DO NOTHING
             RETURNING 1)
         SELECT count(*) FROM row"
    )
}

/// The downstream idempotency key of an effect: derived from its identity
/// alone, so it is the same on every attempt, after every crash and in
/// every process, and never contains the attempt. Give it to the remote side
/// as its idempotency key (Stripe's `Idempotency-Key` header, Adyen's
/// `idempotency-key`): a repeat of the call then returns the first result.
///
/// Format: `whk1_` and 56 lowercase hex digits, 61 ASCII characters (within
/// Adyen's 64 and Stripe's 255): the first 28 bytes of SHA-256 over
/// `len(scope):scope/len(provider):provider/len(event_key):event_key/len(effect):effect/ordinal`
/// (lengths in bytes, decimal), so distinct identities never share an input.
pub fn downstream_key(scope: &str, provider: &str, event_key: &str, effect: &str, ordinal: u32) -> String {
    use sha2::{Digest as _, Sha256};
    let mut hash = Sha256::new();
    for part in [scope, provider, event_key, effect] {
        hash.update(part.len().to_string());
        hash.update(b":");
        hash.update(part.as_bytes());
        hash.update(b"/");
    }
    hash.update(ordinal.to_string());
    format!("whk1_{}", hex::encode(&hash.finalize()[..28]))
}

/// An outbox row as a worker leases it: the identity is the lease's; only
/// whether the run reconciles comes with it, the payload is read per item
/// ([`StoredEffect::read`]).
#[derive(Debug)]
pub(crate) struct OutboxRow {
    /// The row was uncertain: this run reconciles instead of calling again.
    pub(crate) reconcile: bool,
    /// The row's last run ended by its lease expiring: its call may have gone
    /// out unrecorded (this run asks the reconciliation first, if any).
    pub(crate) interrupted: bool,
    /// The payload and content type when the payload is small enough
    /// ([`INLINE_PAYLOAD_BYTES`]) to come with the lease; a larger one is read
    /// per item.
    pub(crate) inline: Option<StoredEffect>,
}

/// The largest payload (`octet_length`, bytes: its size before any
/// compression; IMMUTABLE, which Citus needs in a RETURNING clause, where
/// `pg_column_size` is STABLE) the lease returns with the row: 64 KiB, so one lease carries at most its batch size times
/// this, whatever the backlog holds, and a receipt-sized effect costs no
/// read of its own.
#[cfg_attr(not(test), allow(dead_code))] // the literal in `PAYLOAD_COLUMNS`; a test holds them equal
pub(crate) const INLINE_PAYLOAD_BYTES: usize = 64 * 1024;

/// A leased effect's payload and content type, read by a fenced statement
/// of its own after the lease ([`TableQueue::read`](super::queue::TableQueue::read)),
/// or with the lease when small.
#[derive(Debug, Clone)]
pub(crate) struct StoredEffect {
    pub(crate) payload: Bytes,
    pub(crate) content_type: String,
}

impl StoredEffect {
    /// Reads the [`OutboxRows`] body columns of `row`.
    pub(crate) fn read(row: &Row) -> Self {
        Self { payload: Bytes::from(row.get::<Vec<u8>>(0)), content_type: row.get(1) }
    }
}

/// The outbox as a queue kind.
pub(crate) struct OutboxRows;

impl QueueKind for OutboxRows {
    const NAME: &'static str = queue::OUTBOX;
    const TABLE: &'static str = "webhook_outbox";
    const BORN: &'static str = "created_at";
    const KEY: &'static [&'static str] = &["scope", "provider", "event_key", "effect", "ordinal:integer"];
    const DUE_STATES: &'static str = "'pending', 'uncertain'";
    // A reconciliation whose lease expired is asked again; a call, made again
    // (after its reconciliation, when there is one).
    const EXPIRED_STATE: &'static str = "CASE WHEN e.uncertain_since IS NOT NULL THEN 'uncertain' ELSE 'pending' END";
    // An effect with an ordering key waits for every unfinished one of its
    // scope and key enqueued before it (index `webhook_outbox_ordering`). The
    // lease's scope (`$4`) is repeated on the inner table so that Citus routes
    // the subquery to the outer row's shard.
    const ORDER_GUARD: &'static str = "AND (c.ordering_key IS NULL OR NOT EXISTS (
             SELECT 1 FROM {t} p
             WHERE p.scope = c.scope AND ($4::text IS NULL OR p.scope = $4) AND p.ordering_key = c.ordering_key
               AND p.state IN ('pending', 'running', 'uncertain') AND p.ordered_at <= c.ordered_at
               AND (p.ordered_at, p.provider, p.event_key, p.effect, p.ordinal)
                 < (c.ordered_at, c.provider, c.event_key, c.effect, c.ordinal)))";
    const FILTER_COLUMN: Option<&'static str> = Some("effect");
    const PAYLOAD_COLUMNS: &'static str = "e.uncertain_since IS NOT NULL, e.run_alone, \
         CASE WHEN octet_length(e.payload) <= 65536 THEN e.payload END, \
         CASE WHEN octet_length(e.payload) <= 65536 THEN e.content_type END";
    const BODY_COLUMNS: &'static str = "e.payload, e.content_type";
    const DONE_SET: &'static str = "response_status = {status}, delivered_at = now(), uncertain_since = NULL";
    type Payload = OutboxRow;

    fn payload(row: &Row, first: usize) -> OutboxRow {
        let inline = row.get::<Option<Vec<u8>>>(first + 2).zip(row.get::<Option<String>>(first + 3));
        OutboxRow {
            reconcile: row.get(first),
            interrupted: row.get(first + 1),
            inline: inline.map(|(payload, content_type)| StoredEffect { payload: Bytes::from(payload), content_type }),
        }
    }

    fn retry_state(payload: &OutboxRow) -> &'static str {
        if payload.reconcile {
            "uncertain"
        } else {
            "pending"
        }
    }

    fn count(provider: &str, effect: Option<&str>, outcome: &'static str) {
        let outcome = if outcome == "done" { "delivered" } else { outcome };
        crate::metrics::outbox_effect(provider, effect.unwrap_or_default(), outcome);
    }
}

impl Leased<OutboxRow> {
    /// The effect's name.
    pub(crate) fn effect(&self) -> &str {
        self.key_part(3)
    }

    /// Which of the event's effects of that name.
    pub(crate) fn ordinal(&self) -> u32 {
        self.key_part(4).parse().unwrap_or(0)
    }

    /// The row's downstream key.
    pub(crate) fn downstream_key(&self) -> String {
        downstream_key(self.scope(), self.provider(), self.event_key(), self.effect(), self.ordinal())
    }
}

/// The outbox's own ends, besides the queue's retry, bury and release: all
/// fenced by the lease token (`$1..$5` the identity, `$6` the token).
pub(crate) struct OutboxSql {
    /// Delivered, for a batch of rows in one statement: `$1..$7` arrays of
    /// scope, provider, event key, effect, ordinal, token and remote
    /// reference (text, NULL elements allowed in the last), each row fenced
    /// by its own token, and `$8` the scope of every row when they share one
    /// (else NULL: bound, Citus routes the statement to that scope's shard);
    /// returns the identities and tokens it marked (a run missing from them
    /// had lost its lease).
    pub(crate) delivered: String,
    /// `$7 last_error, $8 seconds until the reconciliation (NULL: none, an
    /// operator resolves it), $9 response_status`: uncertain.
    pub(crate) uncertain: String,
    /// The reconciliation found the call did not happen: send again, now,
    /// or `dead` once the retry budget is spent: past the run budget (`$7`
    /// max attempts) or past `$8` seconds after the row was created (or
    /// requeued: `retry_from`), as [`TableQueue::retry_later`](super::queue::TableQueue::retry_later)
    /// decides; returns the state and whether the attempts were spent
    /// (false with `dead`: the time budget).
    pub(crate) resend: String,
}

impl OutboxSql {
    pub(crate) fn new(schema: &str) -> Self {
        let t = format!("{schema}.webhook_outbox");
        let fence = "scope = $1 AND provider = $2 AND event_key = $3 AND effect = $4 AND ordinal = $5::text::integer
                     AND state = 'running' AND lease_token = $6::text::uuid";
        // Every end clears `run_alone`: the run ended otherwise than by its lease expiring.
        let released = "locked_until = NULL, lease_token = NULL, run_alone = false";
        // The end of the row's retry budget is past (as the queue's retry_later).
        // `now()` is read once in `FROM` (`c.now`) where it would stand in a
        // CASE or COALESCE: Citus refuses non-IMMUTABLE functions there in an
        // UPDATE.
        let expired = format!("{schema}.plus_seconds(coalesce(retry_from, created_at), $8) <= c.now");
        Self {
            delivered: format!(
                "UPDATE {t} o SET state = 'done', delivered_at = now(), remote_ref = d.remote_ref,
                        response_status = NULL, uncertain_since = NULL, run_at = NULL, {released}
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
                      AS d(scope, provider, event_key, effect, ordinal, token, remote_ref)
                 WHERE (o.scope, o.provider, o.event_key, o.effect, o.ordinal)
                     = (d.scope, d.provider, d.event_key, d.effect, d.ordinal::integer)
                   AND o.state = 'running' AND o.lease_token = d.token::uuid
                   AND ($8::text IS NULL OR o.scope = $8)
                 RETURNING o.scope, o.provider, o.event_key, o.effect, o.ordinal::text, d.token"
            ),
            uncertain: format!(
                "UPDATE {t} SET state = 'uncertain', uncertain_since = coalesce(uncertain_since, c.now),
                        run_at = CASE WHEN $8::float8 IS NULL THEN NULL ELSE {schema}.plus_seconds(c.now, $8) END,
                        last_error = $7, response_status = $9, last_failed_at = c.now, {released}
                 FROM (SELECT now() AS now) c
                 WHERE {fence} RETURNING 1"
            ),
            resend: format!(
                "UPDATE {t} SET state = CASE WHEN {spent} THEN 'dead' ELSE 'pending' END,
                        last_error = CASE WHEN attempts >= $7
                                          THEN 'reconciled as not delivered on the last allowed attempt'
                                          WHEN {expired}
                                          THEN 'reconciled as not delivered once its retry budget (retry_for) was spent: \
                                                not sent again'
                                          ELSE last_error END,
                        last_failed_at = CASE WHEN {spent} THEN c.now ELSE last_failed_at END,
                        run_at = CASE WHEN {spent} THEN NULL ELSE c.now END,
                        uncertain_since = NULL, {released}
                 FROM (SELECT now() AS now) c
                 WHERE {fence} RETURNING state, attempts >= $7",
                spent = format!("(attempts >= $7 OR {expired})"),
            ),
        }
    }
}

/// The parameters of [`OutboxSql::uncertain`] after the fence.
pub(crate) fn uncertain_params<'a>(
    error: &'a str,
    reconcile_in: Option<Duration>,
    status: Option<u16>,
) -> [Param<'a>; 3] {
    [
        Param::Text(error),
        Param::OptF64(reconcile_in.map(|d| d.as_secs_f64())),
        Param::OptI16(status.map(|s| i16::try_from(s).unwrap_or(i16::MAX))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downstream_keys_are_stable_short_ascii_and_distinct() {
        let key = downstream_key("acct_1", "stripe", "evt_1", "send_receipt", 0);
        assert_eq!(key, downstream_key("acct_1", "stripe", "evt_1", "send_receipt", 0), "the same every time");
        assert_eq!(key.len(), 61);
        assert!(key.len() <= 64 && key.is_ascii() && key.starts_with("whk1_"), "{key}");
        assert!(key[5..].bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{key}");
        let others = [
            downstream_key("acct_2", "stripe", "evt_1", "send_receipt", 0),
            downstream_key("acct_1", "github", "evt_1", "send_receipt", 0),
            downstream_key("acct_1", "stripe", "evt_2", "send_receipt", 0),
            downstream_key("acct_1", "stripe", "evt_1", "charge", 0),
            downstream_key("acct_1", "stripe", "evt_1", "send_receipt", 1),
            // Parts that join alike with '/' stay apart (length prefixes).
            downstream_key("acct_1/stripe", "", "evt_1", "send_receipt", 0),
            downstream_key("acct_1", "stripe/evt_1", "", "send_receipt", 0),
        ];
        for other in &others {
            assert_ne!(&key, other);
        }
        let mut all: Vec<&String> = others.iter().collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), others.len());
    }
}

#[cfg(test)]
mod inline_tests {
    #[test]
    fn the_inline_bound_in_the_lease_is_the_constant() {
        let cols = <super::OutboxRows as super::QueueKind>::PAYLOAD_COLUMNS;
        assert_eq!(cols.matches(&super::INLINE_PAYLOAD_BYTES.to_string()).count(), 2);
    }
}

#[cfg(test)]
mod ordering_tests {
    use super::OutboxRows;
    use crate::store::queue::statement_texts;

    /// The ordering guard costs the lease no statement (it is one more
    /// condition of its one statement) and no scan: on 20,000 effects over
    /// 200 ordering keys in 10 scopes, half of them finished, the generic plan
    /// the workers run probes for an earlier unfinished effect through the
    /// partial index `webhook_outbox_ordering`.
    #[tokio::test]
    async fn the_lease_with_its_ordering_guard_is_one_statement_probing_an_index() {
        let store = crate::store::testing::fresh(1).await;
        let (db, _) = store.open().unwrap();
        // One session: the rows, their statistics, the plan mode and the
        // prepared lease, in a transaction rolled back at the end.
        let (tx, _) =
            db.without_deadline().connect("test").await.unwrap().begin("BEGIN", "SELECT 1", &[]).await.unwrap();
        tx.batch(
            "INSERT INTO webhook_idempotency.webhook_outbox
                 (scope, provider, event_key, effect, ordinal, state, run_at, payload, content_type,
                  ordering_key, ordered_at)
             SELECT 'acct_' || (i % 10), 'stripe', 'evt_' || i, 'notify', 0,
                    CASE WHEN i % 2 = 0 THEN 'done' ELSE 'pending' END,
                    CASE WHEN i % 2 = 0 THEN NULL ELSE now() END,
                    '\\x7b7d', 'application/json', 'pi_' || (i % 200), clock_timestamp()
               FROM generate_series(1, 20000) i;
             ANALYZE webhook_idempotency.webhook_outbox;
             SET LOCAL plan_cache_mode = force_generic_plan;",
        )
        .await
        .unwrap();
        let lease = statement_texts::<OutboxRows>("webhook_idempotency")
            .into_iter()
            .find_map(|(name, sql)| (name == "lease").then_some(sql))
            .unwrap();
        tx.batch(&format!(
            "PREPARE lease(float8, int8, text, text, int4, text[], float8, float8, float8, bool, text) AS {lease}"
        ))
        .await
        .unwrap();
        let plan: Vec<String> = tx
            .query(
                "EXPLAIN EXECUTE lease(30, 16, NULL, NULL, 200, ARRAY['notify'], 86400, 1, 3600, false, \
                    '0123456789abcdef0123456789abcdef')",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        tx.rollback().await.unwrap();
        let plan = plan.join("\n");
        // Each probe (one per subquery over due rows: those that run alone, the
        // others, and whether any that runs alone is due) goes through the
        // ordering index; nothing reads the table whole.
        let probes = plan.lines().filter(|l| l.contains("Index") && l.contains("webhook_outbox_ordering")).count();
        assert_eq!(probes, 3, "{plan}");
        assert!(plan.contains("Index Scan using webhook_outbox_due_alone"), "{plan}");
        assert!(!plan.contains("Seq Scan"), "{plan}");
    }
}
