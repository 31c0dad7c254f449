-- Ceiling (b): a worker's per-event transaction without the lease: one business insert, the fenced
-- mark-done (the statement InboxTx::complete runs), COMMIT. Each client walks its own pre-leased rows
-- evt_b_<client_id>_<n> (n = 1, 2, ...; pgbench variables persist per client; start with -D n=0),
-- state 'running' with lease_token md5(key)::uuid, so every UPDATE finds its row, as a worker's does.
-- pgbench -n -T 15 -c 16 -j 2 -D n=0 -f complete.sql
\set n :n + 1
BEGIN;
INSERT INTO bench_effects (scope, event_key, event_type)
VALUES ('acct_bench', 'evt_b_' || :client_id || '_' || :n, 'payment_intent.succeeded');
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = now(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = 'evt_b_' || :client_id || '_' || :n
   AND state = 'running' AND lease_token = md5('evt_b_' || :client_id || '_' || :n)::uuid
RETURNING 1;
COMMIT;
