-- webhook-idempotency schema, migration 7: time-based retry budgets and inbox integrity tags.
--
-- `retry_from`: where a row's retry budget (`RetryPolicy::retry_for`) starts when it is not the row's
-- arrival (`received_at` for events, `created_at` for effects): an operator's requeue and the takeover of a
-- synchronous-mode `failed` row set it to now(), so the row gets a whole budget again. NULL: the arrival.
--
-- `integrity_tag`: inbox mode's optional keyed MAC (HMAC-SHA256 with a server-side key the layer and the
-- workers share) over the row's identity, type, request head and payload. A worker configured with the key
-- runs only rows whose tag verifies: a row written by someone with write access to the table but without
-- the key is not run (SECURITY.md). NULL: written without a key.
--
-- Both columns are nullable without a default: adding them rewrites nothing.
-- The schema appears only as the double-quoted placeholder webhook_idempotency (see 001).

ALTER TABLE "webhook_idempotency".webhook_events ADD COLUMN IF NOT EXISTS retry_from timestamptz;
ALTER TABLE "webhook_idempotency".webhook_events ADD COLUMN IF NOT EXISTS integrity_tag bytea;
ALTER TABLE "webhook_idempotency".webhook_outbox ADD COLUMN IF NOT EXISTS retry_from timestamptz;

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (7) ON CONFLICT (version) DO NOTHING;
