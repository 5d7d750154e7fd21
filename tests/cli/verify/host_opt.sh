#!/usr/bin/env bash
# --build-host-opt and $CUDAAGENT_BUILD_HOST_OPT: the level reaches the record's settings and the
# store key (only when it is not the default 2, so stored verdicts keep their keys), the flag wins
# over the variable, and a level outside 0-3 is a usage error (exit 2) from either. The candidate
# computes with torch in its C++, so the source scan rejects it before anything is built.
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
export CUDAAGENT_CACHE_DIR=$scratch/cache
unset CUDAAGENT_BUILD_HOST_OPT
ws=$scratch/torch-in-cpp
cp -r "$root/share/examples/workspaces/bias-relu-cpu" "$ws"
cat >"$ws/kernels/bias_relu.cpp" <<'EOF'
#include <torch/extension.h>

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  return torch::relu(x + bias) * scale;
}
EOF
verify() { "$bin/cudaagent-verify" --quiet --device cpu --task "$ws/model.py" "$@" "$ws"; }
record() {
  local name=$1
  shift
  verify "$@" >"$scratch/$name.json" || fail "$name: exited $?"
  [[ $(jq -r .verify.verdict "$scratch/$name.json") == REJECT_POLICY ]] ||
    fail "$name: $(jq -c .verify "$scratch/$name.json")"
}
record default
CUDAAGENT_BUILD_HOST_OPT=2 record env2
CUDAAGENT_BUILD_HOST_OPT=1 record env1
CUDAAGENT_BUILD_HOST_OPT=1 record flag3 --build-host-opt 3
level() { jq -r .verify.settings.host_optimization "$scratch/$1.json"; }
key() { jq -r .verify.job_key "$scratch/$1.json"; }
[[ $(level default) == 2 && $(level env2) == 2 ]] || fail "default level: $(level default), $(level env2)"
[[ $(level env1) == 1 ]] || fail "CUDAAGENT_BUILD_HOST_OPT=1 gave $(level env1)"
[[ $(level flag3) == 3 ]] || fail "--build-host-opt 3 over the variable gave $(level flag3)"
[[ $(key default) == "$(key env2)" ]] || fail "level 2 changed the store key"
[[ $(key default) != "$(key env1)" && $(key env1) != "$(key flag3)" ]] ||
  fail "another level kept the store key"
for bad in "CUDAAGENT_BUILD_HOST_OPT=4" "CUDAAGENT_BUILD_HOST_OPT=fast"; do
  code=0
  env "$bad" "$bin/cudaagent-verify" --quiet --device cpu --task "$ws/model.py" "$ws" \
    >/dev/null 2>"$scratch/err" || code=$?
  [[ $code == 2 ]] || fail "$bad exited $code, expected 2"
  grep -q "build-host-opt" "$scratch/err" || fail "$bad: the message does not name the option: $(cat "$scratch/err")"
done
code=0
verify --build-host-opt -1 >/dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "--build-host-opt -1 exited $code, expected 2"
echo ok
