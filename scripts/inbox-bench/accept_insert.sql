-- Ceiling (a): the inbox accept's INSERT alone, autocommit (one durable commit per event).
-- Same row as the layer writes: 1,100-byte payload, request head, pending. Run by examples/inbox_load.rs:
-- pgbench -n -T 15 -c 16 -j 2 -f accept_insert.sql
\set k random(1, 1000000000)
INSERT INTO webhook_idempotency.webhook_events
    (scope, provider, event_key, event_type, state, attempts, payload, request_head, run_at)
VALUES ('acct_bench', 'stripe', 'evt_pgb_' || :k, 'payment_intent.succeeded', 'pending', 0,
        convert_to(repeat('x', 1100), 'UTF8'),
        '{"method": "POST", "uri": "/webhooks/stripe", "headers": [["content-type", "application/json"]]}'::jsonb,
        now())
ON CONFLICT (scope, provider, event_key) DO NOTHING;
