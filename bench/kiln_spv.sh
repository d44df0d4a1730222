#!/usr/bin/env bash
# Writes the SPIR-V of every kernel a Kiln program generates to OUTDIR/<hash>.spv (kernels
# generated again, not taken from the disk cache), and lists each with its workgroup size and
# how many invocations each of its dispatches had: what KILN_BENCH_SPV needs to run it as a
# reference variant of bench_ops on the reference's own buffers (bench/README.md): with
# workgroups = invocations / workgroup size, KILN_BENCH_SPV=OUTDIR/<hash>.spv@<workgroups>.
#
#     bench/kiln_spv.sh /tmp/spv build/release/bench/bench_ops     (KILN_BENCH_FILTER=...)
set -euo pipefail
out=${1:?usage: bench/kiln_spv.sh OUTDIR PROGRAM [ARGS...]}
shift
[ $# -gt 0 ] || { echo "usage: bench/kiln_spv.sh OUTDIR PROGRAM [ARGS...]" >&2; exit 1; }
if ! command -v spirv-as >/dev/null; then
    echo "kiln_spv.sh: spirv-as (spirv-tools) is needed" >&2
    exit 1
fi
mkdir -p "$out"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
KILN_CACHE=0 KILN_DEBUG=4 KILN_BENCH_PAIRS=${KILN_BENCH_PAIRS:-1} "$@" >/dev/null 2>"$log" || true
# "kiln spirv: trace: kernel <name> (<hash>), workgroup <n>: <words> words" starts a module.
awk -v out="$out" '
    /^kiln spirv: trace: kernel [^ ]+ \([0-9a-f]+\), workgroup [0-9]+: [0-9]+ words$/ {
        if (file) close(file)
        hash = $6; gsub(/[(),]/, "", hash)
        file = out "/" hash ".spvasm"
        printf "" > file
        next
    }
    /^kiln spirv: trace: / { if (file) { sub(/^kiln spirv: trace: /, ""); print > file } next }
    { if (file) { close(file); file = "" } }
' "$log"
for asm in "$out"/*.spvasm; do
    [ -e "$asm" ] || continue
    spirv-as --target-env vulkan1.3 "$asm" -o "${asm%.spvasm}.spv"
    rm -f "$asm"
done
grep -o "kernel [^ ]* ([0-9a-f]*), workgroup [0-9]*" "$log" | sort -u | while read -r _ name hash _ wg; do
    hash=${hash//[(),]/}
    runs=$(grep -o "kernel [^ ]* ($hash): [0-9]* invocations" "$log" | awk '{print $4}' |
        sort -u | tr '\n' ' ')
    echo "$out/$hash.spv ($name): workgroup $wg, invocations per dispatch: ${runs:-none}"
done
