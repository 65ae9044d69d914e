#!/usr/bin/env bash
# Configure (GUI off), build, and run the GPU tests, castscope-bench and compute-sanitizer
# (memcheck + racecheck over a reduced test filter) on a machine with an NVIDIA GPU.
# Logs go to $OUT (default ./gpu-logs); a short table is printed last.
#   STEPS="build test bench memcheck racecheck python"   which steps to run (default: these six;
#   python: the Python package's pytest suite with CUDA tensors, where nanobind and torch import)
#   "cli" (not a default): tests/gpu/time_cli.sh, `castscope-cli cast` with cpu / auto / cuda
#   "host" (not a default): castscope-bench --host, the views' update on the CPU alone
#   "map" (not a default): the model map, CPU against CUDA cell by cell on a 2-layer synthetic
#     checkpoint and its sweep with activations (MAP_ACT_TOKENS rows), then castscope-bench --map
#     on the 8B one (MAP_DIR, default ./syn8b on disk, made
#     once; MAP_LAYERS=32) from the page cache and cold
#   "ncu" (not a default) profiles the cast kernels of `castscope-bench --quick` (NCU_KERNELS regex)
#   BUILD_DIR=build-device  JOBS=$(nproc)  BENCH_ARGS=""  SAN_FILTER=...  TEST_FILTER=...
set -u -o pipefail
OUT=${OUT:-$PWD/gpu-logs}
B=${BUILD_DIR:-build-device}
JOBS=${JOBS:-$(nproc)}
STEPS=${STEPS:-"build test bench memcheck racecheck python"}
SAN_FILTER=${SAN_FILTER:-"GpuCast.AxesTwoDTilesSparsityAndSubtiles:GpuCast.InputDtypes:GpuCast.OverflowIeeeAndUnscaledFormats:GpuCast.BadInputsAreErrors:GpuStats.*:GpuGemm.*"}
mkdir -p "$OUT"
declare -A RESULT
has() { [[ " $STEPS " == *" $1 "* ]]; }
now() { date +%s; }

if has build; then
  t0=$(now)
  # The Python module must share the interpreter's libstdc++: a toolchain that links it statically
  # (the GPU image's /opt/gcc does) puts a second copy in the process and std::locale facets from
  # the two mix (a crash in std::regex). The system compiler links it dynamically.
  if [ -x /usr/bin/g++ ] && [ -z "${KEEP_CXX:-}" ]; then export CC=/usr/bin/gcc CXX=/usr/bin/g++; fi
  PY=()
  if has python && python3 -c "import nanobind, torch" 2>/dev/null; then PY=(-DCASTSCOPE_PYTHON=ON _core); fi
  cmake -S . -B "$B" -G Ninja -DCASTSCOPE_GUI=OFF -DCASTSCOPE_ONNX=OFF -DCMAKE_BUILD_TYPE=Release \
    ${PY[0]:-} >"$OUT/configure.log" 2>&1 &&
    ninja -C "$B" -k 0 -j"$JOBS" castscope_test_gpu castscope-bench castscope-cli ${PY[1]:-} \
      >"$OUT/build.log" 2>&1
  rc=$?
  RESULT[build]="rc=$rc $(( $(now) - t0 ))s"
  if [ $rc -ne 0 ]; then
    tail -20 "$OUT/configure.log"
    grep -E "error|FAILED" "$OUT/build.log" | head -40
  fi
fi
TEST_BIN="$B/tests/castscope_test_gpu"
BENCH_BIN="$B/bench/castscope-bench"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

if has test; then
  t0=$(now)
  "$TEST_BIN" --gtest_filter="${TEST_FILTER:-*}" >"$OUT/test_gpu.log" 2>&1
  rc=$?
  RESULT[test]="rc=$rc $(( $(now) - t0 ))s $(grep -E '^\[  (PASSED|FAILED)|tests? ran' "$OUT/test_gpu.log" | tr '\n' ' ')"
  grep -E "FAILED|Failure|error" "$OUT/test_gpu.log" | head -20
fi
if has bench; then
  t0=$(now)
  # shellcheck disable=SC2086
  "$BENCH_BIN" ${BENCH_ARGS:-} >"$OUT/bench.log" 2>&1
  rc=$?
  RESULT[bench]="rc=$rc $(( $(now) - t0 ))s"
  cat "$OUT/bench.log"
fi
if has cli; then
  t0=$(now)
  bash tests/gpu/time_cli.sh "$B/app/castscope-cli" "${CLI_SIZES:-1024 4096 8192 16384}" "${CLI_DTYPES:-mxfp8e4 nvfp4 tcfp12 icb44fi4_e32}" >"$OUT/cli.log" 2>&1
  rc=$?
  RESULT[cli]="rc=$rc $(( $(now) - t0 ))s"
  cat "$OUT/cli.log"
