#!/bin/sh
# Runs one scripted session of the app under a virtual X server and checks what it left:
#   run_session.sh APP CHECKER SCRIPT OUTDIR
# The script's first line that starts with "#check" lists the checker's expectations; a line
# "#args ..." gives the app more options (--width W --height H --ui-scale S); the virtual screen
# is made large enough for the window; "#env NAME=VALUE ..." sets the app's environment.
set -eu
app=$1 checker=$2 script=$3 out=$4
mkdir -p "$out"
cd "$out"
rm -f ./*.png state.json
# Recent files and settings go to the session's own directory, never the user's.
XDG_CONFIG_HOME="$out/config"
export XDG_CONFIG_HOME
rm -rf "$out/config"
# "@MODELS@" in a script is the test models' folder (scripts/setup.sh --dev fills it); a line
# "#needs FILE" skips the session (exit 77) when FILE is missing.
models=${CASTSCOPE_TEST_MODELS:-$HOME/.cache/castscope/models}
needs=$(sed -n 's/^#needs //p' "$script" | head -n 1 | sed "s|@MODELS@|$models|g")
if [ -n "$needs" ] && [ ! -e "$needs" ]; then
  echo "skipped: $needs not found (scripts/setup.sh --dev fetches it)"
  exit 77
fi
sed "s|@MODELS@|$models|g" "$script" > "$out/session.txt"
script=$out/session.txt
expect=$(sed -n 's/^#check //p' "$script" | head -n 1)
args=$(sed -n 's/^#args //p' "$script" | head -n 1)
envs=$(sed -n 's/^#env //p' "$script" | head -n 1)
w=$(echo "$args" | sed -n 's/.*--width \([0-9]*\).*/\1/p')
h=$(echo "$args" | sed -n 's/.*--height \([0-9]*\).*/\1/p')
w=${w:-1600} h=${h:-1000}
[ "$w" -ge 1600 ] || w=1600
[ "$h" -ge 1000 ] || h=1000
# shellcheck disable=SC2086
env $envs xvfb-run -a -s "-screen 0 ${w}x${h}x24" "$app" --script "$script" --state state.json $args
# shellcheck disable=SC2086
"$checker" state.json $expect
