#!/usr/bin/env bash
# Runs every built fuzz target in DIR for SECONDS each, starting from the kept corpus in
# fuzz/corpus/<target>/, and prints executions and findings. Exit status 1 if anything was found.
# Usage: fuzz/run_fuzzers.sh BUILD_DIR/fuzz SECONDS
set -u
dir=${1:?usage: run_fuzzers.sh DIR SECONDS}
secs=${2:?usage: run_fuzzers.sh DIR SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/castscope-fuzz-run-XXXXXX")
found=0
ran=0
printf '%-22s %12s %10s %s\n' target executions findings artifacts
for bin in "$dir"/fuzz_*; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  name=$(basename "$bin")
  target=${name#fuzz_}
  kept="$here/corpus/$target"
  mkdir -p "$work/$target/new" "$work/$target/artifacts"
  # New inputs go to a scratch corpus; the kept corpus is only read.
  "$bin" -max_total_time="$secs" -print_final_stats=1 -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$work/$target/artifacts/" "$work/$target/new" ${kept:+$( [ -d "$kept" ] && echo "$kept")} \
    >"$work/$target/log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$target/log" | grep -o '[0-9]*$' | tail -1)
  n=$(find "$work/$target/artifacts" -type f | wc -l)
  if [ "$rc" -ne 0 ] && [ "$n" -eq 0 ]; then n=1; fi
  printf '%-22s %12s %10s %s\n' "$target" "${execs:-?}" "$n" "$( [ "$n" -gt 0 ] && echo "$work/$target/artifacts (log: $work/$target/log)")"
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
