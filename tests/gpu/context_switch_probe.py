"""What does a process's first GPU work cost right after another process used the GPU?

The evaluation session's calls show, on the H200, that the runner's first GPU work in a call
costs about 0.13 ms more than its next: a null call's output copy takes 0.19 ms, a real call's
(after its forward) 0.06 ms. The owner writes each call's fresh inputs on the GPU just before the
call, from its own CUDA context. If switching the GPU between two processes' contexts is what
costs the time, and its variation is the noise left in a short call, this probe shows it.

Two processes, each with its own CUDA context, take turns the way the owner and a runner do:
  A (this process, the "owner") does some GPU work of its own and waits for it, then tells B;
  B (a spawned process, the "runner") at once launches one tiny kernel, synchronises, and sends
  back its host-clock time for that (and the kernel's CUDA-event time).
What A does before each turn, in random order over many turns:
  nothing     A does no GPU work (B's previous work was B's own: no switch)
  kernel      a small elementwise kernel (compute engine)
  randn       torch.randn into a 4 MiB tensor, as the owner draws inputs
  copy_d2d    a 4 MiB device-to-device copy
  copy_h2d    a 4 MiB copy from pinned host memory (a copy engine)
  idle_2ms    nothing, after 2 ms of sleep (does an idle GPU cost time by itself?)
Prints one JSON object: per kind, B's latency in microseconds (median, p10, p90, CV) and the
event time, and A's own time for its work. Usage: python3 context_switch_probe.py [TURNS]
"""

import json
import multiprocessing
import random
import sys
import time

from probe_common import spin_recv, summary

KINDS = ("nothing", "kernel", "randn", "copy_d2d", "copy_h2d", "idle_2ms")


def runner(conn):
    import torch

    tiny = torch.zeros(1, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    conn.send("ready")
    while True:
        message = spin_recv(conn)
        if message == "exit":
            return
        began = time.perf_counter()
        start.record()
        tiny.add_(1)
        end.record()
        torch.cuda.synchronize()
        host_us = (time.perf_counter() - began) * 1e6
        conn.send((host_us, start.elapsed_time(end) * 1e3))


def main():
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 77
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    child = context.Process(target=runner, args=(theirs,), daemon=True)
    child.start()
    small = torch.zeros(1 << 18, device="cuda")            # 1 MiB
    source = torch.zeros(1 << 20, device="cuda")           # 4 MiB
    target = torch.empty_like(source)
    pinned = torch.zeros(1 << 20).pin_memory()
    torch.cuda.synchronize()
    if spin_recv(ours) != "ready":
        raise SystemExit("the runner did not start")

    def work(kind):
        if kind == "kernel":
            small.add_(1)
        elif kind == "randn":
            torch.randn(1 << 20, device="cuda", out=target)
        elif kind == "copy_d2d":
            target.copy_(source)
        elif kind == "copy_h2d":
            target.copy_(pinned, non_blocking=True)
        elif kind == "idle_2ms":
            time.sleep(0.002)
        torch.cuda.synchronize()

    results = {kind: {"b_us": [], "b_event_us": [], "a_us": []} for kind in KINDS}
    plan = [kind for kind in KINDS for _ in range(turns)]
    random.Random(1).shuffle(plan)
    for kind in KINDS * 5:  # warm-up turns, not kept
        work(kind)
        ours.send("go")
        spin_recv(ours)
    for kind in plan:
        began = time.perf_counter()
        work(kind)
        a_us = (time.perf_counter() - began) * 1e6
        ours.send("go")
        b_us, b_event_us = spin_recv(ours)
        results[kind]["b_us"].append(b_us)
        results[kind]["b_event_us"].append(b_event_us)
        results[kind]["a_us"].append(a_us)
    ours.send("exit")
    child.join(10)
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "turns": turns,
           "kinds": {kind: {"b_host_us": summary(r["b_us"]), "b_event_us": summary(r["b_event_us"]),
                            "a_work_us": summary(r["a_us"])} for kind, r in results.items()}}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
