#!/usr/bin/env bash
# Inbox-mode load benchmarks (BENCHMARKS.md, "Inbox mode"): examples/inbox_load.rs
# on a durable throwaway PostgreSQL (scripts/bench-pg.sh), with pgbench running
# scripts/inbox-bench/*.sql for the ceiling. About 11 minutes with the defaults.
#
#   scripts/inbox-bench.sh [inbox_load options]   # e.g. --accept-secs 5
exec "$(dirname "$0")/bench-pg.sh" inbox_load "$@"
