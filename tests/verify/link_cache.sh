#!/usr/bin/env bash
# Linked modules are cached by content like the objects: a second build of the same candidate
# (profile after verify) takes the module from the cache and still loads and passes; an edit to a
# source makes new objects and so a new link. The object policy's nm and objdump output is kept by
# the objects' bytes too. Args: BIN_DIR BASE_WORKSPACE.
set -euo pipefail
bin=$1 base=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cp -r "$base" "$scratch/a"
# Bytes no earlier run of the shared test cache has seen, so the first build compiles and links;
# the function's name marks the object's nm output.
probe=link_cache_probe_$$_$(date +%s%N)
echo "extern \"C\" int $probe() { return 1; }" >>"$scratch/a/kernels/bias_relu.cpp"
verify() { "$bin/cudaagent-verify" --quiet --device cpu --task "$base/model.py" "$scratch/a"; }
link() { jq -c '.verify.build.steps[] | select(.source == "(link)") | {cached, ok}' "$1"; }

verify >"$scratch/first.json"
[[ $(jq -r .verify.verdict "$scratch/first.json") == PASS ]] || fail "first: $(jq -c .verify "$scratch/first.json" | cut -c1-400)"
[[ $(link "$scratch/first.json") == '{"cached":false,"ok":true}' ]] || fail "first link: $(link "$scratch/first.json")"

# The object policy's tool output is kept under the hash of each object's bytes, for the next read.
kept=$(grep -l "$probe" "${CUDAAGENT_CACHE_DIR:-$HOME/.cache/cudaagent}"/build/object-tools/*.symbols) || fail "no nm output kept for the new object"
[[ $(wc -l <<<"$kept") == 1 && -s ${kept%.symbols}.objdump-lines ]] || fail "kept: $kept"

verify >"$scratch/second.json"
[[ $(jq -r .verify.verdict "$scratch/second.json") == PASS ]] || fail "second: $(jq -c .verify "$scratch/second.json" | cut -c1-400)"
[[ $(link "$scratch/second.json") == '{"cached":true,"ok":true}' ]] || fail "second link: $(link "$scratch/second.json")"

echo "// and an edit" >>"$scratch/a/kernels/bias_relu_binding.cpp"
verify >"$scratch/third.json"
[[ $(jq -r .verify.verdict "$scratch/third.json") == PASS ]] || fail "third: $(jq -c .verify "$scratch/third.json" | cut -c1-400)"
[[ $(link "$scratch/third.json") == '{"cached":false,"ok":true}' ]] || fail "an edited binding reused the old module: $(link "$scratch/third.json")"
echo ok
