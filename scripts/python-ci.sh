#!/usr/bin/env bash
# Builds and installs the Python package with pip, then runs its pytest suite against the
# castscope-cli of the main build (results must equal the CLI's bits). The package is built with
# the CPU engine only, into a kept build directory, so this second engine build stays cheap; the
# CUDA path of the package is tested on the GPU machine (python/tests/test_gpu.py).
#
# usage: scripts/python-ci.sh [PATH/TO/castscope-cli]     (default: build-ci/app/castscope-cli)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
cli=$(realpath "${1:-${CASTSCOPE_CLI:-build-ci/app/castscope-cli}}")
export PIP_BREAK_SYSTEM_PACKAGES=1  # Debian's python3 refuses pip installs without it
start=$(date +%s)
python3 -m pip install -q --no-build-isolation -Cbuild-dir="$root/build-py" \
  -Ccmake.define.CASTSCOPE_CUDA="${CASTSCOPE_PY_CUDA:-OFF}" "$root"
echo "python package built and installed after $(( $(date +%s) - start )) s"
# From outside the source tree, so that the installed package is the one imported.
cd /tmp
CASTSCOPE_CLI="$cli" python3 -m pytest -q -p no:cacheprovider "$root/python/tests"
