#!/usr/bin/env bash
# Submits the whole job: the data array, the scoring array (when CANDIDATES is set), and the merge
# after both. Usage:
#   OUT=/shared/run1 [CANDIDATES=cands.jsonl] [SHARDS=4] [GPU=1] examples/slurm/run.sh [SBATCH_FLAGS...]
# Every other setting of data.sbatch and score.sbatch passes through the environment. Prints the
# job ids; the results are in $OUT once the merge job has run (squeue -u "$USER" shows progress).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${OUT:?set OUT to a folder on the shared filesystem}"
export OUT
mkdir -p "$OUT"
shards=${SHARDS:-4}
flags=(--parsable --array="0-$((shards - 1))" "$@")
if [[ -n ${GPU:-} ]]; then flags+=(--gres=gpu:1); fi
after=()
data=$(sbatch "${flags[@]}" --chdir="$OUT" --export=ALL "$here/data.sbatch")
after+=("$data")
echo "data array: $data"
if [[ -n ${CANDIDATES:-} ]]; then
  score=$(sbatch "${flags[@]}" --chdir="$OUT" --export=ALL "$here/score.sbatch")
  after+=("$score")
  echo "score array: $score"
fi
dependency=afterok$(printf ':%s' "${after[@]}")
merge=$(sbatch --parsable "$@" --chdir="$OUT" --dependency="$dependency" --export=ALL "$here/merge.sbatch")
echo "merge: $merge (after $dependency); results in $OUT"
