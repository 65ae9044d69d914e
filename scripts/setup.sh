#!/usr/bin/env bash
# Installs everything CastScope needs to build and test on Debian 12 (run as root or with sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
PACKAGES=(
  build-essential cmake ninja-build pkg-config git clang
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  zlib1g-dev libzip-dev libonnx-dev libprotobuf-dev protobuf-compiler
  libimgui-dev libglfw3-dev libstb-dev libgl-dev libgl1-mesa-dri libglx-mesa0
  xvfb xauth python3 python3-pip
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
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
# The GGUF tests read and write GGUF with ggml's own Python package.
python3 -c "import gguf" 2>/dev/null || python3 -m pip install -q gguf
# The layout test (tests/interop/test_layouts.py) builds ONNX graphs with the onnx package and
# reads PaddleOCR's v4 recognizer from the rapidocr-onnxruntime wheel, kept in a cache so that a
# CI run downloads it once.
python3 -c "import onnx" 2>/dev/null || python3 -m pip install -q onnx
layout_cache="${CASTSCOPE_TEST_CACHE:-$HOME/.cache/castscope-tests}"
ls "$layout_cache"/rapidocr_onnxruntime-1.4.4-*.whl >/dev/null 2>&1 ||
  python3 -m pip download -q --no-deps rapidocr-onnxruntime==1.4.4 -d "$layout_cache" ||
  echo "note: could not download rapidocr-onnxruntime; the layout test skips PaddleOCR"
# nvcc ships with the CUDA toolkit under /usr/local/cuda when it is installed.
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "note: add /usr/local/cuda/bin to PATH to build the CUDA backend"
fi
