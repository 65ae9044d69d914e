#!/bin/sh
# castscope-cli's exit codes are part of its contract (app/cli/command.hpp): 0 success and for
# --help / --version, 1 bad input, 2 usage error.
#   cli_exit_codes.sh CLI SOURCE_DIR
set -u
cli=$1 src=$2
layer="$src/assets/demo_layer.npy"
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() {
  want=$1
  shift
  "$cli" "$@" >/dev/null 2>&1
  got=$?
  [ "$got" -eq "$want" ] || fail "castscope-cli $* exited $got, expected $want"
}
expect 0 --help
expect 0 --version
expect 0 cast --help
expect 0 info mxfp4e2
expect 0 inspect "$layer"
expect 2
expect 2 no-such-command
expect 2 cast "$layer" --dtype mxfp4e2 --round sideways
expect 2 report "$layer" --dtype mxfp4e2 --no-such-flag
expect 2 map "$layer"
expect 2 export "$layer" "${TMPDIR:-/tmp}/castscope-never-written.safetensors" --dtype mxfp4e2 --overflow sideways
expect 1 inspect "$src/no/such/file.safetensors"
expect 1 info not_a_dtype
expect 1 report "$layer" --dtype not_a_dtype
# A fuzzed packed file (a 124-digit dimension, bad dtype strings): an error, not a crash.
expect 1 decompress "$src/fuzz/corpus/packed/finding-packed-shape-overflow.safetensors" "${TMPDIR:-/tmp}/castscope-never-written.npy"
echo "exit codes ok"
