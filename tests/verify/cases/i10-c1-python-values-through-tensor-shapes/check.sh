# The audit's budget of values written from the program must be what refused it.
reason=$(jq -r .verify.reason)
[[ $reason == *"written from the program"* ]] || { echo "wrong reason: $reason"; exit 1; }
