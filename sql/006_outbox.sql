-- webhook-idempotency schema, migration 6: the outbox, business keys and object versions.
--
-- A handler records an external effect (an e-mail, a charge, a call to a fulfilment API) in its own
-- transaction with `WebhookTx::enqueue`; it commits or rolls back with the claim and the business writes.
-- An `OutboxWorker` leases due rows (`FOR UPDATE SKIP LOCKED`, a lease fenced by `lease_token`, as the
-- inbox does), calls the registered effect function with a downstream idempotency key derived from the
-- row's identity, and ends the row fenced by the token. The schema appears only as the double-quoted
-- placeholder webhook_idempotency (see 001).

-- One row per effect: (scope, provider, event_key) is the event that decided it, (effect, ordinal) which
-- effect of that event. The queue columns are the inbox's. States:
--   pending    due at run_at;
--   running    leased (locked_until, lease_token);
--   done       delivered (delivered_at, remote_ref);
--   uncertain  the remote may have acted and the answer was lost: reconciled at run_at when a
--              reconciliation function is registered, else (run_at NULL) waiting for an operator;
--   dead       failed permanently, or out of attempts.
CREATE TABLE IF NOT EXISTS "webhook_idempotency".webhook_outbox (
    scope            text        NOT NULL CHECK (octet_length(scope) BETWEEN 1 AND 512),
    provider         text        NOT NULL CHECK (octet_length(provider) BETWEEN 1 AND 512),
    event_key        text        NOT NULL CHECK (octet_length(event_key) BETWEEN 1 AND 512),
    effect           text        NOT NULL CHECK (octet_length(effect) BETWEEN 1 AND 128),
    ordinal          integer     NOT NULL DEFAULT 0 CHECK (ordinal >= 0),
    state            text        NOT NULL
                     CHECK (state IN ('pending', 'running', 'done', 'uncertain', 'dead')),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error       text,
    -- A status the effect function reported (an HTTP status, say), for operators.
    response_status  smallint,
    -- The remote's reference for a delivered effect (its id for the call).
    remote_ref       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    last_failed_at   timestamptz,
    -- Set when the row first became uncertain: its next runs reconcile instead of calling again.
    uncertain_since  timestamptz,
    run_at           timestamptz,
    locked_until     timestamptz,
    lease_token      uuid,
    -- The payload as enqueued, and its content type ('application/json' for `Effect::json`). A payload that
    -- makes the row pass ~2 kB is TOASTed (compressed, out of line): an UPDATE that does not change it keeps
    -- the pointer, so the lease and the ends rewrite the narrow row only ("TOAST", PostgreSQL docs). A
    -- smaller one stays inline and is rewritten with each state change; BENCHMARKS.md measures what that
    -- costs (WAL per delivered effect) against a table of its own, which costs the enqueue more.
    payload          bytea       NOT NULL,
    content_type     text        NOT NULL,
    PRIMARY KEY (scope, provider, event_key, effect, ordinal)
) WITH (fillfactor = 90);

-- Due rows (pending, and uncertain rows to reconcile) and leases that may have expired, as for the inbox.
CREATE INDEX IF NOT EXISTS webhook_outbox_run_at
    ON "webhook_idempotency".webhook_outbox (run_at) WHERE run_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS webhook_outbox_locked_until
    ON "webhook_idempotency".webhook_outbox (locked_until) WHERE locked_until IS NOT NULL;
-- Retention: delivered rows by age (maintained when a row is marked done, not at enqueue).
CREATE INDEX IF NOT EXISTS webhook_outbox_delivered_at
    ON "webhook_idempotency".webhook_outbox (delivered_at) WHERE state = 'done';

-- Business keys: "this transition happened", apart from "this event was received". One row per
-- (scope, action, business_key), claimed with `WebhookTx::claim_action` in the handler's transaction.
CREATE TABLE IF NOT EXISTS "webhook_idempotency".webhook_actions (
    scope            text        NOT NULL CHECK (octet_length(scope) BETWEEN 1 AND 512),
    action           text        NOT NULL CHECK (octet_length(action) BETWEEN 1 AND 128),
    business_key     text        NOT NULL CHECK (octet_length(business_key) BETWEEN 1 AND 512),
    -- The event that performed it.
    provider         text        NOT NULL,
    event_key        text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, action, business_key)
);

-- Object versions for last-writer-wins updates (`WebhookTx::apply_if_newer`): the newest version applied
-- per object, and the event that carried it.
CREATE TABLE IF NOT EXISTS "webhook_idempotency".webhook_versions (
    scope            text        NOT NULL CHECK (octet_length(scope) BETWEEN 1 AND 512),
    object_kind      text        NOT NULL CHECK (octet_length(object_kind) BETWEEN 1 AND 128),
    object_id        text        NOT NULL CHECK (octet_length(object_id) BETWEEN 1 AND 512),
    version          bigint      NOT NULL,
    provider         text        NOT NULL,
    event_key        text        NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, object_kind, object_id)
);

-- The operators' outbox actions are audited like the others.
ALTER TABLE "webhook_idempotency".webhook_audit DROP CONSTRAINT IF EXISTS webhook_audit_action_check;
ALTER TABLE "webhook_idempotency".webhook_audit ADD CONSTRAINT webhook_audit_action_check
    CHECK (action IN ('requeue', 'replay', 'purge', 'outbox_resolve', 'outbox_requeue', 'outbox_purge'));

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (6) ON CONFLICT (version) DO NOTHING;
