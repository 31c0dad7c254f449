-- webhook-idempotency schema, migration 13: time arithmetic every node evaluates alike.
--
-- `plus_seconds(at, secs)`: the instant `secs` seconds after `at`. PostgreSQL marks `timestamptz + interval` STABLE, since an
-- interval of days or months depends on the session's time zone; an interval of seconds alone does not (a
-- timestamptz is an absolute instant), so this wrapper is IMMUTABLE, truthfully. Citus refuses a STABLE
-- function called with column references in an UPDATE on a distributed table ("STABLE functions used in
-- UPDATE queries cannot be called with column references"): the queues' statements compute a row's next
-- run and its retry budget's end (`retry_from + retry_for`) through this function instead. On a single
-- PostgreSQL the result is the same value. On Citus the function is created on every node with it.
-- Idempotent (`CREATE OR REPLACE FUNCTION`); a catalog change only.
CREATE OR REPLACE FUNCTION "webhook_idempotency".plus_seconds(timestamptz, double precision)
    RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT $1 + make_interval(secs => $2) $$;

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (13) ON CONFLICT (version) DO NOTHING;
