#!/usr/bin/env bash
# The main job on the bundled example, on the CPU. Data side: synthesise a few tiny tasks, filter
# them in the sandbox (eager only with Debian's torch 1.13, which has no torch.compile: each record
# says so), and dedup the kept ones against the example tasks. Scoring side: verify two candidates
# of the example CPU task, one honest and one that calls torch instead of its kernel, time the one
# that passes, score both, and summarise. Episode: cudaagent-rollout runs one episode of the example
# task against the scripted model (share/scripted-model: an OpenAI-compatible server that answers
# with replies written in advance), which reads the task, writes the kernel, its binding and
# model_new.py, compiles, verifies, profiles and stops; its record is scored like the candidates'
# and must PASS. Then it scores the bundled verify/profile sample (one line is torn on purpose, to
# show an error record). On a GPU the same chain runs with --device cuda and the default 1-100 ms
# filter window, and an episode's model is a real one, served by vLLM or cudaagent-train serve.
#
# Everything it makes stays in OUT_DIR (default: build/quickstart), which it names at the end; a
# second run reuses its store, so the scoring is taken from it instead of being redone.
# Usage: examples/pipeline.sh [BIN_DIR [OUT_DIR]]   (default: build/release/bin, build/quickstart)
#   env: EPISODE_SCRIPT=FILE  the scripted model's replies instead of the honest solution (any
#        replay script; the run fails, loudly, unless the episode it makes passes)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/release/bin}
out=${2:-$here/build/quickstart}
mkdir -p "$out"
out=$(cd "$out" && pwd)
examples=$here/share/examples
# The scripted model's server runs in the background during the episode: stopped however this ends.
server_pid=
stop_server() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  server_pid=
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== synth -> filter -> dedup: 8 tiny tasks (seed 1), run in the sandbox, then deduplicated" >&2
# Tiny CPU tasks run in microseconds: the window is widened from the GPU's 1-100 ms.
"$bin/cudaagent-synth" --quiet --seed 1 --count 8 --batch 2 --max-dim 16 -o "$out/synthesized.jsonl"
"$bin/cudaagent-filter" --quiet --device cpu --window-ms 0.001,1000 --jobs 2 --db "$out/store.db" \
  "$out/synthesized.jsonl" -o "$out/filtered.jsonl"
jq -c 'select(.filter.kept)' "$out/filtered.jsonl" |
  "$bin/cudaagent-dedup" --quiet --annotate --reference "examples=$examples/workspaces" -o "$out/tasks.jsonl"
printf '%-14s %-34s %-9s %-28s %s\n' id ops eager_ms filter dedup
jq -r --slurpfile deduped "$out/tasks.jsonl" '
  . as $t | ([$deduped[] | select(.id == $t.id)][0].dedup) as $d |
  [.id[0:12], (.task.ops | join(",")),
   (if .filter.eager_ms then (.filter.eager_ms.median * 1000 | floor / 1000 | tostring) else "-" end),
   (if .filter.kept then "kept" else "rejected: " + ([.filter.reasons[].check] | join(",")) end),
   (if $d then (if $d.kept then "kept" else "dropped" end) + " (nearest " +
      ($d.score * 100 | floor | tostring) + "%)" else "-" end)] | @tsv' "$out/filtered.jsonl" |
  while IFS=$'\t' read -r id ops ms filter dedup; do
    printf '%-14s %-34s %-9s %-28s %s\n' "$id" "$ops" "$ms" "$filter" "$dedup"
  done
echo "torch.compile check: $(jq -r .filter.compile "$out/filtered.jsonl" | sort -u | paste -sd ';')"
cat <<'TEXT'
  eager_ms: the task's median eager time on this CPU; kept: it runs in the sandbox, gives the same
  output twice and a different one for different inputs; dedup: its Python AST's similarity to the
  nearest example task (dropped above 90%).

TEXT

echo "== verify -> profile -> reward: two candidates for the example CPU task (the first run builds torch's" \
  "header, minutes)" >&2
