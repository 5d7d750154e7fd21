#!/usr/bin/env bash
exec bash "$(dirname "$0")/../check_help_version_man.sh" "$1" cudaagent-profile --compile-mode
