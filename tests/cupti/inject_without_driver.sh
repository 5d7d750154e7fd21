#!/usr/bin/env bash
# The injection library in a process where CUPTI cannot trace (no GPU driver on the CI machine, or
# no CUPTI at all): the process runs on, InitializeInjection still returns 1, flush says "not
# tracing" (-1), and the trace holds one error line saying why — or, with no output path, stderr
# does. Usage: inject_without_driver.sh HOST LIBRARY
set -euo pipefail
host=$1 library=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_host_output() {  # the host's stdout when tracing is off
  [[ "$(cat "$1")" == $'init 1\ninit-again 1\nflush -1\nstream -1' ]] || fail "host printed: $(cat "$1")"
}

# 1. CUPTI that cannot be opened: an error line naming the library, in the pid-expanded path.
CUDAAGENT_CUPTI_LIBRARY=$work/absent/libcupti.so.13 CUDAAGENT_CUPTI_OUT=$work/trace-%p.jsonl \
  "$host" "$library" >"$work/out1" 2>"$work/err1" || fail "host failed: $(cat "$work/err1")"
expect_host_output "$work/out1"
traces=("$work"/trace-*.jsonl)
[[ ${#traces[@]} -eq 1 && -f ${traces[0]} ]] || fail "expected one trace-PID.jsonl, got: ${traces[*]}"
[[ ${traces[0]} =~ trace-[0-9]+\.jsonl$ ]] || fail "%p not expanded: ${traces[0]}"
[[ $(wc -l <"${traces[0]}") -eq 1 ]] || fail "expected one line: $(cat "${traces[0]}")"
grep -q '^{"kind":"error","pid":[0-9]*,"message":"cannot open CUPTI .*absent/libcupti.so.13' "${traces[0]}" ||
  fail "no error line: $(cat "${traces[0]}")"

# 2. A library that is not CUPTI at all: named as lacking CUPTI's functions.
CUDAAGENT_CUPTI_LIBRARY=libc.so.6 CUDAAGENT_CUPTI_OUT=$work/trace2.jsonl \
  "$host" "$library" >"$work/out2" 2>"$work/err2" || fail "host failed: $(cat "$work/err2")"
expect_host_output "$work/out2"
grep -q '"message":"CUPTI .libc.so.6. lacks cuptiGetVersion"' "$work/trace2.jsonl" ||
  fail "no 'lacks' line: $(cat "$work/trace2.jsonl")"

# 3. The real CUPTI without a driver (CI) fails to subscribe; with a driver it would trace, and
#    then flush writes a summary instead. Either way the process carries on and the trace says so.
CUDAAGENT_CUPTI_OUT=$work/trace3.jsonl "$host" "$library" >"$work/out3" 2>"$work/err3" ||
  fail "host failed: $(cat "$work/err3")"
if grep -q '"kind":"error"' "$work/trace3.jsonl" 2>/dev/null; then
  expect_host_output "$work/out3"
else
  grep -q '"kind":"summary"' "$work/trace3.jsonl" || fail "neither error nor summary: $(cat "$work/trace3.jsonl" 2>&1)"
fi

# 4. No output path: nothing written, one line on stderr.
env -u CUDAAGENT_CUPTI_OUT "$host" "$library" >"$work/out4" 2>"$work/err4" || fail "host failed"
expect_host_output "$work/out4"
grep -q 'cudaagent-cupti: CUDAAGENT_CUPTI_OUT is not set' "$work/err4" || fail "stderr: $(cat "$work/err4")"
echo "ok"
