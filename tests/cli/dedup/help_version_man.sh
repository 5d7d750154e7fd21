#!/usr/bin/env bash
# The shared --help/--version/man checks; dedup offers no --db, and its man page names the
# similarity measure its records carry.
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
bash "$(dirname "$0")/../check_help_version_man.sh" "$bin" cudaagent-dedup --threshold >/dev/null ||
  fail "shared checks"
"$bin/cudaagent-dedup" --help | grep -q -- "--db" && fail "--help offers --db, which dedup does not use"
# The whole output first: dedup streams, and a reader that stops after one line ends it with 141.
out=$("$bin/cudaagent-dedup" -q "$root/share/examples/dedup/tasks.jsonl") || fail "dedup exited $?"
measure=$(sed -n 1p <<<"$out" | grep -oE '"measure":"[^"]+"' | cut -d'"' -f4)
[[ -n $measure ]] || fail "no measure in the output"
grep -qF -- "$measure" "$root/man/cudaagent-dedup.1" || fail "man page does not name the measure $measure"
echo "ok"
