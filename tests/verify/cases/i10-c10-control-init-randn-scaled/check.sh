# The static policy of model_new.py must let this constructor through: no python-* finding.
jq -e '[.verify.policy.findings[] | select(.rule | startswith("python-"))] | length == 0' >/dev/null ||
  { echo "model_new.py's static policy refused an honest constructor"; exit 1; }
