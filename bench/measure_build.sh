#!/usr/bin/env bash
# Measures what honest builds need, to size the compiler limits of build_extension
# (BuildLimits): peak resident memory, CPU seconds and wall seconds of each step of building the
# example workspaces, and whether each step still succeeds under an address-space limit.
# Usage: bench/measure_build.sh OUT_DIR [AS_LIMIT_MIB]   (run from the repository root)
# Needs g++, python3 with torch (its include paths are asked of torch.utils.cpp_extension), and
# nvcc for the CUDA steps (skipped without it). Prints one line per step:
#   step  exit  max_rss_mib  user_s  sys_s  wall_s
set -uo pipefail
out=$1 limit_mib=${2:-0}
root=$(pwd)
mkdir -p "$out"
python=${CUDAAGENT_PYTHON:-/usr/bin/python3}
mapfile -t incs < <("$python" -c 'import torch.utils.cpp_extension as c, sysconfig
for p in c.include_paths(): print(p)
print(sysconfig.get_paths()["include"])' 2>/dev/null)
isys=()
for p in "${incs[@]}"; do isys+=(-isystem "$p"); done
[[ -d /usr/local/cuda/include ]] && isys+=(-isystem /usr/local/cuda/include)
# EXTRA_INCLUDE: a folder searched first (e.g. one holding c10/cuda/impl/cuda_cmake_macros.h,
# which a CPU-only torch lacks, to compile the CUDA bindings on a machine without a CUDA torch).
[[ -n ${EXTRA_INCLUDE:-} ]] && isys=(-isystem "$EXTRA_INCLUDE" "${isys[@]}")
defs=(-DTORCH_EXTENSION_NAME=cuda_extension -DTORCH_API_INCLUDE_EXTENSION_H -D_GLIBCXX_USE_CXX11_ABI=1)
cxx=(g++ -O2 -std=c++17 -fPIC -w "${defs[@]}")
cpu=$root/share/examples/workspaces/bias-relu-cpu
cuda=$root/share/examples/workspaces/bias-relu-cuda

step() {  # name command...
  local name=$1; shift
  local report=$out/$name.time
  (
    if ((limit_mib > 0)); then ulimit -v $((limit_mib * 1024)); fi
    /usr/bin/time -o "$report" -f '%x %M %U %S %e' "$@" >"$out/$name.log" 2>&1
  )
  # The last line holds the numbers ("Command exited with ..." or "Command terminated by signal
  # ..." may come first).
  read -r code rss user sys wall < <(tail -1 "$report") || { code=? rss=0 user=0 sys=0 wall=0; }
  printf '%-24s %4s %8d %8.1f %6.1f %8.1f\n' "$name" "$code" $((rss / 1024)) "$user" "$sys" "$wall"
}

printf '%-24s %4s %8s %8s %6s %8s\n' step exit rss_mib user_s sys_s wall_s
echo '#include <torch/extension.h>' >"$out/cudaagent_torch.h"
step pch "${cxx[@]}" "${isys[@]}" -x c++-header "$out/cudaagent_torch.h" -o "$out/cudaagent_torch.h.gch"
pch=(-Winvalid-pch -include "$out/cudaagent_torch.h")
step cpu-kernel "${cxx[@]}" -I"$root/share/workspace" "${isys[@]}" "${pch[@]}" -c "$cpu/kernels/bias_relu.cpp" -o "$out/k.o"
step cpu-binding "${cxx[@]}" -I"$root/share/workspace" "${isys[@]}" "${pch[@]}" -c "$cpu/kernels/bias_relu_binding.cpp" -o "$out/b.o"
step binding-cpp "${cxx[@]}" -I"$root/share/workspace" "${isys[@]}" "${pch[@]}" -c "$root/share/workspace/binding.cpp" -o "$out/m.o"
step cpu-kernel-no-pch "${cxx[@]}" -I"$root/share/workspace" "${isys[@]}" -c "$cpu/kernels/bias_relu.cpp" -o "$out/k2.o"
if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  arch=${ARCH:-90}
  step cuda-kernel "$nvcc" -O3 --use_fast_math -std=c++17 -Xcompiler -fPIC --expt-relaxed-constexpr \
    -gencode=arch=compute_$arch,code=sm_$arch -w "${defs[@]}" "${isys[@]}" -c "$cuda/kernels/bias_relu.cu" -o "$out/c.o"
  step cuda-binding "${cxx[@]}" -DWITH_CUDA -I"$root/share/workspace" "${isys[@]}" "${pch[@]}" -c "$cuda/kernels/bias_relu_binding.cpp" -o "$out/cb.o"
  gemm=$root/tests/gpu/tasks/linear-relu/cublas/kernels
  for f in "$gemm"/*.cu; do
    step "cublas-$(basename "$f" .cu)" "$nvcc" -O3 -std=c++17 -Xcompiler -fPIC -gencode=arch=compute_$arch,code=sm_$arch -w \
      "${defs[@]}" "${isys[@]}" -c "$f" -o "$out/g.o"
  done
fi
ls -l "$out"/*.o "$out"/*.gch 2>/dev/null | awk '{ printf "%-40s %10d bytes\n", $9, $5 }'
