"""How much of a timed call's time per forward is the runner's synchronisation, not the kernel.

The session runner, for each of a call's N forwards, runs the model, synchronises the device,
copies the output into its slot of the shared buffer and synchronises again; the owner times the
whole call on its host clock. This probe times the same N-forward call in one process, without the
sandbox or a second process, in three ways, so the difference between them is what the two
synchronisations per forward cost:

  per-forward-sync   forward, synchronize, copy out, synchronize (the runner's pattern today)
  end-sync           forward, copy out (both queued on the current stream), one synchronize at
                     the end of the call
  events             the forwards alone between two CUDA events (the kernel's own time)

Usage: python3 tests/gpu/forward_sync_probe.py [CALLS] [FORWARDS]. Prints one JSON object: per task
and way, the median time per forward (µs) and the per-call coefficient of variation. Needs CUDA.
"""
import json
import statistics
import sys
import time

import torch


def tasks():
    relu_in = [torch.randn(1 << 24, device="cuda") for _ in range(2)]
    a = [torch.randn(2048, 2048, device="cuda") for _ in range(2)]
    b = [torch.randn(2048, 2048, device="cuda") for _ in range(2)]
    return {
        "relu_16m": (lambda k: torch.relu(relu_in[k % 2]), relu_in[0].numel()),
        "sgemm_2048": (lambda k: a[k % 2] @ b[k % 2], 2048 * 2048),
    }


def one_call(forward, out_slots, forwards, way):
    torch.cuda.synchronize()
    started = time.perf_counter_ns()
    for k in range(forwards):
        result = forward(k)
        if way == "per-forward-sync":
            torch.cuda.synchronize()
        out_slots[k].copy_(result.reshape(-1))
        if way == "per-forward-sync":
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - started) / 1e3 / forwards


def event_call(forward, forwards):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for k in range(forwards):
        forward(k)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / forwards


def summary(samples):
    mean = statistics.fmean(samples)
    return {"median_us": round(statistics.median(samples), 2),
            "cv": round(statistics.pstdev(samples) / mean, 4) if mean else None}


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    forwards = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    report = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "calls": calls,
              "forwards": forwards, "tasks": {}}
    for name, (forward, numel) in tasks().items():
        out_slots = [torch.empty(numel, device="cuda") for _ in range(forwards)]
        ways = {"per-forward-sync": [], "end-sync": [], "events": []}
        for _ in range(3):  # warm-up: cuBLAS handles, the allocator's pools
            one_call(forward, out_slots, forwards, "end-sync")
        for _ in range(calls):  # interleaved, so the ways meet the same clocks
            for way in ("per-forward-sync", "end-sync"):
                ways[way].append(one_call(forward, out_slots, forwards, way))
            ways["events"].append(event_call(forward, forwards))
        report["tasks"][name] = {way: summary(samples) for way, samples in ways.items()}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
