# Shared helpers for the behaviour scripts: a scratch directory, failure reporting, and a
# generator of many reward records.
set -euo pipefail
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# N records alternating between the reward tiers; ids r0..r(N-1).
make_records() {
  awk -v n="$1" 'BEGIN {
    for (i = 0; i < n; i++) {
      if (i % 3 == 0) v = "{\"verdict\":\"FAIL_COMPILE\"}";
      else v = "{\"verdict\":\"PASS\"}";
      printf "{\"id\":\"r%d\",\"verify\":%s,\"profile\":{\"times_ms\":{\"eager\":{\"median\":%d},\"compile\":{\"median\":%d},\"candidate\":{\"median\":1}}}}\n", i, v, 1 + i % 4, 1 + i % 5
    }
  }'
}
