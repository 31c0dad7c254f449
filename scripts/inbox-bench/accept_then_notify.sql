-- Diagnostic (a''): the accept INSERT, autocommit, then pg_notify in its own autocommit statement (no xid,
-- so no WAL flush while it holds the notification queue lock). A proposed shape of Inbox::accept;
-- compare with accept_notify.sql (one statement) and accept_insert.sql (no NOTIFY).
-- pgbench -n -T 15 -c 16 -j 2 -f accept_then_notify.sql
\set k random(1, 1000000000)
INSERT INTO webhook_idempotency.webhook_events
    (scope, provider, event_key, event_type, state, attempts, payload, request_head, run_at)
VALUES ('acct_bench', 'stripe', 'evt_pgb_' || :k, 'payment_intent.succeeded', 'pending', 0,
        convert_to(repeat('x', 1100), 'UTF8'),
        '{"method": "POST", "uri": "/webhooks/stripe", "headers": [["content-type", "application/json"]]}'::jsonb,
        now())
ON CONFLICT (scope, provider, event_key) DO NOTHING;
SELECT pg_notify('webhook_idempotency_inbox', 'stripe');
