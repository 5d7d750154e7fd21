# The verdict must come from the process left behind, not from anything else.
jq -e '.verify.reason | test("process\\(es\\) running after its")' >/dev/null ||
  { echo "wrong reason: $(jq -r .verify.reason)"; exit 1; }
