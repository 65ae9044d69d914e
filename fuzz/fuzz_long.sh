#!/usr/bin/env bash
# Open-ended fuzzing, not run by CI: every built target in DIR for SECONDS with a fresh random
# seed, JOBS targets at a time. Inputs that reach new coverage are merged into the kept corpus
# (fuzz/corpus/<target>/), and every crashing input is copied there too as finding-<hash>, so
# that once fixed it is replayed by CI's deterministic run. Exit status 1 if anything crashed.
# Usage: fuzz/fuzz_long.sh BUILD_DIR/fuzz [SECONDS=600] [JOBS=nproc]
set -u
dir=${1:?usage: fuzz_long.sh DIR [SECONDS] [JOBS]}
secs=${2:-600}
jobs=${3:-$(nproc)}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/castscope-fuzz-long-XXXXXX")

one() {
  local bin=$1 target seed kept
  target=$(basename "$bin")
  target=${target#fuzz_}
  kept="$here/corpus/$target"
  seed=$(( (RANDOM << 15 | RANDOM) + 1 ))
  mkdir -p "$work/$target/new" "$work/$target/artifacts" "$kept"
  "$bin" -seed="$seed" -max_total_time="$secs" -print_final_stats=1 -rss_limit_mb=2048 \
    -timeout=30 -artifact_prefix="$work/$target/artifacts/" "$work/$target/new" "$kept" \
    >"$work/$target/log" 2>&1
  echo "$seed $?" >"$work/$target/result"
}

for bin in "$dir"/fuzz_*; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
  one "$bin" &
done
wait

crashed=0
printf '%-14s %12s %12s %8s %10s\n' target seed executions new_kept crashes
for res in "$work"/*/result; do
  [ -f "$res" ] || continue
  t=$(basename "$(dirname "$res")")
  read -r seed rc <"$res"
  kept="$here/corpus/$t"
  before=$(find "$kept" -type f | wc -l)
  # Keep only inputs that add coverage to the kept corpus.
  "$dir/fuzz_$t" -merge=1 -rss_limit_mb=2048 -timeout=30 "$kept" "$work/$t/new" \
    >"$work/$t/merge.log" 2>&1
  after=$(find "$kept" -type f | wc -l)
  n=0
  for a in "$work/$t/artifacts"/*; do
    [ -f "$a" ] || continue
    cp "$a" "$kept/finding-$(sha1sum "$a" | cut -c1-12)"
    n=$((n + 1))
  done
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t/log" | grep -o '[0-9]*$' | tail -1)
  printf '%-14s %12s %12s %8s %10s\n' "$t" "$seed" "${execs:-?}" "$((after - before))" "$n"
  if [ "$n" -gt 0 ] || { [ "$rc" -ne 0 ] && [ "$n" -eq 0 ]; }; then
    crashed=1
    grep -m1 -A14 'ERROR: \|runtime error\|deadly signal' "$work/$t/log" | sed 's/^/    /'
  fi
done
echo "logs: $work"
exit "$crashed"
