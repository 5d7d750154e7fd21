#!/usr/bin/env bash
# Builds the training set (issue 15): a deterministic synthesised stream, deduplicated on the CPU
# against KernelBench and against itself before any GPU time is spent, then filtered on the GPU in
# parts that each fit one short device call (a fresh machine each time: everything a part needs
# and makes lives in one small state folder that travels in and out), then shipped with its card.
#
# Usage: scripts/build_dataset.sh PHASE [options]
#   prepare   cudaagent-synth (fixed --seed and --count), then cudaagent-dedup against the
#             --reference sets (KernelBench levels 1-3) and against the stream itself; writes the
#             distinct candidates, in stream order, to STATE/candidates.jsonl.gz (CPU only)
#   filter    cudaagent-filter on the next candidates not yet filtered, for at most --seconds,
#             stopping early once --target kept tasks are in hand; appends each result to
#             STATE/results.jsonl and this part's summary to STATE/parts.jsonl, and prints the
#             measured time per task and the GPU-hours the rest will take. A later part, on
#             another machine with the state folder carried over, goes on where this one stopped
#   finish    the first --target kept candidates, in stream order, to OUT/tasks.jsonl.zst, with
#             OUT/CARD.md and OUT/card.json made from the state (scripts/dataset_card.py)
#   status    what the state holds and the projection; runs nothing
#   save      copies the state, without its store, into --progress (default
#             share/datasets/ops6k/progress, which is committed): state.json, parts.jsonl,
#             candidates.jsonl.gz and each part's results as results/part-NNN.jsonl.gz, written
#             once and never changed, so a commit after every part adds only that part. A device
#             machine and this one both start bare: what is not committed is lost
#   restore   makes --state from --progress (refusing to overwrite a prepared state without
#             --force), so the next part goes on where the last saved one stopped
#   all       prepare (unless STATE has been prepared), filter without a time limit, finish
#   sample    `all` on the CPU with tiny tasks into build/dataset-sample: the whole flow in a
#             minute or two (prepare's defaults become --device cpu --count 60 --target 24)
#
# Options (each phase takes those it needs; prepare's choices are kept in STATE/state.json and
# every later phase uses them):
#   --state DIR          the state folder (default .data/ops6k). On a device call point it into
#                        $OUT (--state $OUT/ops6k) after copying the carried folder there; bring it
#                        back by copying what the call returned to .data/ops6k and carrying
#                        .data/ops6k in the next call. It holds 5 files: state.json,
#                        candidates.jsonl.gz, results.jsonl.gz, parts.jsonl, filter.db.gz (while a
#                        part runs, or after one was cut off: results.jsonl, filter.db and perhaps
#                        filter.db-wal instead, which the next part takes as they are)
#   --bin DIR            the binaries (default $CUDAAGENT_BIN, else build/layout/bin, else
#                        build/release/bin)
#   prepare:
#   --device cuda|cpu    the filter's device (default cuda). cpu is the smoke mode: tiny tasks
#                        (synth --batch 2 --max-dim 16), window 0.001,1000 ms
#   --seed S             synth seed (default 1)
#   --count N            tasks to synthesise (default 24000: about 11,000 distinct, enough for
#                        6,000 kept at a keep rate above 0.55)
#   --target K           kept tasks to ship (default 6000)
#   --window-ms LO,HI    filter's eager window (default 1,100 on cuda)
#   --timeout S          filter's limit per job (default 300 on cuda, 60 on cpu)
#   --threshold X        dedup threshold (default 0.9)
#   --reference NAME=PATH  a dedup reference set, repeatable (default kb1, kb2, kb3 =
#                        .kernelbench/KernelBench/level1..3, which must then exist)
#   --synth-arg ARG      one more synth argument (repeatable)
#   --force              prepare again over an existing state (its results are discarded)
#   filter:
#   --seconds S          stop the filter after S seconds of wall clock (0, the default: no limit):
#                        SIGTERM, so running tasks finish and every finished result is kept;
#                        SIGKILL --grace seconds later (default 60); results stored in filter.db by
#                        then are taken from it by the next part
#   --jobs W             filter --jobs (default on cuda: one core short of all of them, at most
#                        16 per GPU, at least 2; 2 on cpu). Each task's checks run torch.compile
#                        on one core, and they are most of its time: the GPU waits on the CPUs.
#                        The jobs share the GPU's memory and the disk: a task that runs out of
#                        either beside others runs once more with the GPU to itself (the card
#                        counts them), so many such tasks slow a part down.
#   --gpus LIST          filter --gpus
#   --max-tasks N        filter at most the next N candidates (0, the default: all that are left)
#   --log FILE           the filter's stderr (default STATE/../NAME-filter.log)
#   --filter-arg ARG     one more filter argument (repeatable; must not change results, or the
#                        store misses)
#   finish:
#   --out DIR            where the dataset goes (default share/datasets/ops6k)
#   --partial            ship fewer than --target kept tasks (a sample) instead of failing
#   --budget-gpu-hours H the filter's budget for --target tasks (default 1): the card says
#                        whether the build kept to it, and by how much it went over
#   save, restore:
#   --progress DIR       the committed copy (default share/datasets/ops6k/progress)
#
# The device call of a part (the lead's; tests/gpu/lease_h200.sh dataset does this, with the state
# carried in as .data/ops6k and the binaries as build/layout/bin and .deps):
#   cp -r .data/ops6k $OUT/ops6k && scripts/build_dataset.sh filter --state $OUT/ops6k \
#     --bin build/layout/bin --seconds 480 --grace 40
# then, back here: rm -rf .data/ops6k && cp -r FILES_AT/ops6k .data/ops6k, scripts/build_dataset.sh
# save and a commit (and again until the status says the target is reached; a new session starts
# with scripts/build_dataset.sh restore), then scripts/build_dataset.sh finish.
# Needs bash, jq, gzip; finish also zstd and python3. Nothing here is timed by tests.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '7,86p' "$0" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }
die() { echo "build_dataset: $*" >&2; exit 1; }

