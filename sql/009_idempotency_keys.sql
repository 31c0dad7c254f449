-- webhook-idempotency schema, migration 9: the Idempotency-Key request-header layer's stored responses.
--
-- `IdempotencyKeyLayer` claims `(scope, 'idempotency-key', key)` in `webhook_events` like a webhook event;
-- this table holds what a retry with the same key needs: the request's fingerprint (SHA-256 of what
-- identifies the request: method, path, query and body by default) and, once the claim committed, the
-- response to replay. The response is written in the claim's own transaction, so it exists exactly when
-- the handler's writes committed. A recovery point (`phase`) is written in a transaction of its own while
-- the handler runs, so it survives a crash and the retry resumes from it. Rows go with the
-- `idempotency-key` retention window (`Retention`, by `created_at`; 24 h by default).
-- The schema appears only as the double-quoted placeholder webhook_idempotency (see 001).

CREATE TABLE IF NOT EXISTS "webhook_idempotency".webhook_request_keys (
    scope            text        NOT NULL CHECK (octet_length(scope) BETWEEN 1 AND 512),
    provider         text        NOT NULL CHECK (octet_length(provider) BETWEEN 1 AND 512),
    idempotency_key  text        NOT NULL CHECK (octet_length(idempotency_key) BETWEEN 1 AND 255),
    fingerprint      bytea       NOT NULL CHECK (octet_length(fingerprint) = 32),
    -- The last recovery point the handler recorded (committed on its own), or NULL.
    phase            text,
    -- The stored response, set together with the handler's writes; NULL until then.
    response_status  smallint,
    -- Replayed headers as [name, value, name, value, ...].
    response_headers text[],
    response_body    bytea,
    -- When the row was written: its first recovery point, then its completion (so the key is purged no
    -- earlier than the claim row of the run that completed it).
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    PRIMARY KEY (scope, provider, idempotency_key)
);

-- Retention: each provider's keys by age.
CREATE INDEX IF NOT EXISTS webhook_request_keys_provider_created_at
    ON "webhook_idempotency".webhook_request_keys (provider, created_at);

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (9) ON CONFLICT (version) DO NOTHING;