task=$examples/workspaces/bias-relu-cpu
rm -rf "$out/candidates"
mkdir -p "$out/candidates"
cp -r "$task" "$out/candidates/honest"
cp -r "$task" "$out/candidates/cheat"
cat >"$out/candidates/cheat/model_new.py" <<'PY'
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored: the work is done by torch)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return torch.relu(x + self.bias) * 2.0
PY
for name in honest cheat; do
  jq -nc --rawfile m "$task/model.py" --arg w "$out/candidates/$name" --arg id "$name" \
    '{id: $id, task: {model_py: $m}, candidate: {workspace: $w}}'
done >"$out/candidates.jsonl"
"$bin/cudaagent-verify" --quiet --device cpu --db "$out/store.db" "$out/candidates.jsonl" |
  "$bin/cudaagent-profile" --quiet --device cpu --db "$out/store.db" |
  "$bin/cudaagent-reward" --quiet --db "$out/store.db" --errors "$out/unscored.jsonl" -o "$out/scored.jsonl"
# Profile times the PASS against eager (Debian's torch 1.13 has no torch.compile; the record says
# so) in the same sandbox; the REJECT_POLICY passes through untimed. Reward reads both keys.
printf '%-8s %-15s %-7s %-17s %s\n' id verdict reward "speedup (eager)" reason
jq -r '[.id, .reward.verdict, (.reward.value | tostring),
        (if .reward.inputs.eager then (.reward.inputs.eager.speedup * 1000 | floor / 1000 | tostring) + "x" else "-" end),
        ((.profile.reason // .verify.reason // "")[0:70])] | @tsv' "$out/scored.jsonl" |
  while IFS=$'\t' read -r id verdict value speedup reason; do
    printf '%-8s %-15s %-7s %-17s %s\n' "$id" "$verdict" "$value" "$speedup" "$reason"
  done
cat <<'TEXT'
  reward: -1 failed or rejected (REJECT_POLICY: the cheat computes with torch instead of its kernel);
  1 correct but not faster than eager PyTorch by more than 5%; 2 faster than eager; 3 faster than
  eager and torch.compile. speedup: eager's time over the candidate's. On this CPU example it is
  below 1 by design: the kernel is a plain C++ loop against PyTorch's vectorised eager, and the
  point of the run is the path (sandbox, checks, timing), not the speed. On a GPU the same chain
  times CUDA kernels against eager and torch.compile.

TEXT
"$bin/cudaagent-reward" --summary --plots "$out/plots" "$out/scored.jsonl" >"$out/summary.txt" 2>/dev/null
sed -n '1,3p' "$out/summary.txt"
echo

echo "== rollout: one episode of the example CPU task with a scripted model (a server that answers" \
  "with replies written in advance)" >&2
# The script: read the task, write the example's kernel, binding and model_new.py, compile, verify,
# profile, stop (cudaagent-rollout's replay format, one reply per line; share/scripted-model/README.md).
jq -nc --rawfile kernel "$task/kernels/bias_relu.cpp" --rawfile binding "$task/kernels/bias_relu_binding.cpp" \
  --rawfile model_new "$task/model_new.py" '
  def call(name; arguments): {name: name, arguments: arguments};
  def run(command): {content: "", tool_calls: [call("Bash"; {command: command})]};
  {content: "Let me read the task.", tool_calls: [call("Read"; {file_path: "model.py"})]},
  {content: "One fused pass: bias, ReLU and the scale.", tool_calls: [
    call("Write"; {file_path: "kernels/bias_relu.cpp", content: $kernel}),
    call("Write"; {file_path: "kernels/bias_relu_binding.cpp", content: $binding}),
    call("Write"; {file_path: "model_new.py", content: $model_new})]},
  run("bash utils/compile.sh"), run("python3 -m utils.verification"), run("python3 -m utils.profiling"),
  {content: "The fused kernel compiles, passes verification and is profiled."}' >"$out/episode-script.jsonl"
[[ -z ${EPISODE_SCRIPT:-} ]] || cp "$EPISODE_SCRIPT" "$out/episode-script.jsonl"
# The script is the model: its hash names it, so a store never answers one script with another's episode.
model=scripted-$(sha256sum "$out/episode-script.jsonl" | cut -c1-12)
rm -f "$out/episode-port"
python3 "$here/share/scripted-model/scripted_server.py" "$out/episode-script.jsonl" "$out/episode-port" \
  "$out/episode-requests.log" &
server_pid=$!
for _ in $(seq 200); do [[ -s $out/episode-port ]] && break; sleep 0.05; done
[[ -s $out/episode-port ]] || { echo "pipeline: the scripted model's server did not start" >&2; exit 1; }
: >"$out/episode-requests.log"
# The record goes through cudaagent-reward like the candidates'; with the store, a re-run takes the
# episode and its score from it and asks the server nothing.
jq -nc --rawfile m "$task/model.py" '{id: "bias-relu-cpu", task: {model_py: $m}}' |
  "$bin/cudaagent-rollout" --quiet --device cpu --endpoint "http://127.0.0.1:$(cat "$out/episode-port")" \
    --model "$model" --seed 1 --db "$out/store.db" |
  "$bin/cudaagent-reward" --quiet --db "$out/store.db" -o "$out/trajectory.jsonl"
stop_server
rm -f "$out/episode-port"
jq -r '"episode of \(.trajectory.task_id) (\(.id[0:12])): verdict \(.reward.verdict), reward \(.reward.value)," +
       " turns \(.trajectory.turns_used) (finish \(.trajectory.finish_reason)), evaluations " +
       ([.trajectory.evaluations[] | "\(.op): \(.verdict // .exit_code)"] | join(", "))' \
  "$out/trajectory.jsonl" | tee "$out/episode.txt"
if [[ $(jq -r .reward.verdict "$out/trajectory.jsonl") != PASS ]]; then
  echo "pipeline: FAIL: the scripted episode did not PASS: $(jq -c '{verdict: .reward.verdict,
    reason: (.reward.reason // .verify.reason // .error.reason // .error), finish: .trajectory.finish_reason}' "$out/trajectory.jsonl")" >&2
  echo "pipeline: its record is $out/trajectory.jsonl, the server's requests $out/episode-requests.log" >&2
  exit 1
fi
cat <<'TEXT'
  turns: the model's replies (read, write, compile, verify, profile, stop); evaluations: what the
  agent asked the trusted evaluator for through the workspace's commands, and what it answered. The
  record (trajectory.jsonl) holds the conversation, the token ids and loss mask a trainer reads,
  and the files the agent left, so cudaagent-verify can judge it again.

TEXT

echo "== reward: $examples/reward-sample.jsonl" >&2
"$bin/cudaagent-reward" --quiet --db "$out/store.db" --errors "$out/sample-errors.jsonl" \
  "$examples/reward-sample.jsonl" -o "$out/sample-scored.jsonl"
printf '%-20s %-15s %6s  %s\n' id verdict reward reason
jq -r '[.id, .reward.verdict, (.reward.value|tostring), .reward.reason] | @tsv' "$out/sample-scored.jsonl" |
  while IFS=$'\t' read -r id verdict value reason; do
    printf '%-20s %-15s %6s  %s\n' "$id" "$verdict" "$value" "$reason"
  done
echo
echo "error records (not scored):"
jq -c '.error | {line, id, reason}' "$out/sample-errors.jsonl"
cat <<TEXT

Outputs are in $out:
  synthesized.jsonl, filtered.jsonl, tasks.jsonl   the data side, stage by stage
  candidates.jsonl, scored.jsonl, unscored.jsonl   the scoring side (verify, profile, reward keys)
  summary.txt, plots/*.svg                         cudaagent-reward --summary of scored.jsonl
  trajectory.jsonl, episode.txt                    the scripted episode's record (rollout, reward) and
                                                   its summary line
  episode-script.jsonl, episode-requests.log       the scripted model's replies, the requests it got
  sample-scored.jsonl, sample-errors.jsonl         the bundled sample, scored
  store.db                                         every result (SQLite); a re-run takes them from it
Read any of them with jq, e.g.  jq .profile $out/scored.jsonl
TEXT
