#!/bin/sh
# Runs one scripted session of the app under a virtual X server and checks what it left:
#   run_session.sh APP CHECKER SCRIPT OUTDIR
# The script's first line that starts with "#check" lists the checker's expectations.
set -eu
app=$1 checker=$2 script=$3 out=$4
mkdir -p "$out"
cd "$out"
rm -f ./*.png state.json
# Recent files and settings go to the session's own directory, never the user's.
XDG_CONFIG_HOME="$out/config"
export XDG_CONFIG_HOME
rm -rf "$out/config"
expect=$(sed -n 's/^#check //p' "$script" | head -n 1)
xvfb-run -a -s "-screen 0 1600x1000x24" "$app" --script "$script" --state state.json
# shellcheck disable=SC2086
"$checker" state.json $expect
