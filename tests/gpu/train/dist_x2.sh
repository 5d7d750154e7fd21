#!/usr/bin/env bash
# Data parallelism of cudaagent-train ppo on the two GPUs of one host, started the way srun starts
# ranks (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, MASTER_ADDR, MASTER_PORT; rank r on GPU r), over
# an NCCL process group: gradients all-reduced in buckets, optimiser state sharded (ZeRO-1).
#
#   tests/gpu/train/dist_x2.sh OUT [BIN_DIR]
#
# BIN_DIR (default build/gpu-train/bin) holds cudaagent-train built against the machine's PyTorch
# wheel by parity.sh, e.g. in the same device call, from the repository root:
#   PARITY_BUILD_DIR=build/gpu-train PARITY_BUILD_ONLY=1 tests/gpu/train/parity.sh OUT/train-build
#   tests/gpu/train/dist_x2.sh OUT/dist
# (tests/gpu/lease_h200.sh dist does both.) Two parts, each with its logs under OUT:
#   parity      the fixtures' Qwen2 (tests/fixtures/train/qwen2-tiny: 2 layers, hidden 64, GQA,
#               q/k/v bias; PARITY_MODEL overrides) trained STEPS=3 PPO iterations in float32 by
#               one rank on cuda:0, then by two ranks, with the same global batch (PARITY_BATCH=16
#               trajectories, minibatches of half of it, micro-batches of 2 per rank). The actor's
#               and critic's tensors must agree within rtol 1e-3, atol 1e-4 (below); the last
#               iteration must have moved the actor beyond that; each rank's optimiser file must
#               hold part of the moments and both together all of them (ZeRO-1); both sides must
#               have seen the same batches, and rank 0 alone writes metrics.
#   throughput  ppo_bench.sh's random Qwen2-0.5B-shaped model (ppo_update_reference.py make-model)
#               on its random trajectories (ROWS=32 per iteration of PROMPT=512 + RESPONSE=1536
#               tokens in TURNS=4 turns, ITERATIONS=3, MINI=16, MICRO=2, bfloat16 compute,
#               old log-probs recomputed), on one GPU and on two with the same global batch: the
#               median over iterations after the first of rank 0's perf/update_tokens_per_s (the
#               whole batch's tokens over the update's wall time, so it is the job's rate), and
#               the ratio. Reported, never gated. THROUGHPUT=0 skips this part.
# RANKS=1 runs only the one-rank side of both parts (a single GPU can check that much: the PPO run
# with its checkpoints, and the one-GPU throughput). Writes OUT/summary.md (both tables;
# lease_h200.sh prints it) and exits 1 when a parity check fails or a run fails.
#
# Tolerances, rtol 1e-3 and atol 1e-4 per element. The two sides differ only in the order of
# float32 sums (each rank sums its share of a minibatch's gradients and NCCL sums the two ranks;
# one rank sums the same terms in one order; GPU kernels' atomics add an order of their own), a
# few units in the last place of each gradient, and most weights end up closer than 1e-6. AdamW
# divides each element's gradient by that element's running magnitude, though, so an element whose
# gradient is itself rounding noise takes a step of up to lr * |g| / eps that the order of the sums
# decides: k_proj's bias (softmax ignores a constant added to every key, so its gradient is 0 but
# for rounding) and embedding rows whose contributions cancel. In the CPU dry run those were up to
# 2e-5 apart after 3 steps (2% of one step at lr 1e-3), a few dozen of 349k elements. atol 1e-4 is
# 10% of one step; a rank's share of the gradient gone missing, or a parameter its ZeRO-1 owner
# never sent, moves elements by about the learning rate and fails. The detail column gives the
# largest difference, how many elements differ by more than 1e-6, and the L2 norm of the
# difference over that of training's move (2e-5 in the dry run). (A gradient wrong by one factor
# everywhere would pass: AdamW does not see the gradient's scale.) float32 is forced
# (--compute-dtype float32): bfloat16 products would round at 4e-3.
#
# CPU dry run, to test this script without a GPU (DEVICE=cpu, a CPU build with Gloo):
#   DEVICE=cpu tests/gpu/train/dist_x2.sh OUT build/release/bin
# runs the same parity over Gloo on the CPU, and the throughput part on the fixture model at tiny
# sizes (its numbers measure nothing). About 45 s on two cores.
#
# NVLink multicast (NVLS) stays off in every launch: NCCL_NVLS_ENABLE=0 is exported here, with
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1. On the GPU each two-rank launch
# also writes NCCL's own log (NCCL_DEBUG=INFO) to *.nccl.rankR.PID.log beside it; the summary
# quotes its version, the NCCL_NVLS_ENABLE it read and the transport of its first channel.
set -uo pipefail
(($# >= 1)) || { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../../.." && pwd)
here=$root/tests/gpu/train
out=$(mkdir -p "$1" && cd "$1" && pwd) || exit 1
bin=$(cd "${2:-$root/build/gpu-train/bin}" 2>/dev/null && pwd) ||
  { echo "dist_x2: no ${2:-build/gpu-train/bin} (parity.sh's build makes it)" >&2; exit 1; }
[[ -x $bin/cudaagent-train ]] || { echo "dist_x2: no cudaagent-train in $bin" >&2; exit 1; }
device=${DEVICE:-cuda}
python=${PYTHON:-python3}
dist_timeout=${DIST_TIMEOUT:-300}
# RANKS=1 runs the one-rank half alone (one GPU: what a single H200 can check of this script, its
# one-rank PPO with checkpoints and the one-GPU throughput); the default runs both halves.
ranks_list=${RANKS:-1 2}
case " $ranks_list " in
  " 1 2 ") two_ranks=1 needed_gpus=2 ;;
  " 1 ") two_ranks=0 needed_gpus=1 ;;
  *) echo "dist_x2: RANKS is \"1 2\" or 1, not \"$ranks_list\"" >&2; exit 2 ;;
