#!/usr/bin/env bash
record=$(cat)
! grep -q -e hunter2 -e TOPSECRET -e "second secret" <<<"$record"
jq -e '.verify.build.log_tail | test("in a file outside the workspace; not shown")' <<<"$record" >/dev/null
