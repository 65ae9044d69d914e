#!/bin/sh
# castscope-cli plan --layout: each tensor's candidates restricted to what the layout holds along
# its axis, so the plan exports in that layout; without --layout a plan no layout holds is warned
# about (tests/planner/test_layout_fit.cpp); a ggml type along a MatMul B's axis 0 is refused by name.
#   cli_plan_layout.sh CLI SOURCE_DIR WORKDIR [MODEL]   (MODEL: PaddleOCR v4's recognizer,
#   default ~/.cache/castscope/models/ch_PP-OCRv4_rec_infer.onnx, which scripts/setup.sh fetches)
set -eu
cli=$1 src=$2 work=$3
model=${4:-$HOME/.cache/castscope/models/ch_PP-OCRv4_rec_infer.onnx}
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ ! -f "$model" ]; then
  echo "skipping: $model not found (scripts/setup.sh fetches it)"
  exit 77
fi
cands=nvfp4,mxfp4e2,q4_k,mxfp8e4

# The engine refuses q4_k along a MatMul B's reduction axis 0 by name (no runtime holds it),
# in the model map as in a cast, instead of computing it along another axis.
map=$("$cli" map "$model" --dtype q4_k --dtype nvfp4 --json --device cpu --filter '^linear_85\.w_0$')
echo "$map" | grep -q '"error": "q4_k quantizes blocks along the last axis' ||
  fail "q4_k on linear_85.w_0 along axis 0 was not refused by name: $map"

for layout in native gguf compressed-tensors gpt-oss; do
  ext=safetensors
  [ "$layout" = gguf ] && ext=gguf
  plan="$work/plan-$layout.json"
  rm -rf "$work/$layout" "$plan"
  mkdir -p "$work/$layout"
  "$cli" plan "$model" --candidates "$cands" --budget 4.5 --layout "$layout" --device cpu \
    -o "$plan" >"$work/plan-$layout.txt" 2>"$work/plan-$layout.err" ||
    fail "plan --layout $layout: $(cat "$work/plan-$layout.err")"
  [ -f "$plan" ] || fail "plan --layout $layout wrote no plan"
  if grep -q 'no export layout holds' "$work/plan-$layout.err"; then
    fail "plan --layout $layout was warned about: $(cat "$work/plan-$layout.err")"
  fi
  "$cli" export "$model" "$work/$layout/m.$ext" --plan "$plan" --layout "$layout" -q \
    --device cpu 2>"$work/export-$layout.err" ||
    fail "export of the --layout $layout plan: $(cat "$work/export-$layout.err")"
done
# The native plan casts most weights, and none of the MatMul B [K, N] tensors to q4_k.
n=$(grep -c '"dtype"' "$work/plan-native.json")
[ "$n" -ge 40 ] || fail "the native plan casts only $n tensors"
grep -A2 '"axis": "0"' "$work/plan-native.json" | grep -q '"q4_k"' &&
  fail "the native plan puts q4_k on a tensor reduced along axis 0"
# The other layouts hold none of these datatypes on PaddleOCR's convs and MatMul B weights:
# their plans keep every tensor, and say so.
grep -q 'holds none of the candidates' "$work/plan-gguf.txt" "$work/plan-gguf.err" ||
  fail "the gguf plan does not say it keeps everything"

# Without --layout the planner's casts are the engine's, which refuses ggml types off the rows:
# the native layout holds the plan, so there is no warning, and it exports.
"$cli" plan "$model" --candidates "$cands" --budget 4.5 --device cpu -o "$work/plan-any.json" \
  >/dev/null 2>"$work/plan-any.err" || fail "plan without --layout"
if grep -q 'no export layout holds' "$work/plan-any.err"; then
  fail "warned about a plan the native layout holds: $(cat "$work/plan-any.err")"
fi
"$cli" export "$model" "$work/any.safetensors" --plan "$work/plan-any.json" -q --device cpu ||
  fail "export of the plan made without --layout"
echo ok
