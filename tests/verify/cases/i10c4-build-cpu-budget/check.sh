#!/usr/bin/env bash
jq -e '.verify.reason | test("budget|\\(6 s\\)")' >/dev/null
