#!/usr/bin/env bash
# Outbox load benchmarks (BENCHMARKS.md, "Outbox"): examples/outbox_load.rs on a
# durable throwaway PostgreSQL (scripts/bench-pg.sh), with pgbench running
# scripts/outbox-bench/*.sql for the ceiling. About 8 minutes with the defaults.
#
#   scripts/outbox-bench.sh [outbox_load options]   # e.g. --secs 5
exec "$(dirname "$0")/bench-pg.sh" outbox_load "$@"
