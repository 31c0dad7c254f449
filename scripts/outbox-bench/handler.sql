-- Ceiling (e): a handler's transaction without the outbox: one business INSERT, COMMIT (the claim's own
-- statements are left out: the difference to (e') is the enqueue's share).
\set k random(1, 1000000000)
BEGIN;
INSERT INTO bench_effects (scope, event_key, event_type) VALUES ('acct_bench', 'evt_h_' || :k, 'payment_intent.succeeded');
COMMIT;