fi
if has host; then
  t0=$(now)
  "$BENCH_BIN" --host --cli "$B/app/castscope-cli" --iters 5 >"$OUT/host.log" 2>&1
  rc=$?
  RESULT[host]="rc=$rc $(( $(now) - t0 ))s"
  cat "$OUT/host.log"
fi
if has map; then
  t0=$(now)
  CLI="$B/app/castscope-cli"
  D6="--dtype mxfp4e2 --dtype nvfp4 --dtype mxfp6e2 --dtype mxfp8e4 --dtype mx6 --dtype int8_sc"
  SMALL=${MAP_SMALL:-$PWD/syn2.safetensors}
  [ -f "$SMALL" ] || python3 tools/make_synthetic_model.py "$SMALL" --layers 2 --jobs "$JOBS" >"$OUT/map.log" 2>&1
  # shellcheck disable=SC2086
  "$CLI" map "$SMALL" $D6 --json --device cpu >"$OUT/map_cpu.json" 2>>"$OUT/map.log" &&
    "$CLI" map "$SMALL" $D6 --json --device cuda >"$OUT/map_cuda.json" 2>>"$OUT/map.log" &&
    python3 tests/gpu/compare_map.py "$OUT/map_cpu.json" "$OUT/map_cuda.json" >>"$OUT/map.log" 2>&1
  rc=$?
  tail -3 "$OUT/map.log"
  # The sweep with activations on the small checkpoint: each operand uploaded once.
  "$BENCH_BIN" --map "$SMALL" --runs 1 --act-tokens "${MAP_ACT_TOKENS:-256}" >"$OUT/map_act.log" 2>&1
  cat "$OUT/map_act.log"
  MD=${MAP_DIR:-$PWD/syn8b}
  if [ ! -f "$MD/model.safetensors.index.json" ]; then
    t1=$(now)
    python3 tools/make_synthetic_model.py "$MD" --layers "${MAP_LAYERS:-32}" --embeddings --shards 4 \
      --jobs "$JOBS" >>"$OUT/map.log" 2>&1
    echo "synthetic checkpoint: $(( $(now) - t1 ))s"
  fi
  df -h "$MD" | tail -1
  t1=$(now); cat "$MD"/*.safetensors >/dev/null; echo "cat (page cache): $(( $(now) - t1 ))s"
  timeout "${MAP_TIMEOUT:-240}" "$BENCH_BIN" --map "$MD/model.safetensors.index.json" --cold \
    --runs "${MAP_RUNS:-2}" >"$OUT/map_bench.log" 2>&1
  rc2=$?
  cat "$OUT/map_bench.log"
  RESULT[map]="compare rc=$rc bench rc=$rc2 $(( $(now) - t0 ))s"
fi
if has ncu; then
  t0=$(now)
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  "$NCU" -k "regex:${NCU_KERNELS:-elementwise|fast_kernel|tcfp_kernel|reduce}" --section SpeedOfLight \
    --section Occupancy --section LaunchStats -c "${NCU_COUNT:-60}" --csv --page details \
    "$BENCH_BIN" --quick --no-gemms --no-update --iters 3 >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
  rc=$?
  RESULT[ncu]="rc=$rc $(( $(now) - t0 ))s"
fi
for tool in memcheck racecheck; do
  has $tool || continue
  t0=$(now)
  timeout "${SAN_TIMEOUT:-150}" "$SAN" --tool $tool --error-exitcode 9 "$TEST_BIN" --gtest_filter="$SAN_FILTER" \
    >"$OUT/$tool.log" 2>&1
  rc=$?
  RESULT[$tool]="rc=$rc $(( $(now) - t0 ))s $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1)"
done

if has python; then
  t0=$(now)
  if [ -d "$B/python/castscope" ]; then
    PYTHONPATH="$B/python" CASTSCOPE_CLI="$B/app/castscope-cli" python3 -m pytest -q \
      -p no:cacheprovider python/tests >"$OUT/python.log" 2>&1
    rc=$?
    RESULT[python]="rc=$rc $(( $(now) - t0 ))s $(tail -1 "$OUT/python.log")"
  else
    RESULT[python]="skipped: nanobind or torch not importable here"
  fi
fi

echo
echo "step       result"
for s in build test bench cli host map ncu memcheck racecheck python; do
  [ -n "${RESULT[$s]:-}" ] && printf '%-10s %s\n' "$s" "${RESULT[$s]}"
done
exit 0