esac
case $device in
  cuda) backend=nccl ;;
  cpu) backend=gloo ;;
  *) echo "dist_x2: DEVICE is cuda or cpu, not $device" >&2; exit 2 ;;
esac

# NVLink multicast off for every launch, in NCCL and in what else could reach it (the lent
# machines' rule: a program using it can put the host's GPUs out of service).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
echo "NCCL_NVLS_ENABLE=0 (NVLink multicast off) in every launch; backend $backend on $device"
# rank_from_environment prefers torchrun's variables to srun's: none may leak in from outside.
unset RANK WORLD_SIZE LOCAL_RANK
# A parity.sh build finds the libraries the machine lacks in its extra-lib, and torch's in the wheel.
if [[ -d $bin/../extra-lib ]]; then
  torch_lib=$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  export LD_LIBRARY_PATH=$bin/../extra-lib:$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
"$bin/cudaagent-train" --version >"$out/version.txt" 2>&1 || { cat "$out/version.txt" >&2; exit 1; }
if [[ $device == cuda ]]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  ((gpus >= needed_gpus)) || { echo "dist_x2: $gpus GPU(s) here; $needed_gpus needed (RANKS=\"$ranks_list\")" >&2; exit 1; }
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv >"$out/gpu.txt" 2>&1
  nvidia-smi topo -m >"$out/topology.txt" 2>&1
fi

running=()
stop_running() {
  local pid
  for pid in "${running[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${running[@]}"; do wait "$pid" 2>/dev/null; done
  running=()
}
trap 'stop_running; exit 130' INT TERM

