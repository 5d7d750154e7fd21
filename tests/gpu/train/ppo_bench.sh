#!/usr/bin/env bash
# PPO update throughput and memory: cudaagent-train ppo against the same update in plain Python
# PyTorch + transformers (tests/gpu/train/ppo_update_reference.py), on the same GPU, in the same
# run, on the same random trajectories and the same random ~0.5B-shaped model (Qwen2-0.5B's
# shape). Reports, per side, the median over iterations after the first of the update's tokens
# per second (prompt + response tokens x PPO epochs / update time), the old-log-prob recompute
# tokens per second, and the peak GPU memory the process held (nvidia-smi, sampled every 0.2 s;
# Python also reports torch's max_memory_allocated). Writes OUT/summary.md and OUT/summary.json.
#
#   tests/gpu/train/ppo_bench.sh BIN_DIR OUT_DIR           on an H200
#   tests/gpu/train/ppo_bench.sh --smoke BIN_DIR OUT_DIR   on the CPU: the toy model, tiny sizes;
#                                                          the Python side only if transformers is there
#
# On the GPU, BIN_DIR is the cudaagent-train build of tests/gpu/train/parity.sh (against the
# libtorch inside the machine's PyTorch wheel; LD_LIBRARY_PATH must name torch's lib directory and
# the build's extra-lib, as parity.sh sets them), e.g. in one device call:
#   PARITY_BUILD_DIR=build/gpu-train PARITY_BUILD_ONLY=1 tests/gpu/train/parity.sh $OUT/parity
#   tests/gpu/train/ppo_bench.sh build/gpu-train/bin $OUT/ppo
# The data and the random Qwen2-0.5B-shaped model come from ppo_update_reference.py (make-data,
# make-model), so the GPU machine needs no test programs. Both sides train that same Hugging Face
# directory: cudaagent-train through train::CausalLm (float32 weights and AdamW, per-layer
# recomputation), Python with fp32 weights and AdamW; both compute in PRECISION: bf16 is
# bfloat16 autocast on the Python side and --compute-dtype bfloat16 on the C++ side, fp32 is
# float32 on both (on the CPU, --smoke, Python never autocasts, so the C++ side computes in float32
# too). COMPUTE_DTYPE overrides the C++ side's dtype. CPP_ACTOR overrides what the C++ side
# trains (for instance a toy spec, to time the machinery alone; toys compute in float32).
# Sizes (environment): ROWS=64 trajectories per iteration, ITERATIONS=3, PROMPT=512,
# RESPONSE=1536 tokens (TURNS=4 turns, the last fifth of each but the last an observation),
# MINI=16, MICRO=2, EPOCHS=1, PRECISION=bf16, PYTHON=python3.
#
# Mixed precision against autocast (issue 14: Qwen2-0.5B shape, 32 rows x 2048 tokens, actor and
# critic), from the repository root on an H200, in one device call:
#   PARITY_BUILD_DIR=build/gpu-train PARITY_BUILD_ONLY=1 tests/gpu/train/parity.sh $OUT/parity &&
#   ROWS=32 tests/gpu/train/ppo_bench.sh build/gpu-train/bin $OUT/ppo-bf16
# then read $OUT/ppo-bf16/summary.md: both ratios >= 1 is the goal; summary.json's
# sizes.cpp_compute_dtype says what the C++ side ran. PRECISION=fp32 (a separate call: float32
# products take several minutes) gives the float32 pair.
set -euo pipefail
smoke=0
if [[ ${1:-} == --smoke ]]; then
  smoke=1
  shift
fi
bin=$(cd "$1" && pwd)
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
if ((smoke)); then
  rows=${ROWS:-8} iterations=${ITERATIONS:-2} prompt=${PROMPT:-12} response=${RESPONSE:-40}
  turns=${TURNS:-2} mini=${MINI:-4} micro=${MICRO:-2} device=cpu shape=tiny vocab=512
  cpp_actor=${CPP_ACTOR:-toy:vocab=512,dim=32,hidden=64}
else
  rows=${ROWS:-64} iterations=${ITERATIONS:-3} prompt=${PROMPT:-512} response=${RESPONSE:-1536}
  turns=${TURNS:-4} mini=${MINI:-16} micro=${MICRO:-2} device=cuda shape=qwen2-0.5b vocab=151936
  cpp_actor=${CPP_ACTOR:-$out/model}
fi
epochs=${EPOCHS:-1}
precision=${PRECISION:-bf16}
case $precision in
  bf16) compute_dtype=bfloat16 ;;
  fp32) compute_dtype=float32 ;;
  *) echo "ppo_bench: PRECISION is bf16 or fp32, not $precision" >&2; exit 2 ;;
esac
# Python autocasts only on CUDA; toys compute in float32 only.
if ((smoke)) || [[ $cpp_actor == toy* ]]; then compute_dtype=float32; fi
compute_dtype=${COMPUTE_DTYPE:-$compute_dtype}

have_python_side=1
if ! "$python" -c 'import torch, transformers' 2>/dev/null; then
  ((smoke)) || { echo "ppo_bench: $python lacks torch or transformers" >&2; exit 1; }
  have_python_side=0
fi

if ((smoke)); then
  "$bin/cudaagent-test-trajectories" random --rows $((rows * iterations)) --prompt "$prompt" \
    --response "$response" --turns "$turns" --vocab "$vocab" --seed 1 >"$out/data.jsonl"
else
  "$python" "$here/ppo_update_reference.py" make-data --rows $((rows * iterations)) --prompt "$prompt" \
    --response "$response" --turns "$turns" --vocab "$vocab" --seed 1 >"$out/data.jsonl"
