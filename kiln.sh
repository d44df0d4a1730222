#!/usr/bin/env bash
# Kiln's entry point. Needs only bash on a fresh Debian 12 machine: it installs the Debian
# packages that are missing, configures and builds with CMake, then runs.
#
#   ./kiln.sh run     build (release) and run Kiln's main job: train a small CNN on
#                     Fashion-MNIST for one epoch (examples/train_fashion.c; --epochs N and its
#                     other options pass through) and print the test accuracy
#   ./kiln.sh test    build with ASan+UBSan and -Werror, run the whole test suite
#   ./kiln.sh info    build (release) and run kilninfo (what the Vulkan devices can do)
#   ./kiln.sh bench   build (release) and run the benchmarks
#
# Environment: KILN_JOBS (build parallelism, default: number of cores), KILN_DEVICE (index or
# name substring of the Vulkan device), KILN_DEBUG (1..4, more output).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
root=$(pwd)

# zlib1g-dev: examples/train_fashion reads gzipped IDX files (the library never links zlib).
# libcjson-dev: the safetensors reader's JSON parser (io/), a dependency of the installed
# library (docs/packaging.md).
build_packages=(cmake ninja-build gcc g++ libc6-dev pkg-config libvulkan-dev libvulkan1
                libvulkan-volk-dev spirv-headers spirv-tools mesa-vulkan-drivers zlib1g-dev
                libcjson-dev)
# The data set ./kiln.sh run trains on (/usr/share/datasets/fashion-mnist).
run_packages=(dataset-fashion-mnist)
# clang and libclang-rt-14-dev: the libFuzzer build (docs/fuzzing.md); the runtime is only a
# recommendation of clang, which --no-install-recommends leaves out. python3-jsonschema:
# kilninfo's JSON against its schema (tests/kilninfo/check_schema.py). dataset-fashion-mnist:
# tests/examples/test_train_fashion.c trains on it.
test_packages=(libcmocka-dev vulkan-validationlayers python3 python3-jsonschema clang
               libclang-rt-14-dev dataset-fashion-mnist)
# python3-torch: bench_train's reference (the same training step in PyTorch, on the CPU).
bench_packages=(glslc python3-numpy python3-torch dataset-fashion-mnist)

say() { printf 'kiln.sh: %s\n' "$*" >&2; }

# Installs the packages of "$@" that are not installed yet (and nothing when all are).
ensure_packages() {
    local missing=() p
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$p")
        fi
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local line="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            say "missing Debian packages: ${missing[*]}"
            say "not root and no sudo: run this as root, then run ./kiln.sh again:"
            printf '    %s\n' "$line" >&2
            exit 1
        fi
    fi
    say "installing missing packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -q
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}

jobs() { echo "${KILN_JOBS:-$(nproc 2>/dev/null || echo 2)}"; }

# build <dir> <cmake options...>: configure once, then build.
build() {
    local dir=$1
    shift
    # Build output goes to stderr: stdout carries only what the command itself prints.
    cmake -S "$root" -B "$dir" -G Ninja "$@" >&2
    cmake --build "$dir" --parallel "$(jobs)" >&2
}

case "${1:-}" in
run)
    shift
    ensure_packages "${build_packages[@]}" "${run_packages[@]}"
    build "$root/build/release" -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF
    exec "$root/build/release/examples/train_fashion" "$@"
    ;;
info)
    shift
    ensure_packages "${build_packages[@]}"
    build "$root/build/release" -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF
    exec "$root/build/release/tools/kilninfo/kilninfo" "$@"
    ;;
test)
    shift
    ensure_packages "${build_packages[@]}" "${test_packages[@]}"
    build "$root/build/test" -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON -DKILN_WERROR=ON
    cd "$root/build/test"
    exec ctest --output-on-failure --parallel "$(jobs)" "$@"
    ;;
bench)
    shift
    ensure_packages "${build_packages[@]}" "${bench_packages[@]}"
    build "$root/build/release" -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF
    exec "$root/bench/run.sh" "$root/build/release" "$@"
    ;;
packages)
    # Installs what a build needs, and the test and bench sets named after it (tools/ use it).
    shift
    sets=("${build_packages[@]}")
    for s in "$@"; do
        case "$s" in
        run) sets+=("${run_packages[@]}") ;;
        test) sets+=("${test_packages[@]}") ;;
        bench) sets+=("${bench_packages[@]}") ;;
        *) say "packages: unknown set '$s' (run, test, bench)"; exit 2 ;;
        esac
    done
    ensure_packages "${sets[@]}"
    ;;
*)
    cat >&2 <<'USAGE'
usage: ./kiln.sh run [--epochs N ...]     build and run Kiln's main job: train a CNN on
                                          Fashion-MNIST, print the test accuracy
       ./kiln.sh test [ctest options]     build with sanitizers and run every test
       ./kiln.sh info [kilninfo options]  build and run kilninfo
       ./kiln.sh bench                    build and run the benchmarks
       ./kiln.sh packages [run] [test] [bench]
                                          install the Debian packages they need, nothing else
USAGE
    exit 2
    ;;
esac
