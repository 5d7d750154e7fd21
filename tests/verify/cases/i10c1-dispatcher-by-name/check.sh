#!/usr/bin/env bash
# Both the dispatcher (torch-compute) and its dispatch-key state are findings.
jq -e '[.verify.policy.findings[].rule] | (index("torch-compute") and index("dispatch-state"))' >/dev/null
