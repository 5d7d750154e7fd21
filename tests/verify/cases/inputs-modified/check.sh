# The inputs are mapped read-only in the candidate's process: the in-place write faults, and the
# verdict says why.
jq -e '.verify.reason | test("inputs are read-only")' >/dev/null || { echo "unexpected reason: $(jq -r .verify.reason)"; exit 1; }
