-- Ceiling (d): the worker's SQL for a batch of 16 (drain_procedure.sql): the lease, then one fenced
-- mark-delivered statement for the 16 rows. Rows per second = tps x 16.
CALL bench_outbox_drain(16);
