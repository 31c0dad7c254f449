-- webhook-idempotency schema, migration 3: operations.
--
-- Every manual action of `webhook-admin` (requeue, replay, purge) is recorded here with its actor and
-- time, in the same transaction as the change. The schema appears only as the double-quoted
-- placeholder webhook_idempotency (see 001).

CREATE TABLE IF NOT EXISTS "webhook_idempotency".webhook_audit (
    at         timestamptz NOT NULL DEFAULT now(),
    actor      text        NOT NULL,
    action     text        NOT NULL CHECK (action IN ('requeue', 'replay', 'purge')),
    -- The filter the action was given, and how many rows it changed.
    filter     jsonb       NOT NULL,
    rows       bigint      NOT NULL
);

CREATE INDEX IF NOT EXISTS webhook_audit_at ON "webhook_idempotency".webhook_audit (at);

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (3) ON CONFLICT (version) DO NOTHING;
