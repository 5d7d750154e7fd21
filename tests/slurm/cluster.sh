#!/usr/bin/env bash
# A real one-node Slurm cluster on localhost, started and stopped here: munged with a fresh key,
# slurmctld and slurmd on free ports with a private configuration (nothing of the machine's own
# Slurm or munge is used or touched). It runs examples/slurm as a user would: the data array
# (synth -> filter -> dedup, two shards), the scoring array (verify -> profile -> reward on the
# CPU example task's honest and cheating candidates), the merge of the per-shard stores, and the
# scoring again from the merged store, which must change nothing.
# Usage: cluster.sh BIN_DIR SOURCE_DIR. Exit 77 (skipped) when the daemons cannot run here.
set -euo pipefail
bin=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
for program in munged slurmctld slurmd sbatch sinfo squeue sqlite3 jq; do
  command -v "$program" >/dev/null ||
    skip "$program is not installed (Debian 12: apt-get install slurmctld slurmd slurm-client munge sqlite3 jq; scripts/setup.sh installs them)"
done
[[ $(id -u) == 0 ]] || skip "slurmd launches jobs only when it runs as root, and this test runs as $(id -un)"

# A short path: munge's socket path must fit in a sockaddr_un.
work=$(mktemp -d /tmp/cudaagent-slurm-XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ -n ${KEEP_SLURM_TEST:-} ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
show_logs() {
  local log
  for log in "$work"/log/*; do
    echo "--- $log"
    tail -n 20 "$log"
  done
}

# munge: a fresh key and socket of our own.
mkdir -p "$work/munge" "$work/log" "$work/state" "$work/spool"
chmod 700 "$work/munge"
head -c 1024 /dev/urandom >"$work/munge/munge.key"
chmod 400 "$work/munge/munge.key"
munged --foreground --force --key-file="$work/munge/munge.key" --socket="$work/munge/sock" \
  --pid-file="$work/munge/pid" --seed-file="$work/munge/seed" --log-file="$work/log/munged.log" \
  --num-threads=2 2>>"$work/log/munged.err" &
pids+=($!)

# Slurm: one node (this machine, by its short name as slurmctld requires), free ports.
host=$(hostname -s)
read -r ctld_port slurmd_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=cudaagenttest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/sock
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
PlugStackConfig=/dev/null
KillWait=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
for _ in $(seq 100); do [[ -S $work/munge/sock ]] && break; sleep 0.1; done
[[ -S $work/munge/sock ]] || { show_logs; skip "munged did not start"; }
slurmctld -D -c -f "$SLURM_CONF" >"$work/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$work/log/slurmd.out" 2>&1 &
pids+=($!)
state=
for _ in $(seq 120); do
  state=$(sinfo -h -o %t 2>/dev/null || true)
  [[ $state == idle ]] && break
  sleep 0.5
done
[[ $state == idle ]] || { show_logs; skip "the one-node cluster did not come up (node state '$state')"; }
echo "cluster up: node $host, slurmctld port $ctld_port"

# Everything the jobs need comes through the environment (sbatch --export=ALL).
export CUDAAGENT_BIN=$bin OUT=$work/out DEVICE=cpu
mkdir -p "$OUT"
submit() {  # submit NAME SCRIPT [SBATCH_FLAGS...]: waits for the job; fails with its logs
  local name=$1 script=$2
  shift 2
  # One CPU per task: the scripts ask for more than this test machine may have.
  if ! timeout 1200 sbatch --wait --quiet --chdir="$OUT" --export=ALL --cpus-per-task=1 \
    --output="$work/log/$name-%a.log" "$@" "$src/examples/slurm/$script"; then
    show_logs
    fail "$name: the job failed"
  fi
}

# 1-3. The whole job through run.sh, as a user submits it: the data array (six tiny tasks over
# two array tasks), the scoring array (the CPU example task's honest candidate and one that calls
# torch instead of its kernel), and the merge after both.
export COUNT=6 SEED=3 SYNTH_ARGS="--batch 2 --max-dim 16"
export FILTER_ARGS="--window-ms 0.001,1000 --jobs 2" DEDUP_ARGS="--reference examples=$src/share/examples/workspaces"
task=$src/share/examples/workspaces/bias-relu-cpu
mkdir -p "$work/cands"
cp -r "$task" "$work/cands/honest"
cp -r "$task" "$work/cands/cheat"
sed -i 's/return cuda_extension\.[a-z_]*(.*)/return torch.relu(x + self.bias) * 2.0/' "$work/cands/cheat/model_new.py"
cmp -s "$task/model_new.py" "$work/cands/cheat/model_new.py" && fail "the cheating candidate is the honest one"
for name in honest cheat; do
  jq -nc --rawfile m "$task/model.py" --arg w "$work/cands/$name" --arg id "$name" \
    '{id: $id, task: {model_py: $m, meta: {level: 1, problem_id: 1, name: "1_bias_relu"}}, candidate: {workspace: $w}}'
done >"$work/candidates.jsonl"
export CANDIDATES=$work/candidates.jsonl PROFILE_ARGS="--rounds 4 --round-ms 5 --warmup-ms 50 --timeout 120"
# One CPU per task: the scripts ask for more than this test machine may have.
SHARDS=2 "$src/examples/slurm/run.sh" --cpus-per-task=1 >"$work/run.out" || fail "run.sh: $(cat "$work/run.out")"
cat "$work/run.out"
merge_job=$(sed -n 's/^merge: \([0-9]*\) .*/\1/p' "$work/run.out")
data_job=$(sed -n 's/^data array: //p' "$work/run.out")
score_job=$(sed -n 's/^score array: //p' "$work/run.out")
[[ -n $merge_job && -n $data_job && -n $score_job ]] || fail "run.sh did not print its job ids"
# Wait for the merge (and so for everything before it).
for _ in $(seq 2400); do
  [[ -z $(squeue -h -j "$data_job,$score_job,$merge_job" 2>/dev/null) ]] && break
  if squeue -h -o %r -j "$merge_job" 2>/dev/null | grep -q DependencyNeverSatisfied; then
    show_logs
    for log in "$OUT"/*.log; do echo "--- $log"; cat "$log"; done
    fail "an array task failed, so the merge never ran"
  fi
  sleep 0.5
done
[[ -z $(squeue -h -j "$data_job,$score_job,$merge_job" 2>/dev/null) ]] || fail "the jobs did not finish in 20 minutes"

for shard in 0 1; do
  [[ -f $OUT/shards/tasks-$shard.jsonl && -f $OUT/shards/tasks-store-$shard.db ]] || { show_logs; fail "data shard $shard is missing"; }
  log=$OUT/cudaagent-data-${data_job}_$shard.log
  grep -q "cudaagent-synth: shard $shard/2 (from SLURM_ARRAY_TASK_ID)" "$log" || fail "synth did not take shard $shard/2: $(cat "$log")"
  grep -q "cudaagent-filter: input is a stream" "$log" || fail "filter sharded again: $(cat "$log")"
  grep -q "cudaagent-dedup: input is a stream" "$log" || fail "dedup sharded again: $(cat "$log")"
  grep -q "left to the other shards" "$log" && fail "a stage after synth dropped records of other shards: $(cat "$log")"
  log=$OUT/cudaagent-score-${score_job}_$shard.log
  grep -q "cudaagent-verify: shard $shard/2 (from SLURM_ARRAY_TASK_ID)" "$log" || fail "verify did not shard: $(cat "$log")"
  grep -q "cudaagent-profile: input is a stream" "$log" || fail "profile sharded again: $(cat "$log")"
done
ls "$OUT"/shards/*.partial 2>/dev/null && fail "a shard did not complete"
# Every task synth makes is filtered exactly once, in one shard or the other.
"$bin/cudaagent-synth" --quiet --seed 3 --count 6 --batch 2 --max-dim 16 --shard 0/1 | jq -r .id | sort -u >"$work/expected-ids"
cat "$OUT"/shards/tasks-*.jsonl | jq -r .id | sort >"$work/kept-ids"
[[ -z $(uniq -d "$work/kept-ids") ]] || fail "a task reached two shards"
comm -13 "$work/expected-ids" "$work/kept-ids" | grep -q . && fail "a shard holds a task synth did not make"
[[ -s $OUT/tasks.jsonl ]] || fail "the merge wrote no tasks.jsonl: $(cat "$OUT"/cudaagent-merge-*.log)"

# 3. The merge: one store, one file of tasks, one of scored records, a summary.
count() { sqlite3 "$OUT/store.db" "SELECT count(*) FROM results WHERE stage = '$1'"; }
[[ $(count filter) == $(wc -l <"$work/expected-ids") ]] ||
  fail "the merged store holds $(count filter) filter results for $(wc -l <"$work/expected-ids") tasks"
[[ $(count verify) == 2 && $(count reward) == 2 ]] || fail "merged store: verify $(count verify), reward $(count reward)"
[[ $(count profile) == 1 ]] || fail "merged store: $(count profile) profiles, expected the honest one's"
[[ $(jq -s length "$OUT/scored.jsonl") == 2 ]] || fail "scored.jsonl: $(cat "$OUT/scored.jsonl")"
[[ $(jq -r 'select(.id == "honest") | .reward.verdict' "$OUT/scored.jsonl") == PASS ]] ||
  fail "honest: $(jq -c 'select(.id == "honest") | .reward' "$OUT/scored.jsonl")"
[[ $(jq -r 'select(.id == "cheat") | .reward.value' "$OUT/scored.jsonl") == -1 ]] ||
  fail "cheat: $(jq -c 'select(.id == "cheat") | .verify.verdict' "$OUT/scored.jsonl")"
grep -q "pass rate" "$OUT/summary.txt" || fail "summary: $(cat "$OUT/summary.txt")"
for svg in "$OUT"/plots/*.svg; do
  python3 -c 'import sys, xml.etree.ElementTree as t; t.parse(sys.argv[1])' "$svg" || fail "$svg is not XML"
done
ls "$OUT"/plots/*.svg >/dev/null || fail "no plots"

# 4. The scoring again, from the merged store: every result is taken from it, nothing is added,
# and the rewards are the same.
sqlite3 "$OUT/store.db" "SELECT job_key FROM results ORDER BY job_key" >"$work/keys-before"
cp "$OUT/scored.jsonl" "$work/scored-before.jsonl"
export STORE=$OUT/store.db
submit rescore score.sbatch --array=0-1
sqlite3 "$OUT/store.db" "SELECT job_key FROM results ORDER BY job_key" >"$work/keys-after"
cmp -s "$work/keys-before" "$work/keys-after" || fail "re-running from the store added rows: $(diff "$work/keys-before" "$work/keys-after")"
cat "$OUT"/shards/scored-*.jsonl | jq -c '{id, reward: .reward.value, verify: .verify.store.hit, profile: .profile.store.hit}' | sort >"$work/rescored"
jq -c '{id, reward: .reward.value}' "$work/scored-before.jsonl" | sort >"$work/before"
jq -c '{id, reward}' "$work/rescored" | sort | cmp -s - "$work/before" || fail "the rewards changed: $(cat "$work/rescored")"
grep -q '"id":"honest","reward":[0-9],"verify":true,"profile":true' "$work/rescored" ||
  fail "the honest candidate was not taken from the store: $(cat "$work/rescored")"
echo ok
