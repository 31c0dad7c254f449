-- webhook-idempotency schema, migration 2: inbox mode.
--
-- In inbox mode the layer stores a verified delivery as a `pending` row (the raw body in `payload`,
-- the request head in `request_head`) and answers at once; `InboxWorker`s claim due rows with
-- `FOR UPDATE SKIP LOCKED` under a lease (`locked_until`, fenced by `lease_token`) and run the
-- handler. The schema appears only as the double-quoted placeholder webhook_idempotency (see 001).

-- Method, URI and the headers the handler may read, as JSON: {"method": "POST", "uri": "/x",
-- "headers": [["content-type", "application/json"], ...]}. Signature headers are not kept.
ALTER TABLE "webhook_idempotency".webhook_events ADD COLUMN IF NOT EXISTS request_head jsonb;

-- Due pending rows, oldest first (the workers' claim).
CREATE INDEX IF NOT EXISTS webhook_events_due
    ON "webhook_idempotency".webhook_events (run_at) WHERE state = 'pending';

-- Leases that may have expired (a crashed worker's rows).
CREATE INDEX IF NOT EXISTS webhook_events_leased
    ON "webhook_idempotency".webhook_events (locked_until) WHERE state = 'running' AND locked_until IS NOT NULL;

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (2) ON CONFLICT (version) DO NOTHING;