# Ranks meet on a port nobody holds now.
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# launch PREFIX RANKS ARGS...: `cudaagent-train ppo ARGS` as RANKS ranks of one job, each with the
# variables srun gives a task; rank r's stdout and stderr in PREFIX.rankR.out/.err (rank 0's
# stdout holds the metrics). On the GPU, the memory each GPU uses is sampled into PREFIX.memory.csv.
# When a rank fails the others are stopped at once: they would wait for it until --dist-timeout.
launch() {
  local prefix=$1 ranks=$2 rank pid status code=0 sampler=""
  shift 2
  local port
  port=$(free_port) || return 1
  if [[ $device == cuda ]]; then
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 500 >"$prefix.memory.csv" 2>/dev/null &
    sampler=$!
  fi
  running=()
  for ((rank = 0; rank < ranks; rank++)); do
    (
      export SLURM_PROCID=$rank SLURM_NTASKS=$ranks SLURM_LOCALID=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port
      if [[ $device == cuda ]] && ((ranks > 1)) && [[ -z ${NCCL_DEBUG:-} ]]; then
        export NCCL_DEBUG=INFO NCCL_DEBUG_FILE=$prefix.nccl.rank$rank.%p.log
      fi
      exec "$bin/cudaagent-train" ppo --device "$device" --backend "$backend" --dist-timeout "$dist_timeout" "$@"
    ) >"$prefix.rank$rank.out" 2>"$prefix.rank$rank.err" &
    running+=($!)
  done
  local remaining=("${running[@]}") next
  while ((${#remaining[@]} > 0)); do
    next=()
    for pid in "${remaining[@]}"; do
      if kill -0 "$pid" 2>/dev/null; then
        next+=("$pid")
        continue
      fi
      wait "$pid"
      status=$?
      ((status != 0)) && code=$status
    done
    remaining=("${next[@]}")
    if ((code != 0)); then
      stop_running
      break
    fi
    ((${#remaining[@]} > 0)) && sleep 0.5
  done
  running=()
  if [[ -n $sampler ]]; then
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
  fi
  if ((code != 0)); then
    for ((rank = 0; rank < ranks; rank++)); do
      echo "--- $(basename "$prefix") rank $rank stderr (last lines)"
      tail -5 "$prefix.rank$rank.err"
    done >&2
  fi
  return "$code"
}

# Trajectories in the random layout ppo_bench.sh trains on: the test program where the build has
# it (CPU builds), else ppo_update_reference.py (the GPU machine's build has no test programs).
# make_data ROWS PROMPT RESPONSE TURNS VOCAB
make_data() {
  if [[ -x $bin/cudaagent-test-trajectories ]]; then
    "$bin/cudaagent-test-trajectories" random --rows "$1" --prompt "$2" --response "$3" --turns "$4" \
      --vocab "$5" --seed 1
  else
    "$python" "$here/ppo_update_reference.py" make-data --rows "$1" --prompt "$2" --response "$3" \
      --turns "$4" --vocab "$5" --seed 1
  fi
}

# How far apart two safetensors files are, beside the pass/fail of compare_tensors.py, so the
# results say how close "within numerics" was: the largest |a - b| and its tensor, how many
# elements differ by more than 1e-6, and, given the file the run started from, the L2 norm of the
# difference over the L2 norm of what training moved.
difference() {
  PYTHONPATH=$root/tests/train "$python" - "$@" <<'EOF'
import math
import sys
from compare_tensors import read
a, b = read(sys.argv[1]), read(sys.argv[2])
start = read(sys.argv[3]) if len(sys.argv) > 3 else None
worst, where, beyond, count, apart, moved = 0.0, "-", 0, 0, 0.0, 0.0
for name in sorted(set(a) & set(b)):
    x, y = a[name][2], b[name][2]
    for u, v in zip(x, y):
        d = abs(u - v)
        if d > worst:
            worst, where = d, name
        beyond += d > 1e-6
        apart += d * d
    count += len(x)
    if start is not None and name in start:
        moved += sum((u - w) ** 2 for u, w in zip(x, start[name][2]))
text = f"largest difference {worst:.2g} ({where}); {beyond} of {count} elements differ by more than 1e-6"
if start is not None and moved > 0:
    text += f"; L2 difference / L2 of training's move {math.sqrt(apart / moved):.1e}"
print(text)
EOF
}

# Safetensors entries (tensors) in a file: what each ZeRO-1 shard holds.
tensor_count() {
  "$python" -c 'import json, struct, sys
d = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", d[:8])[0]
print(len([k for k in json.loads(d[8:8 + n]) if k != "__metadata__"]))' "$1"
}

# The median over iterations after the first (the first pays for warm-up) of a metric of rank 0.
median_metric() {
  "$python" -c 'import json, statistics, sys
values = [json.loads(line).get(sys.argv[1]) for line in open(sys.argv[2]) if line.strip()]
values = [v for v in values if v is not None]
print(statistics.median(values[1:] or values) if values else "null")' "$1" "$2"
}

# A rate as a whole number, or "-" when the run reported none.
whole_number() { if [[ $1 == null ]]; then echo "-"; else printf '%.0f' "$1"; fi; }

# Each GPU's peak memory (MiB) while a launch ran, "GPU0 / GPU1 ..."; "-" on the CPU.
peak_memory() {
  [[ -s $1 ]] || { echo "-"; return; }
  awk -F', *' '$2 + 0 > peak[$1] { peak[$1] = $2 + 0 } END { n = 0; for (g in peak) n++;
    line = ""; for (g = 0; g < n; g++) line = line (g ? " / " : "") peak[g]; print line }' "$1"
}

failed=0
summary=$out/summary.md
: >"$summary"

# ---------- parity ----------
parity=$out/parity
rm -rf "$parity" && mkdir -p "$parity"
model=${PARITY_MODEL:-$root/tests/fixtures/train/qwen2-tiny}
steps=${STEPS:-3}
batch=${PARITY_BATCH:-16}
rtol=1e-3 atol=1e-4
vocab=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$model/config.json")
make_data $((batch * steps)) 64 192 2 "$vocab" >"$parity/data.jsonl" || { echo "dist_x2: no parity data" >&2; exit 1; }
flags=(--actor "$model" --critic "$model" --compute-dtype float32 --batch-size "$batch"
       --mini-batch-size $((batch / 2)) --micro-batch-size 2 --actor-lr 1e-3 --critic-lr 1e-3
       --old-log-probs recompute --save-every 1 -q)
# Two ranks on two cores: one thread each keeps them from fighting over the cores.
[[ $device == cpu ]] && flags+=(--threads 1)
rows=()
row() { rows+=("| $1 | $2 | $3 |"); [[ $2 == pass ]] || failed=1; }
t0=$SECONDS
launch "$parity/one" 1 --run "$parity/one" "${flags[@]}" "$parity/data.jsonl"
one_code=$?
two_code=0
if ((two_ranks)); then
  launch "$parity/two" 2 --run "$parity/two" "${flags[@]}" "$parity/data.jsonl"
  two_code=$?
fi
echo "parity runs: one rank exit $one_code$( ((two_ranks)) && echo ", two ranks exit $two_code"), $((SECONDS - t0)) s"
# Every iteration saved a checkpoint and the run keeps the last two (--keep-checkpoints' default):
# the older ones were removed, which is where a libstdc++ function bound to the wrong library
# once crashed the program.
if ((one_code == 0)); then
  kept=$(find "$parity/one/checkpoints" -mindepth 1 -maxdepth 1 -type d -name 'iter-*' | wc -l)
  if ((kept == 2 || (steps < 2 && kept == steps))); then
    row "one rank: $steps iterations, a checkpoint each, the last 2 kept" pass "$kept checkpoint folders left"
  else
    row "one rank: $steps iterations, a checkpoint each, the last 2 kept" fail "$kept checkpoint folders left"
  fi
fi
if ((one_code != 0 || two_code != 0)); then
  row "PPO runs (1 and 2 ranks)" fail "exit $one_code and $two_code (logs: parity/*.err)"
elif ((two_ranks)); then
  one=$parity/one/checkpoints/$(cat "$parity/one/checkpoints/latest")
  two=$parity/two/checkpoints/$(cat "$parity/two/checkpoints/latest")
  for file in actor/model.safetensors critic/model.safetensors critic/value_head.safetensors; do
    [[ -f $one/$file ]] || continue
    if message=$("$python" "$root/tests/train/compare_tensors.py" "$one/$file" "$two/$file" --rtol "$rtol" --atol "$atol"); then
      row "$file: 1 vs 2 ranks after $steps PPO steps, global batch $batch" pass \
        "$(difference "$one/$file" "$two/$file" "$model/model.safetensors"); rtol $rtol, atol $atol"
    else
      row "$file: 1 vs 2 ranks after $steps PPO steps, global batch $batch" fail "$message"
    fi
  done
  # The comparison means something only if the last step moved the weights beyond the tolerance.
  before=$parity/one/checkpoints/$(printf 'iter-%08d' $((steps - 1)))/actor/model.safetensors
  if [[ -f $before ]]; then
    if "$python" "$root/tests/train/compare_tensors.py" "$before" "$one/actor/model.safetensors" \
      --rtol "$rtol" --atol "$atol" >/dev/null; then
      row "the last step moved the actor beyond the tolerance" fail "step $steps left it within tolerance"
    else
      row "the last step moved the actor beyond the tolerance" pass \
        "step $steps: $(difference "$before" "$one/actor/model.safetensors")"
    fi
  fi
  for role in actor critic; do
    whole=$(tensor_count "$one/optim-$role.rank-0-of-1.safetensors" 2>/dev/null)
    first=$(tensor_count "$two/optim-$role.rank-0-of-2.safetensors" 2>/dev/null)
    second=$(tensor_count "$two/optim-$role.rank-1-of-2.safetensors" 2>/dev/null)
    whole=${whole:-0} first=${first:-0} second=${second:-0}
    if ((first > 0 && second > 0 && first + second == whole)); then
      row "ZeRO-1: $role optimiser state split over the ranks" pass "$first + $second = $whole tensors"
    else
      row "ZeRO-1: $role optimiser state split over the ranks" fail "$first + $second tensors, one rank: $whole"
    fi
  done
  scores=$("$python" -c 'import json, sys
mean = lambda path: [json.loads(line)["critic/score/mean"] for line in open(path) if line.strip()]
print("same" if mean(sys.argv[1]) == mean(sys.argv[2]) and len(mean(sys.argv[1])) == int(sys.argv[3]) else "different")' \
    "$parity/one.rank0.out" "$parity/two.rank0.out" "$steps")
  if [[ $scores == same ]]; then
    row "both sides trained the same $steps batches" pass "critic/score/mean per iteration equal"
  else
    row "both sides trained the same $steps batches" fail "critic/score/mean per iteration differ"
  fi
  if [[ ! -s $parity/two.rank1.out ]]; then
    row "rank 0 alone writes metrics" pass "rank 1's stdout empty"
  else
    row "rank 0 alone writes metrics" fail "rank 1 wrote $(wc -l <"$parity/two.rank1.out") lines"
  fi
fi
{
  if ((two_ranks)); then
    echo "### Parity: 1 vs 2 ranks ($backend on $device, float32, $(basename "$model"))"
  else
    echo "### One rank only, RANKS=1 ($device, float32, $(basename "$model")): nothing compared"
  fi
  echo
  echo "| check | result | detail |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  # What NCCL reports of itself, from rank 0's log of the two-rank run.
  nccl_log=$(ls "$parity"/two.nccl.rank0.*.log 2>/dev/null | head -1)
  if [[ -n $nccl_log ]]; then
    echo
    version=$(grep -m1 -o 'NCCL version [^ ]*' "$nccl_log" || echo 'NCCL version not reported')
    nvls=$(grep -m1 -o 'NCCL_NVLS_ENABLE set by environment to [0-9]*' "$nccl_log" || echo 'NCCL_NVLS_ENABLE not reported')
    channel=$(grep -m1 -oE 'via [^ ]+' "$nccl_log" || echo 'not reported')
    echo "NCCL, from rank 0's log: $version; $nvls; first channel $channel"
  fi
  echo
} >>"$summary"

# ---------- throughput ----------
if [[ ${THROUGHPUT:-1} == 1 ]]; then
  speed=$out/throughput
  mkdir -p "$speed"
  if [[ $device == cuda ]]; then
    rows_per=${ROWS:-32} iterations=${ITERATIONS:-3} prompt=${PROMPT:-512} response=${RESPONSE:-1536}
    turns=${TURNS:-4} mini=${MINI:-16} micro=${MICRO:-2} dtype=${COMPUTE_DTYPE:-bfloat16} vocab=151936
    big=${THROUGHPUT_MODEL:-$speed/model} label="Qwen2-0.5B shape, random weights"
    if [[ ! -f $big/config.json ]]; then
      "$python" "$here/ppo_update_reference.py" make-model --shape qwen2-0.5b --out "$big" >"$speed/model.json" 2>"$speed/model.err" ||
        { tail -5 "$speed/model.err" >&2; failed=1; }
    fi
  else
    rows_per=${ROWS:-8} iterations=${ITERATIONS:-2} prompt=${PROMPT:-12} response=${RESPONSE:-40}
    turns=${TURNS:-2} mini=${MINI:-4} micro=${MICRO:-2} dtype=float32
    big=${THROUGHPUT_MODEL:-$model} label=$(basename "$big")
    vocab=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$big/config.json")
  fi
  if [[ -f $big/config.json ]]; then
    make_data $((rows_per * iterations)) "$prompt" "$response" "$turns" "$vocab" >"$speed/data.jsonl"
    flags=(--actor "$big" --critic "$big" --compute-dtype "$dtype" --old-log-probs recompute
           --batch-size "$rows_per" --mini-batch-size "$mini" --micro-batch-size "$micro" --ppo-epochs 1 -q)
    [[ $device == cpu ]] && flags+=(--threads 1)
    table=()
    declare -A update old
    for ranks in $ranks_list; do
      t0=$SECONDS
      rm -rf "$speed/run$ranks"
      if launch "$speed/run$ranks" "$ranks" --run "$speed/run$ranks" "${flags[@]}" "$speed/data.jsonl"; then
        update[$ranks]=$(median_metric perf/update_tokens_per_s "$speed/run$ranks.rank0.out")
        old[$ranks]=$(median_metric perf/old_log_prob_tokens_per_s "$speed/run$ranks.rank0.out")
        table+=("| $ranks | $(whole_number "${update[$ranks]}") | $(whole_number "${old[$ranks]}") | $(peak_memory "$speed/run$ranks.memory.csv") | $((SECONDS - t0)) |")
      else
        failed=1
        table+=("| $ranks | failed | - | - | $((SECONDS - t0)) |")
      fi
      # The end-of-run checkpoint of a 0.5B model and its optimiser state is gigabytes of noise.
      rm -rf "$speed/run$ranks/checkpoints"
    done
    ratio=$("$python" -c 'import sys
u1, u2, o1, o2 = sys.argv[1:]
r = lambda a, b: f"{float(b) / float(a):.2f}x" if a not in ("", "null") and b not in ("", "null") else "-"
print(f"update {r(u1, u2)}, old log-probs {r(o1, o2)}")' "${update[1]:-}" "${update[2]:-}" "${old[1]:-}" "${old[2]:-}")
    what="GPUs"
    [[ $device == cpu ]] && what="CPU ranks (dry run: not a measurement)"
    {
      echo "### PPO update throughput, 1 vs 2 $what"
      echo
      echo "$label: $rows_per trajectories per iteration (global) of $prompt + $response tokens, $turns turns," \
        "$iterations iterations, minibatch $mini, micro-batch $micro per rank, $dtype compute, old log-probs recomputed;" \
        "medians over iterations after the first of rank 0's tokens/s (the whole batch over the wall time)"
      echo
      echo "| ranks | update tokens/s | old log-prob tokens/s | peak GPU MiB (per GPU) | run s |"
      echo "|---|---|---|---|---|"
      printf '%s\n' "${table[@]}"
      echo
      echo "2 / 1: $ratio"
    } >>"$summary"
  else
    echo "### PPO update throughput: no model (see throughput/model.err)" >>"$summary"
  fi
fi

cat "$summary"
if ((failed)); then
  echo "dist_x2: FAILED (logs in $out)"
  exit 1
fi
echo "dist_x2: ok"
