#!/usr/bin/env bash
# Quick start, step 2 (and what CI runs): build with warnings as errors and run every CPU test,
# once in the release build and once under AddressSanitizer + UndefinedBehaviorSanitizer.
# The sanitize preset leaves cudaagent-train out (CUDAAGENT_TORCH=OFF): libtorch itself is not
# built with the sanitizers, and its translation units are the slowest of the build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
for preset in release sanitize; do
  echo "== $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  ctest --preset "$preset"
done
