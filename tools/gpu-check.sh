#!/usr/bin/env bash
# The check of Kiln on a real GPU, in two halves:
#
#   tools/gpu-check.sh bundle [DIR]          on a machine with Debian's packages (no GPU needed):
#                                            builds Release with the tests and gathers into DIR
#                                            (default build/gpu-bundle) everything the run needs:
#                                            the test programs, kilninfo, bench_ops, the GLSL
#                                            references compiled to SPIR-V, the Vulkan loader and
#                                            the Khronos validation layer with the libraries they
#                                            load that a bare machine may lack (libglvnd's too,
#                                            which NVIDIA's Vulkan driver needs).
#   tools/gpu-check.sh run [DIR] [REPORT]    on the GPU machine: installs nothing and fetches
#                                            nothing. Picks the GPU (KILN_DEVICE, else the first
#                                            device kilninfo lists that is not a CPU), runs every
#                                            device test on it with the validation layer (a test
#                                            that cannot open that device fails: nothing falls
#                                            back to lavapipe, which the bundle does not carry),
#                                            then the device tests again under the device profile
#                                            GPU_CHECK_PROFILE (default mobile-low; empty: none),
#                                            then kilninfo --json --selftest, then bench_ops and
#                                            bench_train with KILN_BENCH_QUICK=1. Writes REPORT
#                                            (default gpu-report/) and exits non-zero if anything
#                                            failed.
#
# Budget: the run is sized for under five minutes on one GPU machine (GPU_CHECK_TEST_TIMEOUT
# per test program, default 150 s, GPU_CHECK_JOBS programs at once, default 8;
# GPU_CHECK_BENCH=0 skips the benchmark). The NVIDIA driver's manifest is found through
# VK_DRIVER_FILES when the loader does not find it by itself
# (/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json is tried).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf 'gpu-check: %s\n' "$*" >&2; }

# Shared libraries a program loads that are not part of every glibc system, copied into $2.
copy_deps() {
    local bin=$1 dest=$2 lib path
    while read -r lib path; do
        case "$lib" in
        libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | \
            libstdc++.so* | libgcc_s.so* | linux-vdso.so*) continue ;;
        esac
        [ -f "$path" ] && [ ! -e "$dest/$lib" ] && cp -L "$path" "$dest/$lib"
    done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
}

