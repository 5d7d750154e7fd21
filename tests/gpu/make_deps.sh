#!/usr/bin/env bash
# Makes the DEPS_DIR that tests/gpu/device_env.sh reads on the GPU machine, on the Debian 12 machine
# that built BIN_DIR: the .deb files of the tools the GPU scripts call there (bubblewrap, jq), and
# lib/ with every shared library the stage binaries link, copied from this machine (device_env.sh
# puts only those the GPU machine lacks on the library path). cudaagent-train is left out: on the
# GPU machine it is built against that machine's torch (tests/gpu/train/parity.sh, whose Debian
# packages tests/gpu/train/fetch_debs.sh downloads).
# Usage: tests/gpu/make_deps.sh BIN_DIR [DEPS_DIR]   (default .deps; then carry both)
set -euo pipefail
(($# >= 1)) || { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$1 deps=${2:-.deps}
mkdir -p "$deps/lib"
(cd "$deps" && apt-get download bubblewrap jq libjq1 libonig5 >/dev/null)
# The C library, the compiler's runtime and the CUDA Toolkit's libraries (NVRTC: tens of MB) are
# the GPU machine's own; everything else is copied.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libstdc\+\+|libgcc_s|libpthread|libdl\.so|librt\.so)'
for binary in "$bin"/cudaagent-* "$bin"/trace_summary "$bin"/object_policy_probe; do
  [[ -x $binary && $binary != */cudaagent-train && $binary != */cudaagent-test-trajectories ]] || continue
  ldd "$binary" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip || $path == /usr/local/cuda* ]] || cp -L "$path" "$deps/lib/$name"
done
ls "$deps"/*.deb | wc -l | xargs echo "make_deps: .deb files:"
ls "$deps/lib" | wc -l | xargs echo "make_deps: libraries in $deps/lib:"
