#!/usr/bin/env bash
# --kernel-trace is CUDA only (a usage error on --device cpu, before anything runs), is found
# beside the programs or given with --kernel-trace-library (which must be a file), and
# --max-torch-share is a share. Needs no GPU and no torch: every case stops at the flags.
source "$(dirname "$0")/../lib.sh"
bin=$1
usage() {  # expected message fragment, then the arguments (PROGRAM: another copy of the tool)
  local want=$1 code=0
  shift
  "${PROGRAM:-$bin/cudaagent-profile}" "$@" >"$scratch/out" 2>"$scratch/err" || code=$?
  [[ $code == 2 ]] || fail "$* exited $code, expected 2: $(cat "$scratch/err")"
  grep -q -- "$want" "$scratch/err" || fail "$*: message lacks '$want': $(cat "$scratch/err")"
  [[ ! -s $scratch/out ]] || fail "$*: wrote to stdout"
}
mkdir "$scratch/ws"
usage "needs --device cuda" --device cpu --kernel-trace "$scratch/ws"
usage "needs --device cuda" --device cpu --kernel-trace-library /bin/true "$scratch/ws"
usage "is not a readable file" --device cuda --kernel-trace-library "$scratch/missing.so" "$scratch/ws"
usage "is not a readable file" --device cuda --kernel-trace-library "$scratch" "$scratch/ws"
usage "max-torch-share" --device cuda --kernel-trace --max-torch-share 1.5 "$scratch/ws"
# The library beside the programs: a copy of the program in a prefix without lib/ says where it
# looked; with lib/libcudaagent_cupti.so there the flags pass (and the run stops later, exit 1:
# no GPU here, or no such input on a GPU machine).
mkdir -p "$scratch/prefix/bin"
cp "$bin/cudaagent-profile" "$scratch/prefix/bin/"
PROGRAM=$scratch/prefix/bin/cudaagent-profile usage "no libcudaagent_cupti.so in the lib directory" --device cuda --kernel-trace "$scratch/ws"
mkdir "$scratch/prefix/lib"
: >"$scratch/prefix/lib/libcudaagent_cupti.so"
code=0
"$scratch/prefix/bin/cudaagent-profile" --device cuda --kernel-trace "$scratch/none.jsonl" >/dev/null 2>"$scratch/err" || code=$?
[[ $code == 1 ]] || fail "--kernel-trace with the library beside the program exited $code: $(cat "$scratch/err")"
if grep -q "libcudaagent_cupti" "$scratch/err"; then fail "library not found: $(cat "$scratch/err")"; fi
echo ok
