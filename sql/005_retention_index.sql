-- webhook-idempotency schema, migration 5: retention reads one provider's rows by age.
--
-- Retention deletes each provider's rows older than that provider's window (days for Slack, 90 days for
-- Paddle). Through an index on `received_at` alone, the purge for a short window had to step over every
-- younger-than-its-window row of the providers with longer windows, again for every batch. An index on
-- (provider, received_at) gives each provider's oldest rows first and stops at its window; it replaces the
-- `received_at` index, so an insert still maintains the same number of indexes. The distinct providers are
-- found through its leading column (one index probe per provider).
--
-- On a large table, build the index without blocking writes first, then run this migration (which then
-- skips the build):
--   CREATE INDEX CONCURRENTLY webhook_events_provider_received_at
--       ON webhook_idempotency.webhook_events (provider, received_at);
-- The schema appears only as the double-quoted placeholder webhook_idempotency (see 001).
--
-- No table change for it, but from this version on the synchronous claim inserts its row already `done`
-- inside the claim's transaction (invisible to others until the commit, removed by a rollback), so
-- `running` (001's comment) is only the inbox's leased state.

CREATE INDEX IF NOT EXISTS webhook_events_provider_received_at
    ON "webhook_idempotency".webhook_events (provider, received_at);
DROP INDEX IF EXISTS "webhook_idempotency".webhook_events_received_at;

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (5) ON CONFLICT (version) DO NOTHING;