fi
# A parity.sh build finds the libraries the machine lacks in its extra-lib, and torch's in the wheel.
if [[ -d $bin/../extra-lib ]]; then
  torch_lib=$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  export LD_LIBRARY_PATH=$bin/../extra-lib:$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if ((have_python_side)) && [[ ! -f $out/model/config.json ]]; then
  "$python" "$here/ppo_update_reference.py" make-model --shape "$shape" --out "$out/model" >"$out/model.json"
fi

# Runs a command, sampling the GPU memory its process uses; the peak (MiB) goes to FILE.
run_sampled() {
  local file=$1
  shift
  "$@" &
  local pid=$! peak=0 used
  while kill -0 "$pid" 2>/dev/null; do
    if command -v nvidia-smi >/dev/null; then
      used=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
             awk -F', ' -v pid="$pid" '$1 == pid {print $2}')
      [[ -n $used ]] && ((used > peak)) && peak=$used
    fi
    sleep 0.2
  done
  local code=0
  wait "$pid" || code=$?
  echo "$peak" >"$file"
  return "$code"
}

# The C++ side: one invocation trains every iteration (old log-probs recomputed, as the Python
# side does), metrics per iteration in its run directory.
rm -rf "$out/cpp-run"
run_sampled "$out/cpp.peak_mib" "$bin/cudaagent-train" ppo --run "$out/cpp-run" --device "$device" \
  --actor "$cpp_actor" --critic "$cpp_actor" --old-log-probs recompute --batch-size "$rows" \
  --mini-batch-size "$mini" --micro-batch-size "$micro" --ppo-epochs "$epochs" \
  --compute-dtype "$compute_dtype" -q \
  "$out/data.jsonl" >"$out/cpp.jsonl" 2>"$out/cpp.err" || { cat "$out/cpp.err" >&2; exit 1; }

if ((have_python_side)); then
  run_sampled "$out/python.peak_mib" "$python" "$here/ppo_update_reference.py" train --model "$out/model" \
    --data "$out/data.jsonl" --device "$device" --precision "$precision" --batch-size "$rows" \
    --mini-batch-size "$mini" --micro-batch-size "$micro" --ppo-epochs "$epochs" \
    >"$out/python.jsonl" 2>"$out/python.err" || { cat "$out/python.err" >&2; exit 1; }
fi

# Medians over the iterations after the first (the first pays for warm-up), or the only one.
median() { jq -s "[.[1:][] | $1] as \$v | (if (\$v | length) == 0 then [.[0] | $1] else \$v end) | sort |
                  .[(length - 1) / 2 | floor]" "$2"; }
cpp_update=$(median '.["perf/update_tokens_per_s"]' "$out/cpp.jsonl")
cpp_old=$(median '.["perf/old_log_prob_tokens_per_s"]' "$out/cpp.jsonl")
py_update=null py_old=null py_alloc=null py_peak=null
if ((have_python_side)); then
  py_update=$(median '.update_tokens_per_s' "$out/python.jsonl")
  py_old=$(median '.old_log_prob_tokens_per_s' "$out/python.jsonl")
  py_alloc=$(jq -s 'map(.max_memory_allocated_gib // null) | max' "$out/python.jsonl")
  py_peak=$(cat "$out/python.peak_mib")
fi
jq -n --arg date "$(date -u +%F)" --arg gpu "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" \
  --arg commit "$(git -C "$here" rev-parse --short HEAD 2>/dev/null)" --arg actor "$cpp_actor" \
  --argjson rows "$rows" --argjson prompt "$prompt" --argjson response "$response" --argjson turns "$turns" \
  --argjson mini "$mini" --argjson micro "$micro" --argjson epochs "$epochs" --arg precision "$precision" \
  --arg compute_dtype "$compute_dtype" \
  --argjson cpp_update "$cpp_update" --argjson cpp_old "$cpp_old" --argjson cpp_peak "$(cat "$out/cpp.peak_mib")" \
  --argjson py_update "$py_update" --argjson py_old "$py_old" --argjson py_peak "$py_peak" --argjson py_alloc "$py_alloc" \
  '{date: $date, gpu: $gpu, commit: $commit, cpp_actor: $actor,
    sizes: {rows: $rows, prompt: $prompt, response: $response, turns: $turns, mini_batch: $mini,
            micro_batch: $micro, ppo_epochs: $epochs, python_precision: $precision,
            cpp_compute_dtype: $compute_dtype},
    cpp: {update_tokens_per_s: $cpp_update, old_log_prob_tokens_per_s: $cpp_old, peak_gpu_mib: $cpp_peak},
    python: {update_tokens_per_s: $py_update, old_log_prob_tokens_per_s: $py_old, peak_gpu_mib: $py_peak,
             max_memory_allocated_gib: $py_alloc},
    ratio: {update: (if $py_update then $cpp_update / $py_update else null end),
            old_log_prob: (if $py_old then $cpp_old / $py_old else null end)}}' >"$out/summary.json"
jq -r '"| side | update tokens/s | old log-prob tokens/s | peak GPU MiB |",
       "|---|---|---|---|",
       "| cudaagent-train | \(.cpp.update_tokens_per_s | floor) | \(.cpp.old_log_prob_tokens_per_s | floor) | \(.cpp.peak_gpu_mib) |",
       "| PyTorch + transformers | \(.python.update_tokens_per_s // "-" | if type == "number" then floor else . end) | \(.python.old_log_prob_tokens_per_s // "-" | if type == "number" then floor else . end) | \(.python.peak_gpu_mib // "-") |",
       "",
       "C++ / Python: update \(.ratio.update // "-"), old log-probs \(.ratio.old_log_prob // "-")"' \
  "$out/summary.json" | tee "$out/summary.md"
