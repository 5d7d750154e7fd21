#!/usr/bin/env bash
# Each RL subcommand's --help and its man section (shared options plus its own) name the same
# options; --help and --version exit 0; a missing subcommand or an unknown flag exits 2.
source "$(dirname "$0")/lib.sh" "$1"
root=$(cd "$here/../.." && pwd)
page=$root/man/cudaagent-train.1
# The long options of the man text between two section headings (roff writes \-\-name).
options_between() {
  awk -v start="$1" '$0 == start {on = 1; next} /^\.S[SH] / {on = 0} on' "$page" |
    grep -oE -- '\\-\\-[a-z][a-z0-9\\-]+' | sed 's/\\//g' | sort -u
}
options_between ".SS Options of all three" >"$scratch/shared"
for sub in rft value ppo; do
  train "$sub" --help >"$scratch/help" || fail "$sub --help exited $?"
  grep -oE -- '--[a-z][a-z0-9-]+' "$scratch/help" | grep -v -x -- '--help' | sort -u >"$scratch/help-options"
  { options_between ".SS $sub"; cat "$scratch/shared"; } | sort -u >"$scratch/man-options"
  # The shared section names options of other sections in prose (--kl-horizon); keep the set fair.
  if ! diff -u "$scratch/help-options" "$scratch/man-options"; then
    fail "$sub: options in --help and the man section differ (- help, + man)"
  fi
done
train --help >"$scratch/help" || fail "--help exited $?"
for sub in rft value ppo; do grep -q "^  $sub " "$scratch/help" || fail "--help lacks $sub"; done
train --version | grep -q "^cudaagent-train " || fail "--version lacks the program line"
code=0
train >/dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "no subcommand exited $code, expected 2"
code=0
train ppo --run "$scratch/r" --actor toy --critic toy --no-such-flag >/dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "unknown flag exited $code, expected 2"
code=0
train ppo --run "$scratch/r" --actor toy --critic toy --clip-ratio-c 0.5 /dev/null >/dev/null 2>&1 || code=$?
[[ $code == 1 ]] || fail "a dual-clip bound below 1 exited $code, expected 1"
echo ok
