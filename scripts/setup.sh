#!/usr/bin/env bash
# Installs what CastScope needs on Debian 12 (run as root or with sudo).
#   bash scripts/setup.sh         the app and the CLI: compilers, CMake, and the libraries they
#                                 link (Dear ImGui, GLFW, OpenGL, CLI11, nlohmann-json, zlib,
#                                 libzip, ONNX); a few hundred MB of Debian packages, no Python
#   bash scripts/setup.sh --dev   everything above plus what the tests, benchmarks and fuzzers
#                                 use (GoogleTest, Google Benchmark, clang, Xvfb, and the Python
#                                 packages the interop tests load the exports with: PyTorch CPU,
#                                 transformers, compressed-tensors, torchao, gguf, ...); what CI runs
set -euo pipefail
DEV=0
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    *)
      echo "usage: bash scripts/setup.sh [--dev]" >&2
      exit 2
      ;;
  esac
done
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# Build and GUI: what `cmake --build build --target castscope castscope-cli` needs.
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libcli11-dev nlohmann-json3-dev zlib1g-dev libzip-dev libonnx-dev libprotobuf-dev
  protobuf-compiler
  libimgui-dev libglfw3-dev libstb-dev libgl-dev libgl1-mesa-dri libglx-mesa0
)
if [ "$DEV" = 1 ]; then
  # Tests, benchmarks, fuzzers (clang), the GUI tests' virtual display, the Python package.
  PACKAGES+=(git ccache clang libgtest-dev libgmock-dev libbenchmark-dev xvfb xauth python3 python3-pip
    python3-venv)
fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# nvcc ships with the CUDA toolkit under /usr/local/cuda when it is installed.
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "note: add /usr/local/cuda/bin to PATH to build the CUDA backend"
fi
[ "$DEV" = 1 ] || exit 0

# The interop test decodes CastScope's exports with numpy + safetensors, independently of C++.
python3 -c "import numpy, safetensors" 2>/dev/null || python3 -m pip install -q numpy safetensors
# The Python package: its build backend and binding library, and its tests.
python3 -c "import scikit_build_core, nanobind, pytest, ml_dtypes" 2>/dev/null ||
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q scikit-build-core nanobind pytest ml_dtypes
# The model-directory test builds its inputs with transformers and decodes the exports with
# compressed-tensors' and transformers' own code (both need PyTorch; its CPU build suffices).
# accelerate: transformers' MXFP4 (gpt-oss) loader needs it unless asked to dequantize.
python3 -c "import torch, transformers, compressed_tensors, accelerate" 2>/dev/null ||
  python3 -m pip install -q torch transformers compressed-tensors accelerate
# torchao's MX reference (to_mx / to_dtype) for the Python package's parity test: pinned, since
# that API is a prototype and moves between releases.
python3 -c "import torchao" 2>/dev/null || python3 -m pip install -q torchao==0.18.0
# bitsandbytes' own 4-bit quantization and dequantize_4bit (its CPU backend) for the NF4 / FP4
# checkpoint test.
python3 -c "import bitsandbytes" 2>/dev/null || python3 -m pip install -q bitsandbytes==0.50.2
# The GGUF tests read and write GGUF with ggml's own Python package.
python3 -c "import gguf" 2>/dev/null || python3 -m pip install -q gguf
# llama.cpp itself, through its Python binding, for tests/interop/test_llama_cpp.py: compiled once
# from PyPI's source into ~/.cache/castscope/wheels, installed from there afterwards.
bash "$(dirname "$0")/setup-llama-cpp.sh"
# llama.cpp's llama-imatrix and llama-quantize, for tests/interop/test_imatrix_llama.py: built
# once from the same source into ~/.cache/castscope/llama-tools-KEY.
bash "$(dirname "$0")/setup-llama-tools.sh" >/dev/null
# End-to-end evaluation (castscope.evaluate / castscope-cli eval) runs ONNX models in
# onnxruntime, edits their graphs with onnx, and its tests render text-line images with Pillow.
python3 -c "import onnx, onnxruntime, PIL" 2>/dev/null ||
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q onnx onnxruntime Pillow
# The real model of the evaluation and layout tests: PaddleOCR v4's text recognizer, as shipped in the
# rapidocr-onnxruntime wheel (downloaded once, only the model kept; tests look for it here).
models="${CASTSCOPE_TEST_MODELS:-$HOME/.cache/castscope/models}"
if [ ! -s "$models/ch_PP-OCRv4_rec_infer.onnx" ]; then
  mkdir -p "$models"
  wheel_dir=$(mktemp -d)
  if python3 -m pip download -q --no-deps rapidocr-onnxruntime==1.4.4 -d "$wheel_dir"; then
    python3 -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
open(sys.argv[2], 'wb').write(z.read('rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx'))" \
      "$wheel_dir"/rapidocr_onnxruntime-1.4.4-*.whl "$models/ch_PP-OCRv4_rec_infer.onnx.part" &&
      mv "$models/ch_PP-OCRv4_rec_infer.onnx.part" "$models/ch_PP-OCRv4_rec_infer.onnx"
  fi
  rm -rf "$wheel_dir"
fi
# llm-compressor, the GPTQ peer of tests/interop/test_gptq_peer.py, pins torch, transformers and
# compressed-tensors versions other than the ones the other tests use: its own virtual
# environment over the system packages, with its pinned compressed-tensors and the packages its
# import needs, so nothing else changes (quantize_weight needs torch only).
llmc="$HOME/.cache/castscope/venv-llmcompressor"
if ! "$llmc/bin/python" -c "import llmcompressor.modifiers.gptq.gptq_quantize" 2>/dev/null; then
  python3 -m venv --system-site-packages "$llmc"
  "$llmc/bin/python" -m pip install -q --no-deps llmcompressor==0.14.0.1 compressed-tensors==0.19.0
  "$llmc/bin/python" -m pip install -q datasets==5.2.0
fi
# The layout tests (tests/interop/test_layouts.py, python/tests/test_layouts.py) build ONNX graphs
# with the onnx package and read the same recognizer from "$models".
python3 -c "import onnx" 2>/dev/null || python3 -m pip install -q onnx
