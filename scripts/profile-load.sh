#!/usr/bin/env bash
# Profiles the load example's server process and PostgreSQL during one point:
# `scripts/profile-load.sh layer 16` (or `hand 16`). perf(1) samples every CPU
# (`-a`) for PROFILE_SECONDS (default 8) while the new-events point runs, then
# prints the top self-time frames of the server process (its `--serve` child)
# and of the postgres processes. Needs perf and a release build of the example.
set -euo pipefail
variant=${1:-layer}
senders=${2:-16}
secs=${PROFILE_SECONDS:-8}
out=$(mktemp -d)
[ -n "${PROFILE_KEEP:-}" ] && echo "keeping $out" || trap 'rm -rf "$out"' EXIT
cargo build --release --all-features --example load >/dev/null 2>&1
LOAD_SENDERS=$senders LOAD_VARIANTS=$variant LOAD_SECONDS=$((secs + 6)) LOAD_PLOT="$out/plot.png" \
  target/release/examples/load >"$out/load.txt" 2>&1 &
load=$!
until grep -q "^server pid" "$out/load.txt" 2>/dev/null; do sleep 0.2; done
# The warm-up of both variants takes about 2 s; then the measured point starts.
sleep 3
perf record -a -F 999 -o "$out/perf.data" -- sleep "$secs" >/dev/null 2>&1
wait "$load"
echo "== load output"; grep -E "^\| (layer|hand)" "$out/load.txt" || true
server=$(sed -n 's/^server pid \([0-9]*\).*/\1/p' "$out/load.txt")
report() {
  perf report -i "$out/perf.data" "$@" --no-children --sort symbol --stdio 2>/dev/null \
    | grep -E '^ +[0-9]' | head -"${PROFILE_TOP:-25}" || true
}
echo "== top frames of the server process (pid $server; self time, % of all samples)"
report --pid "$server"
echo "== top frames of the postgres processes (self time, % of all samples)"
report --comms postgres
