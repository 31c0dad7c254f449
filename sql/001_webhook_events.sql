-- webhook-idempotency schema, migration 1: the claim table.
--
-- Run it with your own migration tool, or call `webhook_idempotency::store::migrate(&pool)`,
-- which applies the same text under an advisory lock. The schema appears only as the
-- double-quoted identifier webhook_idempotency (the placeholder `migrate_schema` replaces with
-- the schema you configure); edit that token to install under another schema by hand. Either way the file records its
-- version in webhook_idempotency.webhook_schema_migrations (last statement), which
-- the layer's schema check (`webhook_idempotency::store::check_schema`) reads.
--
-- One row per event, identified by (scope, provider, event_key). The primary key is the
-- arbiter of concurrent deliveries: the layer's claim is
--   INSERT ... ON CONFLICT (scope, provider, event_key) DO NOTHING
-- inside the transaction that also carries the handler's business writes.
-- `scope` comes first so the table can be distributed by scope (Citus) unchanged.

CREATE SCHEMA IF NOT EXISTS "webhook_idempotency";

CREATE TABLE IF NOT EXISTS "webhook_idempotency".webhook_events (
    scope            text        NOT NULL CHECK (octet_length(scope) BETWEEN 1 AND 512),
    provider         text        NOT NULL CHECK (octet_length(provider) BETWEEN 1 AND 512),
    event_key        text        NOT NULL CHECK (octet_length(event_key) BETWEEN 1 AND 512),
    event_type       text                 CHECK (octet_length(event_type) <= 512),
    -- running: claimed by a delivery whose transaction is still open (only ever visible
    --          committed in inbox mode); done: the handler succeeded and committed;
    -- failed: the last delivery's handler failed, the claim was rolled back and this row
    --         records the attempt; pending/dead: inbox mode.
    state            text        NOT NULL
                     CHECK (state IN ('pending', 'running', 'done', 'failed', 'dead')),
    -- Deliveries that ran the handler, successful or not.
    attempts         integer     NOT NULL DEFAULT 1 CHECK (attempts >= 0),
    -- The last failure, without payload or secrets ("handler answered 500", "commit failed").
    last_error       text,
    -- The HTTP status of the last handler run (the successful one once done).
    response_status  smallint,
    -- The raw body; kept only by inbox mode.
    payload          bytea,
    received_at      timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    last_failed_at   timestamptz,
    -- Inbox mode: when the row may run next, and the worker lease fencing it.
    run_at           timestamptz,
    locked_until     timestamptz,
    lease_token      uuid,
    PRIMARY KEY (scope, provider, event_key)
);

-- Retention deletes by age.
CREATE INDEX IF NOT EXISTS webhook_events_received_at
    ON "webhook_idempotency".webhook_events (received_at);

-- The applied version, read by `check_schema`. `migrate` creates this table first.
CREATE TABLE IF NOT EXISTS "webhook_idempotency".webhook_schema_migrations (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (1) ON CONFLICT (version) DO NOTHING;
