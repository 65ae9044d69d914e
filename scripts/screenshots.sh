#!/usr/bin/env bash
# Regenerates every image in docs/screenshots from the current build. Each GUI session script
# (tests/gui/scripts/*.txt) whose #check line names one of those images with png= runs under a
# virtual X server (tests/gui/run_session.sh); castscope_gui_check checks its state and that each
# image is not blank; the images are then copied to OUT_DIR. Fails when a session fails or when an
# image of docs/screenshots is made by no session (a stale picture left behind).
#   scripts/screenshots.sh [BUILD_DIR [OUT_DIR]]    defaults: build, docs/screenshots
# To add an image: save it in a session (screenshot / save-view), name it with png= on the
# session's #check line and put a first copy in docs/screenshots.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
out=${2:-docs/screenshots}
app=$build/app/castscope
checker=$build/tests/castscope_gui_check
for f in "$app" "$checker"; do
  if [ ! -x "$f" ]; then
    echo "screenshots: $f is not built (cmake --build $build --target castscope castscope_gui_check)" >&2
    exit 2
  fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
made=""
for script in "$PWD"/tests/gui/scripts/*.txt; do
  wanted=""
  for p in $(sed -n 's/^#check //p' "$script" | head -n 1 | tr ' ' '\n' | sed -n 's/^png=//p'); do
    if [ -f "docs/screenshots/$p" ]; then wanted="$wanted $p"; fi
  done
  [ -n "$wanted" ] || continue
  name=$(basename "$script" .txt)
  echo "== $name:$wanted"
  rc=0
  sh tests/gui/run_session.sh "$app" "$checker" "$script" "$work/$name" || rc=$?
  if [ "$rc" = 77 ]; then
    # A session on a test model that is not here (scripts/setup.sh --dev fetches it): its images
    # stay as they are.
    echo "screenshots: $name skipped; kept$wanted" >&2
    made="$made $wanted"
    continue
  fi
  [ "$rc" = 0 ] || exit "$rc"
  for p in $wanted; do
    cp "$work/$name/$p" "$out/$p"
    made="$made $p"
  done
done
status=0
for f in docs/screenshots/*.png; do
  p=$(basename "$f")
  case " $made " in
    *" $p "*) ;;
    *) echo "screenshots: no session makes $p" >&2; status=1 ;;
  esac
done
n=$(echo "$made" | wc -w)
echo "screenshots: $n images written to $out"
exit $status
