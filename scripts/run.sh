#!/usr/bin/env bash
# Sets up, builds and opens CastScope on its embedded demo tensors. Pass --headless on a
# machine without a display (it then loads the demo, casts it, prints a summary and exits).
#
# A first look needs only the app: this installs the build and GUI packages (scripts/setup.sh,
# not --dev) and builds the two programs, castscope and castscope-cli, into build/ without the
# tests, benchmarks or the CUDA backend (the app runs on the CPU engine). CASTSCOPE_CUDA=ON
# builds the CUDA backend too (several minutes more). scripts/build.sh builds everything.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PATH:/usr/local/cuda/bin"
BUILD_DIR="${BUILD_DIR:-build}"
# A build directory configured before (scripts/build.sh) keeps its options.
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCASTSCOPE_TESTS=OFF \
    -DCASTSCOPE_BENCH=OFF -DCASTSCOPE_CUDA="${CASTSCOPE_CUDA:-OFF}"
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" --target castscope castscope-cli
exec "./$BUILD_DIR/app/castscope" "$@"
