-- Ceiling (c): the worker's protocol per event as SQL, one row per lease (what InboxWorker does when one
-- slot frees): the lease statement of src/store/inbox.rs (autocommit, durable), then BEGIN, the business
-- insert, the fenced mark-done, COMMIT. Needs enough pending rows (examples/inbox_load.rs inserts them).
-- pgbench -n -T 15 -c 16 -j 2 -f lease_complete.sql
UPDATE webhook_idempotency.webhook_events
   SET state = 'running', attempts = attempts + 1, locked_until = now() + make_interval(secs => 30),
       lease_token = gen_random_uuid()
 WHERE (scope, provider, event_key) IN (
       SELECT scope, provider, event_key FROM webhook_idempotency.webhook_events
        WHERE ((state = 'pending' AND run_at <= now()) OR (state = 'running' AND locked_until < now()))
        ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING event_key AS key, lease_token AS token \gset
BEGIN;
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ':key', 'payment_intent.succeeded');
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = now(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ':key'
   AND state = 'running' AND lease_token = ':token'::uuid
RETURNING 1;
COMMIT;
