#!/usr/bin/env python3
"""A plain timing of KernelBench-style tasks, the yardstick of bench/profile_agreement.py: no
sandbox, no rounds, no worker processes; one Python process that loads each task's Model, warms it
up, and times many calls with CUDA events (time.perf_counter on a CPU), reporting the median.

Per call: a buffer of max(2 x L2, 256 MiB) is zeroed first (cold L2, as cudaagent-profile does;
--no-flush to leave the L2 warm), then start event, the call, end event, and a synchronise before
the next call. --sync-before-end synchronises before the end event instead (cudaagent-profile's
way, which also catches work left on other streams): a diagnostic of the difference between them.
Arms: eager, and compile (torch.compile with --compile-mode) where torch has it.
Needs torch. Writes one JSON line per task to --out as each finishes.
Usage: plain_timing.py --device cuda --out FILE [--arms eager,compile] TASK.py ...
"""

import argparse
import importlib.util
import json
import statistics
import sys
import time


def load(path, index):
    spec = importlib.util.spec_from_file_location(f"plain_task_{index}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_inputs(torch, module, device, seed):
    torch.manual_seed(seed)
    if device == "cuda" and hasattr(torch.device("cuda"), "__enter__"):
        with torch.device("cuda"):
            inputs = list(module.get_inputs())
    else:
        inputs = list(module.get_inputs())
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def time_arm(torch, model, pools, args, flush):
    cuda = args.device == "cuda"
    with torch.no_grad():
        started, calls = time.perf_counter(), 0
        while calls < 3 or (time.perf_counter() - started) * 1000 < args.warmup_ms:
            model(*pools[calls % len(pools)])
            if cuda:
                torch.cuda.synchronize()
            calls += 1
        times = []
        started = time.perf_counter()
        for k in range(args.reps):
            inputs = pools[k % len(pools)]
            if cuda:
                if flush is not None:
                    flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                if args.sync_before_end:
                    torch.cuda.synchronize()
                start.record()
                model(*inputs)
                if args.sync_before_end:
                    torch.cuda.synchronize()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                model(*inputs)
                times.append((time.perf_counter() - t0) * 1000)
            if k >= 9 and (time.perf_counter() - started) * 1000 > args.max_arm_ms:
                break
    mean = statistics.mean(times)
    return {"ok": True, "median_ms": statistics.median(times), "mean_ms": mean, "min_ms": min(times),
            "cv": statistics.stdev(times) / mean if len(times) > 1 and mean > 0 else None,
            "reps": len(times), "warmup_calls": calls}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tasks", nargs="+", help="model.py files (KernelBench style)")
    parser.add_argument("--out", required=True, help="JSON lines, one per task")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--arms", default="eager,compile")
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument("--reps", type=int, default=100, help="timed calls per arm, at most")
    parser.add_argument("--max-arm-ms", type=float, default=1500, help="stop an arm's timed calls after this "
                        "much wall time (at least 10 calls)")
    parser.add_argument("--warmup-ms", type=float, default=200)
    parser.add_argument("--no-flush", action="store_true", help="leave the L2 warm between calls")
    parser.add_argument("--sync-before-end", action="store_true",
                        help="synchronise before the end event, as cudaagent-profile does")
    args = parser.parse_args()
    import torch

    flush = None
    if args.device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        if not args.no_flush:
            flush = torch.empty(max(2 * l2, 256 << 20) // 4, dtype=torch.int32, device="cuda")
    arms = [a for a in args.arms.split(",") if a]
    with open(args.out, "a") as out:
        for index, path in enumerate(args.tasks):
            result = {"task": path, "device": args.device, "torch": torch.__version__,
                      "flush_l2": flush is not None, "sync_before_end": args.sync_before_end, "arms": {}}
            try:
                module = load(path, index)
                torch.manual_seed(index)
                model = module.Model(*module.get_init_inputs()).to(args.device).eval()
                pools = [make_inputs(torch, module, args.device, 1000 * index + k) for k in range(2)]
                for arm in arms:
                    try:
                        if arm == "eager":
                            timed = model
                        elif arm == "compile":
                            if not hasattr(torch, "compile"):
                                result["arms"][arm] = {"ok": False, "reason": f"torch {torch.__version__} "
                                                       "has no torch.compile"}
                                continue
                            torch._dynamo.reset()
                            timed = torch.compile(model, mode=None if args.compile_mode == "default"
                                                  else args.compile_mode)
                        else:
                            raise ValueError(f"unknown arm {arm!r}")
                        started = time.perf_counter()
                        result["arms"][arm] = time_arm(torch, timed, pools, args, flush)
                        result["arms"][arm]["wall_s"] = time.perf_counter() - started
                    except Exception as error:  # one arm failing leaves the others
                        result["arms"][arm] = {"ok": False, "reason": f"{type(error).__name__}: {error}"[:300]}
                timed = None
                del model, pools
            except Exception as error:
                result["error"] = f"{type(error).__name__}: {error}"[:300]
            out.write(json.dumps(result, allow_nan=False, default=lambda o: None) + "\n")
            out.flush()
            if args.device == "cuda":
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
