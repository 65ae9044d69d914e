#!/usr/bin/env bash
# Whole-process wall time of `castscope-cli cast` with --device cpu, auto and cuda, interleaved,
# for float32 tensors of several sizes and datatypes: what Device::Auto's threshold is measured
# from (docs/performance.md, "Start-up"). Prints the median of REPS runs per cell.
#   tests/gpu/time_cli.sh build-device/app/castscope-cli [SIZES] [DTYPES] [REPS]
set -u
CLI=${1:?castscope-cli path}
SIZES=${2:-"1024 4096 8192 16384"}
DTYPES=${3:-"mxfp8e4 nvfp4 tcfp12 icb44fi4_e32"}
REPS=${4:-5}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
now_ms() { date +%s%N | awk '{printf "%.1f", $1 / 1e6}'; }
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
printf '%-7s %-14s %10s %10s %10s\n' size dtype "cpu ms" "auto ms" "cuda ms"
for n in $SIZES; do
  python3 -c "import numpy as np; np.save('$DIR/x.npy', np.random.default_rng(5).standard_normal(($n, $n), dtype=np.float32))" || exit 1
  cat "$DIR/x.npy" >/dev/null
  for d in $DTYPES; do
    declare -A T=()
    for r in $(seq 0 "$REPS"); do
      for dev in cpu auto cuda; do
        t0=$(now_ms)
        "$CLI" cast "$DIR/x.npy" "$DIR/y.npy" --dtype "$d" --stats --device "$dev" >"$DIR/out.$dev" 2>&1 || {
          echo "FAILED: $n $d $dev"; cat "$DIR/out.$dev"; }
        t1=$(now_ms)
        [ "$r" -gt 0 ] && T[$dev]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}') "
      done
    done
    printf '%-7s %-14s %10s %10s %10s   (auto ran on: %s)\n' "$n" "$d" \
      "$(echo ${T[cpu]} | tr ' ' '\n' | median)" "$(echo ${T[auto]} | tr ' ' '\n' | median)" \
      "$(echo ${T[cuda]} | tr ' ' '\n' | median)" "$(grep -o 'backend [a-z]*' "$DIR/out.auto")"
    unset T
  done
done
