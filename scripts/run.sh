#!/usr/bin/env bash
# Sets up, builds and opens CastScope on its embedded demo tensors. Pass --headless on a
# machine without a display (it then loads the demo, casts it, prints a summary and exits).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
exec ./build/app/castscope "$@"
