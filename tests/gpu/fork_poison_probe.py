"""Which import of torch.compile's stack spoils a fork for CUDA, on a GPU machine.

A harness worker imports torch (and, for the filter, torch.compile's stack) once and forks a job
per task; a job can use the GPU only if the worker never asked the CUDA runtime anything. torch
marks the fork bad (poison_fork) from the C functions that ask the runtime: the device count
(torch.cuda.is_available() without NVML, device_count() when NVML fails) and the lazy init. This
wraps those functions, imports each module asked for, and prints, per module, the Python stack of
every call that reached them, then whether a forked child can still use CUDA.

    python3 tests/gpu/fork_poison_probe.py [MODULE ...]   (default: torch._dynamo
                                                           torch._inductor.compile_fx)
Prints one JSON object. Exit 0 when the child could use CUDA, 1 when not.
"""

import importlib
import json
import os
import sys
import traceback

import torch

MODULES = sys.argv[1:] or ["torch._dynamo", "torch._inductor.compile_fx"]
calls = []


def wrap(name):
    original = getattr(torch._C, name, None)
    if original is None:
        return

    def recorded(*args, **kwargs):
        calls.append({"function": name, "module": current[0],
                      "stack": [f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_stack()[-12:-1]]})
        return original(*args, **kwargs)

    setattr(torch._C, name, recorded)


current = ["(before)"]
for function in ("_cuda_getDeviceCount", "_cuda_init", "_cuda_getDevice", "_cuda_getArchFlags"):
    wrap(function)

for module in MODULES:
    current[0] = module
    try:
        importlib.import_module(module)
    except Exception as error:  # noqa: BLE001  (reported, not fatal)
        calls.append({"function": "(import failed)", "module": module, "stack": [repr(error)]})

child = os.fork()
if child == 0:
    try:
        bad = torch._C._cuda_isInBadFork()
        (torch.ones(1, device="cuda") + 1).item()
        os._exit(3 if bad else 0)
    except BaseException:  # noqa: BLE001
        os._exit(4)
_, status = os.waitpid(child, 0)
code = os.waitstatus_to_exitcode(status)
print(json.dumps({"torch": torch.__version__, "modules": MODULES, "calls": calls,
                  "child": {0: "can use CUDA", 3: "in a bad fork", 4: "CUDA failed"}.get(code, code)},
                 indent=1))
sys.exit(0 if code == 0 else 1)
