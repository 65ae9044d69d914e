#!/bin/sh
# Messages on bad input name what is wrong: a truncated ONNX file (truncated or not ONNX, and its
# size), a text file named .safetensors (not a safetensors file), a folder of several bad files
# (every one), and `eval` without the Python package (a virtual environment and
# CASTSCOPE_PYTHON, not PIP_BREAK_SYSTEM_PACKAGES).
#   cli_messages.sh CLI SOURCE_DIR
set -eu
cli=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect WORDS... -- ARGS: the command fails (exit 1) and stderr holds every word.
expect() {
  words=""
  while [ "$1" != "--" ]; do words="$words
$1"; shift; done
  shift
  if "$cli" "$@" >"$work/out" 2>"$work/err"; then fail "$* succeeded"; fi
  echo "$words" | while IFS= read -r w; do
    [ -z "$w" ] || grep -qF -- "$w" "$work/err" || fail "$*: no '$w' in: $(cat "$work/err")"
  done
}

# A real ONNX model cut short (the first half of the demo graph's bytes).
python3 - "$work/whole.onnx" <<'PY' || { echo "skipping: python3 with onnx needed"; exit 77; }
import sys
try:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save
except ImportError:
    sys.exit(1)
w = numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(64, 64), "w")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [w])
save(helper.make_model(g), sys.argv[1])
PY
size=$(wc -c <"$work/whole.onnx")
half=$((size / 2))
head -c "$half" "$work/whole.onnx" >"$work/cut.onnx"
expect "truncated or not an ONNX model" "$half bytes" "cut.onnx" -- inspect "$work/cut.onnx"

printf 'this is a text file, not tensors\nsecond line\n' >"$work/notes.safetensors"
expect "not a safetensors file" "notes.safetensors" -- inspect "$work/notes.safetensors"

mkdir "$work/folder"
cp "$work/cut.onnx" "$work/folder/a.onnx"
cp "$work/notes.safetensors" "$work/folder/b.safetensors"
head -c 5 "$work/notes.safetensors" >"$work/folder/c.safetensors"
"$cli" inspect "$work/whole.onnx" >/dev/null || fail "the whole ONNX file does not open"
cp "$work/whole.onnx" "$work/folder/good.onnx"
expect "3 of 4 files cannot be read" "a.onnx" "b.safetensors" "c.safetensors" -- \
  inspect "$work/folder"

# An interpreter without the castscope package: isolated, no site-packages.
cat >"$work/py" <<'SH'
#!/bin/sh
exec python3 -I -S "$@"
SH
chmod +x "$work/py"
CASTSCOPE_PYTHON="$work/py" expect "virtual environment" "python3 -m venv" "CASTSCOPE_PYTHON" \
  -- eval "$work/whole.onnx" --plan mxfp4e2
if grep -q PIP_BREAK_SYSTEM_PACKAGES "$work/err"; then fail "eval advises PIP_BREAK_SYSTEM_PACKAGES"; fi
echo ok
