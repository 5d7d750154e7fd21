#!/usr/bin/env bash
# Parity and benchmarks of cudaagent-train against Hugging Face transformers (issue 13); the checks
# themselves are in parity.py (its docstring lists them and their gates).
#
# On the GPU machine, from the repository root:
#   tests/gpu/train/parity.sh OUT [DEPS_DIR]
# builds cudaagent-train against the libtorch inside the machine's PyTorch wheel into
# PARITY_BUILD_DIR (default OUT/build; a second run reuses it), with the Debian 12 packages in
# DEPS_DIR (default .deps/train, made by tests/gpu/train/fetch_debs.sh on a Debian 12 machine)
# unpacked beside it for the headers and libraries the machine lacks, then runs parity.py live
# (about 5 minutes on an H200). PARITY_BUILD_ONLY=1 stops after the build, so build and run can
# be separate device calls (with PARITY_BUILD_DIR inside the repository, e.g. build/gpu-train).
#
# On the CPU (CI runs this through tests/cli/train/parity_smoke.sh), with a build at hand:
#   PARITY_SMOKE=1 tests/gpu/train/parity.sh OUT BIN_DIR
# runs the same script against the committed fixtures instead of a live transformers.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)

if [[ ${PARITY_SMOKE:-0} == 1 ]]; then
  exec python3 "$root/tests/gpu/train/parity.py" --smoke --bin "$2" --out "$out"
fi

deps_dir=${2:-$root/.deps/train}
python=${PYTHON:-python3}
torch_prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
torch_lib=$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
build=$(mkdir -p "${PARITY_BUILD_DIR:-$out/build}" && cd "${PARITY_BUILD_DIR:-$out/build}" && pwd)
deps=$build/deps
if [[ ! -x $build/bin/cudaagent-train ]]; then
  mkdir -p "$deps"
  shopt -s nullglob
  debs=("$deps_dir"/*.deb)
  ((${#debs[@]} > 0)) || { echo "parity: no .deb files in $deps_dir (tests/gpu/train/fetch_debs.sh makes them)" >&2; exit 1; }
  for deb in "${debs[@]}"; do dpkg -x "$deb" "$deps"; done
  # The CUDA parts of lib/ (NVRTC, CUPTI) are not needed here; tests and benchmarks neither.
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAAGENT_CUDA=OFF -DCUDAAGENT_TORCH=ON \
    -DCUDAAGENT_BUILD_TESTS=OFF -DCUDAAGENT_BUILD_BENCH=OFF -DCUDAAGENT_WERROR=OFF \
    -DCMAKE_PREFIX_PATH="$torch_prefix;$deps/usr" -DOPENSSL_ROOT_DIR="$deps/usr" \
    -DCUDAToolkit_ROOT="${CUDAToolkit_ROOT:-/usr/local/cuda}" >"$out/cmake.log" 2>&1 ||
    { tail -40 "$out/cmake.log" >&2; exit 1; }
  cmake --build "$build" --target cudaagent-train -j "$(nproc)" -- -k 0 >"$out/build.log" 2>&1 ||
    { grep -E "error|Error" "$out/build.log" | head -40 >&2; exit 1; }
fi
# Libraries the machine lacks come from the unpacked packages; its own stay in charge otherwise.
mkdir -p "$build/extra-lib"
ldd "$build/bin/cudaagent-train" | awk '/not found/ {print $1}' | while read -r missing; do
  found=$(find "$deps" -name "$missing" | head -1)
  [[ -n $found ]] && ln -sf "$found" "$build/extra-lib/$missing"
done
export LD_LIBRARY_PATH=$build/extra-lib:$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ldd "$build/bin/cudaagent-train" | grep -q 'not found'; then
  echo "parity: cudaagent-train still lacks: $(ldd "$build/bin/cudaagent-train" | awk '/not found/ {print $1}')" >&2
  exit 1
fi
"$build/bin/cudaagent-train" --version >"$out/version.txt"
# The wheel's libtorch exports copies of C++ library functions; the program must not use them.
bash "$root/tests/train/library_order.sh" "$build/bin" >"$out/library-order.txt" 2>&1 ||
  { cat "$out/library-order.txt" >&2; exit 1; }
[[ ${PARITY_BUILD_ONLY:-0} == 1 ]] && { cat "$out/version.txt"; exit 0; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/gpu.txt" 2>&1 || true
"$python" "$root/tests/gpu/train/parity.py" --bin "$build/bin" --out "$out"
