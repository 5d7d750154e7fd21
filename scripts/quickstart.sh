#!/usr/bin/env bash
# Quick start, step 1: install what is missing, build the release preset, and run the main job on
# the bundled example (examples/pipeline.sh: the data side, the scoring side, and one agent episode
# against a scripted model). Its outputs stay in build/quickstart (it says what each file and
# number means at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target cudaagent_programs  # the tests build with scripts/test.sh
examples/pipeline.sh build/release/bin build/quickstart
