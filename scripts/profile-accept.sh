#!/usr/bin/env bash
# Profiles inbox mode's accept (BENCHMARKS.md, "Where the accept's time goes"): runs the 16-sender accept
# point of examples/inbox_load.rs (scripts/inbox-bench.sh) and samples every CPU with perf(1) at 999 Hz for
# 8 s in its middle, then prints the CPU share by process name (postgres, the example's tokio-rt-worker
# threads, which hold both the HTTP server and the senders) and each one's top self-time frames.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
scripts/inbox-bench.sh --senders 16 --accept-secs 14 --skip drain,latency,ceiling > $out/load.txt 2>&1 &
pid=$!
until grep -q "accept: 16 senders" $out/load.txt 2>/dev/null; do sleep 0.2; done
sleep 4
perf record -a -F 999 -o $out/perf.data -- sleep 8 >/dev/null 2>&1
wait $pid
grep -A6 "### Accept" $out/load.txt || true
for comm in tokio-rt-worker postgres; do
  echo "== $comm"
  perf report -i $out/perf.data --comms $comm --no-children --sort symbol --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -30
done
echo "== by comm"
perf report -i $out/perf.data --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -10