bundle() {
    local out=${1:-$root/build/gpu-bundle} build=$root/build/gpu
    # The packages the build, the tests and the references need (as ./kiln.sh test and bench).
    "$root/kiln.sh" packages test bench || return 1
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON \
        -DKILN_WERROR=ON >&2 || return 1
    cmake --build "$build" --parallel "${KILN_JOBS:-$(nproc)}" >&2 || return 1
    rm -rf "$out"
    mkdir -p "$out/tests" "$out/bin" "$out/lib" "$out/layers" "$out/spv"
    local t
    # Every test program but kilninfo's own (they run kilninfo from its build path; the run
    # below runs kilninfo itself), the fuzz replay (the interpreter only, its corpus read from
    # the source tree) and the layering check (a build, not a program).
    while IFS= read -r t; do
        case "$(basename "$t")" in test_kilninfo_* | test_fuzz_*) continue ;; esac
        cp "$t" "$out/tests/"
    done < <(find "$build/tests" -type f -name 'test_*' -perm -u+x | sort)
    cp "$build/tools/kilninfo/kilninfo" "$build/bench/bench_ops" "$build/bench/bench_train" \
        "$out/bin/"
    strip "$out"/tests/* "$out"/bin/* 2>/dev/null
    for t in "$out"/tests/* "$out"/bin/*; do copy_deps "$t" "$out/lib"; done
    # The loader (loaded with dlopen by volk, so ldd does not list it) and the validation layer.
    local loader layer manifest
    loader=$(ldconfig -p | awk '/libvulkan\.so\.1 .*x86-64/ {print $NF; exit}')
    layer=$(ldconfig -p | awk '/libVkLayer_khronos_validation\.so .*x86-64/ {print $NF; exit}')
    manifest=/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json
    if [ -z "$loader" ] || [ -z "$layer" ] || [ ! -f "$manifest" ]; then
        say "the Vulkan loader or the validation layer is not installed here"
        return 1
    fi
    cp -L "$loader" "$out/lib/libvulkan.so.1"
    cp -L "$layer" "$out/lib/libVkLayer_khronos_validation.so"
    copy_deps "$out/lib/libVkLayer_khronos_validation.so" "$out/lib"
    # libglvnd's libraries: NVIDIA's Vulkan driver (libGLX_nvidia.so.0) gives no vkCreateInstance
    # without them, and a GPU machine made for compute may lack them. Debian's, unpacked here.
    local gl
    gl=$(mktemp -d) || return 1
    (cd "$gl" && apt-get download libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2 \
        >/dev/null 2>&1) || { say "apt-get download of libglvnd's packages failed"; return 1; }
    for t in "$gl"/*.deb; do dpkg -x "$t" "$gl/root" || return 1; done
    cp -a "$gl"/root/usr/lib/x86_64-linux-gnu/lib*.so.* "$out/lib/"
    rm -rf "$gl"
    # A relative library_path is read relative to the manifest.
    sed 's|"library_path": *"[^"]*"|"library_path": "../lib/libVkLayer_khronos_validation.so"|' \
        "$manifest" >"$out/layers/VkLayer_khronos_validation.json"
    # The GLSL references of bench_ops, compiled here in each variant it asks for.
    local s name
    for s in "$root"/bench/shaders/*.comp; do
        name=$(basename "$s" .comp)
        # Each form that compiles (a *_oct shader compiles with OCTETS only).
        glslc -O --target-env=vulkan1.1 "$s" -o "$out/spv/$name.spv" 2>/dev/null
        glslc -O --target-env=vulkan1.1 -DPAIRED "$s" -o "$out/spv/$name+paired.spv" 2>/dev/null
        glslc -O --target-env=vulkan1.1 -DPAIRED -DOCTETS "$s" \
            -o "$out/spv/$name+octets.spv" 2>/dev/null
        # and the texel variants (read-only operands as uniform texel buffers)
        glslc -O --target-env=vulkan1.1 -DTEXELS "$s" -o "$out/spv/$name+texels.spv" 2>/dev/null
        glslc -O --target-env=vulkan1.1 -DPAIRED -DTEXELS "$s" \
            -o "$out/spv/$name+paired+texels.spv" 2>/dev/null
        glslc -O --target-env=vulkan1.1 -DPAIRED -DOCTETS -DTEXELS "$s" \
            -o "$out/spv/$name+octets+texels.spv" 2>/dev/null
    done
    # What tests read from the source tree or the system: the trace checker (run with the
    # GPU machine's python3) and the Fashion-MNIST files of the training example's test.
    mkdir -p "$out/data" "$out/scripts"
    cp "$root/tests/engine/check_trace.py" "$root/bench/train_torch.py" "$out/scripts/"
    local fashion=${KILN_FASHION_DATA:-/usr/share/datasets/fashion-mnist}
    cp "$fashion"/*-ubyte.gz "$out/data/" || { say "no Fashion-MNIST files in $fashion"; return 1; }
    # The programs of the tests' second pass under a device profile (ctest's label "profile").
    (cd "$build" && ctest -N -L profile) |
        sed -n 's/.*Test *#[0-9]*: *\([^@]*\)@.*/test_\1/p' >"$out/profile-tests"
    cp "$root/tools/gpu-check.sh" "$out/"
    { git -C "$root" describe --always --dirty 2>/dev/null || echo unknown; } >"$out/commit"
    # One compressed file to carry (the test programs share most of their code).
    tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")" || return 1
    say "bundle in $out ($(du -sh "$out" | cut -f1)) and $out.tar.xz" \
        "($(du -sh "$out.tar.xz" | cut -f1)); on the GPU machine: tar xJf it, then" \
        "run '<bundle>/gpu-check.sh run <bundle> <report folder>'"
}

