#!/usr/bin/env bash
# Runs every benchmark built in <build dir>/bench, one after another (they share the machine,
# so never in parallel). Each prints its own table.
set -euo pipefail
build=${1:?usage: bench/run.sh <build dir>}
shopt -s nullglob
benches=("$build"/bench/bench_*)
if [ ${#benches[@]} -eq 0 ]; then
    echo "bench/run.sh: no benchmarks were built in $build/bench" >&2
    exit 1
fi
for b in "${benches[@]}"; do
    [ -x "$b" ] || continue
    echo "== $(basename "$b")"
    "$b"
done
