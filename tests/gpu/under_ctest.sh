#!/usr/bin/env bash
# Runs one GPU check for CTest (label gpu: `ctest --preset gpu`). Skipped (exit 77) on a machine
# without a usable NVIDIA GPU, so the label can be run anywhere.
# Usage: tests/gpu/under_ctest.sh SCRIPT BIN_DIR BUILD_DIR OUT_DIR
set -uo pipefail
script=$1 bin=$2 build=$3 out=$4
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "skipped: no NVIDIA GPU here (nvidia-smi -L failed)"
  exit 77
fi
mkdir -p "$out"
case $(basename "$script") in
  cupti_check.sh) exec bash "$script" "$out" "$build" ;;
  profile_cupti.sh) exec bash "$script" "$bin" "$build" "$out" ;;
  *) exec bash "$script" "$bin" "$out" ;;
esac