run() {
    local b=${1:-$root/build/gpu-bundle} report=${2:-gpu-report}
    [ -x "$b/bin/kilninfo" ] || { say "no bundle in $b (tools/gpu-check.sh bundle makes one)"; return 1; }
    b=$(cd "$b" && pwd) || return 1
    mkdir -p "$report" && report=$(cd "$report" && pwd)
    export LD_LIBRARY_PATH="$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export VK_LAYER_PATH="$b/layers"
    local nv=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    if [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && [ -f "$nv" ]; then
        export VK_DRIVER_FILES=$nv
    fi
    local summary=$report/summary.txt failed=0 start=$SECONDS
    : >"$summary"
    note() { printf '%s\n' "$*" | tee -a "$summary" >&2; }
    note "gpu-check of commit $(cat "$b/commit") on $(uname -n), $(date -u +%FT%TZ)"
    command -v nvidia-smi >/dev/null &&
        note "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"

    "$b/bin/kilninfo" --json >"$report/kilninfo.json" 2>"$report/kilninfo.err"
    local rc=$?
    note "kilninfo --json: exit $rc"
    local dev=${KILN_DEVICE:-}
    if [ -z "$dev" ]; then
        # The first device whose "type" (the line after its "name") is not "cpu".
        dev=$(awk '/"devices"/ {d = 1}
                   d && /"name":/ {n = $0; next}
                   d && n != "" && /"type":/ && !/"cpu"/ {
                       sub(/.*"name": *"/, "", n); sub(/".*/, "", n); print n; exit}
                   {n = ""}' "$report/kilninfo.json")
    fi
    if [ -z "$dev" ]; then
        note "FAIL: no GPU among the Vulkan devices (kilninfo.json); nothing ran"
        return 1
    fi
    export KILN_DEVICE=$dev
    note "device: $KILN_DEVICE"

    # The tests: the environment ctest gives them (tests/CMakeLists.txt), on the GPU.
    export KILN_VALIDATION=1 KILN_CACHE=0 KILN_FASHION_DATA="$b/data" \
        KILN_TEST_PYTHON=python3 KILN_TEST_CHECK_TRACE="$b/scripts/check_trace.py"
    local tmo=${GPU_CHECK_TEST_TIMEOUT:-150} jobs=${GPU_CHECK_JOBS:-8}
    mkdir -p "$report/tests"
    find "$b/tests" -type f -name 'test_*' | sort |
        xargs -P "$jobs" -I{} bash -c '
            t={}; n=$(basename "$t"); s=$SECONDS
            timeout '"$tmo"' "$t" >"'"$report"'/tests/$n.log" 2>&1; rc=$?
            echo "$n $rc $((SECONDS - s))" >>"'"$report"'/tests/results"'
    local name code secs passed=0
    while read -r name code secs; do
        if [ "$code" = 0 ]; then
            passed=$((passed + 1))
            note "pass $name (${secs} s)"
        else
            failed=$((failed + 1))
            note "FAIL $name: exit $code$([ "$code" = 124 ] && echo ", timed out") (${secs} s)"
        fi
    done < <(sort "$report/tests/results")
    note "tests: $passed passed, $failed failed ($((SECONDS - start)) s so far)"

    # The second pass: the device tests again under a device profile (GPU_CHECK_PROFILE, default
    # mobile-low; empty: none), device halves only, as CI's "@profile" tests on lavapipe.
    local profile=${GPU_CHECK_PROFILE-mobile-low}
    if [ -n "$profile" ] && [ -s "$b/profile-tests" ]; then
        mkdir -p "$report/tests-$profile"
        sed "s|^|$b/tests/|" "$b/profile-tests" |
            KILN_PROFILE=$profile KILN_TEST_DEVICE_ONLY=1 xargs -P "$jobs" -I{} bash -c '
                t={}; n=$(basename "$t"); s=$SECONDS
                timeout '"$tmo"' "$t" >"'"$report"'/tests-'"$profile"'/$n.log" 2>&1; rc=$?
                echo "$n $rc $((SECONDS - s))" >>"'"$report"'/tests-'"$profile"'/results"'
        local ppassed=0 pfailed=0
        while read -r name code secs; do
            if [ "$code" = 0 ]; then
                ppassed=$((ppassed + 1))
            else
                pfailed=$((pfailed + 1))
                note "FAIL $name under $profile: exit $code$([ "$code" = 124 ] && echo ", timed out") (${secs} s)"
            fi
        done < <(sort "$report/tests-$profile/results")
        failed=$((failed + pfailed))
        note "tests under $profile: $ppassed passed, $pfailed failed ($((SECONDS - start)) s so far)"
        for name in $(awk '$2 != 0 {print $1}' "$report/tests-$profile/results" | sort); do
            echo "==== $name under $profile (failed)"
            tail -c 20000 "$report/tests-$profile/$name.log"
        done >"$report/tests-$profile.log"
    fi
    # One log file for all (the logs of failed programs first).
    {
        for name in $(awk '$2 != 0 {print $1}' "$report/tests/results" | sort); do
            echo "==== $name (failed)"; tail -c 20000 "$report/tests/$name.log"
        done
        for name in $(awk '$2 == 0 {print $1}' "$report/tests/results" | sort); do
            echo "==== $name"; tail -c 2000 "$report/tests/$name.log"
        done
    } >"$report/tests.log"

    timeout 120 "$b/bin/kilninfo" --json --selftest >"$report/selftest.json" 2>"$report/selftest.err"
    rc=$?
    note "kilninfo --json --selftest: exit $rc"
    [ $rc = 0 ] || failed=$((failed + 1))

    if [ "${GPU_CHECK_BENCH:-1}" != 0 ]; then
        KILN_BENCH_QUICK=1 KILN_BENCH_SPV_DIR="$b/spv" KILN_BENCH_JSON="$report/bench.json" \
            KILN_VALIDATION=0 timeout 150 "$b/bin/bench_ops" >"$report/bench.txt" 2>&1
        rc=$?
        note "bench_ops (KILN_BENCH_QUICK=1): exit $rc"
        [ $rc = 0 ] || failed=$((failed + 1))
        # The training step of the training example on the GPU, against PyTorch on the CPU
        # (2 threads, the issue's reference) when the machine's python3 imports torch.
        KILN_BENCH_QUICK=1 KILN_FASHION_DATA="$b/data" KILN_VALIDATION=0 \
            KILN_BENCH_TRAIN_SCRIPT="$b/scripts/train_torch.py" timeout 120 "$b/bin/bench_train" \
            >"$report/bench_train.txt" 2>&1
        rc=$?
        note "bench_train (KILN_BENCH_QUICK=1): exit $rc"
        [ $rc = 0 ] || failed=$((failed + 1))
    fi
    note "gpu-check: $failed failure(s), $((SECONDS - start)) s"
    [ $failed = 0 ]
}

case "${1:-}" in
bundle) shift; bundle "$@" ;;
run) shift; run "$@" ;;
*)
    echo "usage: tools/gpu-check.sh bundle [DIR] | run [DIR] [REPORT]" >&2
    exit 2
    ;;
esac
