#!/usr/bin/env bash
# A model that misbehaves in every way the tools must survive (replayed with --policy replay:):
# malformed arguments, an unknown tool, path escapes, links out of the workspace, writes to
# protected files (through the tools and through the shell), a flood of output, a command past its
# timeout, the host's secrets and network. Every call gets an error or a harmless answer the model
# sees; the episode ends normally, the protected files are untouched, nothing escaped.
source "$(dirname "$0")/../lib.sh"
bin=$1
source "$(dirname "$0")/lib.bash"
rm -f /tmp/escaped.txt

run --policy "replay:$scratch/misbehave.jsonl" --keep-workspaces "$task"
[[ $code == 0 ]] || fail "exit $code: $(cat "$scratch/err")"
[[ $(q .trajectory.finish_reason) == stop ]] || fail "finish: $(q .trajectory.finish_reason) $(q .trajectory.finish_detail)"
[[ $(q .trajectory.tool_calls) == 24 ]] || fail "tool calls: $(q .trajectory.tool_calls)"
[[ $(q .verify.verdict) == REJECT_POLICY && $(q .reward.value) == -1 ]] || fail "final: $(q .verify.reason)"
q '.trajectory.messages[] | select(.role == "tool") | "[\(.name)] \(.content)"' >"$scratch/results"
expect() { grep -qF -- "$1" "$scratch/results" || fail "no result says: $1"; }
expect "[Read] Error: Read: the arguments are not a JSON object"
expect "[Teleport] Error: unknown tool 'Teleport'"
expect "[Read] Error: '../../../../etc/passwd' is outside the workspace"
expect "[Read] Error: '/etc/passwd' is outside the workspace"
expect "[Write] Error: '/tmp/escaped.txt' is outside the workspace"
expect "[Read] Error: Read: missing argument \"file_path\""
expect "[Read] Error: Read: argument \"file_path\" must be a string"
expect "[Read] Error: 'leak' is a symbolic link"
expect "[Read] Error: 'root_link' is a symbolic link"
expect "[Write] Error: 'leak' is a symbolic link"
expect "[Glob] No files match '**/passwd'"
expect "[Write] Error: 'model.py' is protected"
expect "[Edit] Error: 'model.py' is protected"
expect "[Write] Error: 'utils/verification.py' is protected"
expect "[Write] Error: 'SKILL.md' is protected"
expect "bytes of output cut from the middle"
expect "TAIL-MARK"
expect "the command timed out after 1 s"
expect "after-timeout"
expect "[KillBash] Error: no background command 'bash_42'"
grep -q "^root:" "$scratch/results" && fail "the host's passwd leaked into a result"
grep -q "Read-only file system\|Permission denied\|Device or resource busy" "$scratch/results" ||
  fail "the shell could change protected files"
grep -q "Network is unreachable\|Operation not permitted\|Permission denied\|Address family not supported" "$scratch/results" ||
  fail "no network error: $(grep -A2 'echo net' "$scratch/results")"
[[ ! -e /tmp/escaped.txt ]] || fail "a write escaped the workspace"
ws=$(q .trajectory.workspace)
cmp -s "$ws/model.py" "$task" || fail "model.py was changed"
cmp -s "$ws/binding.cpp" "$root/share/workspace/binding.cpp" || fail "binding.cpp was changed"
[[ -f $ws/utils/verification.py && ! -e $ws/u2 ]] || fail "utils/ was moved"
echo "ok"
