#!/usr/bin/env bash
# The object check, not the source scan, must have found it.
jq -e '[.verify.policy.findings[].rule] | index("torch-compute")' >/dev/null
