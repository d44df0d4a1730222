#!/usr/bin/env bash
# Runs every benchmark built in <build dir>/bench, one after another (they share the machine,
# so never in parallel). Each prints its own table. Then bench_ops again under the device
# profile KILN_BENCH_PROFILE (default mobile-low; empty: none) and a table of how much each of
# its rows slows down there (profile_compare.py).
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

profile=${KILN_BENCH_PROFILE-mobile-low}
ops=$build/bench/bench_ops
if [ -n "$profile" ] && [ -x "$ops" ] && command -v python3 >/dev/null; then
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    echo "== bench_ops, as the device is and under $profile (KILN_BENCH_QUICK=1)"
    KILN_BENCH_QUICK=1 KILN_BENCH_JSON="$dir/default.json" "$ops" >"$dir/default.txt" 2>&1 ||
        { cat "$dir/default.txt"; exit 1; }
    KILN_PROFILE=$profile KILN_BENCH_QUICK=1 KILN_BENCH_JSON="$dir/profile.json" "$ops" \
        >"$dir/profile.txt" 2>&1 || { cat "$dir/profile.txt"; exit 1; }
    python3 "$(dirname "$0")/profile_compare.py" "$dir/default.json" "$dir/profile.json" "$profile"
fi
