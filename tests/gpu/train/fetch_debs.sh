#!/usr/bin/env bash
# Downloads (apt-get download, on a Debian 12 machine) the packages that building cudaagent-train
# on the GPU machine needs and it lacks: headers and link-time libraries of simdjson, CLI11,
# SQLite, OpenSSL, libcurl, PCRE2, utf8proc and libmicrohttpd. parity.sh unpacks them there.
# Usage: tests/gpu/train/fetch_debs.sh [DIR]   (default .deps/train)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
dir=${1:-$root/.deps/train}
mkdir -p "$dir"
cd "$dir"
apt-get download \
  libsimdjson-dev libsimdjson14 libcli11-dev \
  libsqlite3-dev libsqlite3-0 libssl-dev libssl3 libcurl4-openssl-dev libcurl4 \
  libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 libmicrohttpd-dev libmicrohttpd12
ls -l "$dir"
