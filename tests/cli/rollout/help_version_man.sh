#!/usr/bin/env bash
# The shared --help/--version/man checks, and the usage errors of the policy flags.
bash "$(dirname "$0")/../check_help_version_man.sh" "$1" cudaagent-rollout --endpoint || exit 1
source "$(dirname "$0")/../lib.sh"
code=0; "$1/cudaagent-rollout" --model m x.py >/dev/null 2>"$scratch/err" || code=$?
[[ $code == 2 ]] && grep -q "needs --endpoint and --model" "$scratch/err" || fail "server policy without --endpoint: exit $code"
code=0; "$1/cudaagent-rollout" --policy scripted x.py >/dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "--policy scripted exited $code"
code=0; "$1/cudaagent-rollout" --policy replay:/no/such/file x.py >/dev/null 2>"$scratch/err" || code=$?
[[ $code == 1 ]] && grep -q "cannot read the replay script" "$scratch/err" || fail "missing replay script: exit $code"
echo "ok"
