"""The candidate process: imports ModelNew and the candidate's compiled extension and runs them on
inputs the reference process drew. Everything here runs next to hostile code, so nothing it reports
is trusted: the verifier compares the output files against the reference's in another process and
reads this process's report only as evidence that can lower a verdict, never raise one.

Before any candidate code is imported it loads every input, restricts itself (no new privileges,
not dumpable, Landlock: writes only below --out), and it runs forward under an operator audit that
records every ATen operator not in the policy's allowed list (a torch compute op = REJECT_POLICY).
Writes out_K.bin, inputs_after_K.bin and report.json into --out. Exit 3: the candidate raised.

The audit is in-process: it catches torch compute anywhere in the candidate's code (import,
construction, forward), but not compute done without torch (numpy, pure Python) on inputs the
candidate found in memory or in --ref. On the GPU, cudaagent-profile's kernel provenance (share
of GPU time in the candidate's own kernels) is the check that does not depend on this process.
"""

import argparse
import ctypes
import importlib.util
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tensor_file  # noqa: E402


def restrict_self(writable_dir):
    """Best effort, layered on the OS sandbox: returns the layers that held."""
    held = []
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE = 38, 4
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
            held.append("no_new_privs")
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0:
            held.append("not_dumpable")
        abi = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
        if abi >= 1:
            # Handle only write-type rights: reads stay open (the mount namespace is read-only
            # anyway), writes are allowed only below writable_dir.
            write_rights = (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | \
                (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
            if abi >= 2:
                write_rights |= 1 << 13  # REFER
            if abi >= 3:
                write_rights |= 1 << 14  # TRUNCATE
            attr = ctypes.c_uint64(write_rights)
            ruleset = libc.syscall(444, ctypes.byref(attr), 8, 0)
            if ruleset >= 0:
                fd = os.open(writable_dir, os.O_PATH | os.O_DIRECTORY)

                class PathBeneath(ctypes.Structure):
                    _pack_ = 1
                    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

                rule = PathBeneath(write_rights, fd)
                ok = libc.syscall(445, ruleset, 1, ctypes.byref(rule), 0) == 0  # PATH_BENEATH
                # Device nodes (the GPU's /dev/nvidia*, /dev/null) are opened for writing; /dev
                # inside the sandbox holds only those, so writes there stay allowed.
                # /tmp and /dev/shm are private tmpfs mounts of this sandbox alone.
                for extra in ("/dev", "/tmp"):
                    extra_fd = os.open(extra, os.O_PATH | os.O_DIRECTORY)
                    extra_rule = PathBeneath(write_rights, extra_fd)
                    ok = ok and libc.syscall(445, ruleset, 1, ctypes.byref(extra_rule), 0) == 0
                    os.close(extra_fd)
                if ok and libc.syscall(446, ruleset, 0) == 0:  # landlock_restrict_self
                    held.append(f"landlock_abi_{abi}")
                os.close(fd)
                os.close(ruleset)
    except Exception as error:  # a missing layer is reported, not fatal
        held.append(f"restrict_error:{type(error).__name__}")
    return held


def make_audit_mode(torch, allowed, setup_allowed):
    from torch.utils._python_dispatch import TorchDispatchMode

    class OperatorAudit(TorchDispatchMode):
        """Counts operators outside the policy. Active from before the candidate's code is imported
        until its last forward: compute done at import or in __init__ (answers precomputed from
        inputs it found) counts as much as compute in forward. The setup phase also allows the
        random and fill operators that initialise parameters."""

        def __init__(self):
            super().__init__()
            self.forbidden = {}
            self.phase = "setup"

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
            if self.phase == "setup":
                if name not in allowed and name not in setup_allowed:
                    key = "setup:" + name
                    self.forbidden[key] = self.forbidden.get(key, 0) + 1
            elif name not in allowed:
                self.forbidden[name] = self.forbidden.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    return OperatorAudit


def storages_overlap(torch, outputs, inputs):
    def tensors(value):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                yield from tensors(item)
        elif isinstance(value, dict):
            for item in value.values():
                yield from tensors(item)

    spans = []
    for tensor in tensors(inputs):
        if tensor.numel():
            start = tensor.data_ptr()
            spans.append((start, start + tensor.numel() * tensor.element_size()))
    found = []
    for index, tensor in enumerate(tensors(outputs)):
        if not tensor.numel():
            continue
        start = tensor.data_ptr()
        end = start + tensor.numel() * tensor.element_size()
        if any(start < e and s < end for s, e in spans):
            found.append(index)
    return found


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", required=True, help="dir with model_new.py and the extension")
    parser.add_argument("--ref", required=True, help="reference data dir (read-only)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--checks", type=int, default=5)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--policy", default=os.path.join(HERE, "policy.json"))
    args = parser.parse_args()

    started = time.monotonic()
    import torch

    with open(args.policy) as policy_file:
        policy = json.load(policy_file)
    allowed = set(policy["allowed_ops"])
    setup_allowed = set(policy.get("setup_allowed_ops", []))
    if args.device == "cuda":
        # Open the GPU's device files and make the context before the write restrictions apply
        # (torch.cuda.init() alone leaves the context to the first allocation).
        torch.cuda.init()
        torch.zeros(1, device=args.device)
        torch.cuda.synchronize()
    phases = {"cuda_init": time.monotonic() - started}
    report = {"sandbox_layers": restrict_self(args.out), "forbidden_ops": {}, "aliasing": [],
              "checks_done": 0, "phases_s": phases}
    mark = time.monotonic()

    def phase_done(name):
        nonlocal mark
        now = time.monotonic()
        phases[name] = now - mark
        mark = now

    def save_report():
        with open(os.path.join(args.out, "report.json"), "w") as out:
            json.dump(report, out)

    # Everything the candidate will see is loaded before its code exists in this process.
    state = torch.load(os.path.join(args.ref, "state.pt"), map_location=args.device)
    init_inputs = torch.load(os.path.join(args.ref, "init.pt"))
    all_inputs = [torch.load(os.path.join(args.ref, f"inputs_{k}.pt")) for k in range(args.checks)]
    audit = make_audit_mode(torch, allowed, setup_allowed)()
    phase_done("load_data")
    save_report()

    sys.path.insert(0, args.work)
    with torch.no_grad(), audit:
        candidate = load_module("model_new", os.path.join(args.work, "model_new.py"))
        phase_done("import")  # model_new.py and, through it, the candidate's extension
        model = candidate.ModelNew(*init_inputs).to(args.device)
        phase_done("construct_model")
        model.load_state_dict(state)
        if args.device == "cuda":
            torch.cuda.synchronize()
    report["forbidden_ops"] = dict(audit.forbidden)
    phase_done("load_state")
    save_report()
    audit.phase = "forward"
    for check, inputs in enumerate(all_inputs):
        inputs = [x.to(args.device) if isinstance(x, torch.Tensor) else x for x in inputs]
        with torch.no_grad(), audit:
            output = model(*inputs)
        if args.device == "cuda":
            torch.cuda.synchronize()
        report["forbidden_ops"] = dict(audit.forbidden)
        report["aliasing"] += [[check, index] for index in storages_overlap(torch, output, inputs)]
        tensor_file.write(torch, os.path.join(args.out, f"out_{check}.bin"), output)
        tensor_file.write(torch, os.path.join(args.out, f"inputs_after_{check}.bin"), inputs)
        report["checks_done"] = check + 1
        phase_done(f"check_{check}")
        save_report()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except BaseException as error:
        import traceback

        traceback.print_exc()
        print(f"candidate: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(3)
