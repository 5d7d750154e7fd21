#!/usr/bin/env bash
# The test fixture that fills the candidate build cache (CUDAAGENT_CACHE_DIR) before the tests
# that build candidates: verifies the CPU example once, which makes torch's precompiled header and
# the example's objects. BIN_DIR EXAMPLE_WORKSPACE. Fails unless the example PASSes.
set -euo pipefail
bin=$1 example=$2
record=$("$bin/cudaagent-verify" --quiet --device cpu --task "$example/model.py" "$example")
verdict=$(jq -r '.verify.verdict' <<<"$record")
echo "the example: $verdict; cache: ${CUDAAGENT_CACHE_DIR:-default}"
[[ $verdict == PASS ]]
