#!/usr/bin/env bash
# examples/pipeline.sh keeps what it makes in the folder it is given and names it at the end, says
# what its numbers mean (the CPU example is slower than eager by design), runs a scripted episode
# against the scripted model's server that passes and is scored (and stops the server), and a
# second run takes its scoring and the episode from the store it left. An episode that does not
# pass fails the run, with the reason. Usage: pipeline.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
out=$(mktemp -d)
trap 'rm -rf "$out" "$out-cheat" "$out-cheat".*' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
"$src/examples/pipeline.sh" "$bin" "$out" >"$out/stdout.txt" 2>"$out/stderr.txt" ||
  fail "exit $?: $(tail -20 "$out/stderr.txt")"
for file in synthesized.jsonl filtered.jsonl tasks.jsonl candidates.jsonl scored.jsonl summary.txt \
  sample-scored.jsonl sample-errors.jsonl store.db plots/rewards.svg plots/fast_p.svg \
  trajectory.jsonl episode.txt episode-script.jsonl episode-requests.log; do
  [[ -s $out/$file ]] || fail "$file is missing from the output folder"
done
grep -q "Outputs are in $out" "$out/stdout.txt" || fail "the folder is not named at the end: $(tail -5 "$out/stdout.txt")"
grep -q "below 1 by design" "$out/stdout.txt" || fail "the CPU example's speed is not explained"
[[ $(jq -r 'select(.id == "honest") | .reward.verdict' "$out/scored.jsonl") == PASS ]] || fail "honest: $(jq -c .reward "$out/scored.jsonl")"
[[ $(jq -r 'select(.id == "cheat") | .reward.value' "$out/scored.jsonl") == -1 ]] || fail "cheat was rewarded"
# The episode: the scripted model's six replies, every evaluation it asked for passed, scored PASS
# by cudaagent-reward, and its server stopped when the run ended.
no_server() { ! pgrep -f "$1/episode-script.jsonl" >/dev/null || fail "the scripted model's server is still running"; }
no_server "$out"
ep() { jq -r "$@" "$out/trajectory.jsonl"; }
[[ $(wc -l <"$out/trajectory.jsonl") == 1 ]] || fail "expected one episode record: $(wc -l <"$out/trajectory.jsonl")"
[[ $(ep .reward.verdict) == PASS && $(ep .reward.value) == 1 ]] || fail "episode: $(ep -c .reward)"
[[ $(ep .trajectory.turns_used) == 6 && $(ep .trajectory.finish_reason) == stop ]] ||
  fail "episode turns: $(ep -c '.trajectory | [.turns_used, .finish_reason]')"
[[ $(ep '[.trajectory.evaluations[] | "\(.op):\(.exit_code)"] | join(",")') == "compile:0,verify:0,profile:0" ]] ||
  fail "episode evaluations: $(ep -c .trajectory.evaluations)"
[[ $(ep '.candidate.files["model_new.py"]') == "$(cat "$src/share/examples/workspaces/bias-relu-cpu/model_new.py")" ]] ||
  fail "the episode did not leave the example's model_new.py"
[[ $(jq -s 'map(select(.path == "/v1/chat/completions")) | length' "$out/episode-requests.log") == 6 ]] ||
  fail "the scripted server did not answer six turns: $(wc -l <"$out/episode-requests.log") requests"
grep -qx "episode of bias-relu-cpu ($(ep '.id[0:12]')): verdict PASS, reward 1, turns 6 (finish stop), evaluations compile: compiled, verify: PASS, profile: PASS" \
  "$out/episode.txt" || fail "episode summary: $(cat "$out/episode.txt")"
grep -qF "$(cat "$out/episode.txt")" "$out/stdout.txt" || fail "the episode's summary line is not printed"
rows=$(sqlite3 "$out/store.db" "SELECT count(*) FROM results")
cp -r "$out" "$out-cheat"
# Again, into the same folder: every verdict, profile and reward comes from the store.
"$src/examples/pipeline.sh" "$bin" "$out" >"$out/stdout2.txt" 2>"$out/stderr2.txt" || fail "second run: exit $?"
[[ $(sqlite3 "$out/store.db" "SELECT count(*) FROM results") == "$rows" ]] || fail "the second run added rows to the store"
[[ $(jq -r 'select(.id == "honest") | .profile.store.hit' "$out/scored.jsonl") == true ]] || fail "the second run timed again"
[[ ! -s $out/episode-requests.log && $(ep .reward.verdict) == PASS ]] || fail "the second run ran the episode again"
no_server "$out"
# A script whose model_new.py calls torch instead of its kernel: the run fails and says why.
jq -c 'if .tool_calls then .tool_calls |= map(if .arguments.file_path == "model_new.py" then
         .arguments.content |= sub("cuda_extension[.]bias_relu_scale[(]x, self[.]bias, 2[.]0[)]"; "torch.relu(x + self.bias) * 2.0")
       else . end) else . end' "$out/episode-script.jsonl" >"$out-cheat.script"
grep -q 'torch.relu(x + self.bias)' "$out-cheat.script" || fail "the cheating script was not made"
code=0
EPISODE_SCRIPT=$out-cheat.script "$src/examples/pipeline.sh" "$bin" "$out-cheat" >"$out-cheat.stdout" 2>"$out-cheat.stderr" || code=$?
[[ $code == 1 ]] || fail "a failed episode exited $code"
grep -q 'FAIL: the scripted episode did not PASS: .*REJECT_POLICY' "$out-cheat.stderr" || fail "no reason: $(tail -3 "$out-cheat.stderr")"
no_server "$out-cheat"
echo ok
