#!/usr/bin/env bash
# Sourced on a GPU machine that is not Debian 12, to run binaries built here.
#   source tests/gpu/device_env.sh DEPS_DIR BIN_DIR
# DEPS_DIR holds Debian 12 .deb files (bubblewrap, jq, ...) and lib/ with the shared libraries
# the binaries link (copied from the build machine by tests/gpu/make_deps.sh). The .debs are unpacked under /tmp/deps;
# of lib/, only the libraries the machine lacks are put on LD_LIBRARY_PATH, so the machine's own
# libssl, libcurl and the like stay in charge of everything else (the Python that verify starts
# inherits none of this: the sandbox passes a fixed environment).
deps_dir=$1 bin_dir=$2
mkdir -p /tmp/deps /tmp/deplib
for deb in "$deps_dir"/*.deb; do dpkg -x "$deb" /tmp/deps; done
export PATH=/tmp/deps/usr/bin:$PATH
export LD_LIBRARY_PATH=/tmp/deplib:/tmp/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for binary in "$bin_dir"/*; do
  [[ -x $binary && -f $binary ]] || continue
  ldd "$binary" 2>/dev/null | awk '/not found/ {print $1}'
done | sort -u | while read -r missing; do
  if [[ -f $deps_dir/lib/$missing ]]; then ln -sf "$(cd "$deps_dir/lib" && pwd)/$missing" /tmp/deplib/; fi
done
for binary in "$bin_dir"/*; do
  [[ -x $binary && -f $binary ]] || continue
  if ldd "$binary" 2>/dev/null | grep -q 'not found'; then
    echo "device_env: $binary still lacks: $(ldd "$binary" | awk '/not found/ {print $1}' | tr '\n' ' ')" >&2
  fi
done
