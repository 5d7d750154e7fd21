"""A timing session for cudaagent-profile: loads one model, then answers the driver's commands.

Run as an interactive job of worker.py: commands arrive on stdin, one JSON object a line; replies go
to fd 3, one JSON object a line. Two roles:
  baseline   the pristine task (--task): "eager", and "compile" (torch.compile, --compile-mode) when
             torch has it; also writes the weights (state.pt, init.pt) the candidate loads, and
             computes reference outputs for the driver's hidden checks. Never sees candidate code.
  candidate  ModelNew from --work with the baseline's weights. Hostile: nothing it replies is
             trusted. The driver times every round on its own clock, compares the outputs of hidden
             calls with the baseline's, and checks the fingerprints sent here against those outputs.

Commands:
  {"cmd": "init", "seed": S, "warmup_ms": W, "warmup_calls": K}
      build the model(s) with inputs from seed S, warm each arm up for at least W ms and K calls.
      -> {"ok": true, "arms": {NAME: {"ok", "ms_per_call" | "reason"}}, "device": {...},
          "input_bytes", "output_bytes", "torch"}
  {"cmd": "round", "arm": A, "seeds": [s0, s1, ...]}
      fresh inputs from each seed (generated here, inside the driver's round clock), then one timed
      call per input: L2 flush and persisting-L2 reset outside the timed region, CUDA events around
      the call with a device-wide synchronise before the end mark (CPU: time.perf_counter).
      -> {"ok": true, "times_ms": [...], "sums": [...], "persisting_l2_bytes": N | null,
          "marks_ns": [[t0, t1], ...]}   time.monotonic_ns() around each timed call: t0 after the
          pre-call synchronise, t1 after the device-wide synchronise that ends the call
  {"cmd": "check", "arm": A, "call": k, "path": P}   the output of call k of A's last round -> P
  {"cmd": "expect", "seed": s, "path": P}            (baseline) the eager output for seed s -> P
  {"cmd": "flush"}   write the kernel trace's pending records and a summary line (CUPTI injection
                     library loaded through CUDA_INJECTION64_PATH) -> {"ok": true, "flush": RC|null}
  {"cmd": "exit"}
A failing command replies {"ok": false, "error": "..."} and the process exits with status 3.
"""

