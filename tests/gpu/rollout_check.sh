#!/usr/bin/env bash
# cudaagent-rollout on the device: scripted episodes (share/scripted-model/scripted_server.py, with
# byte-level token ids) whose kernels are compiled, verified and profiled on the GPU by the trusted
# evaluator through the workspace's shims.
#   honest      the example's fused CUDA kernel: compile, verify, profile, stop -> PASS, reward >= 1
#   same        the honest record verified again by cudaagent-verify: the same verdict, snapshot
#               and settings as the episode's (both are cudaagent::Verifier in an evaluation session)
#   fixed       a kernel that does not compile first (nvcc's errors reach the agent), then the fix
#               -> FAIL_COMPILE in the first evaluation, PASS at the end
#   fallback    model_new.py calls torch instead of its kernel -> reward -1
#   concurrent  N honest episodes at once (default 8), one evaluation slot: evaluation latency
#               and queueing per episode
#   serve       only when SERVE_URL is set (cudaagent-train serve, or any server): 4 episodes of
#               up to 10 turns against it, to show the loop survives a real sampler
# Prints a table; exits 1 on any mismatch, 2 on a usage error.
# Usage: tests/gpu/rollout_check.sh BIN_DIR OUT [--device cuda|cpu]   (default cuda)
#   env: CONCURRENT (default 8), SERVE_URL, SERVE_MODEL (default "policy"), ONLY_SERVE (1: skip the
#        scripted episodes)
# On a CPU-only machine `--device cpu` runs the same episodes on the CPU example (a smoke test).
set -uo pipefail
(($# == 2 || $# == 4)) || { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$1 out=$2 device=cuda
if (($# == 4)); then
  [[ $3 == --device && ($4 == cuda || $4 == cpu) ]] || { echo "rollout_check: --device cuda|cpu" >&2; exit 2; }
  device=$4
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
export CUDAAGENT_CACHE_DIR=${CUDAAGENT_CACHE_DIR:-/tmp/cudaagent-gpu-cache}
if [[ $device == cuda ]]; then example=$root/share/examples/workspaces/bias-relu-cuda kernel=bias_relu.cu
else example=$root/share/examples/workspaces/bias-relu-cpu kernel=bias_relu.cpp; fi
server_pid=
trap '[[ -n $server_pid ]] && kill $server_pid 2>/dev/null' EXIT

python3 - "$example" "$kernel" "$out" <<'P' || exit 1
import json, os, sys
ex, kernel, out = sys.argv[1:4]
read = lambda n: open(os.path.join(ex, n)).read()
call = lambda name, **a: {"name": name, "arguments": a}
files = [call("Write", file_path="kernels/" + kernel, content=read("kernels/" + kernel)),
         call("Write", file_path="kernels/bias_relu_binding.cpp", content=read("kernels/bias_relu_binding.cpp"))]
def script(name, lines):
    with open(os.path.join(out, name + ".script"), "w") as f:
        f.writelines(json.dumps(l) + "\n" for l in lines)
run = lambda command: {"content": "", "tool_calls": [call("Bash", command=command)]}
new = read("model_new.py") + "\n# @EPISODE@\n"  # distinct content per episode: nothing shared
script("honest", [
    {"content": "Reading the task.", "tool_calls": [call("Read", file_path="model.py")]},
    {"content": "A fused kernel.", "tool_calls": files + [call("Write", file_path="model_new.py", content=new)]},
    run("bash utils/compile.sh"), run("python3 -m utils.verification"), run("python3 -m utils.profiling"),
    {"content": "Done."}])
# The kernel's last return loses its semicolon: a compile error in either example's kernel.
source = read("kernels/" + kernel)
statement = [l.strip() for l in source.splitlines() if l.strip().startswith("return ") and l.strip().endswith(";")][-1]
cut = statement[:-1] + "  // missing semicolon\n"
broken = source.replace(statement, cut, 1)
assert broken != source
script("fixed", [
    {"content": "", "tool_calls": [call("Write", file_path="kernels/" + kernel, content=broken),
                                   files[1], call("Write", file_path="model_new.py", content=new)]},
    run("bash utils/compile.sh"),
    {"content": "", "tool_calls": [call("Read", file_path="kernels/" + kernel),
                                   call("Edit", file_path="kernels/" + kernel,
                                        old_string=cut, new_string=statement)]},
    run("bash utils/compile.sh && python3 -m utils.verification"),
    {"content": "Fixed."}])
cheat = read("model_new.py").replace("return cuda_extension.bias_relu_scale(x, self.bias, 2.0)",
                                     "return torch.relu(x + self.bias) * 2.0")
script("fallback", [
    {"content": "", "tool_calls": files + [call("Write", file_path="model_new.py", content=cheat)]},
    run("python3 -m utils.verification"), {"content": "Done."}])
P

start_server() {  # SCRIPT: sets url
  [[ -n $server_pid ]] && { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; }
  rm -f "$out/port"
  python3 "$root/share/scripted-model/scripted_server.py" "$out/$1.script" "$out/port" "$out/$1.requests" &
  server_pid=$!
  for _ in $(seq 200); do [[ -s $out/port ]] && break; sleep 0.05; done
  url=http://127.0.0.1:$(cat "$out/port")
}
failures=0
row() {  # NAME CONDITION-OK DETAIL
  local result=ok
  [[ $2 == 1 ]] || { result=MISMATCH; failures=$((failures + 1)); }
  printf '| %-10s | %-8s | %s |\n' "$1" "$result" "$3"
}
episode() {  # NAME [ARGS...]: one run of the scripted NAME; record in $out/NAME.jsonl
  local name=$1
  shift
  start_server "$name"
  local t0=$SECONDS
  "$bin/cudaagent-rollout" --device "$device" --endpoint "$url" --model scripted --work-dir /tmp "$@" \
    "$example/model.py" >"$out/$name.jsonl" 2>"$out/$name.err"
  echo "$name: exit $? after $((SECONDS - t0)) s" >>"$out/steps.txt"
}
field() { jq -r "$2" "$out/$1.jsonl" | head -1; }
: >"$out/steps.txt"
printf '| %-10s | %-8s | %s |\n' episode result detail
printf '|%s|\n' "------------|----------|--------"

# ONLY_SERVE=1 (with SERVE_URL): the episodes against the server alone.
if [[ ${ONLY_SERVE:-0} != 1 ]]; then
episode honest
ok=0; [[ $(field honest .verify.verdict) == PASS && $(field honest '.reward.value >= 1') == true &&
         $(field honest '[.trajectory.evaluations[].exit_code] == [0,0,0]') == true &&
         $(field honest .trajectory.tokens.status) == exact ]] && ok=1
row honest $ok "verify $(field honest .verify.verdict), profile $(field honest .profile.verdict), reward $(field honest .reward.value), $(field honest '.profile.reason'), evaluations $(field honest '[.trajectory.evaluations[] | "\(.op) \(.seconds * 10 | floor / 10)s"] | join(", ")')"

# The record is a candidate record: cudaagent-verify judges it the way the episode's evaluator did.
head -1 "$out/honest.jsonl" | "$bin/cudaagent-verify" --quiet --device "$device" >"$out/same.jsonl" 2>"$out/same.err"
same() { jq -c "$1" "$out/same.jsonl" | head -1; }
ok=0; [[ $(same .verify.verdict) == '"PASS"' && $(same .verify.snapshot) == $(field honest '.verify.snapshot | tojson') &&
         $(same .verify.settings) == $(field honest '.verify.settings | tojson') ]] && ok=1
row same $ok "cudaagent-verify $(same .verify.verdict), snapshot $(same .verify.snapshot | cut -c2-13) vs $(field honest .verify.snapshot | cut -c1-12), task session reused in the episode: $(field honest .verify.session.task_reused)"

episode fixed
ok=0; [[ $(field fixed '[.trajectory.evaluations[].verdict] | join(",")') == FAIL_COMPILE,compiled,PASS &&
         $(field fixed .verify.verdict) == PASS ]] && ok=1
row fixed $ok "evaluations $(field fixed '[.trajectory.evaluations[].verdict] | join(",")'), final $(field fixed .verify.verdict), reward $(field fixed .reward.value)"
jq -r '.trajectory.messages[] | select(.role == "tool") | .content' "$out/fixed.jsonl" | grep -m3 "error" >"$out/fixed.diagnostics"
[[ -s $out/fixed.diagnostics ]] || row fixed-diag 0 "the compiler's errors did not reach the agent"
grep -q cudaagent-compile- "$out/fixed.diagnostics" && row fixed-diag 0 "the private build folder shows in the diagnostics"

episode fallback
ok=0; [[ $(field fallback .reward.value) == -1 ]] && ok=1
row fallback $ok "verdict $(field fallback .verify.verdict): $(field fallback .verify.reason | cut -c1-80)"

n=${CONCURRENT:-8}
cp "$out/honest.script" "$out/concurrent.script"
episode concurrent --episodes-per-task "$n" --jobs "$n" --eval-slots 1 -q
summary=$(python3 - "$out/concurrent.jsonl" <<'P'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
t = [r for r in recs if "trajectory" in r]
ev = sorted(e["seconds"] for r in t for e in r["trajectory"]["evaluations"] if e["op"] == "verify")
pf = sorted(e["seconds"] for r in t for e in r["trajectory"]["evaluations"] if e["op"] == "profile")
med = lambda xs: xs[len(xs) // 2] if xs else float("nan")
ok = len(t) == len(recs) and all(r["verify"]["verdict"] == "PASS" for r in t)
print(int(ok), "%d records, %d PASS, verify median %.1fs max %.1fs (queue included), profile median %.1fs max %.1fs, "
      "episode median %.0fs" % (len(t), sum(r["verify"]["verdict"] == "PASS" for r in t), med(ev), ev[-1] if ev else 0,
      med(pf), pf[-1] if pf else 0, med(sorted(r["trajectory"]["seconds"]["total"] for r in t))))
P
)
row concurrent "${summary%% *}" "${summary#* }"
fi

if [[ -n ${SERVE_URL:-} ]]; then
  t0=$SECONDS
  "$bin/cudaagent-rollout" --device "$device" --endpoint "$SERVE_URL" --model "${SERVE_MODEL:-policy}" \
    --episodes-per-task 4 --jobs 4 --max-turns 10 --max-tokens 512 "$example/model.py" \
    >"$out/serve.jsonl" 2>"$out/serve.err"
  rc=$?
  ok=0; [[ $rc == 0 && $(grep -c '"trajectory"' "$out/serve.jsonl") == 4 ]] && ok=1
  row serve $ok "exit $rc after $((SECONDS - t0)) s; finish $(jq -r .trajectory.finish_reason "$out/serve.jsonl" | sort | uniq -c | tr '\n' ' '); tokens $(jq -r .trajectory.tokens.status "$out/serve.jsonl" | sort | uniq -c | tr '\n' ' ')"
fi
cat "$out/steps.txt"
exit $((failures > 0))
