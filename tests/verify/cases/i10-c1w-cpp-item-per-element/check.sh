# The audit's budget of values read one by one must be what refused it, not another rule.
reason=$(jq -r .verify.reason)
[[ $reason == *"read one by one"* ]] || { echo "wrong reason: $reason"; exit 1; }