(($#)) || usage
phase=$1
shift
case $phase in
  prepare | filter | finish | status | save | restore | all | sample) ;;
  -h | --help) usage 0 ;;
  *) echo "build_dataset: unknown phase '$phase'" >&2; usage ;;
esac

state=$here/.data/ops6k out_dir=$here/share/datasets/ops6k progress=$here/share/datasets/ops6k/progress
bin=${CUDAAGENT_BIN:-}
device="" seed="" count="" target="" window="" timeout="" threshold=0.9 force=0 partial=0
seconds=0 grace=60 max_tasks=0 jobs="" gpus="" log="" budget=1
references=() synth_extra=() filter_extra=()
if [[ $phase == sample ]]; then
  state=$here/build/dataset-sample/state out_dir=$here/build/dataset-sample/out
  device=cpu count=60 target=24 partial=1
fi
while (($#)); do
  case $1 in
    --force) force=1; shift; continue ;;
    --partial) partial=1; shift; continue ;;
    -h | --help) usage 0 ;;
  esac
  (($# >= 2)) || { echo "build_dataset: $1 needs a value" >&2; exit 2; }
  case $1 in
    --state) state=$2 ;;
    --bin) bin=$2 ;;
    --device) device=$2 ;;
    --seed) seed=$2 ;;
    --count) count=$2 ;;
    --target) target=$2 ;;
    --window-ms) window=$2 ;;
    --timeout) timeout=$2 ;;
    --threshold) threshold=$2 ;;
    --reference) references+=("$2") ;;
    --synth-arg) synth_extra+=("$2") ;;
    --seconds) seconds=$2 ;;
    --grace) grace=$2 ;;
    --jobs) jobs=$2 ;;
    --gpus) gpus=$2 ;;
    --budget-gpu-hours) budget=$2 ;;
    --log) log=$2 ;;
    --filter-arg) filter_extra+=("$2") ;;
    --max-tasks) max_tasks=$2 ;;
    --out) out_dir=$2 ;;
    --progress) progress=$2 ;;
    *) echo "build_dataset: unknown argument '$1'" >&2; usage ;;
  esac
  shift 2
done
for n in ${seed:+"$seed"} ${count:+"$count"} ${target:+"$target"} "$seconds" "$grace" "$max_tasks" ${jobs:+"$jobs"} ${timeout:+"$timeout"}; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "build_dataset: '$n' is not a whole number" >&2; exit 2; }
done
[[ -z $device || $device == cuda || $device == cpu ]] || { echo "build_dataset: --device is cuda or cpu" >&2; exit 2; }
if [[ -z $bin ]]; then
  bin=$here/build/layout/bin
  [[ -x $bin/cudaagent-filter ]] || bin=$here/build/release/bin
