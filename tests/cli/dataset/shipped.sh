#!/usr/bin/env bash
# The training set on main (share/datasets/ops6k) is what its card says and what the code at this
# commit would make again: the file's size and sha256 are the card's, it holds the card's number of
# distinct kept tasks inside the card's eager window and under the KernelBench threshold, and
# cudaagent-synth with the card's seed and count makes every shipped task again, byte for byte.
# A change to the synthesiser's stream, or a hand edit of the data, fails here.
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
dir=$root/share/datasets/ops6k
card=$dir/card.json
command -v zstd >/dev/null || fail "needs zstd"
[[ -f $card && -f $dir/tasks.jsonl.zst ]] || fail "no dataset in $dir"

bytes=$(stat -c %s "$dir/tasks.jsonl.zst")
[[ $bytes == "$(jq -r .file.bytes "$card")" ]] || fail "tasks.jsonl.zst is $bytes bytes, the card says $(jq -r .file.bytes "$card")"
sum=$(sha256sum "$dir/tasks.jsonl.zst" | cut -d' ' -f1)
[[ $sum == "$(jq -r .file.sha256 "$card")" ]] || fail "tasks.jsonl.zst's sha256 is not the card's"
((bytes <= 10000000)) || fail "tasks.jsonl.zst is over 10 MB"

zstd -dc "$dir/tasks.jsonl.zst" >"$scratch/tasks.jsonl"
shipped=$(jq -r .shipped "$card")
[[ $(wc -l <"$scratch/tasks.jsonl") == "$shipped" ]] || fail "$(wc -l <"$scratch/tasks.jsonl") lines, the card says $shipped"
[[ $(jq -r .id "$scratch/tasks.jsonl" | sort -u | wc -l) == "$shipped" ]] || fail "ids are not distinct"

# Every task kept by the filter, its eager median inside the window, no closer to KernelBench than
# the threshold the build dropped at.
low=$(jq -r '.eager_ms.window[0]' "$card") high=$(jq -r '.eager_ms.window[1]' "$card")
threshold=$(jq -r .made.dedup_threshold "$card")
bad=$(jq -c --argjson low "$low" --argjson high "$high" --argjson t "$threshold" '
  select((.filter.kept != true) or (.filter.eager_ms.median < $low) or (.filter.eager_ms.median > $high)
         or ((.nearest_kernelbench.score // 0) > $t)) | .id' "$scratch/tasks.jsonl" | awk 'NR <= 3')
[[ -z $bad ]] || fail "tasks outside what the card promises: $bad"

# The synthesiser at this commit makes the same stream: every shipped task, by id and source.
mapfile -t synth_args < <(jq -r '.made.synth_args[]' "$card")
((${#synth_args[@]} > 0)) || fail "the card has no synth arguments"
"$bin/cudaagent-synth" -q "${synth_args[@]}" |
  jq -c '{id, m: .task.model_py}' | sort >"$scratch/made"
jq -c '{id, m: .task.model_py}' "$scratch/tasks.jsonl" | sort >"$scratch/shipped"
missing=$(comm -13 "$scratch/made" "$scratch/shipped" | wc -l)
((missing == 0)) || fail "$missing shipped tasks are not what cudaagent-synth ${synth_args[*]} makes now"
echo "ok: $shipped tasks, as the card says, remade by cudaagent-synth ${synth_args[*]}"
