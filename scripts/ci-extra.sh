#!/usr/bin/env bash
# The second half of CI: the engine's unit tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer (clang, CPU engine, no GUI), then every fuzz target over the kept
# corpus in fuzz/corpus/ with a fixed seed and number of runs, so a commit always gets the same
# verdict (open-ended fuzzing with fresh seeds is fuzz/fuzz_long.sh, not part of CI).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_RUNS="${FUZZ_RUNS:-100000}"
FUZZ_SEED="${FUZZ_SEED:-1}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCASTSCOPE_SANITIZE=ON -DCASTSCOPE_CUDA=OFF -DCASTSCOPE_GUI=OFF -DCASTSCOPE_BENCH=OFF
cmake --build build-asan -j"$(nproc)"
# The interop test runs Python against the CLI; it is covered by the main run.
ctest --test-dir build-asan --output-on-failure -j2 --timeout 900 -E interop

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCASTSCOPE_FUZZ=ON -DCASTSCOPE_CUDA=OFF -DCASTSCOPE_GUI=OFF -DCASTSCOPE_BENCH=OFF -DCASTSCOPE_TESTS=OFF
cmake --build build-fuzz -j"$(nproc)"
bash fuzz/run_fuzzers.sh build-fuzz/fuzz "$FUZZ_RUNS" "$FUZZ_SEED"
