-- Ceiling (e'): (e) with the enqueue statement of src/store/outbox.rs (the row with its 200-byte JSON
-- payload, stored out of line), then COMMIT and the outbox NOTIFY, as WebhookTx::enqueue and the
-- commit send them.
\set k random(1, 1000000000)
BEGIN;
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', 'evt_h_' || :k, 'payment_intent.succeeded');
WITH row AS (
    INSERT INTO webhook_idempotency.webhook_outbox
        (scope, provider, event_key, effect, ordinal, state, run_at, payload, content_type)
    VALUES ('acct_bench', 'stripe', 'evt_h_' || :k, 'send_receipt', 0, 'pending', now(),
            convert_to('{"order_id":"evt_h","to":"customer@example.com","template":"receipt","lines":"' || repeat('x', 120) || '"}', 'UTF8'),
            'application/json')
    ON CONFLICT (scope, provider, event_key, effect, ordinal) DO NOTHING
    RETURNING 1)
SELECT count(*) FROM row;
COMMIT;
NOTIFY webhook_outbox_bench;
