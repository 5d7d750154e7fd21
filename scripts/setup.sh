#!/usr/bin/env bash
# Installs every Debian 12 package cudaagent needs to build, test and run. Idempotent: packages
# already present are not touched, and apt is not called at all when nothing is missing.
# The CUDA Toolkit is not a Debian package here; without it the GPU parts are left out.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git    # toolchain
  libcli11-dev libsimdjson-dev libsqlite3-dev sqlite3  # CLI, JSON, store
  doctest-dev libssl-dev libcurl4-openssl-dev          # tests, hashing, HTTP
  libpcre2-dev                                         # the rollout's Grep tool
  jq python3 procps zstd                               # tests (pgrep), benchmark anchors, the dataset
  bubblewrap libseccomp-dev                            # the sandbox for candidate code
  python3-torch libtorch-dev pybind11-dev              # CPU verification (torch 1.13, no GPU)
  libpcre2-dev libutf8proc-dev libmicrohttpd-dev       # cudaagent-train: tokenizer, HTTP server
  libgloo-dev                                          # cudaagent-train's CPU data parallelism
  slurmctld slurmd slurm-client munge                  # tests/slurm's one-node cluster (the test
                                                       # runs its own daemons, private config)
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
echo "setup: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
