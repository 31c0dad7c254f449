#!/usr/bin/env bash
# Checks the declared `rust-version` of webhook-idempotency against its
# locked dependencies: fails when any package the library builds with (normal
# and build dependencies, reached from the crate with its default features
# and with every feature but `sqlx`, for every target platform) declares a
# higher `rust-version` than the crate does, or, with --all-features, a
# higher one than `[package.metadata.msrv] sqlx` (the sqlx driver's). Dev-dependencies (tests, examples,
# benches) are not part of the promise and are not counted.
#
#   scripts/check-msrv.sh          # check; prints the binding packages
#   scripts/check-msrv.sh --print  # print the true minimum only
#
# Reads `cargo metadata --format-version 1 --locked` (the `rust_version` of
# every package, and the resolved dependency graph with dependency kinds).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-check}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cargo metadata --format-version 1 --locked >"$tmp/default.json"
# Every feature but `sqlx`: the sqlx driver needs a newer Rust (sqlx 0.9.1's
# rust-version), declared apart as [package.metadata.msrv] sqlx, and checked
# with --all-features below.
features=$(cargo metadata --format-version 1 --no-deps --locked | python3 -c '
import json, sys
root = json.load(sys.stdin)["packages"][0]
print(",".join(f for f in root["features"] if f not in ("default", "sqlx")))')
cargo metadata --format-version 1 --locked --features "$features" >"$tmp/all.json"
cargo metadata --format-version 1 --locked --all-features >"$tmp/sqlx.json"

python3 - "$mode" "$tmp/default.json" "$tmp/all.json" <<'PY'
import json
import sys

mode, files = sys.argv[1], sys.argv[2:]


def version(v):
    """'1.80' / '1.80.1' -> (1, 80, 1)."""
    parts = [int(p) for p in v.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


declared = None
needs = {}  # (name, version) -> rust_version, over both feature sets
for path in files:
    meta = json.load(open(path))
    packages = {p["id"]: p for p in meta["packages"]}
    root = meta["resolve"]["root"]
    declared = packages[root].get("rust_version")
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    seen, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for dep in nodes[pid]["deps"]:
            kinds = {k["kind"] for k in dep["dep_kinds"]}
            # kind None is a normal dependency; dev-dependencies only build tests.
            if kinds & {None, "build"}:
                todo.append(dep["pkg"])
    for pid in seen - {root}:
        p = packages[pid]
        if p.get("rust_version"):
            needs[(p["name"], p["version"])] = p["rust_version"]

if declared is None:
    sys.exit("Cargo.toml declares no rust-version")
top = max(needs.values(), key=version, default="1.0")
if mode == "--print":
    print(top)
    sys.exit(0)
binding = sorted(((v, n, ver) for (n, ver), v in needs.items() if version(v) == version(top)))
over = sorted(((v, n, ver) for (n, ver), v in needs.items() if version(v) > version(declared)), key=lambda t: version(t[0]))
print(f"declared rust-version {declared}; dependencies need at most {top} ({len(needs)} packages declare one)")
print("  highest: " + ", ".join(f"{n} {ver} ({v})" for v, n, ver in binding))
if over:
    print(f"FAIL: {len(over)} dependencies need a newer Rust than rust-version = \"{declared}\":")
    for v, n, ver in over:
        print(f"  {n} {ver} needs {v}")
    sys.exit(1)
if version(top) < version(declared):
    print(f"note: rust-version could be lowered to {top} as far as dependencies are concerned")
PY

[ "$mode" = "--print" ] && exit 0
# With the sqlx feature: against [package.metadata.msrv] sqlx.
python3 - "$tmp/sqlx.json" <<'PY'
import json
import sys

meta = json.load(open(sys.argv[1]))
packages = {p["id"]: p for p in meta["packages"]}
root = meta["resolve"]["root"]
declared = packages[root].get("metadata", {}).get("msrv", {}).get("sqlx")
if declared is None:
    sys.exit("Cargo.toml declares no [package.metadata.msrv] sqlx")
version = lambda v: tuple([int(p) for p in v.split(".")] + [0] * (3 - len(v.split("."))))
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
seen, todo = set(), [root]
while todo:
    pid = todo.pop()
    if pid in seen:
        continue
    seen.add(pid)
    for dep in nodes[pid]["deps"]:
        if {k["kind"] for k in dep["dep_kinds"]} & {None, "build"}:
            todo.append(dep["pkg"])
over = sorted((packages[p]["name"], packages[p]["version"], packages[p]["rust_version"]) for p in seen - {root}
              if packages[p].get("rust_version") and version(packages[p]["rust_version"]) > version(declared))
print(f"with the sqlx feature: declared {declared}")
if over:
    print(f"FAIL: {len(over)} dependencies need a newer Rust than [package.metadata.msrv] sqlx = \"{declared}\":")
    for n, ver, v in over:
        print(f"  {n} {ver} needs {v}")
    sys.exit(1)
PY
