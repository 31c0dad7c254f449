-- The outbox worker's SQL per batch as procedures, for pgbench's drain ceiling (examples/outbox_load.rs
-- creates them): the lease statement of src/store/queue.rs for the outbox (its pending branch: due rows on
-- the run_at partial index, FOR UPDATE SKIP LOCKED, a fresh token per row, the payload read with the row),
-- committed; then the fenced mark-delivered of src/store/outbox.rs for the whole batch in one statement
-- and commit (bench_outbox_drain, as the worker's batching marker does when the batch's calls end
-- together), or one row per commit (bench_outbox_drain_per_row, the worker before batching). No HTTP
-- call: the database's share only.
CREATE OR REPLACE FUNCTION bench_outbox_lease(batch int) RETURNS TABLE (event_key text, token text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY WITH pending AS (
        SELECT scope, provider, event_key, effect, ordinal FROM webhook_idempotency.webhook_outbox
        WHERE state IN ('pending', 'uncertain') AND run_at <= now()
        ORDER BY run_at LIMIT batch FOR UPDATE SKIP LOCKED),
    leased AS (
        UPDATE webhook_idempotency.webhook_outbox e
           SET state = 'running', attempts = e.attempts + 1, run_at = NULL,
               locked_until = now() + make_interval(secs => 30), lease_token = gen_random_uuid()
          FROM pending p
         WHERE (e.scope, e.provider, e.event_key, e.effect, e.ordinal)
             = (p.scope, p.provider, p.event_key, p.effect, p.ordinal)
        RETURNING e.event_key, e.lease_token, e.payload, e.content_type)
    SELECT leased.event_key, leased.lease_token::text FROM leased;
END $$;

CREATE OR REPLACE PROCEDURE bench_outbox_drain(batch int) LANGUAGE plpgsql AS $$
DECLARE
    keys text[];
    tokens text[];
BEGIN
    SELECT array_agg(l.event_key), array_agg(l.token) INTO keys, tokens FROM bench_outbox_lease(batch) l;
    COMMIT;
    UPDATE webhook_idempotency.webhook_outbox o
       SET state = 'done', delivered_at = now(), remote_ref = NULL, response_status = NULL,
           uncertain_since = NULL, run_at = NULL, locked_until = NULL, lease_token = NULL
      FROM unnest(array_fill('acct_bench'::text, ARRAY[cardinality(keys)]), array_fill('stripe'::text, ARRAY[cardinality(keys)]),
                  keys, array_fill('send_receipt'::text, ARRAY[cardinality(keys)]), array_fill('0'::text, ARRAY[cardinality(keys)]),
                  tokens, array_fill(NULL::text, ARRAY[cardinality(keys)]))
           AS d(scope, provider, event_key, effect, ordinal, token, remote_ref)
     WHERE (o.scope, o.provider, o.event_key, o.effect, o.ordinal)
         = (d.scope, d.provider, d.event_key, d.effect, d.ordinal::integer)
       AND o.state = 'running' AND o.lease_token = d.token::uuid;
    COMMIT;
END $$;

CREATE OR REPLACE PROCEDURE bench_outbox_drain_per_row(batch int) LANGUAGE plpgsql AS $$
DECLARE
    keys text[];
    tokens text[];
BEGIN
    SELECT array_agg(l.event_key), array_agg(l.token) INTO keys, tokens FROM bench_outbox_lease(batch) l;
    COMMIT;
    FOR i IN 1 .. coalesce(array_length(keys, 1), 0) LOOP
        UPDATE webhook_idempotency.webhook_outbox
           SET state = 'done', delivered_at = now(), remote_ref = NULL, response_status = NULL,
               uncertain_since = NULL, run_at = NULL, locked_until = NULL, lease_token = NULL
         WHERE scope = 'acct_bench' AND provider = 'stripe' AND event_key = keys[i] AND effect = 'send_receipt'
           AND ordinal = 0 AND state = 'running' AND lease_token = tokens[i]::uuid;
        COMMIT;
    END LOOP;
END $$;
