-- webhook-idempotency schema, migration 12: a row that may have killed its worker runs alone; effects
-- ordered by a key.
--
-- `run_alone` (both queue tables): the row's last run ended by its lease expiring: its worker's process
-- died (a handler that aborts, a segfault, the OOM killer, a deploy's SIGKILL) or could not renew the
-- lease. Every row that process was running expired with it, and nothing tells which one killed it. So
-- the lease statement puts such a row back due at a backoff with full jitter, marked, and a worker leases
-- a marked row only when its process has nothing else in hand, and leases nothing else while it runs. A
-- marked row whose lease expires again while it runs alone killed its process: only it spends its retry
-- budget on it, and it is `dead` once that is spent (the mark stays, so an operator's requeue runs it
-- alone too). Every other end of a run clears the mark. For the outbox, a marked row's call was started
-- and never recorded: when the effect has a reconciliation, it is asked before the call is made again.
-- NOT NULL DEFAULT false is a catalog change (PostgreSQL 11 and later): no table rewrite.
--
-- `ordering_key`, `ordered_at` (outbox): an effect enqueued with an ordering key
-- (`Effect::ordering_key`) is not leased while an effect of the same scope and key enqueued before it
-- (`ordered_at`, the enqueue's clock_timestamp(); ties broken by the identity) is not finished (`pending`,
-- `running` or `uncertain`): effects for one entity run in the order they were enqueued. NULL: no
-- ordering (every effect enqueued before this migration).
--
-- The indexes are partial and empty at first (no row is marked, none has a key), but their build reads
-- the table under a lock that blocks writes; on a large table build them without blocking writes first,
-- then run this migration (which then skips the builds):
--   CREATE INDEX CONCURRENTLY webhook_events_due_alone ON webhook_idempotency.webhook_events (run_at)
--       WHERE run_alone AND state = 'pending';
-- and likewise for the two outbox indexes below. (The columns must exist first: add them alone, then the
-- indexes, then run this file.) The schema appears only as the double-quoted placeholder
-- webhook_idempotency (see 001).

ALTER TABLE "webhook_idempotency".webhook_events ADD COLUMN IF NOT EXISTS run_alone boolean NOT NULL DEFAULT false;
ALTER TABLE "webhook_idempotency".webhook_outbox ADD COLUMN IF NOT EXISTS run_alone boolean NOT NULL DEFAULT false;
ALTER TABLE "webhook_idempotency".webhook_outbox ADD COLUMN IF NOT EXISTS ordering_key text;
ALTER TABLE "webhook_idempotency".webhook_outbox ADD COLUMN IF NOT EXISTS ordered_at timestamptz;

-- Due rows that must run alone (the lease's `alone` subquery and its "any due?" probe).
CREATE INDEX IF NOT EXISTS webhook_events_due_alone
    ON "webhook_idempotency".webhook_events (run_at) WHERE run_alone AND state = 'pending';
CREATE INDEX IF NOT EXISTS webhook_outbox_due_alone
    ON "webhook_idempotency".webhook_outbox (run_at) WHERE run_alone AND state IN ('pending', 'uncertain');

-- Unfinished effects by ordering key, oldest first: the lease's probe for an earlier one.
CREATE INDEX IF NOT EXISTS webhook_outbox_ordering
    ON "webhook_idempotency".webhook_outbox (scope, ordering_key, ordered_at)
    WHERE ordering_key IS NOT NULL AND state IN ('pending', 'running', 'uncertain');

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (12) ON CONFLICT (version) DO NOTHING;
