#!/usr/bin/env bash
jq -e '.verify.policy.findings[] | select(.rule == "bad-name" and .path == "kernels/my kernel.cpp")' >/dev/null
