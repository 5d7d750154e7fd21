#!/usr/bin/env bash
# Prints one task record per named task of tests/filter/tasks/ (NAME.py), in the cudaagent-records(5)
# shape: {"id", "task": {"source", "model_py", "ops", "meta"}}. The id is the name, so tests can
# pick records out with jq.
set -euo pipefail
dir=$(cd "$(dirname "$0")/tasks" && pwd)
for name in "$@"; do
  jq -cRs --arg id "$name" '{id: $id, task: {source: "tests/filter", model_py: ., ops: [], meta: {}}}' \
    <"$dir/$name.py"
done
