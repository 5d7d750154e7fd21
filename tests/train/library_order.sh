#!/usr/bin/env bash
# Programs that link libtorch take the C++ library's own functions from libstdc++, never from the
# copies a PyTorch wheel's libtorch.so carries and exports (its std::filesystem::remove_all crashed
# cudaagent-train on the GPU machine). Two checks: libstdc++ is the first library each program
# needs, and with every symbol bound at start (LD_BIND_NOW) the dynamic linker binds no std::
# symbol of the program to libtorch or libc10. Here, with Debian's libtorch, the second cannot
# fail; tests/gpu/train/parity.sh runs this script against the wheel, where it can.
source "$(dirname "$0")/lib.sh" "$1"
command -v readelf >/dev/null || { echo "SKIP: no readelf"; exit 77; }
for program in cudaagent-train cudaagent-test-trajectories; do
  # The test program is absent from builds without tests (the GPU machine's); the trainer never is.
  if [[ ! -x $bin/$program ]]; then
    [[ $program == cudaagent-train ]] && fail "no $bin/$program"
    continue
  fi
  readelf -d "$bin/$program" | awk '/\(NEEDED\)/ { gsub(/[\[\]]/, "", $NF); print $NF }' >"$scratch/needed"
  first=$(head -1 "$scratch/needed")
  [[ $first == libstdc++.so* ]] ||
    fail "$program needs $first first, not libstdc++: $(tr '\n' ' ' <"$scratch/needed")"
  LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT=$scratch/bindings "$bin/$program" --help >/dev/null 2>&1 ||
    fail "$program --help failed"
  # Lines: "PID: binding file PROGRAM [0] to LIBRARY [0]: normal symbol `NAME' [VERSION]".
  cat "$scratch"/bindings.* |
    awk -v p="$program" '$4 ~ ("/" p "$") && $7 ~ /\/lib(torch|c10)[^\/]*$/ && $11 ~ /^`_Z(N|NK)?St/' \
      >"$scratch/wrong" || true
  rm -f "$scratch"/bindings.*
  if [[ -s $scratch/wrong ]]; then
    fail "$program binds C++ library symbols to libtorch: $(head -3 "$scratch/wrong")"
  fi
done
echo "libstdc++ comes first and takes every std:: symbol of cudaagent-train and cudaagent-test-trajectories"
