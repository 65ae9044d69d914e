#!/bin/sh
# castscope-cli map / report --rotate / export of a rotated plan, on the demo layer:
#   cli_map.sh CLI SOURCE_DIR WORKDIR
set -eu
cli=$1 src=$2 work=$3
mkdir -p "$work"
layer="$src/assets/demo_layer.npy"
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$cli" map "$layer" --dtype mxfp4e2 --dtype nvfp4 --csv --device cpu)
echo "$out" | head -n 1 |
  grep -q '^tensor,layer,block,shape,numel,"mxfp4e2:snr","nvfp4:snr","mxfp4e2:bits_per_value","nvfp4:bits_per_value"$' ||
  fail "csv header: $out"
[ "$(echo "$out" | wc -l)" -eq 2 ] || fail "expected one row: $out"
plain=$(echo "$out" | tail -n 1 | cut -d, -f7)

rot=$("$cli" map "$layer" --dtype mxfp4e2 --dtype nvfp4 --csv --device cpu --rotate h128r1 |
  tail -n 1 | cut -d, -f7)
# demo_layer has outlier input columns: the rotation must change (and here raise) the FP4 SNR.
awk -v a="$plain" -v b="$rot" 'BEGIN { exit !(b > a + 1) }' || fail "rotated $rot vs plain $plain"

# The map's cell and report's line are the same computation.
rep=$("$cli" report "$layer" --dtype mxfp4e2 --csv --device cpu --rotate h128r1 2>/dev/null |
  grep '^"demo_layer"')
case "$rep" in *",$rot,"*) ;; *) fail "report --rotate line '$rep' lacks the map's SNR $rot" ;; esac

json=$("$cli" map "$layer" --dtype mxfp4e2 --json --metric clipped \
  --activations synthetic:16x256:4:20:3 --act-dtype mxfp8e4 --device cpu)
echo "$json" | grep -q '"metric": "clipped"' || fail "json metric: $json"
echo "$json" | grep -q '"out_snr_db"' || fail "json has no output SNR: $json"
echo "$json" | grep -q '"out_product": "fp32 (CPU)"' || fail "json does not name the product: $json"
out=$("$cli" map "$layer" --dtype nvfp4 --csv --metric outsnr --activations synthetic:16x256:4:20:3 \
  --device cpu | tail -n 1)
osnr=$(echo "$out" | cut -d, -f7)
asnr=$(echo "$out" | cut -d, -f8)
[ -n "$osnr" ] && [ "$osnr" = "$asnr" ] || fail "outsnr metric $osnr vs output column $asnr: $out"
[ "$(echo "$out" | cut -d, -f9)" = '"fp32 (CPU)"' ] || fail "csv product column: $out"
if "$cli" map "$layer" --dtype nvfp4 --csv --metric outsnr 2>"$work/err"; then
  fail "outsnr without activations accepted"
fi

# Errors: bad rotation, both output formats, activations of the wrong width.
if "$cli" map "$layer" --dtype mxfp4e2 --csv --rotate 48 2>"$work/err"; then fail "rotate 48 accepted"; fi
grep -q "not one of 16, 32, 64, 128, 256" "$work/err" || fail "rotate 48 message: $(cat "$work/err")"
if "$cli" map "$layer" --dtype mxfp4e2 --csv --json 2>"$work/err"; then fail "--csv --json accepted"; fi
if "$cli" map "$layer" --dtype mxfp4e2 --csv --activations synthetic:4x100 2>"$work/err"; then
  fail "activations of 100 features accepted for a 256-wide weight"
fi
grep -q "have 100 features, but no tensor" "$work/err" || fail "activations message: $(cat "$work/err")"

# A rotated plan: native export records the rotation, decompress undoes it; gguf refuses.
printf '{"rules": [{"pattern": "*", "dtype": "mxfp4e2", "rotate": "h64r9"}]}\n' >"$work/plan.json"
"$cli" export "$layer" "$work/rot.safetensors" --plan "$work/plan.json" --layout native >/dev/null
grep -a -q '"demo_layer.rotate":"h64r9"' "$work/rot.safetensors" || fail "no rotate metadata"
grep -a -q '"castscope.version":"2"' "$work/rot.safetensors" || fail "rotated file not version 2"
"$cli" decompress "$work/rot.safetensors" "$work/rot.npy" >/dev/null
"$cli" cast "$layer" "$work/virtual.npy" --dtype mxfp4e2 --rotate h64r9 --device cpu >/dev/null
cmp -s "$work/rot.npy" "$work/virtual.npy" || fail "decompressed rotated export differs from the virtual cast"
if "$cli" export "$layer" "$work/rot.gguf" --plan "$work/plan.json" --layout gguf 2>"$work/err"; then
  fail "gguf accepted a rotated plan"
fi
grep -q "cannot store" "$work/err" || fail "gguf message: $(cat "$work/err")"
[ ! -e "$work/rot.gguf" ] || fail "refused export left a file"
# The --dtype shortcut takes --rotate too; a plan does not.
"$cli" export "$layer" "$work/rot2.safetensors" --dtype mxfp4e2 --rotate h64r9 -q >/dev/null
"$cli" decompress "$work/rot2.safetensors" "$work/rot2.npy" >/dev/null
cmp -s "$work/rot2.npy" "$work/virtual.npy" || fail "export --dtype --rotate differs from the virtual cast"
if "$cli" export "$layer" "$work/x.safetensors" --plan "$work/plan.json" --rotate 64 2>"$work/err"; then
  fail "--rotate accepted with --plan"
fi
echo ok
