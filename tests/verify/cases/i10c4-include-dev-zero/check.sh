#!/usr/bin/env bash
jq -e '.verify.reason | test("memory limit")' >/dev/null
