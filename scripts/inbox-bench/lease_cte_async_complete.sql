-- Diagnostic (c''): as lease_cte_complete.sql, and the lease commits with synchronous_commit = off (a proposed
-- change: a lease lost in a crash only returns the row to pending, and the mark-done's durable commit flushes
-- the WAL up to and including the lease anyway).
-- pgbench -n -T 15 -c 16 -j 2 -f lease_cte_async_complete.sql
BEGIN;
SET LOCAL synchronous_commit = off;
WITH due AS (
    SELECT scope, provider, event_key, run_at AS at FROM webhook_idempotency.webhook_events
     WHERE state = 'pending' AND run_at <= now()
     ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED),
expired AS (
    SELECT scope, provider, event_key, locked_until AS at FROM webhook_idempotency.webhook_events
     WHERE state = 'running' AND locked_until < now()
     ORDER BY locked_until LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE webhook_idempotency.webhook_events
   SET state = 'running', attempts = attempts + 1, locked_until = now() + make_interval(secs => 30),
       lease_token = gen_random_uuid()
 WHERE (scope, provider, event_key) IN (
       SELECT scope, provider, event_key FROM (SELECT * FROM expired UNION ALL SELECT * FROM due) c
        ORDER BY at LIMIT 1)
RETURNING event_key AS key, lease_token AS token \gset
COMMIT;
BEGIN;
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ':key', 'payment_intent.succeeded');
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = now(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ':key'
   AND state = 'running' AND lease_token = ':token'::uuid
RETURNING 1;
COMMIT;
