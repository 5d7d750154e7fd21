"""The trusted reference process: runs the pristine model.py, never any candidate code.

It draws everything from a private seed read on stdin (never argv, so it is not visible in the
process list), so the candidate cannot know the inputs in advance. It writes, into --out (the
directory the candidate will read): state.pt (Model's state_dict), init.pt (get_init_inputs()) and
for each check K inputs_K.pt; and into --private (a directory no candidate sandbox ever binds):
inputs_K.bin and expected_K.bin, the inputs and reference outputs in the tensor file format, for
the trusted comparator. Exit status 0, or 3 with a message on
stderr when the task itself is broken (an INFRA_ERROR for the verifier, never the candidate's fault).
"""

import argparse
import importlib.util
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tensor_file  # noqa: E402  (our own module, from the harness directory only)


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def to_device(torch, value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return value


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", required=True, help="pristine model.py")
    parser.add_argument("--out", required=True, help="what the candidate may read")
    parser.add_argument("--private", required=True, help="what only the comparator reads")
    parser.add_argument("--checks", type=int, default=5)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    seed = int(sys.stdin.readline())
    phases = {}
    mark = time.monotonic()

    def phase_done(name):
        nonlocal mark
        now = time.monotonic()
        phases[name] = now - mark
        mark = now

    import torch

    if args.device == "cuda":
        torch.cuda.init()
        # torch.cuda.init() leaves the context to the first allocation: make it here, so that
        # this phase, not the model's, carries its cost.
        torch.zeros(1, device=args.device)
        torch.cuda.synchronize()
    phase_done("cuda_init")

    torch.use_deterministic_algorithms(False)
    task = load_module("cudaagent_reference_task", args.task)
    phase_done("load_task")
    torch.manual_seed(seed)
    init_inputs = list(task.get_init_inputs())
    model = task.Model(*init_inputs)
    phase_done("construct_model")
    model = model.to(args.device)
    if args.device == "cuda":
        torch.cuda.synchronize()
    phase_done("model_to_device")
    torch.save(model.state_dict(), os.path.join(args.out, "state.pt"))
    torch.save(init_inputs, os.path.join(args.out, "init.pt"))
    phase_done("save_model")
    for check in range(args.checks):
        # A fresh stream per check from the private seed: the inputs of one check reveal nothing
        # about the next.
        torch.manual_seed((seed * 1_000_003 + check * 7919 + 1) % (2**63))
        inputs = list(task.get_inputs())
        torch.save(inputs, os.path.join(args.out, f"inputs_{check}.pt"))
        on_device = [to_device(torch, x, args.device) for x in inputs]
        # The inputs as the candidate will receive them, to prove later it did not modify them.
        tensor_file.write(torch, os.path.join(args.private, f"inputs_{check}.bin"), on_device)
        with torch.no_grad():
            output = model(*on_device)
        if args.device == "cuda":
            torch.cuda.synchronize()
        tensor_file.write(torch, os.path.join(args.private, f"expected_{check}.bin"), output)
        phase_done(f"check_{check}")
    # Where the time went, for the record (this directory is the trusted side's alone).
    with open(os.path.join(args.private, "phases.json"), "w") as out:
        json.dump(phases, out)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as error:  # the task is broken: report, the verifier calls it INFRA_ERROR
        import traceback

        traceback.print_exc()
        print(f"reference: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(3)
