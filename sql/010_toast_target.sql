-- webhook-idempotency schema, migration 10: large payloads out of the hot-updated rows.
--
-- The lease and every end of a queue row (inbox and outbox) write a new version of the row, and PostgreSQL
-- logs that version in the WAL with every inline column in it. A value stored out of line (TOAST) is
-- carried by its pointer: an UPDATE that does not change it neither rewrites it nor logs it ("TOAST",
-- PostgreSQL docs: "an UPDATE of a row with out-of-line values incurs no TOAST costs if none of the
-- out-of-line values change").
--
-- PostgreSQL starts TOASTing a row only once it is wider than TOAST_TUPLE_THRESHOLD (about 2 kB, fixed
-- at compile time; heap_prepare_insert and heap_update test it), and then compresses and moves columns out
-- until the row is under the table's toast_tuple_target (the same ~2 kB by default). So by default a
-- payload of 2 to ~10 kB that compresses under ~2 kB (most JSON) stays in the row, compressed, and is
-- rewritten by each state change. With a target of 512 bytes, a row past the threshold has its payload
-- compressed and, unless it then fits in a few hundred bytes, moved out of line: each state change then
-- rewrites the narrow row only (measured: a 4 kB JSON payload, 6.2 kB of WAL for a lease and a mark-done
-- before, 1.6 kB after). Not lower: once toasting begins PostgreSQL moves out every column over 24 bytes
-- until the row is under the target, and at 128 bytes that took the event key, the event type and the
-- request head out of line too (four TOAST values per row, read back by every lease). The storage stays
-- EXTENDED (compressed, then out of line): EXTERNAL (out of line uncompressed) measured the same WAL per
-- state change and up to 5x the WAL and disk at the accept for compressible payloads (BENCHMARKS.md,
-- "Fourth round").
--
-- What this does not change: a row under the threshold (a payload under ~1.9 kB) stays inline whatever
-- the target, and its payload is still rewritten by each state change; rows written before this
-- migration keep their layout (the target applies to new row versions only). Both settings are catalog
-- changes: no table rewrite, existing rows and pending work untouched. The schema appears only as the
-- double-quoted placeholder webhook_idempotency (see 001).

ALTER TABLE "webhook_idempotency".webhook_events SET (toast_tuple_target = 512);
ALTER TABLE "webhook_idempotency".webhook_outbox SET (toast_tuple_target = 512);

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (10) ON CONFLICT (version) DO NOTHING;