import argparse
import ctypes
import glob
import importlib.util
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tensor_file  # noqa: E402


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def tensors_of(torch, value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from tensors_of(torch, item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_of(torch, item)


def fingerprint(torch, value):
    """Sum of every element of every tensor (and of plain numbers), in float64: the driver
    recomputes it from the file a hidden check writes."""
    total = 0.0
    if isinstance(value, torch.Tensor):
        if value.numel():
            total += float(value.detach().to(torch.float64).sum().item())
        return total
    if isinstance(value, (tuple, list)):
        return sum((fingerprint(torch, item) for item in value), 0.0)
    if isinstance(value, dict):
        return sum((fingerprint(torch, item) for item in value.values()), 0.0)
    if isinstance(value, (bool, int, float)):
        return float(value)
    return 0.0


def json_number(x):
    return x if isinstance(x, float) and math.isfinite(x) else (x if isinstance(x, int) else None)


class Cudart:
    """cudaDeviceSetLimit / cudaCtxResetPersistingL2Cache through ctypes, where a CUDA runtime
    library can be found; otherwise every method is a no-op that says so."""

    def __init__(self, torch):
        self.lib = None
        names = []
        torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
        names += sorted(glob.glob(os.path.join(torch_lib, "libcudart*.so*")))
        for path in sys.path:
            names += sorted(glob.glob(os.path.join(path, "nvidia", "cuda_runtime", "lib", "libcudart.so*")))
        names += ["libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"]
        for name in names:
            try:
                self.lib = ctypes.CDLL(name)
                self.name = name
                break
            except OSError:
                continue

    def persisting_limit(self):
        if self.lib is None:
            return None
        value = ctypes.c_size_t(0)
        if self.lib.cudaDeviceGetLimit(ctypes.byref(value), 0x06) != 0:  # cudaLimitPersistingL2CacheSize
            return None
        return int(value.value)

    def reset_persisting(self):
        if self.lib is None:
            return False
        ok = self.lib.cudaDeviceSetLimit(0x06, ctypes.c_size_t(0)) == 0
        return self.lib.cudaCtxResetPersistingL2Cache() == 0 and ok


class Session:
    def __init__(self, args, torch):
        self.args = args
        self.torch = torch
        self.cuda = args.device == "cuda"
        self.task = load_module("cudaagent_timing_task", args.task)
        self.arms = {}
        self.arm_errors = {}
        self.outputs = {}
        self.flush_buffer = None
        self.cudart = None
        self.persisting_baseline = 0
        self.device_info = {"type": args.device}

    # Inputs: the task's own get_inputs(), seeded, made on the device where torch can.
    def make_inputs(self, seed):
        torch = self.torch
        torch.manual_seed(int(seed) % (1 << 63))
        if self.cuda and hasattr(torch, "device") and hasattr(torch.device("cuda"), "__enter__"):
            with torch.device("cuda"):
                inputs = list(self.task.get_inputs())
        else:
            inputs = list(self.task.get_inputs())
        return [x.to(self.args.device) if isinstance(x, torch.Tensor) else x for x in inputs]

    def build(self, seed):
        torch, args = self.torch, self.args
        if args.role == "baseline":
            torch.manual_seed(int(seed) % (1 << 63))
            init_inputs = list(self.task.get_init_inputs())
            model = self.task.Model(*init_inputs).to(args.device).eval()
            torch.save(model.state_dict(), os.path.join(args.state, "state.pt"))
            torch.save(init_inputs, os.path.join(args.state, "init.pt"))
            self.arms["eager"] = model
            mode = args.compile_mode
            if mode == "none":
                self.arm_errors["compile"] = "not requested (--compile-mode none)"
            elif not hasattr(torch, "compile"):
                self.arm_errors["compile"] = f"torch {torch.__version__} has no torch.compile"
            else:
                try:
                    self.arms["compile"] = torch.compile(model, mode=None if mode == "default" else mode)
                except Exception as error:  # reported, the eager baseline still stands
                    self.arm_errors["compile"] = f"{type(error).__name__}: {error}"[:300]
        else:
            state = torch.load(os.path.join(args.state, "state.pt"), map_location=args.device)
            init_inputs = torch.load(os.path.join(args.state, "init.pt"))
            sys.path.insert(0, args.work)
            candidate = load_module("model_new", os.path.join(args.work, "model_new.py"))
            model = candidate.ModelNew(*init_inputs).to(args.device)
            model.load_state_dict(state)
            self.arms["candidate"] = model.eval()

    def prepare_device(self):
        torch = self.torch
        if not self.cuda:
            return
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        flush = max(2 * l2, 256 << 20)
        self.flush_buffer = torch.empty(flush // 4, dtype=torch.int32, device="cuda")
        self.cudart = Cudart(torch)
        # The device's own persisting-L2 limit is not 0 on every GPU (the H200 reported one in
        # an honest process, 2026-11-29): clear it once here, before any round, and count only
        # what rises above what is left afterwards as the candidate's doing.
        self.cudart.reset_persisting()
        self.persisting_baseline = self.cudart.persisting_limit() or 0
        self.device_info.update({"persisting_l2_baseline_bytes": self.persisting_baseline})
        self.device_info.update({"name": props.name, "l2_bytes": l2 or None, "flush_bytes": flush,
                                 "sm_count": props.multi_processor_count,
                                 "cudart": getattr(self.cudart, "name", None),
                                 "persisting_l2_reset": self.cudart.lib is not None})

    def call(self, model, inputs):
        with self.torch.no_grad():
            return model(*inputs)

    def warm_up(self, seed, warmup_ms, warmup_calls):
        torch = self.torch
        report = {}
        pool = [self.make_inputs(seed * 7 + k) for k in range(2)]
        self.input_bytes = sum(t.numel() * t.element_size() for t in tensors_of(torch, pool[0]))
        for name in list(self.arms):
            try:
                started = time.perf_counter()
                calls = 0
                per_call = []
                while calls < warmup_calls or (time.perf_counter() - started) * 1000 < warmup_ms:
                    t0 = time.perf_counter()
                    out = self.call(self.arms[name], pool[calls % 2])
                    if self.cuda:
                        torch.cuda.synchronize()
                    per_call.append((time.perf_counter() - t0) * 1000)
                    calls += 1
                    if calls > 1_000_000:
                        break
                tail = sorted(per_call[len(per_call) // 2:])
                report[name] = {"ok": True, "ms_per_call": tail[len(tail) // 2], "calls": calls}
                self.output_bytes = sum(t.numel() * t.element_size() for t in tensors_of(torch, out))
            except Exception as error:
                if name == "compile":  # the eager baseline stands without it
                    del self.arms[name]
                    self.arm_errors[name] = f"{type(error).__name__}: {error}"[:300]
                else:
                    raise
        for name, reason in self.arm_errors.items():
            report[name] = {"ok": False, "reason": reason}
        return report

    def timed_round(self, arm, seeds):
        torch = self.torch
        model = self.arms[arm]
        inputs = [self.make_inputs(seed) for seed in seeds]
        times = []
        outputs = []
        marks = []
        persisting = None
        if self.cuda:
            reading = self.cudart.persisting_limit()
            persisting = None if reading is None else max(0, reading - self.persisting_baseline)
            start_events = [torch.cuda.Event(enable_timing=True) for _ in seeds]
            end_events = [torch.cuda.Event(enable_timing=True) for _ in seeds]
            for k in range(len(seeds)):
                self.cudart.reset_persisting()
                self.flush_buffer.zero_()
                torch.cuda.synchronize()
                t0 = time.monotonic_ns()
                start_events[k].record()
                outputs.append(self.call(model, inputs[k]))
                torch.cuda.synchronize()
                marks.append([t0, time.monotonic_ns()])
                end_events[k].record()
            torch.cuda.synchronize()
            times = [start_events[k].elapsed_time(end_events[k]) for k in range(len(seeds))]
        else:
            for k in range(len(seeds)):
                m0 = time.monotonic_ns()
                t0 = time.perf_counter()
                outputs.append(self.call(model, inputs[k]))
                times.append((time.perf_counter() - t0) * 1000)
                marks.append([m0, time.monotonic_ns()])
        self.outputs[arm] = outputs
        sums = [json_number(fingerprint(torch, out)) for out in outputs]
        return {"ok": True, "times_ms": [float(t) for t in times], "sums": sums,
                "persisting_l2_bytes": persisting, "marks_ns": marks}

    def write_output(self, value, path):
        tensor_file.write(self.torch, path, value)
        if self.cuda:
            self.torch.cuda.synchronize()


def flush_kernel_trace():
    """cudaagent_cupti_flush() of the injection library the driver loaded, if any: its return
    code, or None when no library is loaded."""
    path = os.environ.get("CUDA_INJECTION64_PATH")
    if not path:
        return None
    try:
        lib = ctypes.CDLL(path)  # the driver's handle: already loaded, not loaded again
        flush = lib.cudaagent_cupti_flush
    except (OSError, AttributeError):
        return None
    flush.restype = ctypes.c_int
    return int(flush())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["baseline", "candidate"], required=True)
    parser.add_argument("--task", required=True, help="pristine model.py (get_inputs)")
    parser.add_argument("--work", help="candidate: dir with model_new.py and the extension")
    parser.add_argument("--state", required=True, help="weights: written by baseline, read by candidate")
    parser.add_argument("--out", required=True, help="where check outputs go")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument("--kernel-trace-out", default="",
                        help="set CUDAAGENT_CUPTI_OUT for the CUPTI injection library")
    parser.add_argument("--reply-fd", type=int, default=3)
    args = parser.parse_args()
    if args.kernel_trace_out:
        # Read by the injection library (CUDA_INJECTION64_PATH) when CUDA initialises below.
        os.environ["CUDAAGENT_CUPTI_OUT"] = args.kernel_trace_out
    reply_file = os.fdopen(args.reply_fd, "w", buffering=1)

    def reply(message):
        reply_file.write(json.dumps(message, allow_nan=False) + "\n")
        reply_file.flush()

    import torch

    if args.device == "cuda":
        torch.cuda.init()
    if args.role == "candidate":
        import candidate as candidate_harness  # restrict_self: the same layers as verification

        layers = candidate_harness.restrict_self(args.out)
    else:
        layers = []
    session = Session(args, torch)
    for line in sys.stdin:
        if not line.strip():
            continue
        command = json.loads(line)
        name = command.get("cmd")
        try:
            if name == "init":
                seed = int(command["seed"])
                session.build(seed)
                session.prepare_device()
                arms = session.warm_up(seed, float(command.get("warmup_ms", 100)),
                                       int(command.get("warmup_calls", 3)))
                reply({"ok": True, "arms": arms, "device": session.device_info,
                       "input_bytes": session.input_bytes, "output_bytes": session.output_bytes,
                       "torch": torch.__version__, "sandbox_layers": layers, "pid": os.getpid()})
            elif name == "round":
                reply(session.timed_round(command["arm"], [int(s) for s in command["seeds"]]))
            elif name == "check":
                session.write_output(session.outputs[command["arm"]][int(command["call"])], command["path"])
                reply({"ok": True})
            elif name == "expect" and args.role == "baseline":
                inputs = session.make_inputs(int(command["seed"]))
                session.write_output(session.call(session.arms["eager"], inputs), command["path"])
                reply({"ok": True})
            elif name == "flush":
                reply({"ok": True, "flush": flush_kernel_trace()})
            elif name == "exit":
                reply({"ok": True})
                return 0
            else:
                raise ValueError(f"unknown command {name!r}")
        except Exception as error:
            import traceback

            traceback.print_exc()
            reply({"ok": False, "error": f"{type(error).__name__}: {error}"[:500]})
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
