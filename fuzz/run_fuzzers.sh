#!/usr/bin/env bash
# Runs every built fuzz target in DIR over the kept corpus in fuzz/corpus/<target>/ with a fixed
# seed and a fixed number of executions, so the same commit always gets the same verdict (what CI
# runs). Prints executions and findings; exit status 1 if anything was found.
# Usage: fuzz/run_fuzzers.sh BUILD_DIR/fuzz [RUNS] [SEED]
# For open-ended fuzzing with fresh seeds that grows the kept corpus, see fuzz/fuzz_long.sh.
set -u
dir=${1:?usage: run_fuzzers.sh DIR [RUNS] [SEED]}
runs=${2:-${FUZZ_RUNS:-20000}}
seed=${3:-${FUZZ_SEED:-1}}
here=$(cd "$(dirname "$0")" && pwd)
# Reproducibility: one engine thread (coverage must not depend on how chunks fell to threads), a
# fixed scratch path, no corpus reloads on a timer, and no address randomization (comparisons of
# pointers feed libFuzzer's mutation dictionary).
export CASTSCOPE_THREADS=1
norand=()
if setarch "$(uname -m)" -R true 2>/dev/null; then norand=(setarch "$(uname -m)" -R); fi
work=$(mktemp -d "${TMPDIR:-/tmp}/castscope-fuzz-run-XXXXXX")
found=0
ran=0
printf 'seed %s, %s runs per target\n' "$seed" "$runs"
printf '%-14s %10s %24s %9s %s\n' target executions "coverage (cov/ft/corp)" findings artifacts
for bin in "$dir"/fuzz_*; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  name=$(basename "$bin")
  target=${name#fuzz_}
  kept="$here/corpus/$target"
  mkdir -p "$work/$target/new" "$work/$target/artifacts" "$kept"
  # New inputs go to a scratch corpus; the kept corpus is only read. The timeout is generous
  # because a slow machine must not turn into a finding.
  CASTSCOPE_FUZZ_SLOT="run-$target" "${norand[@]}" \
    "$bin" -seed="$seed" -runs="$runs" -reload=0 -print_final_stats=1 -rss_limit_mb=2048 -timeout=60 \
    -artifact_prefix="$work/$target/artifacts/" "$work/$target/new" "$kept" \
    >"$work/$target/log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$target/log" | grep -o '[0-9]*$' | tail -1)
  n=$(find "$work/$target/artifacts" -type f | wc -l)
  if [ "$rc" -ne 0 ] && [ "$n" -eq 0 ]; then n=1; fi
  cov=$(grep -o 'DONE *cov: [0-9]* ft: [0-9]* corp: [0-9]*' "$work/$target/log" | tail -1 |
    awk '{print $3"/"$5"/"$7}')
  printf '%-14s %10s %24s %9s %s\n' "$target" "${execs:-?}" "${cov:-?}" "$n" "$( [ "$n" -gt 0 ] && echo "$work/$target/artifacts (log: $work/$target/log)")"
  if [ "$n" -gt 0 ]; then
    found=1
    grep -m1 -A12 'ERROR: \|runtime error\|deadly signal' "$work/$target/log" | sed 's/^/    /'
  fi
  ran=$((ran + 1))
done
if [ "$ran" -eq 0 ]; then
  echo "no fuzz targets in '$dir' (configure with -DCASTSCOPE_FUZZ=ON and build them)" >&2
  exit 2
fi
[ "$found" -eq 0 ] && rm -rf "$work"
exit "$found"
