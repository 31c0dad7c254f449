-- webhook-idempotency schema, migration 8: the body-digest guard against replays under a fresh key.
--
-- For presets whose event key comes from a header the signature does not cover (GitHub's
-- `X-GitHub-Delivery`, Shopify's `X-Shopify-Event-Id`, Linear's `Linear-Delivery`, Twilio's
-- `I-Twilio-Idempotency-Token`), a captured delivery replayed with a fresh key header is a new event to the
-- claim. With `WebhookLayerBuilder::body_digest_guard(true)` the layer also claims the SHA-256 of the
-- signed body, per (scope, provider), in the claim's transaction (synchronous mode) or with the insert
-- (inbox mode): a second event whose body is byte-identical to one already processed (or stored) under
-- another key is answered as a duplicate and not run. Rows go with the provider's retention window
-- (`Retention`, by `created_at`).
-- The schema appears only as the double-quoted placeholder webhook_idempotency (see 001).

CREATE TABLE IF NOT EXISTS "webhook_idempotency".webhook_body_digests (
    scope            text        NOT NULL CHECK (octet_length(scope) BETWEEN 1 AND 512),
    provider         text        NOT NULL CHECK (octet_length(provider) BETWEEN 1 AND 512),
    body_sha256      bytea       NOT NULL CHECK (octet_length(body_sha256) = 32),
    -- The event whose body it was.
    event_key        text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, provider, body_sha256)
);

-- Retention: each provider's digests by age.
CREATE INDEX IF NOT EXISTS webhook_body_digests_provider_created_at
    ON "webhook_idempotency".webhook_body_digests (provider, created_at);

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (8) ON CONFLICT (version) DO NOTHING;
