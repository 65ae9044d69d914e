#!/bin/sh
# castscope-cli plan --budget / --budget-bytes / --pareto on the demo layer, the refusal of a
# budget below the smallest plan, and export of the plan it writes:
#   cli_plan.sh CLI SOURCE_DIR WORKDIR
set -eu
cli=$1 src=$2 work=$3
mkdir -p "$work"
layer="$src/assets/demo_layer.npy"
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$cli" plan "$layer" --budget 6.3 --device cpu -o "$work/plan.json")
echo "$out" | grep -q 'mxfp6e2' || fail "6.3 bits per weight should buy mxfp6e2: $out"
grep -q '"budget"' "$work/plan.json" || fail "plan has no budget: $(cat "$work/plan.json")"
grep -q '"bits_per_weight": 6.3' "$work/plan.json" || fail "budget figure: $(cat "$work/plan.json")"
grep -q '"predicted"' "$work/plan.json" || fail "plan has no predicted error"
"$cli" export "$layer" "$work/out.safetensors" --plan "$work/plan.json" --device cpu -q \
  >/dev/null || fail "export of the budget plan"

# One byte short of the smallest plan (mxfp4e2: 4.25 bits of 192x256) is refused, naming it.
min=$((192 * 256 * 17 / 32))
if err=$("$cli" plan "$layer" --budget-bytes $((min - 1)) --device cpu 2>&1); then
  fail "a budget below the smallest plan was accepted: $err"
fi
echo "$err" | grep -q "smallest plan the candidates allow: 4.2500 bits per weight ($min bytes)" ||
  fail "refusal message: $err"
"$cli" plan "$layer" --budget-bytes $min --device cpu >/dev/null || fail "the smallest plan fits"

csv=$("$cli" plan "$layer" --pareto --budget 6.3 --csv --device cpu --activations synthetic:16)
echo "$csv" | head -n 1 | grep -q '^bits,bits_per_weight,predicted_error,chosen$' ||
  fail "pareto csv header: $csv"
[ "$(echo "$csv" | grep -c ',1$')" -eq 1 ] || fail "one chosen point: $csv"
# Bits ascend and the error descends along the curve.
echo "$csv" | tail -n +2 | awk -F, 'NR > 1 && ($1 <= b || $3 >= e) { exit 1 } { b = $1; e = $3 }' ||
  fail "curve not monotone: $csv"

json=$("$cli" plan "$layer" --pareto --json --device cpu)
echo "$json" | grep -q '"pareto"' || fail "pareto json: $json"
echo "$json" | grep -q '"error": "relative"' || fail "relative errors by default: $json"
abs=$("$cli" plan "$layer" --pareto --json --absolute --device cpu)
echo "$abs" | grep -q '"error": "absolute"' || fail "--absolute: $abs"
if "$cli" plan "$layer" --absolute >/dev/null 2>&1; then
  fail "--absolute without a budget"
fi
if "$cli" plan "$layer" --budget 5 --budget-bytes 100 >/dev/null 2>&1; then
  fail "--budget and --budget-bytes together"
fi
# --axis-for: the tensors' layout is the override's (the planner casts along axis 0) and the
# plan written keeps it as an axis-only rule ahead of the picks, so the export casts along it.
json=$("$cli" plan "$layer" --budget 6.3 --device cpu --json --axis-for 'demo_*=0' \
  -o "$work/plan_axis.json")
echo "$json" | grep -q '"axis": "0"' || fail "budget plan --axis-for: axis: $json"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["rules"]
assert r[0] == {"pattern": "demo_*", "axis": 0} and "dtype" in r[1], r
assert json.load(open(sys.argv[1]))["budget"]["bits_per_weight"] == 6.3' "$work/plan_axis.json" ||
  fail "budget plan --axis-for: rules: $(cat "$work/plan_axis.json")"
out=$("$cli" export "$layer" "$work/axis.safetensors" --plan "$work/plan_axis.json" --device cpu)
echo "$out" | grep -q 'demo_layer .*: axis 0:192' || fail "export of the --axis-for plan: $out"
out=$("$cli" plan "$layer" --snr 20 --device cpu --axis-for 'demo_*=0' -o "$work/auto_axis.json")
echo "$out" | grep -q '^demo_layer  *\[192, 256\]  *0 ' || fail "plan --axis-for: $out"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["rules"]
assert r[0] == {"pattern": "demo_*", "axis": 0} and "dtype" in r[1], r' "$work/auto_axis.json" ||
  fail "plan --axis-for: rules: $(cat "$work/auto_axis.json")"
if err=$("$cli" plan "$layer" --budget 6.3 --axis-for 'demo_*' 2>&1); then
  fail "--axis-for without an axis was accepted"
fi
echo "$err" | grep -q "PATTERN=AXIS" || fail "--axis-for refusal: $err"

echo "cli_plan: ok"
