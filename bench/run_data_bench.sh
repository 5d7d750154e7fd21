#!/usr/bin/env bash
# The data pipeline end to end (issue 5): cudaagent-synth -> cudaagent-filter -> cudaagent-dedup,
# measured: per-stage throughput, the keep rate and why tasks were rejected, the depth mix and
# eager times of the kept tasks, and the GPU-hours that --target kept tasks would cost at the
# measured rate. A run cut short by --seconds is a sample: the extrapolation is from it.
#
# Usage: bench/run_data_bench.sh --out DIR [options]
#   --out DIR              everything goes here (created): tasks.jsonl, filtered.jsonl, filter.db,
#                          filter.err, kept.jsonl, deduped.jsonl, dropped.jsonl,
#                          stream-deduped.jsonl (the whole synthesised stream deduplicated),
#                          stages.env, summary.json
#   --device cuda|cpu      the filter's device (default cuda). cpu is a smoke test: tiny tasks
#                          (synth --batch 2 --max-dim 16) and the window 0.001,1000 ms
#   --count N              tasks to synthesise (default 6000)
#   --seed S               synth seed (default 1)
#   --jobs W               filter --jobs (default on cuda: half the cores, at most 8 per GPU,
#                          at least 2: check jobs are CPU-bound (torch.compile on one thread
#                          each) and share their GPU's memory; 2 on cpu)
#   --gpus LIST            filter --gpus (default CUDA_VISIBLE_DEVICES, else every /dev/nvidiaN)
#   --seconds LIMIT        stop the filter after LIMIT s of wall clock, 0 for none (default 0):
#                          SIGTERM, so tasks not started are dropped, running ones finish and
#                          every finished record is written; SIGKILL --grace s later
#   --grace S              (default 120) records written by then stay in filtered.jsonl, results
#                          stay in filter.db: a second run on the same --out takes them from there
#   --timeout S            filter's limit per harness job (default 300)
#   --window-ms LO,HI      filter's window (default 1,100 on cuda, 0.001,1000 on cpu)
#   --reference [NAME=]PATH  dedup reference set, repeatable (a KernelBench level directory...);
#                          without one, tasks are deduplicated against each other only
#   --target K             kept tasks to extrapolate for (default 6000)
#   --bin DIR              binaries (default $CUDAAGENT_BIN, else build/release/bin)
#   --synth-arg ARG, --filter-arg ARG   one more argument for that stage (repeatable)
#   --summarize-only       run no stage: summarise an earlier run's --out again (its stages.env)
# Prints a summary table on stdout; summary.json holds the same and more. Needs jq and awk.
# On the H200 (a sample of 6,000 tasks in a fixed time, then extrapolated), after
# tests/gpu/filter_check.sh has passed:
#   bench/run_data_bench.sh --device cuda --count 16000 --seconds 360 --grace 90 --out $OUT/data \
#     --reference kb1=.kernelbench/KernelBench/level1 --reference kb2=.kernelbench/KernelBench/level2 \
#     --reference kb3=.kernelbench/KernelBench/level3
# Extrapolation: dedup drops more of a longer stream (tasks with the same operators and other
# sizes are duplicates), so the sample's own dedup rate is not used for it. The whole synthesised
# stream is deduplicated (CPU only); the kept tasks needed are the m whose stream prefix holds
# --target distinct tasks (--count must be large enough), and m / the filter's keep rate tasks
# must be filtered, at the measured rate.
# Throughput counts only tasks filtered in this run (results taken from filter.db are left out);
# "per GPU" divides by the GPUs the filter used, and GPU-hours are wall hours times that number.
# "timing slot alone" is the floor: the seconds the timing slots were held (one timing job per GPU
# at a time), however many check jobs run beside them.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out="" device=cuda count=6000 seed=1 jobs="" gpus="" seconds=0 grace=120 timeout=300 window=""
target=6000 bin=${CUDAAGENT_BIN:-$here/build/release/bin} summarize_only=0
references=() synth_extra=() filter_extra=()
usage() { sed -n '7,47p' "$0" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }
while (($#)); do
  case $1 in
    --out) out=$2 ;;
    --device) device=$2 ;;
    --count) count=$2 ;;
    --seed) seed=$2 ;;
    --jobs) jobs=$2 ;;
    --gpus) gpus=$2 ;;
    --seconds) seconds=$2 ;;
    --grace) grace=$2 ;;
    --timeout) timeout=$2 ;;
    --window-ms) window=$2 ;;
    --reference) references+=(--reference "$2") ;;
    --target) target=$2 ;;
    --bin) bin=$2 ;;
    --summarize-only) summarize_only=1; shift; continue ;;
    --synth-arg) synth_extra+=("$2") ;;
    --filter-arg) filter_extra+=("$2") ;;
    -h|--help) usage 0 ;;
    *) echo "run_data_bench: unknown argument '$1'" >&2; usage ;;
  esac
  (($# >= 2)) || { echo "run_data_bench: $1 needs a value" >&2; exit 2; }
  shift 2
done
[[ -n $out ]] || { echo "run_data_bench: --out DIR is required" >&2; usage; }
[[ $device == cuda || $device == cpu ]] || { echo "run_data_bench: --device is cuda or cpu" >&2; exit 2; }
for n in "$count" "$seconds" "$grace" "$target"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "run_data_bench: '$n' is not a whole number" >&2; exit 2; }
done
for tool in synth filter dedup; do
  ((summarize_only)) || [[ -x $bin/cudaagent-$tool ]] ||
    { echo "run_data_bench: no $bin/cudaagent-$tool (--bin)" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "run_data_bench: needs jq" >&2; exit 1; }
mkdir -p "$out" || exit 1
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

run_stages() {
  run_date=$(date -u +%FT%TZ)
  # The GPUs the filter will use (0 on the CPU device).
  ngpus=0 gpu_name=""
  if [[ $device == cuda ]]; then
    if [[ -n $gpus ]]; then
      ngpus=$(awk -F, '{ print NF }' <<<"$gpus")
    elif [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
      ngpus=$(awk -F, '{ print NF }' <<<"$CUDA_VISIBLE_DEVICES")
    else
      ngpus=$(find /dev -maxdepth 1 -name 'nvidia[0-9]*' | wc -l)
    fi
    ((ngpus > 0)) || { echo "run_data_bench: --device cuda, but no GPU (see --gpus)" >&2; exit 1; }
    gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
    cores=$(nproc)
    jobs=${jobs:-$(( cores / 2 < 8 * ngpus ? (cores / 2 > 2 ? cores / 2 : 2) : 8 * ngpus ))}
    window=${window:-1,100}
  else
    jobs=${jobs:-2}
    window=${window:-0.001,1000}
    synth_extra=(--batch 2 --max-dim 16 "${synth_extra[@]}")
  fi

  # 1. Synthesise.
  start=$(now)
  "$bin/cudaagent-synth" -q --seed "$seed" --count "$count" "${synth_extra[@]}" -o "$out/tasks.jsonl" \
    2>"$out/synth.err" || { echo "run_data_bench: synth failed: $(tail -3 "$out/synth.err")" >&2; exit 1; }
  synth_s=$(elapsed "$start" "$(now)")
  synth_tasks=$(jq -c 'select(.task)' "$out/tasks.jsonl" | wc -l)

  # 2. Filter. Records go straight to the file (not -o, which renames at the end), so whatever was
  # written survives even the SIGKILL; each result is in filter.db before its record is written.
  filter_args=(--device "$device" --jobs "$jobs" --timeout "$timeout" --window-ms "$window"
               --db "$out/filter.db")
  [[ -n $gpus ]] && filter_args+=(--gpus "$gpus")
  limit=()
  ((seconds > 0)) && limit=(timeout --preserve-status --signal=TERM --kill-after="$grace" "$seconds")
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  start=$(now)
  "${limit[@]}" "$bin/cudaagent-filter" "${filter_args[@]}" "${filter_extra[@]}" "$out/tasks.jsonl" \
    >"$out/filtered.jsonl" 2>"$out/filter.err"
  filter_rc=$?
  filter_s=$(elapsed "$start" "$(now)")
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  from_store=$(grep -o '[0-9]* from the store' "$out/filter.err" | tail -1 | cut -d' ' -f1)
  from_store=${from_store:-0}
  if ((filter_rc != 0 && filter_rc != 143)); then
    echo "run_data_bench: filter exit $filter_rc (summary from the records written): $(tail -2 "$out/filter.err")" >&2
  fi

  # 3. Dedup the kept tasks.
  jq -c 'select(.filter.kept == true)' "$out/filtered.jsonl" >"$out/kept.jsonl"
  start=$(now)
  "$bin/cudaagent-dedup" -q "${references[@]}" --dropped "$out/dropped.jsonl" "$out/kept.jsonl" \
    -o "$out/deduped.jsonl" 2>"$out/dedup.err"
  dedup_rc=$?
  dedup_s=$(elapsed "$start" "$(now)")
  ((dedup_rc == 0)) || echo "run_data_bench: dedup exit $dedup_rc: $(tail -2 "$out/dedup.err")" >&2
  [[ -f $out/deduped.jsonl ]] || : >"$out/deduped.jsonl"
  [[ -f $out/dropped.jsonl ]] || : >"$out/dropped.jsonl"
  # 3b. Dedup the whole synthesised stream too (CPU only): how the share of distinct tasks falls
  # as the stream grows. A sample's own dedup rate says little about 6,000 tasks: two tasks with
  # the same operators and other sizes are duplicates, and the catalog's chains run out.
  start=$(now)
  "$bin/cudaagent-dedup" -q --jobs "$(nproc)" "${references[@]}" "$out/tasks.jsonl" \
    -o "$out/stream-deduped.jsonl" 2>"$out/stream-dedup.err"
  stream_dedup_rc=$?
  stream_dedup_s=$(elapsed "$start" "$(now)")
  ((stream_dedup_rc == 0)) || echo "run_data_bench: stream dedup exit $stream_dedup_rc" >&2
  [[ -f $out/stream-deduped.jsonl ]] || : >"$out/stream-deduped.jsonl"
  nrefs=$((${#references[@]} / 2))
  declare -p run_date device ngpus gpu_name jobs window timeout seconds count seed target nrefs synth_s \
    synth_tasks filter_s filter_rc load_before load_after from_store dedup_s dedup_rc \
    stream_dedup_s stream_dedup_rc |
    sed 's/^declare -[a-z-]* /declare -g /' >"$out/stages.env"
}

if ((summarize_only)); then
  # shellcheck disable=SC1091
  source "$out/stages.env" || { echo "run_data_bench: no $out/stages.env to summarise" >&2; exit 1; }
else
  run_stages
fi

# 4. Summarise.
jq -n \
  --slurpfile tasks <(jq -c 'select(.task) | {depth: .task.meta.depth}' "$out/tasks.jsonl") \
  --slurpfile filtered <(jq -c '{id, error: (.error != null), depth: .task.meta.depth?,
                                  est: .task.meta.est_eager_ms?, filter}' "$out/filtered.jsonl") \
  --slurpfile deduped <(jq -c '{dedup}' "$out/deduped.jsonl") \
  --slurpfile dropped <(jq -c '{dedup}' "$out/dropped.jsonl") \
  --slurpfile stream <(jq -c '.task.meta.index' "$out/stream-deduped.jsonl") \
  --argjson stream_dedup_s "$stream_dedup_s" \
  --arg device "$device" --arg gpu "$gpu_name" --argjson ngpus "$ngpus" --argjson jobs "$jobs" \
  --argjson count "$count" --argjson seed "$seed" --argjson synth_tasks "$synth_tasks" \
  --argjson synth_s "$synth_s" --argjson filter_s "$filter_s" --argjson filter_rc "$filter_rc" \
  --argjson limit_s "$seconds" --argjson from_store "$from_store" --arg window "$window" \
  --argjson timeout "$timeout" --argjson dedup_s "$dedup_s" --argjson dedup_rc "$dedup_rc" \
  --argjson target "$target" --arg load_before "$load_before" --arg load_after "$load_after" \
  --arg host "$(hostname)" --arg cores "$(nproc)" --arg date "$run_date" \
  --argjson nrefs "$nrefs" '
  def hist: group_by(.) | map({key: (.[0] | tostring), value: length}) | from_entries;
  def pct($p): if length == 0 then null else sort | .[((length - 1) * $p) | floor] end;
  def dist: {n: length, p5: pct(0.05), p25: pct(0.25), p50: pct(0.5), p75: pct(0.75),
             p95: pct(0.95), max: (if length == 0 then null else max end)};
  def per($n; $d): if $d > 0 then $n / $d else null end;
  def round3: if . == null then null else (. * 1000 | round) / 1000 end;
  ($filtered | map(select(.filter != null))) as $f
  | ($f | map(select(.filter.kept))) as $k
  | ($f | map(select(.filter.kept | not))) as $r
  | ($f | length - $from_store) as $fresh
  | ($deduped | length) as $final
  | per($fresh; $filter_s) as $rate
  | per($final; $f | length) as $final_rate
  | ($stream | sort) as $distinct
  | (per($k | length; $f | length)) as $keep
  # Kept tasks needed: m such that the first m tasks of a stream hold $target distinct ones (the
  # kept tasks are a sample of the same kind of stream); then m / keep rate tasks to filter.
  | (if ($distinct | length) >= $target and $target > 0 then $distinct[$target - 1] + 1 else null end) as $m
  | (if $m != null and $keep != null and $keep > 0 then $m / $keep else null end) as $needed
  | ($f | map(.filter.seconds.slot // 0) | add // 0) as $slot_sum
  | {
      date: $date, host: $host, cores: $cores, device: $device, gpus: $ngpus,
      gpu: (if $gpu != "" then $gpu else ($f | map(.filter.gpu // empty) | first // "") end),
      load_before: $load_before, load_after: $load_after,
      synth: {count: $count, seed: $seed, tasks: $synth_tasks, seconds: $synth_s,
              tasks_per_s: per($synth_tasks; $synth_s), depth: ($tasks | map(.depth) | hist)},
      filter: {jobs: $jobs, window_ms: $window, timeout_s: $timeout, limit_s: $limit_s,
               exit: $filter_rc, seconds: $filter_s, records: ($filtered | length),
               filtered: ($f | length), from_store: $from_store, fresh: $fresh,
               not_reached: ($synth_tasks - ($filtered | length)),
               error_records: ($filtered | map(select(.error)) | length),
               tasks_per_s: ($rate | round3),
               tasks_per_s_per_gpu: (if $ngpus > 0 and $rate != null then $rate / $ngpus | round3 else null end),
               gpu_hours_used: (if $ngpus > 0 then $filter_s * $ngpus / 3600 | round3 else null end),
               kept: ($k | length), rejected: ($r | length),
               keep_rate: (per($k | length; $f | length) | round3),
               reasons: ($f | map(.filter.reasons[].check) | hist),
               first_reason: ($r | map(.filter.reasons[0].check) | hist),
               eager_time: ($r | map(.filter.reasons[] | select(.check == "eager_time") |
                                     if (.detail | test("below")) then "below" else "above" end) | hist),
               compile: ($f | map(.filter.compile | sub(":.*"; "")) | hist),
               determinism: ($f | map(.filter.determinism // "null") | hist),
               kept_depth: ($k | map(.depth) | hist),
               depth_keep_rate: ($f | group_by(.depth) | map({key: (.[0].depth | tostring),
                                  value: (((map(select(.filter.kept)) | length) / length) | round3)})
                                | from_entries),
               kept_eager_ms: ($k | map(.filter.eager_ms.median) | dist | map_values(round3)),
               kept_eager_ms_buckets: ($k | map(.filter.eager_ms.median |
                   if . < 1 then "<1" elif . < 2 then "1-2" elif . < 5 then "2-5"
                   elif . < 10 then "5-10" elif . < 20 then "10-20" elif . < 50 then "20-50"
                   elif . <= 100 then "50-100" else ">100" end) | hist),
               measured_over_estimate: ($f | map(select(.filter.eager_ms != null and .est != null and .est > 0)
                                             | .filter.eager_ms.median / .est) | dist | map_values(round3)),
               job_seconds: {worker_start_sum: ($f | map(.filter.seconds.worker_start // 0) | add // 0 | round3),
                             check: ($f | map(.filter.seconds.check // 0) | dist | map_values(round3)),
                             timing: ($f | map(select(.filter.seconds.time > 0) | .filter.seconds.time) | dist | map_values(round3)),
                             slot: ($f | map(select(.filter.seconds.slot > 0) | .filter.seconds.slot) | dist | map_values(round3)),
                             slot_wait: ($f | map(select(.filter.seconds.time > 0) | .filter.seconds.slot_wait // 0) | dist | map_values(round3)),
                             slot_sum: ($slot_sum | round3)}},
      dedup: {references: $nrefs, in: ($k | length), kept: $final, dropped: ($dropped | length),
              exit: $dedup_rc, seconds: $dedup_s, tasks_per_s: per($k | length; $dedup_s),
              nearest_of_dropped: ($dropped | map(.dedup.nearest.set // "none") | hist)},
      stream_dedup: {seconds: $stream_dedup_s, tasks: $synth_tasks, distinct: ($distinct | length),
                     distinct_in_first: ([100, 300, 1000, 2000, 3000, 4000, 6000, 8000, 12000, 16000, 24000, 32000]
                                         | map(select(. <= $synth_tasks)) + [$synth_tasks] | unique
                                         | map(. as $n | {key: ($n | tostring),
                                                          value: ($distinct | map(select(. < $n)) | length)})
                                         | from_entries)},
      extrapolation: {target: $target, final_keep_rate: ($final_rate | round3),
                      kept_needed: $m,
                      note: (if $m == null then "fewer than \($target) distinct tasks in the \($synth_tasks) synthesised: raise --count" else null end),
                      tasks_to_filter: (if $needed != null then $needed | ceil else null end),
                      filter_hours_wall: (if $needed != null and $rate != null then $needed / $rate / 3600 | round3 else null end),
                      filter_gpu_hours: (if $needed != null and $rate != null and $ngpus > 0 then $needed / $rate / 3600 * $ngpus | round3 else null end),
                      timing_slot_gpu_hours: (if $needed != null and ($f | length) > 0 and $ngpus > 0 then $needed * $slot_sum / ($f | length) / 3600 | round3 else null end)}
    }' >"$out/summary.json" || { echo "run_data_bench: cannot summarise" >&2; exit 1; }

jq -r '
  def kv: if length == 0 then "none" else to_entries | map("\(.key): \(.value)") | join(", ") end;
  def d: "p5 \(.p5), p25 \(.p25), p50 \(.p50), p75 \(.p75), p95 \(.p95), max \(.max) (n \(.n))";
  "data bench \(.date) on \(.host) (\(.cores) cores, load \(.load_before) -> \(.load_after)), device \(.device)\(if .gpu != "" then " (\(.gpus) x \(.gpu))" else "" end)",
  "",
  "| stage | measure | value |", "|---|---|---|",
  "| synth | tasks (seed \(.synth.seed)) | \(.synth.tasks) in \(.synth.seconds) s (\(.synth.tasks_per_s | floor)/s) |",
  "| synth | depth | \(.synth.depth | kv) |",
  "| filter | settings | --jobs \(.filter.jobs), window \(.filter.window_ms) ms, timeout \(.filter.timeout_s) s, limit \(.filter.limit_s) s |",
  "| filter | wall, exit | \(.filter.seconds) s, exit \(.filter.exit) |",
  "| filter | tasks filtered | \(.filter.filtered) of \(.synth.tasks) (\(.filter.from_store) from the store, \(.filter.not_reached) not reached, \(.filter.error_records) error records) |",
  "| filter | tasks/s | \(.filter.tasks_per_s) wall, \(.filter.tasks_per_s_per_gpu) per GPU |",
  "| filter | GPU-hours used | \(.filter.gpu_hours_used) |",
  "| filter | kept | \(.filter.kept) (keep rate \(.filter.keep_rate)) |",
  "| filter | rejections (every reason) | \(.filter.reasons | kv) |",
  "| filter | first reason | \(.filter.first_reason | kv) |",
  "| filter | eager_time | \(.filter.eager_time | kv) |",
  "| filter | compile | \(.filter.compile | kv) |",
  "| filter | kept depth | \(.filter.kept_depth | kv) |",
  "| filter | keep rate by depth | \(.filter.depth_keep_rate | kv) |",
  "| filter | kept eager ms | \(.filter.kept_eager_ms | d) |",
  "| filter | kept eager ms buckets | \(.filter.kept_eager_ms_buckets as $b |
      ["<1", "1-2", "2-5", "5-10", "10-20", "20-50", "50-100", ">100"] |
      map(select($b[.]) | "\(.): \($b[.])") | if length == 0 then "none" else join(", ") end) |",
  "| filter | measured / estimated ms | \(.filter.measured_over_estimate | d) |",
  "| filter | check job s | \(.filter.job_seconds.check | d) |",
  "| filter | timing job s (without the wait) | \(.filter.job_seconds.timing | d) |",
  "| filter | timing slot held s | \(.filter.job_seconds.slot | d); sum \(.filter.job_seconds.slot_sum) |",
  "| filter | timing slot wait s | \(.filter.job_seconds.slot_wait | d) |",
  "| filter | worker starts s (sum) | \(.filter.job_seconds.worker_start_sum) |",
  "| dedup | kept, dropped | \(.dedup.kept) of \(.dedup.in), dropped \(.dedup.dropped) (nearest: \(.dedup.nearest_of_dropped | kv)); \(.dedup.references) reference sets |",
  "| dedup | wall | \(.dedup.seconds) s, exit \(.dedup.exit) |",
  "| total | final keep rate (this sample) | \(.extrapolation.final_keep_rate) |",
  "| stream dedup | distinct tasks in the first N synthesised | \(.stream_dedup.distinct_in_first | kv) (\(.stream_dedup.seconds) s) |",
  "| extrapolation | kept tasks needed for \(.extrapolation.target) distinct | \(.extrapolation.kept_needed // .extrapolation.note) |",
  "| extrapolation | tasks to filter for \(.extrapolation.target) distinct kept | \(.extrapolation.tasks_to_filter) |",
  "| extrapolation | filter hours (wall) | \(.extrapolation.filter_hours_wall) |",
  "| extrapolation | filter GPU-hours | \(.extrapolation.filter_gpu_hours) (timing slot alone: \(.extrapolation.timing_slot_gpu_hours)) |"
' "$out/summary.json"
