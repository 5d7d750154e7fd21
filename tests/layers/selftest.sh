#!/usr/bin/env bash
# check_layers.py must fail on each kind of violation: a tiny tree with one of each.
set -euo pipefail
checker=$(cd "$(dirname "$0")" && pwd)/check_layers.py
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/lib/{base,records,verify,profile,include/cudaagent/{base,records,verify,profile}} "$tree"/tools/verify
echo 'cudaagent_add_library(base)' >"$tree/lib/base/CMakeLists.txt"
echo 'cudaagent_add_library(records DEPENDS base LINKS SQLite::SQLite3)' >"$tree/lib/records/CMakeLists.txt"
echo 'cudaagent_add_library(verify DEPENDS records)' >"$tree/lib/verify/CMakeLists.txt"
echo 'cudaagent_add_library(profile DEPENDS records verify)' >"$tree/lib/profile/CMakeLists.txt"
echo 'cudaagent_add_tool(verify DEPENDS verify)' >"$tree/tools/verify/CMakeLists.txt"
printf '#include "cudaagent/base/status.h"\n' >"$tree/lib/records/ok.cpp"
printf '#include "cudaagent/records/record.h"\n' >"$tree/lib/base/upward.cpp"
printf '#include "private.h"\n' >"$tree/lib/verify/elsewhere.cpp"
printf '#include "cudaagent/base/status.h"\n' >"$tree/lib/verify/through.cpp"
printf '#include "cudaagent/profile/x.h"\n' >"$tree/tools/verify/main.cpp"
set +e
out=$(python3 "$checker" "$tree")
status=$?
set -e
echo "$out"
fail() { echo "selftest: $1" >&2; exit 1; }
((status == 1)) || fail "exit $status, expected 1"
grep -q "lib/base/upward.cpp: includes a header of 'records'" <<<"$out" || fail "upward include not seen"
grep -q "lib/profile: a stage may not use the stage 'verify'" <<<"$out" || fail "stage on stage not seen"
grep -q 'lib/verify/elsewhere.cpp: includes "private.h"' <<<"$out" || fail "foreign private header not seen"
grep -q "tools/verify/main.cpp: includes a header of 'profile'" <<<"$out" || fail "tool include not seen"
if grep -q 'through.cpp\|records/ok.cpp' <<<"$out"; then fail "a legal include was flagged"; fi
echo 'cudaagent_add_library(base DEPENDS verify)' >"$tree/lib/base/CMakeLists.txt"
out=$(python3 "$checker" "$tree" || true)
grep -q "lib/base: its dependencies lead back to itself" <<<"$out" || fail "cycle not seen"
echo "selftest: every violation seen"
