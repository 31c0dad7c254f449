-- webhook-idempotency schema, migration 4: HOT updates for the synchronous claim.
--
-- PostgreSQL updates a row in place (a HOT update: no new index entries) only when no indexed column
-- changes, and a column in a partial index's predicate counts as indexed. The inbox indexes of migration 2
-- named `state` in their predicates, so the synchronous mode's done-marking (which changes `state`) wrote
-- every row twice with new index entries. The inbox indexes now key on `run_at` and `locked_until` alone,
-- which are set only while a row is pending or leased, and the table leaves room in each page for the
-- in-place version (fillfactor 90). The schema appears only as the double-quoted placeholder
-- webhook_idempotency (see 001).

DROP INDEX IF EXISTS "webhook_idempotency".webhook_events_due;
DROP INDEX IF EXISTS "webhook_idempotency".webhook_events_leased;

-- `run_at` is set only on pending rows from now on.
UPDATE "webhook_idempotency".webhook_events SET run_at = NULL WHERE state <> 'pending' AND run_at IS NOT NULL;

CREATE INDEX IF NOT EXISTS webhook_events_run_at
    ON "webhook_idempotency".webhook_events (run_at) WHERE run_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS webhook_events_locked_until
    ON "webhook_idempotency".webhook_events (locked_until) WHERE locked_until IS NOT NULL;

ALTER TABLE "webhook_idempotency".webhook_events SET (fillfactor = 90);

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (4) ON CONFLICT (version) DO NOTHING;
