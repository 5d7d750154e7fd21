#!/usr/bin/env bash
# share/harness/filter_task.py's seeded(), with a stand-in for torch (no GPU needed): on CUDA with
# torch's device context, the model and inputs are made with the GPU as the default device; code
# that fails so runs again without it, from the same seed; on the CPU, or a torch without the
# context (1.13), there is no context at all.
source "$(dirname "$0")/../lib.sh"
harness=$(cd "$(dirname "$0")/../../../share/harness" && pwd)
python3 - "$harness" <<'PY' || fail "seeded() misbehaves"
import sys
sys.path.insert(0, sys.argv[1])
import filter_task

class FakeTorch:
    def __init__(self, has_context):
        self.log = []
        torch = self
        class Device:
            def __init__(self, name):
                self.name = name
            def __enter__(self):
                torch.log.append("enter " + self.name)
            def __exit__(self, *exc):
                torch.log.append("exit " + self.name)
        if not has_context:
            Device = type("Device", (), {"__init__": lambda self, name: None})
        self.device = Device
    def manual_seed(self, seed):
        self.log.append("seed %d" % seed)

def check(got, expected, what):
    if got != expected:
        sys.exit("%s: got %r, expected %r" % (what, got, expected))

t = FakeTorch(True)
check(filter_task.seeded(t, 5, "cuda", lambda: t.log.append("make") or 1), 1, "cuda result")
check(t.log, ["seed 5", "enter cuda", "make", "exit cuda"], "cuda: made under the device")

t = FakeTorch(True)
calls = []
def cpu_only():
    calls.append(len(t.log))
    if len(calls) == 1:
        raise RuntimeError("a CPU-only call")
    return "made"
check(filter_task.seeded(t, 7, "cuda", cpu_only), "made", "fallback result")
check(t.log, ["seed 7", "enter cuda", "exit cuda", "seed 7"], "fallback: reseeded, no device")

t = FakeTorch(True)
def always_fails():
    raise ValueError("the task's own error")
try:
    filter_task.seeded(t, 1, "cuda", always_fails)
    sys.exit("an error in both runs was swallowed")
except ValueError as error:
    check(str(error), "the task's own error", "the second run's error is raised")

for device, has_context in (("cpu", True), ("cuda", False)):
    t = FakeTorch(has_context)
    check(filter_task.seeded(t, 2, device, lambda: 3), 3, device + " result")
    check(t.log, ["seed 2"], "%s (context %s): no device context" % (device, has_context))
print("ok")
PY
