-- Ceiling (d'): as lease16_complete.sql, with the round trips the worker makes: pgbench sends each
-- statement in a round trip of its own, while the worker sends BEGIN with the fenced read in one flight and
-- the fenced mark-done with COMMIT in another (pipelined), so per row: BEGIN + read, the business INSERT,
-- mark-done + COMMIT (three round trips, against five in (d) and four in (b)). Needs pgbench's pipeline
-- mode (PostgreSQL 14 or later) and the extended protocol: the keys and tokens go as parameters.
-- Generated (16 identical blocks but for the index); pgbench -n -M extended -T 15 -c 16 -j 2 -f lease16_pipelined_complete.sql
WITH pending AS (
    SELECT scope, provider, event_key, run_at AS at FROM webhook_idempotency.webhook_events
     WHERE state IN ('pending') AND run_at <= now()
     ORDER BY run_at LIMIT 16 FOR UPDATE SKIP LOCKED),
expired AS (
    SELECT scope, provider, event_key, locked_until AS at FROM webhook_idempotency.webhook_events
     WHERE state = 'running' AND locked_until < now()
     ORDER BY locked_until LIMIT 16 FOR UPDATE SKIP LOCKED),
due AS (
    SELECT * FROM (SELECT * FROM expired UNION ALL SELECT * FROM pending) c ORDER BY at LIMIT 16),
leased AS (
    UPDATE webhook_idempotency.webhook_events e SET state = 'running', attempts = e.attempts + 1, run_at = NULL,
           locked_until = now() + make_interval(secs => 30), lease_token = gen_random_uuid()
      FROM due
     WHERE (e.scope, e.provider, e.event_key) = (due.scope, due.provider, due.event_key)
    RETURNING e.event_key, e.lease_token::text AS token, e.event_type)
SELECT array_agg(event_key) AS keys, array_agg(token) AS tokens FROM leased \gset
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[1] AND state = 'running' AND lease_token = ((:tokens)::text[])[1]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[1], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[1]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[1]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[2] AND state = 'running' AND lease_token = ((:tokens)::text[])[2]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[2], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[2]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[2]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[3] AND state = 'running' AND lease_token = ((:tokens)::text[])[3]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[3], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[3]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[3]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[4] AND state = 'running' AND lease_token = ((:tokens)::text[])[4]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[4], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[4]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[4]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[5] AND state = 'running' AND lease_token = ((:tokens)::text[])[5]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[5], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[5]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[5]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[6] AND state = 'running' AND lease_token = ((:tokens)::text[])[6]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[6], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[6]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[6]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[7] AND state = 'running' AND lease_token = ((:tokens)::text[])[7]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[7], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[7]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[7]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[8] AND state = 'running' AND lease_token = ((:tokens)::text[])[8]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[8], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[8]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[8]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[9] AND state = 'running' AND lease_token = ((:tokens)::text[])[9]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[9], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[9]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[9]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[10] AND state = 'running' AND lease_token = ((:tokens)::text[])[10]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[10], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[10]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[10]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[11] AND state = 'running' AND lease_token = ((:tokens)::text[])[11]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[11], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[11]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[11]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[12] AND state = 'running' AND lease_token = ((:tokens)::text[])[12]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[12], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[12]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[12]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[13] AND state = 'running' AND lease_token = ((:tokens)::text[])[13]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[13], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[13]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[13]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[14] AND state = 'running' AND lease_token = ((:tokens)::text[])[14]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[14], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[14]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[14]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[15] AND state = 'running' AND lease_token = ((:tokens)::text[])[15]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[15], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[15]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[15]::uuid
RETURNING 1;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT now(), e.lease_token IS NOT NULL AS mine, e.payload, e.request_head::text, e.integrity_tag
  FROM (SELECT 1) one LEFT JOIN webhook_idempotency.webhook_events e ON scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[16] AND state = 'running' AND lease_token = ((:tokens)::text[])[16]::uuid;
\endpipeline
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', ((:keys)::text[])[16], 'payment_intent.succeeded');
\startpipeline
UPDATE webhook_idempotency.webhook_events
   SET state = 'done', response_status = 200, completed_at = clock_timestamp(), locked_until = NULL, lease_token = NULL
 WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = ((:keys)::text[])[16]
   AND state = 'running' AND lease_token = ((:tokens)::text[])[16]::uuid
RETURNING 1;
COMMIT;
\endpipeline
