# Decided by model_new.py's static policy: nothing was built.
jq -e '.verify.build == null and (.verify.reason | startswith("model_new.py does not compile"))' >/dev/null ||
  { echo "expected FAIL_COMPILE from the static policy, before the build"; exit 1; }
