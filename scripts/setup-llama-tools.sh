#!/usr/bin/env bash
# Builds llama.cpp's `llama-quantize` and `llama-imatrix` once, from the llama.cpp source that
# llama-cpp-python's PyPI sdist vendors (the same version the Python binding of
# scripts/setup-llama-cpp.sh is compiled from), for the test that compares CastScope's GGUF
# export with an importance matrix to llama-quantize's (tests/interop/test_imatrix_llama.py).
#
# Only those two programs and what they link are compiled (llama, ggml with the CPU backend,
# llama.cpp's common library), statically, for the baseline x86-64 instruction set (the flags of
# setup-llama-cpp.sh), so the quantizers' float arithmetic does not depend on the CPU the cache
# was built on. The programs land in ~/.cache/castscope/llama-tools-KEY/bin (or
# CASTSCOPE_LLAMA_TOOLS), KEY a hash of the version and the flags; later runs find them there.
#
# Prints the bin folder on its last line. Environment: JOBS (default nproc).
set -euo pipefail
VERSION=0.3.36
CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_SSE42=OFF"
CMAKE_FLAGS+=" -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_BMI2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF"
CMAKE_FLAGS+=" -DGGML_LLAMAFILE=OFF -DGGML_CPU_REPACK=OFF -DGGML_OPENMP=OFF -DGGML_CCACHE=OFF"
CMAKE_FLAGS+=" -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON"
CMAKE_FLAGS+=" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF"
CMAKE_FLAGS+=" -DLLAMA_BUILD_APP=OFF"

key=$(printf '%s %s' "$VERSION" "$CMAKE_FLAGS" | sha256sum | cut -c1-12)
dest="${CASTSCOPE_LLAMA_TOOLS:-$HOME/.cache/castscope/llama-tools-$key}"
if [[ -x "$dest/bin/llama-quantize" && -x "$dest/bin/llama-imatrix" ]]; then
  echo "$dest/bin"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "building llama-quantize and llama-imatrix of llama-cpp-python $VERSION once into $dest" >&2
python3 -m pip download -q --no-deps --no-binary :all: -d "$work" "llama-cpp-python==$VERSION" >&2
tar -xzf "$work"/llama_cpp_python-"$VERSION".tar.gz -C "$work"
src="$work/llama_cpp_python-$VERSION/vendor/llama.cpp"
start=$(date +%s)
# shellcheck disable=SC2086
cmake -S "$src" -B "$work/build" -G Ninja $CMAKE_FLAGS >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" -j "${JOBS:-$(nproc)}" --target llama-quantize llama-imatrix >&2
echo "llama tools built in $(($(date +%s) - start)) s" >&2
rm -rf "$dest.tmp-$$"
mkdir -p "$dest.tmp-$$/bin"
cp "$work/build/bin/llama-quantize" "$work/build/bin/llama-imatrix" "$dest.tmp-$$/bin/"
printf '%s\n%s\n' "llama-cpp-python $VERSION" "$CMAKE_FLAGS" >"$dest.tmp-$$/BUILD_INFO"
mkdir -p "$(dirname "$dest")"
mv -T "$dest.tmp-$$" "$dest"
echo "$dest/bin"
