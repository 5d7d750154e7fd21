jq -e .verify.verdict >/dev/null
