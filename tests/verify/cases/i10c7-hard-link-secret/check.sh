#!/usr/bin/env bash
record=$(cat)
jq -e '[.verify.policy.findings[].rule] | index("hard-link")' <<<"$record" >/dev/null
! grep -q hunter2 <<<"$record"
