-- Ceiling (a'): the layer's accept statement verbatim (INSERT ... ON CONFLICT DO NOTHING RETURNING,
-- then pg_notify), autocommit. The difference from accept_insert.sql is the cost of NOTIFY.
-- pgbench -n -T 15 -c 16 -j 2 -f accept_notify.sql
\set k random(1, 1000000000)
WITH accepted AS (
    INSERT INTO webhook_idempotency.webhook_events
        (scope, provider, event_key, event_type, state, attempts, payload, request_head, run_at)
    VALUES ('acct_bench', 'stripe', 'evt_pgb_' || :k, 'payment_intent.succeeded', 'pending', 0,
            convert_to(repeat('x', 1100), 'UTF8'),
            '{"method": "POST", "uri": "/webhooks/stripe", "headers": [["content-type", "application/json"]]}'::jsonb,
            now())
    ON CONFLICT (scope, provider, event_key) DO NOTHING
    RETURNING provider)
SELECT pg_notify('webhook_idempotency_inbox', provider) FROM accepted;
