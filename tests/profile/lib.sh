# Shared by the profile behaviour scripts (args: BIN_DIR BASE_WORKSPACE): a scratch copy of the
# CPU example workspace per candidate, and a profile call with short settings.
set -euo pipefail
bin=$1 base=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# workspace NAME [MODEL_NEW_PY]: a copy of the base workspace, model_new.py replaced if given.
workspace() {
  rm -rf "$scratch/$1"
  cp -r "$base" "$scratch/$1"
  if [[ $# -gt 1 ]]; then printf '%s\n' "$2" >"$scratch/$1/model_new.py"; fi
  echo "$scratch/$1"
}
profile() {
  "$bin/cudaagent-profile" --quiet --device cpu --task "$base/model.py" --rounds 4 --round-ms 5 \
    --warmup-ms 50 --timeout 60 "$@"
}
field() { jq -r "$1" "$2"; }
