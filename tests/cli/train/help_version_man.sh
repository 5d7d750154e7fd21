#!/usr/bin/env bash
# cudaagent-train: --help and --version exit 0 (--version also without a subcommand and lists
# torch); every long option of every subcommand's --help is in man/cudaagent-train.1 and every
# option the man page names exists; an unknown flag exits 2.
source "$(dirname "$0")/../lib.sh"
bin=$1
tool=cudaagent-train
root=$(cd "$(dirname "$0")/../../.." && pwd)
"$bin/$tool" --help >"$scratch/help" || fail "--help exited $?"
"$bin/$tool" --version >"$scratch/version" || fail "--version exited $?"
for dep in simdjson torch PCRE2 utf8proc libmicrohttpd; do
  grep -q "$dep:" "$scratch/version" || fail "--version lacks $dep"
done
for command in serve tokenize logprobs bench; do
  grep -q "^  $command" "$scratch/help" || fail "--help lacks the $command subcommand"
  "$bin/$tool" "$command" --help >>"$scratch/help" || fail "$command --help exited $?"
done
grep -oE -- '--[a-z][a-z0-9-]+' "$scratch/help" | sort -u >"$scratch/help-options"
grep -oE -- '\\-\\-[a-z][a-z0-9\\-]+' "$root/man/$tool.1" | sed 's/\\//g' | sort -u >"$scratch/man-options"
if ! diff -u "$scratch/help-options" "$scratch/man-options"; then
  fail "options in --help and man/$tool.1 differ (- help, + man)"
fi
code=0
"$bin/$tool" serve --no-such-flag >/dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "unknown flag exited $code, expected 2"
echo "ok"