fi
command -v jq >/dev/null || die "needs jq"
mkdir -p "$state" || exit 1
state=$(cd "$state" && pwd)
name=$(basename "$state")
log=${log:-$(dirname "$state")/$name-filter.log}
need_bin() { for tool; do [[ -x $bin/cudaagent-$tool ]] || die "no $bin/cudaagent-$tool (--bin)"; done; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
setting() { jq -r "$1" "$state/state.json"; }
# Every file a state folder may hold (prepare and restore start from none of them).
clear_state() {
  rm -f "$state"/{state.json,candidates.jsonl.gz,results.jsonl,results.jsonl.gz,parts.jsonl,filter.db,filter.db-wal,filter.db-shm,filter.db.gz}
}

# --- prepare -----------------------------------------------------------------------------------
prepare() {
  need_bin synth dedup
  if [[ -f $state/state.json ]] && ((!force)); then
    die "$state is prepared already (--force discards it and its results)"
  fi
  clear_state
  device=${device:-cuda} seed=${seed:-1} count=${count:-24000} target=${target:-6000}
  local synth_size=()
  if [[ $device == cpu ]]; then
    window=${window:-0.001,1000} timeout=${timeout:-60}
    synth_size=(--batch 2 --max-dim 16)
  else
    window=${window:-1,100} timeout=${timeout:-300}
    synth_size=(--window-ms "$window")
  fi
  if ((${#references[@]} == 0)); then
    if [[ $phase == sample && ! -d $here/.kernelbench/KernelBench/level1 ]]; then
      # No KernelBench checkout here: the sample compares with the bundled look-alikes instead.
      references=("kb1=$here/share/examples/dedup/reference/level1" "kb2=$here/share/examples/dedup/reference/level2")
      echo "build_dataset: no .kernelbench checkout: the sample uses share/examples/dedup/reference" >&2
    else
      for level in 1 2 3; do
        local dir=$here/.kernelbench/KernelBench/level$level
        [[ -d $dir ]] || die "no $dir: check KernelBench out into .kernelbench or give --reference"
        references+=("kb$level=$dir")
      done
    fi
  fi
  local ref_args=() refs_json='[]' ref
  for ref in "${references[@]}"; do
    [[ $ref == *=* ]] || die "--reference takes NAME=PATH"
    local path=${ref#*=}
    [[ -e $path ]] || die "no reference '$path'"
    ref_args+=(--reference "$ref")
    # Which files the set held, so the card can say exactly what the tasks were compared with.
    local files digest
    if [[ -d $path ]]; then
      files=$(find "$path" -name '*.py' | wc -l)
      digest=$(find "$path" -name '*.py' -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-16)
    else  # one .py file, or JSON Lines of tasks (counted by line)
      files=$(grep -c . "$path")
      digest=$(sha256sum <"$path" | cut -c1-16)
    fi
    refs_json=$(jq -c --arg n "${ref%%=*}" --arg p "$path" --argjson f "$files" --arg d "$digest" \
      '. + [{name: $n, path: $p, files: $f, sha256_16: $d}]' <<<"$refs_json")
  done
  local synth_args=(--seed "$seed" --count "$count" "${synth_size[@]}" "${synth_extra[@]}")
  echo "build_dataset: synthesising $count tasks (seed $seed)" >&2
  "$bin/cudaagent-synth" -q "${synth_args[@]}" -o "$work/synth.jsonl" 2>"$work/synth.err" ||
    die "synth failed: $(tail -3 "$work/synth.err")"
  jq -c 'select(.task)' "$work/synth.jsonl" >"$work/tasks.jsonl"
  local synth_records synth_tasks
  synth_records=$(wc -l <"$work/synth.jsonl")
  synth_tasks=$(wc -l <"$work/tasks.jsonl")
  # Pass 1: KernelBench only. A task near it is dropped; the others keep their nearest KernelBench
  # task and score (renamed to nearest_kernelbench, since pass 2 writes its own dedup key).
  local cores
  cores=$(nproc)
  echo "build_dataset: deduplicating $synth_tasks tasks against ${#references[@]} reference sets" >&2
  "$bin/cudaagent-dedup" -q --jobs "$cores" --threshold "$threshold" --references-only "${ref_args[@]}" \
    --dropped "$work/near-reference.jsonl" -o "$work/pass1.jsonl" "$work/tasks.jsonl" 2>"$work/dedup1.err" ||
    die "dedup against the references failed: $(tail -3 "$work/dedup1.err")"
  jq -c 'select(.task) | .nearest_kernelbench = .dedup | del(.dedup)' "$work/pass1.jsonl" >"$work/pass1b.jsonl"
  # Pass 2: the stream against itself, in stream order (the earlier of two look-alikes stays).
  echo "build_dataset: deduplicating the stream against itself" >&2
  "$bin/cudaagent-dedup" -q --jobs "$cores" --threshold "$threshold" --dropped "$work/near-stream.jsonl" \
    -o "$work/candidates.jsonl" "$work/pass1b.jsonl" 2>"$work/dedup2.err" ||
    die "dedup of the stream failed: $(tail -3 "$work/dedup2.err")"
  jq -c 'select(.task)' "$work/candidates.jsonl" | gzip -6 -n >"$state/candidates.jsonl.gz"
  local commit dirty=false
  commit=$(git -C "$here" rev-parse HEAD 2>/dev/null || echo unknown)
  [[ -n $(git -C "$here" status --porcelain --untracked-files=no 2>/dev/null) ]] && dirty=true
  jq -n --arg name "$name" --arg created "$(date -u +%FT%TZ)" --arg commit "$commit" --argjson dirty "$dirty" \
    --arg synth_version "$("$bin/cudaagent-synth" --version | head -1)" \
    --arg dedup_version "$("$bin/cudaagent-dedup" --version | head -1)" \
    --arg device "$device" --argjson seed "$seed" --argjson count "$count" --argjson target "$target" \
    --arg window "$window" --argjson timeout "$timeout" --argjson threshold "$threshold" \
    --argjson refs "$refs_json" --argjson synth_args "$(printf '%s\n' "${synth_args[@]}" | jq -R . | jq -cs .)" \
    --argjson synth_records "$synth_records" --argjson synth_tasks "$synth_tasks" \
    --slurpfile near_ref <(jq -c '{id, index: .task.meta.index, depth: .task.meta.depth, ops: .task.ops, score: .dedup.score, nearest: .dedup.nearest}' "$work/near-reference.jsonl") \
    --slurpfile near_stream <(jq -c '.task.meta.depth' "$work/near-stream.jsonl") \
    --argjson dedup_errors "$(jq -c 'select(.task | not)' "$work/pass1.jsonl" "$work/candidates.jsonl" | wc -l)" \
    --argjson candidates "$(zcat "$state/candidates.jsonl.gz" | wc -l)" '
    def hist: group_by(.) | map({key: (.[0] | tostring), value: length}) | from_entries;
    {format: 1, name: $name, created: $created, commit: $commit, commit_dirty: $dirty,
     versions: {synth: $synth_version, dedup: $dedup_version},
     device: $device, seed: $seed, count: $count, target: $target,
     window_ms: ($window | split(",") | map(tonumber)), timeout_s: $timeout,
     synth_args: $synth_args, references: $refs, threshold: $threshold,
     synth: {records: $synth_records, tasks: $synth_tasks, errors: ($synth_records - $synth_tasks)},
     dedup: {near_reference: ($near_ref | length), near_reference_tasks: $near_ref,
             near_stream: ($near_stream | length), near_stream_depth: ($near_stream | hist),
             errors: $dedup_errors, candidates: $candidates}}' >"$state/state.json" ||
    die "cannot write $state/state.json"
  : | gzip -n >"$state/results.jsonl.gz"
  : >"$state/parts.jsonl"
  jq -r '"build_dataset: prepared \(.dedup.candidates) distinct candidates of \(.synth.tasks) tasks (\(.dedup.near_reference) near a reference, \(.dedup.near_stream) near an earlier task, \(.synth.errors) synth errors) in \(input_filename | sub("/state.json$"; ""))"' \
    "$state/state.json" >&2
  du -k "$state"/* | awk '{ s += $1 } END { printf "build_dataset: state folder %d KiB\n", s }' >&2
}

# --- the state's results -----------------------------------------------------------------------
# The results travel as results.jsonl.gz. A part unpacks them into results.jsonl and appends to
# it; a part cut off by its machine going away leaves that file, which then holds everything
# (perhaps with a cut last line) and is taken over the .gz. Of its lines, the parsable ones are
# kept. An id twice would mean a task was filtered twice (each part skips the ids already there):
# said, not hidden; finish takes the first.
open_results() {
  if [[ ! -f $state/results.jsonl && -f $state/results.jsonl.gz ]]; then
    gzip -dc "$state/results.jsonl.gz" >"$state/results.jsonl.tmp" && mv "$state/results.jsonl.tmp" "$state/results.jsonl" ||
      die "cannot unpack $state/results.jsonl.gz"
  fi
  rm -f "$state/results.jsonl.gz"
  touch "$state/results.jsonl"
  jq -cR 'fromjson? | select(type == "object" and .id and .filter)' "$state/results.jsonl" >"$work/results.clean" ||
    die "cannot read $state/results.jsonl"
  cmp -s "$work/results.clean" "$state/results.jsonl" || cp "$work/results.clean" "$state/results.jsonl"
  local twice
  twice=$(jq -r .id "$state/results.jsonl" | sort | uniq -d | wc -l)
  ((twice == 0)) || echo "build_dataset: warning: $twice ids have more than one result in $state/results.jsonl" >&2
}
close_results() { gzip -6 -n -f "$state/results.jsonl" || die "cannot compress $state/results.jsonl"; }
count_kept() { grep -c '"filter":{"kept":true' "$state/results.jsonl"; }

# Progress and the projection, from every part so far: printed by filter and status.
report() {
  jq -rn --slurpfile s "$state/state.json" --slurpfile parts <(jq -c . "$state/parts.jsonl") \
    --slurpfile r <(jq -c '{kept: .filter.kept}' "$state/results.jsonl") '
    def r3: if . == null then null else (. * 1000 | round) / 1000 end;
    $s[0] as $s | ($r | length) as $done | ($r | map(select(.kept)) | length) as $kept
    | ($parts | map(.fresh) | add // 0) as $fresh | ($parts | map(.seconds) | add // 0) as $secs
    | ($parts | map((.seconds // 0) * ([.gpus // 0, 1] | max)) | add // 0) as $device_secs
    | (if $done > 0 then $kept / $done else null end) as $keep
    | ([$s.target - $kept, 0] | max) as $missing
    | (if $keep != null and $keep > 0 then $missing / $keep | ceil else null end) as $to_filter
    | (if $fresh > 0 then $secs / $fresh else null end) as $spt
    | ($parts | last) as $last
    | "build_dataset: \($done) of \($s.dedup.candidates) candidates filtered in \($parts | length) parts, \($kept) kept of the \($s.target) wanted (keep rate \($keep | r3))",
      (if $last != null then "build_dataset: last part: \($last.fresh) filtered, \($last.from_store) from the store, \($last.errors) error records, \($last.seconds) s, stopped: \($last.stop); \(if $last.fresh > 0 then $last.seconds / $last.fresh | r3 else "-" end) s per task (wall, --jobs \($last.jobs), \($last.gpus) GPUs: \($last.gpu // $last.device))" else empty end),
      (if $spt != null then "build_dataset: \($spt | r3) s per task over all parts; \($secs / 3600 | r3) h of filter wall time so far (\($device_secs / 3600 | r3) GPU-hours)" else empty end),
      (if $missing == 0 then "build_dataset: the target is reached: run finish"
       elif $to_filter == null or $spt == null then "build_dataset: no projection yet"
       else "build_dataset: projected: about \($to_filter) more tasks to filter, \($to_filter * $spt / 3600 | r3) h wall (\($to_filter * $spt * ([$last.gpus, 1] | max) / 3600 | r3) GPU-hours) at this rate"
            + (if $to_filter > $s.dedup.candidates - $done then "; but only \($s.dedup.candidates - $done) candidates are left: prepare a longer stream (--count)" else "" end)
       end)'
  # Where the tasks' seconds and device memory went (records of filter-7 on; seat_wait from
  # filter-8), for sizing parts.
  jq -rn --slurpfile r <(jq -c 'select(.filter.seconds.phases != null) | .filter' "$state/results.jsonl") '
    def mean: if length == 0 then null else add / length | . * 100 | round / 100 end;
    def median: if length == 0 then null else sort | .[length / 2 | floor] end;
    if ($r | length) == 0 then empty else
      ($r | map(.seconds)) as $s
      | "build_dataset: seconds per task (means over \($r | length)): waiting for a seat \($s | map(select(.seat_wait != null) | .seat_wait) | mean // "-"), for lent memory \($s | map(select(.grow_wait != null) | .grow_wait) | mean // "-"), checks \($s | map(.check) | mean) (torch.compile \($s | map(.compile // 0) | mean)), slot \($s | map(.slot) | mean), slot wait \($s | map(.slot_wait) | mean); job phases: \([$s[].phases | to_entries[]] | group_by(.key) | map("\(.[0].key) \(map(.value) | add / ($r | length) | . * 100 | round / 100)") | join(", "))",
        "build_dataset: device memory peak / estimate, median over \($r | map(select(.memory.estimate_bytes > 0 and .memory.peak_bytes > 0)) | length) tasks: \($r | map(select(.memory.estimate_bytes > 0 and .memory.peak_bytes > 0) | .memory.peak_bytes / .memory.estimate_bytes) | median | if . == null then "-" else . * 100 | round / 100 end)"
    end'
}

# --- filter ------------------------------------------------------------------------------------
filter_part() {
  need_bin filter
  [[ -f $state/state.json && -f $state/candidates.jsonl.gz ]] || die "$state is not prepared (run prepare)"
  open_results
  # The store: a killed part leaves filter.db (and its -wal) uncompressed; that copy is newer.
  if [[ ! -f $state/filter.db && -f $state/filter.db.gz ]]; then
    gzip -dc "$state/filter.db.gz" >"$state/filter.db" || die "cannot unpack $state/filter.db.gz"
  fi
  rm -f "$state/filter.db.gz"
  local s_device s_window s_timeout s_target kept
  s_device=$(setting .device) s_window=$(setting '.window_ms | map(tostring) | join(",")')
  s_timeout=$(setting .timeout_s) s_target=$(setting .target)
  kept=$(count_kept)
  local part recorded
  recorded=$(wc -l <"$state/parts.jsonl")
  part=$(jq -s --argjson n "$recorded" '[$n] + map(.part) | max + 1' "$state/results.jsonl")
  # A part whose results are here but which recorded no summary was cut off (its machine went
  # away): say so in parts.jsonl, with what is known of it.
  local cut
  for ((cut = recorded + 1; cut < part; cut++)); do
    jq -cn --argjson part "$cut" --argjson records "$(grep -c "\"part\":$cut," "$state/results.jsonl")" \
      '{part: $part, started: null, seconds: null, limit_s: null, exit: null, stop: "cut off: no summary",
        records: $records, fresh: null, from_store: null, errors: null, jobs: null, gpus: null,
        gpu: null, device: null}' >>"$state/parts.jsonl"
  done
  # The next candidates, in stream order: those without a result.
  gzip -dc "$state/candidates.jsonl.gz" |
    jq -c --slurpfile filtered <(jq -c .id "$state/results.jsonl") -n \
      '(reduce $filtered[] as $i ({}; .[$i] = true)) as $seen | inputs | select($seen[.id] | not)' \
      >"$work/input.jsonl" || die "cannot read the candidates"
  if ((max_tasks > 0)); then
    head -n "$max_tasks" "$work/input.jsonl" >"$work/input.head" && mv "$work/input.head" "$work/input.jsonl"
  fi
  local left
  left=$(wc -l <"$work/input.jsonl")
  local ngpus=0 gpu_name=""
  if [[ $s_device == cuda ]]; then
    if [[ -n $gpus ]]; then
      ngpus=$(awk -F, '{ print NF }' <<<"$gpus")
    elif [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
      ngpus=$(awk -F, '{ print NF }' <<<"$CUDA_VISIBLE_DEVICES")
    else
      ngpus=$(find /dev -maxdepth 1 -name 'nvidia[0-9]*' | wc -l)
    fi
    ((ngpus > 0)) || die "the state is for cuda, but there is no GPU here (--gpus)"
    gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
    local cores
    cores=$(nproc)
    jobs=${jobs:-$((cores - 1 < 16 * ngpus ? (cores - 1 > 2 ? cores - 1 : 2) : 16 * ngpus))}
  else
    jobs=${jobs:-2}
  fi
  local started stop=finished rc=0
  started=$(date +%s)
  if ((kept >= s_target)); then
    stop=target
  elif ((left == 0)); then
    stop=exhausted
  else
    echo "build_dataset: part $part: filtering up to $left candidates ($kept of $s_target kept so far), --jobs $jobs, limit ${seconds} s; log $log" >&2
    local args=(--device "$s_device" --window-ms "$s_window" --timeout "$s_timeout" --jobs "$jobs"
                --db "$state/filter.db" --errors "$work/errors.jsonl" --progress-every 60)
    [[ -n $gpus ]] && args+=(--gpus "$gpus")
    # The filter's records go through a FIFO to jq, which keeps only what the state needs (the
    # id and the filter key; the task is in candidates) and appends each line as it comes, so a
    # part cut off by the machine going away keeps every record written before.
    mkfifo "$work/records"
    jq -c --unbuffered --argjson part "$part" 'select(.filter) | {id, part: $part, filter}' \
      <"$work/records" >>"$state/results.jsonl" &
    local jq_pid=$!
    "$bin/cudaagent-filter" "${args[@]}" "${filter_extra[@]}" "$work/input.jsonl" >"$work/records" 2>"$log" &
    local filter_pid=$! term_at=0
    # A SIGTERM or SIGINT to this script (a step's time limit) stops the filter the same way, and
    # the part is still recorded and its store compressed.
    signalled=0
    trap 'signalled=1' TERM INT
    # Stop on the time limit or once the target is in hand (kept tasks beyond it are not shipped).
    while kill -0 "$filter_pid" 2>/dev/null; do
      sleep 2
      local now
      now=$(date +%s)
      if ((term_at == 0)); then
        if ((signalled)); then
          stop=signal term_at=$now
        elif ((seconds > 0 && now - started >= seconds)); then
          stop=time term_at=$now
        elif (($(count_kept) >= s_target)); then
          stop=target term_at=$now
        fi
        ((term_at)) && kill -TERM "$filter_pid" 2>/dev/null
      elif ((now - term_at >= grace)); then
        stop="$stop (killed after the grace)"
        kill -KILL "$filter_pid" 2>/dev/null
      fi
    done
    # wait returns early when a trapped signal arrives: wait again until the filter is gone.
    while wait "$filter_pid"; rc=$?; kill -0 "$filter_pid" 2>/dev/null; do :; done
    wait "$jq_pid"
    trap - TERM INT
    if ((rc != 0 && rc != 143)) && [[ $stop == finished ]]; then
      stop="filter exit $rc"
      echo "build_dataset: cudaagent-filter exit $rc: $(tail -3 "$log")" >&2
    fi
  fi
  local ended seconds_used from_store fresh errors=0
  ended=$(date +%s)
  seconds_used=$((ended - started))
  open_results
  local new
  new=$(grep -c "\"part\":$part," "$state/results.jsonl")
  from_store=$(grep -o '[0-9]* from the store' "$log" 2>/dev/null | tail -1 | cut -d' ' -f1)
  from_store=${from_store:-0}
  fresh=$((new - from_store))
  ((fresh < 0)) && fresh=0
  [[ -f $work/errors.jsonl ]] && errors=$(wc -l <"$work/errors.jsonl")
  # The store travels compressed (it is mostly repeated JSON); not after a kill, when its -wal
  # holds results too and both must travel as they are.
  if [[ -f $state/filter.db && ! -s $state/filter.db-wal ]]; then
    rm -f "$state/filter.db-wal" "$state/filter.db-shm"
    gzip -6 -n "$state/filter.db" || die "cannot compress $state/filter.db"
  fi
  if [[ $stop != target && $stop != exhausted ]] || ((new > 0)); then
    jq -cn --argjson part "$part" --argjson started "$started" --argjson seconds "$seconds_used" \
      --argjson limit "$seconds" --argjson rc "$rc" --arg stop "$stop" --argjson new "$new" \
      --argjson fresh "$fresh" --argjson from_store "$from_store" --argjson errors "$errors" \
      --argjson jobs "$jobs" --argjson gpus "$ngpus" --arg gpu "$gpu_name" --arg device "$s_device" \
      --arg host "$(hostname)" --argjson cores "$(nproc)" --argjson left "$left" \
      --arg version "$("$bin/cudaagent-filter" --version | head -1)" \
      --arg error_reasons "$( [[ -f $work/errors.jsonl ]] && jq -r '.error.reason' "$work/errors.jsonl" | sort | uniq -c | sort -rn | head -3)" \
      '{part: $part, started: ($started | todate), seconds: $seconds, limit_s: $limit, exit: $rc,
        stop: $stop, candidates_left: $left, records: $new, fresh: $fresh, from_store: $from_store,
        errors: $errors, error_reasons: $error_reasons, jobs: $jobs, gpus: $gpus,
        gpu: (if $gpu == "" then null else $gpu end), device: $device, host: $host, cores: $cores,
        filter_version: $version}' >>"$state/parts.jsonl"
  fi
  report >&2
  close_results
  case $stop in
    finished | time | target | exhausted | time\ * | target\ *) return 0 ;;
    signal*) return 143 ;;
    *) return 1 ;;
  esac
}

# --- finish ------------------------------------------------------------------------------------
finish() {
  [[ -f $state/state.json ]] || die "$state is not prepared"
  command -v zstd >/dev/null || die "finish needs zstd"
  command -v python3 >/dev/null || die "finish needs python3"
  open_results
  local s_target
  s_target=$(setting .target)
  mkdir -p "$out_dir" || exit 1
  # The kept candidates in stream order, each with its filter key, up to the target.
  gzip -dc "$state/candidates.jsonl.gz" |
    jq -c -n --slurpfile r "$state/results.jsonl" \
      '(reduce $r[] as $x ({}; .[$x.id] = $x.filter)) as $f | inputs | select($f[.id].kept == true) | .filter = $f[.id]' |
    head -n "$s_target" >"$work/tasks.jsonl"
  local shipped
  shipped=$(wc -l <"$work/tasks.jsonl")
  if ((shipped < s_target && !partial)); then
    close_results
    die "only $shipped of the $s_target kept tasks are in hand (filter more, or --partial for a sample)"
  fi
  zstd -q -19 -f "$work/tasks.jsonl" -o "$out_dir/tasks.jsonl.zst" || die "cannot write $out_dir/tasks.jsonl.zst"
  # The repository takes the dataset only while it stays small (issue 15: 10 MB compressed).
  (($(wc -c <"$out_dir/tasks.jsonl.zst") <= 10000000)) ||
    echo "build_dataset: warning: $out_dir/tasks.jsonl.zst is over 10 MB: too large to commit" >&2
  local rebuild
  rebuild=$(jq -r '"scripts/build_dataset.sh all --device \(.device) --seed \(.seed) --count \(.count) --target \(.target) --window-ms \(.window_ms | map(tostring) | join(",")) --timeout \(.timeout_s) --threshold \(.threshold)"
    + ([.references[] | " --reference \(.name)=\(.path)"] | join(""))' "$state/state.json")
  rebuild=${rebuild//$here\//}
  gzip -dc "$state/candidates.jsonl.gz" | jq -c '{id, depth: .task.meta.depth}' >"$work/depths.jsonl"
  python3 "$here/scripts/dataset_card.py" --state "$state" --tasks "$work/tasks.jsonl" \
    --depths "$work/depths.jsonl" --catalog "$here/share/synth/operators.json" --shipped "$out_dir/tasks.jsonl.zst" \
    --rebuild "$rebuild" --budget-gpu-hours "$budget" --json "$out_dir/card.json" --markdown "$out_dir/CARD.md" ||
    die "cannot write the card"
  close_results
  echo "build_dataset: $shipped tasks in $out_dir/tasks.jsonl.zst ($(du -k "$out_dir/tasks.jsonl.zst" | cut -f1) KiB), card in $out_dir/CARD.md" >&2
}

# --- save and restore --------------------------------------------------------------------------
# The committed copy holds everything but the store (a cache the next part can do without). Each
# part's results go into a file of their own that never changes once written: a part's results
# are final when its call has returned, and a later part only appends results under a new number.
save() {
  [[ -f $state/state.json && -f $state/candidates.jsonl.gz ]] || die "$state is not prepared"
  # Read, not opened: a save that is refused leaves the state as it found it.
  local results=$work/results.jsonl
  if [[ -f $state/results.jsonl ]]; then
    jq -cR 'fromjson? | select(type == "object" and .id and .filter)' "$state/results.jsonl" >"$results"
  else
    gzip -dc "$state/results.jsonl.gz" >"$results"
  fi || die "cannot read the results in $state"
  # Everything is checked before anything is written: a refused save changes nothing there.
  local file
  for file in state.json candidates.jsonl.gz; do
    [[ ! -f $progress/$file ]] || cmp -s "$state/$file" "$progress/$file" ||
      die "$progress/$file differs from $state/$file: another state was saved there (restore it, or save elsewhere)"
  done
  # parts.jsonl only grows: what was saved must still be its beginning.
  [[ ! -f $progress/parts.jsonl ]] ||
    cmp -s -n "$(wc -c <"$progress/parts.jsonl")" "$progress/parts.jsonl" "$state/parts.jsonl" ||
    die "$state/parts.jsonl does not go on from $progress/parts.jsonl (restore first?)"
  local part new_parts=() saved_parts=0
  for part in $(jq -r .part "$results" | sort -nu); do
    file=$progress/results/part-$(printf %03d "$part").jsonl.gz
    grep "\"part\":$part," "$results" >"$work/part-$part.jsonl"
    if [[ -f $file ]]; then
      gzip -dc "$file" | cmp -s - "$work/part-$part.jsonl" || die "$file differs from part $part's results in $state"
      saved_parts=$((saved_parts + 1))
    else
      new_parts+=("$part")
    fi
  done
  local on_file
  on_file=$(find "$progress/results" -name 'part-*.jsonl.gz' 2>/dev/null | wc -l)
  ((on_file == saved_parts)) || die "$progress holds parts that $state lacks (restore first?)"
  mkdir -p "$progress/results" || exit 1
  for file in state.json candidates.jsonl.gz parts.jsonl; do
    cp "$state/$file" "$progress/$file.tmp" && mv "$progress/$file.tmp" "$progress/$file" || die "cannot write $progress/$file"
  done
  for part in "${new_parts[@]}"; do
    file=$progress/results/part-$(printf %03d "$part").jsonl.gz
    gzip -6 -n <"$work/part-$part.jsonl" >"$file.tmp" && mv "$file.tmp" "$file" || die "cannot write $file"
  done
  echo "build_dataset: saved $state to $progress: ${#new_parts[@]} new parts, $saved_parts already there ($(du -sk "$progress" | cut -f1) KiB)" >&2
}

restore() {
  [[ -f $progress/state.json && -f $progress/candidates.jsonl.gz ]] || die "nothing saved in $progress"
  if [[ -f $state/state.json ]] && ((!force)); then
    die "$state is prepared already (--force replaces it with what $progress holds)"
  fi
  clear_state
  cp "$progress/state.json" "$progress/candidates.jsonl.gz" "$state/" || die "cannot copy into $state"
  if [[ -f $progress/parts.jsonl ]]; then cp "$progress/parts.jsonl" "$state/"; else : >"$state/parts.jsonl"; fi
  # In part order (the names sort so), as one file: what the parts had appended.
  local files=()
  shopt -s nullglob
  files=("$progress"/results/part-*.jsonl.gz)
  shopt -u nullglob
  if ((${#files[@]})); then
    cat "${files[@]}" | gzip -dc >"$state/results.jsonl" || die "cannot read $progress/results"
  else
    : >"$state/results.jsonl"
  fi
  open_results
  report >&2
  close_results
}

case $phase in
  prepare) prepare ;;
  filter) filter_part ;;
  finish) finish ;;
  save) save ;;
  restore) restore ;;
  status)
    [[ -f $state/state.json ]] || die "$state is not prepared"
    open_results
    report
    close_results
    ;;
  all | sample)
    if [[ ! -f $state/state.json || $phase == sample ]]; then
      [[ $phase == sample ]] && force=1
      prepare || exit 1
    fi
    filter_part || exit 1
    finish
    ;;
esac
