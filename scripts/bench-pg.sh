#!/usr/bin/env bash
# The load benchmarks' server: starts a throwaway PostgreSQL with durable
# commits (fsync = on, synchronous_commit = on, pg_stat_statements loaded),
# runs `cargo run --release --all-features --example <example>` against it
# with --database-url and --pgbench, then stops and deletes the server.
# Loopback only. scripts/inbox-bench.sh and scripts/outbox-bench.sh call it.
#
#   scripts/bench-pg.sh <example> [example options]
#
# PostgreSQL binaries: $PG_BIN, else the newest /usr/lib/postgresql/*/bin.
# As root the server runs as the `postgres` user (PostgreSQL refuses root).
set -euo pipefail

example="${1:?usage: scripts/bench-pg.sh <example> [options]}"
shift

here="$(cd "$(dirname "$0")/.." && pwd)"
pg_bin="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}"
[ -x "$pg_bin/initdb" ] || { echo "PostgreSQL server binaries not found (set PG_BIN)" >&2; exit 1; }

root="$(mktemp -d /tmp/bench-pg.XXXXXX)"
as_pg=()
if [ "$(id -u)" = 0 ]; then
    chown postgres: "$root"
    as_pg=(runuser -u postgres --)
fi
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 55432)"

cleanup() {
    "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$root/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$root"
}
trap cleanup EXIT INT TERM

"${as_pg[@]}" "$pg_bin/initdb" -U postgres -A trust -E UTF8 -D "$root/data" >/dev/null
# Durable commits: fsync and synchronous_commit on (the defaults, stated).
# max_wal_size keeps checkpoints out of the short runs; pg_stat_statements
# counts the statements each accepted delivery costs.
options="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$root \
 -c fsync=on -c synchronous_commit=on -c full_page_writes=on -c wal_sync_method=fdatasync \
 -c max_connections=200 -c shared_buffers=256MB -c max_wal_size=4GB -c checkpoint_timeout=30min \
 -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
"${as_pg[@]}" "$pg_bin/pg_ctl" -D "$root/data" -l "$root/server.log" -w -t 60 -o "$options" start >/dev/null

echo "PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $root, fsync=on, synchronous_commit=on)"
echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
cd "$here"
cargo run --release --all-features --example "$example" -- \
    --database-url "postgresql://postgres@127.0.0.1:$port/postgres" --pgbench "$pg_bin/pgbench" "$@"
