-- Ceiling (d'): the worker's SQL for a batch of 16 as it was before the batching marker: the lease, then one
-- fenced mark-delivered per row, each its own commit (drain_procedure.sql). Rows per second = tps x 16.
CALL bench_outbox_drain_per_row(16);
