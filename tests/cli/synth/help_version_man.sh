#!/usr/bin/env bash
# The shared --help/--version/man checks, and synth's --version names libcurl (its LLM mode).
bash "$(dirname "$0")/../check_help_version_man.sh" "$1" cudaagent-synth --depth-weights || exit 1
"$1/cudaagent-synth" --version | grep -q "libcurl:" || { echo "FAIL: --version lacks libcurl" >&2; exit 1; }
