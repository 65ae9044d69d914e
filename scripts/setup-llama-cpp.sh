#!/usr/bin/env bash
# Installs llama.cpp's Python binding (llama-cpp-python, built from its PyPI source) for the test
# that runs CastScope's GGUF exports in llama.cpp itself (tests/interop/test_llama_cpp.py). PyPI
# ships it as source only, and compiling llama.cpp takes minutes on two cores, so the wheel is
# built once into a cache outside the checkout and later runs install it from there in seconds.
#
# Only what the test calls is compiled: the llama and ggml libraries with the CPU backend, for the
# baseline x86-64 instruction set (no -march=native, no AVX), so the cached wheel runs on any
# machine and its arithmetic does not depend on the CPU it was built on. Left out: llama.cpp's
# common library, tools, examples, server, multimodal library, llamafile's matrix kernels and the
# runtime weight repacking.
#
# Environment: CASTSCOPE_WHEEL_CACHE (default ~/.cache/castscope/wheels), JOBS (default nproc).
set -euo pipefail
VERSION=0.3.36
CMAKE_FLAGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_SSE42=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF"
CMAKE_FLAGS+=" -DGGML_BMI2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_LLAMAFILE=OFF"
CMAKE_FLAGS+=" -DGGML_CPU_REPACK=OFF -DGGML_OPENMP=OFF -DGGML_CCACHE=OFF -DLLAMA_OPENSSL=OFF"
CMAKE_FLAGS+=" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
CMAKE_FLAGS+=" -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF"

installed() {
  python3 -c "import importlib.metadata as m, sys
sys.exit(m.version('llama_cpp_python') != '$VERSION')" 2>/dev/null
}
if installed; then exit 0; fi

# The cache key holds the version and the build flags, so changing either builds anew.
key=$(printf '%s %s' "$VERSION" "$CMAKE_FLAGS" | sha256sum | cut -c1-12)
cache="${CASTSCOPE_WHEEL_CACHE:-$HOME/.cache/castscope/wheels}/llama-cpp-python-$key"
if ! ls "$cache"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # The binding's CMakeLists forces llama.cpp's common library on, which the Python binding never
  # loads; a variable set in llama.cpp's own project scope switches it off again.
  printf 'set(LLAMA_BUILD_COMMON OFF)\n' >"$work/no-common.cmake"
  echo "building llama-cpp-python $VERSION once into $cache (several minutes)"
  start=$(date +%s)
  CMAKE_ARGS="$CMAKE_FLAGS -DCMAKE_PROJECT_llama.cpp_INCLUDE=$work/no-common.cmake" \
    CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-$(nproc)}" \
    python3 -m pip wheel -q --no-deps --no-binary llama-cpp-python --no-cache-dir \
    -w "$work/wheel" "llama-cpp-python==$VERSION"
  echo "llama-cpp-python built in $(($(date +%s) - start)) s"
  mkdir -p "$(dirname "$cache")"
  rm -rf "$cache.tmp-$$"
  mv "$work/wheel" "$cache.tmp-$$"
  mv -T "$cache.tmp-$$" "$cache"
fi
PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --only-binary llama-cpp-python \
  --find-links "$cache" \
  "llama-cpp-python==$VERSION"
