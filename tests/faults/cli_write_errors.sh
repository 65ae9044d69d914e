#!/bin/sh
# Every castscope-cli command that writes names the path the user gave when it cannot write
# there, never a temporary file beside it (*.staged-*, *.tmp-*, *.check-*, *.spill-*), and
# exits 1 leaving nothing behind.
#   cli_write_errors.sh CLI SOURCE_DIR
set -u
cli=$1 src=$2
layer="$src/assets/demo_layer.npy"
work=$(mktemp -d "${TMPDIR:-/tmp}/castscope-write-errors-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
missing="$work/missing/dir"
# check TARGET CLI-ARGS...: the command fails with exit 1 and a message naming TARGET only.
check() {
  target=$1
  shift
  "$cli" "$@" >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" -eq 1 ] || fail "castscope-cli $* exited $rc, expected 1: $(cat "$work/err")"
  grep -qF "'$target'" "$work/err" || fail "castscope-cli $*: message does not name '$target': $(cat "$work/err")"
  if grep -qE 'staged|\.tmp-|\.check-|\.spill-' "$work/err"; then
    fail "castscope-cli $*: message names a temporary file: $(cat "$work/err")"
  fi
  [ ! -e "$work/missing" ] || fail "castscope-cli $* left $work/missing behind"
}
check "$missing/o.npy" cast "$layer" "$missing/o.npy" --dtype mxfp4e2 --device cpu
check "$missing/o.safetensors" cast "$layer" "$missing/o.safetensors" --dtype mxfp6e2 --mode compress --device cpu
for layout in native gpt-oss compressed-tensors; do
  check "$missing/o.safetensors" export "$layer" "$missing/o.safetensors" --dtype mxfp4e2 --layout "$layout" --device cpu -q
done
check "$missing/o.gguf" export "$layer" "$missing/o.gguf" --dtype q4_0 --layout gguf --device cpu -q
"$cli" cast "$layer" "$work/p.safetensors" --dtype mxfp6e2 --mode compress --device cpu >/dev/null ||
  fail "cast --mode compress"
check "$missing/o.npy" decompress "$work/p.safetensors" "$missing/o.npy"
check "$missing/plan.json" plan "$layer" -o "$missing/plan.json" --device cpu
echo "write errors ok"
