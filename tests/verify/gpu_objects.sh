#!/usr/bin/env bash
# The GPU cases of issue 10, class 1, checked at the object level on a machine without a GPU: each
# case's own sources (tests/gpu/cases/g-i10c1-*/kernels) compiled as cudaagent's build compiles
# them (nvcc for .cu; g++ with torch's headers for .cpp), with the base workspace's kernel when the
# case does not replace it (the base binding imports nothing the .cu cases define), then judged by
# the binary-level policy
# through tests/helpers/object_policy_probe, with the toolchain's, torch's and Python's header
# folders as the glue's (object_lines.h). The verdict must be the case's `expected` (on an H200
# the same cases run end to end through tests/gpu/run_h200.sh). Skipped (77) without nvcc.
# Usage: tests/verify/gpu_objects.sh BIN_DIR
set -uo pipefail
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x $nvcc ]] || { echo "no nvcc: skipped"; exit 77; }
python=${CUDAAGENT_PYTHON:-/usr/bin/python3}
mapfile -t incs < <("$python" -c 'import torch.utils.cpp_extension as c, sysconfig
for p in c.include_paths(): print(p)
print(sysconfig.get_paths()["include"])' 2>/dev/null)
((${#incs[@]} > 0)) || { echo "no torch: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
isys=()
# A CPU-only torch lacks this generated header of its CUDA parts; its one definition is enough to
# compile a binding for its symbols.
if ! find "${incs[@]}" -path '*c10/cuda/impl/cuda_cmake_macros.h' 2>/dev/null | grep -q .; then
  mkdir -p "$work/stub/c10/cuda/impl"
  echo '#define C10_CUDA_BUILD_SHARED_LIBS' >"$work/stub/c10/cuda/impl/cuda_cmake_macros.h"
  isys+=(-isystem "$work/stub")
fi
glue=()
for p in "${incs[@]}"; do isys+=(-isystem "$p") glue+=("--glue-root=$p"); done
isys+=(-isystem /usr/local/cuda/include)
for p in /usr/include /usr/lib/gcc /usr/local/cuda /usr/local/include; do glue+=("--glue-root=$p"); done
defs=(-DTORCH_EXTENSION_NAME=cuda_extension -DTORCH_API_INCLUDE_EXTENSION_H -D_GLIBCXX_USE_CXX11_ABI=1 -DWITH_CUDA)
failures=0
# The base workspace's own kernel and binding first: the honest control of the line rule (its
# binding's pybind11 glue reaches Python, none of it from its own lines).
for case_dir in "$root"/share/examples/workspaces/bias-relu-cuda/ "$root"/tests/gpu/cases/g-i10c1-*/; do
  name=$(basename "$case_dir")
  expected=PASS
  [[ -f $case_dir/expected ]] && expected=$(cat "$case_dir/expected")
  objects=()
  sources=("$case_dir"kernels/*)
  base_kernel=$root/share/examples/workspaces/bias-relu-cuda/kernels/bias_relu.cu
  [[ -f ${case_dir}kernels/bias_relu.cu ]] || sources+=("$base_kernel")
  for source in "${sources[@]}"; do
    object=$work/$name-$(basename "$source").o
    case $source in
      *.cu) "$nvcc" -O3 -std=c++17 -Xcompiler -fPIC,-g1,-gdwarf-4 -gencode=arch=compute_90,code=sm_90 -w "${defs[@]}" \
              "${isys[@]}" -c "$source" -o "$object" ;;
      *.cpp) g++ -O2 -std=c++17 -fPIC -w -g1 -gdwarf-4 "${defs[@]}" -I"$root/share/workspace" "${isys[@]}" \
               -c "$source" -o "$object" ;;
      *) continue ;;
    esac || { echo "$name: cannot compile $(basename "$source")"; failures=$((failures + 1)); continue 2; }
    objects+=("kernels/$(basename "$source")=$object")
  done
  verdict=$("$bin/object_policy_probe" "$root/share/harness/policy.json" "${glue[@]}" "${objects[@]}")
  echo "$name: $(head -1 <<<"$verdict") (expected $expected)"
  tail -n +2 <<<"$verdict" | head -3 | sed 's/^/  /'
  [[ $(head -1 <<<"$verdict") == "$expected" ]] || failures=$((failures + 1))
done
exit $((failures > 0))
