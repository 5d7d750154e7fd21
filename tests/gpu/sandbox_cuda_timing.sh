#!/usr/bin/env bash
# Where does a CUDA start get slow inside the sandbox? Times torch's CUDA initialisation and first
# allocation in a fresh Python under a ladder of bubblewrap settings, from none to the layout
# cudaagent's sandbox uses (sandbox.cpp), and the same example through cudaagent-verify with and
# without its sandbox. Usage: tests/gpu/sandbox_cuda_timing.sh BIN_DIR OUT   (needs bwrap, jq)
set -uo pipefail
bin=$1 out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
python=$(command -v python3)
prefix=$("$python" -c 'import sys; print(sys.prefix)')
base_prefix=$("$python" -c 'import sys; print(sys.base_prefix)')
table=$out/sandbox-cuda.md
snippet='import time, torch
t0 = time.monotonic(); torch.cuda.init(); t1 = time.monotonic()
torch.zeros(1, device="cuda"); torch.cuda.synchronize(); t2 = time.monotonic()
print(f"{t1 - t0:.3f} {t2 - t1:.3f}")'
devices=()
for node in /dev/nvidia*; do [[ -e $node ]] && devices+=(--dev-bind "$node" "$node"); done
[[ -d /dev/nvidia-caps ]] && devices+=(--dev-bind /dev/nvidia-caps /dev/nvidia-caps)
layout=(--ro-bind /usr /usr --ro-bind /bin /bin --ro-bind /lib /lib --ro-bind-try /lib64 /lib64
        --ro-bind-try /sbin /sbin --ro-bind /etc/ld.so.cache /etc/ld.so.cache
        --ro-bind "$prefix" "$prefix" --ro-bind-try "$base_prefix" "$base_prefix"
        --proc /proc --dev /dev "${devices[@]}" --ro-bind /sys /sys --tmpfs /tmp)
namespaces=(--unshare-user --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try
            --unshare-net --die-with-parent --new-session --cap-drop ALL)
declare -A ladder=(
  [1-plain-bwrap]="--ro-bind / / --dev-bind /dev /dev --proc /proc"
  [2-plus-namespaces]="${namespaces[*]} --ro-bind / / --dev-bind /dev /dev --proc /proc"
  [3-our-layout]="${namespaces[*]} ${layout[*]}"
  [4-layout-ro-dev]="${namespaces[*]} ${layout[*]} --remount-ro /dev"
  [5-layout-clearenv]="${namespaces[*]} ${layout[*]} --remount-ro /dev --clearenv --setenv PATH /usr/bin:/bin"
  [6-layout-with-etc]="${namespaces[*]} ${layout[*]} --ro-bind /etc /etc --remount-ro /dev --clearenv --setenv PATH /usr/bin:/bin"
  [7-layout-without-ipc-ns]="--unshare-user --unshare-pid --unshare-net --die-with-parent --cap-drop ALL ${layout[*]} --remount-ro /dev --clearenv --setenv PATH /usr/bin:/bin"
)
echo "| setting | cuda.init s | first allocation s (3 runs) |" >"$table"
echo "|---|---|---|" >>"$table"
row() {
  local name=$1; shift
  local results=()
  for _ in 1 2 3; do results+=("$("$@" "$python" -I -c "$snippet" 2>>"$out/sandbox-cuda.log" | tail -1)"); done
  echo "| $name | $(printf '%s ' "${results[@]}" | awk '{print $1, $3, $5}') | $(printf '%s ' "${results[@]}" | awk '{print $2, $4, $6}') |" >>"$table"
}
row 0-no-sandbox env
for name in $(printf '%s\n' "${!ladder[@]}" | sort); do
  # shellcheck disable=SC2086  # the ladder entries are word lists on purpose
  row "$name" bwrap ${ladder[$name]} --
done
# The whole verifier, with and without its sandbox, on the example (second candidate = warm).
ws=$root/share/examples/workspaces/bias-relu-cuda
for mode in sandbox no-sandbox; do
  flags=()
  [[ $mode == no-sandbox ]] && flags=(--no-sandbox --allow-unsandboxed)
  start=$(date +%s.%N)
  "$bin/cudaagent-verify" -q --device cuda "${flags[@]}" --task "$ws/model.py" "$ws" "$ws" 2>>"$out/sandbox-cuda.log" |
    jq -c '{id, verdict: .verify.verdict, reference: .verify.timings_s["reference.model_to_device"],
            candidate: .verify.timings_s["candidate_reported.import"], total: .verify.timings_s.total}' \
    >>"$out/sandbox-cuda-verify.jsonl"
  echo "| verify $mode, 2 candidates | | $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f s", b-a}') |" >>"$table"
done
cat "$table" "$out/sandbox-cuda-verify.jsonl"
