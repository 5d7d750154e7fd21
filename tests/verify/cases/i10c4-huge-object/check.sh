#!/usr/bin/env bash
jq -e '.verify.reason | test("file-size")' >/dev/null
