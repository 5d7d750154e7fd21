#!/usr/bin/env bash
# cudaagent-verify --db: verdicts are stored by content and a re-run takes them from the store;
# other content is verified afresh; INFRA_ERROR (a broken task) is never stored.
# Args: BIN_DIR BASE_WORKSPACE.
set -euo pipefail
bin=$1 base=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cp -r "$base" "$scratch/a"
verify() { "$bin/cudaagent-verify" --quiet --device cpu --db "$scratch/v.db" "$@"; }
count() { sqlite3 "$scratch/v.db" "select count(*) from results where stage = 'verify'"; }

verify --task "$base/model.py" "$scratch/a" >"$scratch/first.json"
[[ $(jq -r .verify.verdict "$scratch/first.json") == PASS ]] || fail "first run: $(cat "$scratch/first.json")"
[[ $(jq -r '.verify.store' "$scratch/first.json") == null ]] || fail "a fresh verdict claims a store hit"
[[ $(count) == 1 ]] || fail "expected 1 stored verdict, found $(count)"

verify --task "$base/model.py" "$scratch/a" >"$scratch/second.json"
[[ $(jq -r .verify.store.hit "$scratch/second.json") == true ]] || fail "re-run did not come from the store"
[[ $(jq -r .verify.job_key "$scratch/first.json") == $(jq -r .verify.job_key "$scratch/second.json") ]] ||
  fail "job keys differ between runs"
[[ $(count) == 1 ]] || fail "a store hit was stored again"

# Different candidate bytes: a different key, verified afresh.
echo "# an edit" >>"$scratch/a/model_new.py"
verify --task "$base/model.py" "$scratch/a" >"$scratch/third.json"
[[ $(jq -r .verify.store "$scratch/third.json") == null ]] || fail "edited candidate came from the store"
[[ $(count) == 2 ]] || fail "expected 2 stored verdicts, found $(count)"

# A broken task is the machinery's failure, not the candidate's: never stored.
cp -r "$scratch/a" "$scratch/b"
printf 'raise RuntimeError("broken task")\n' >"$scratch/b/model.py"
verify --task "$scratch/b/model.py" "$scratch/b" >"$scratch/broken.json"
[[ $(jq -r .verify.verdict "$scratch/broken.json") == INFRA_ERROR ]] || fail "broken task: $(jq -c .verify "$scratch/broken.json")"
[[ $(count) == 2 ]] || fail "INFRA_ERROR was stored"
echo ok
