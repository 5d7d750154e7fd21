"""Would a call of one forward be steadier if the owner kept off the GPU's SMs during a round?

The context-switch probe showed that a runner's first kernel after any kernel of another process
(the owner) costs about 120 µs more, and that a copy from pinned host memory by the owner costs
nothing of the kind. Today the owner runs kernels before every call (fresh inputs drawn on the
device, the reference forward, the outputs poisoned, the flush) and copies the inputs into the
shared slot device to device, so every call of the runner pays the switch and its jitter. This
probe times one-forward calls the two ways, in alternating rounds between two processes with
shared device buffers (CUDA IPC), as the session's owner and runner do:

  now      the owner, before each call: randn into a private tensor, the reference forward,
           a fill of the output slot (poison); timed: the input copied into the shared slot on
           the device, a wait, the runner's forward and its copy out, the answer
  off_sm   inputs drawn for the whole round before it and kept in pinned host memory; timed: the
           input copied from there into the shared slot (a copy engine), a wait, the runner's
           forward and its copy out, the answer; after each call the output copied to pinned host
           memory (a copy engine) for judging after the round

and "null" calls of each way (the runner copies a ready-made output: the fixed cost a profile
removes). Prints one JSON object: per task and way, the call's host time in µs (median, p10, p90,
CV) and the runner's forward between CUDA events. Usage: python3 owner_off_sm_probe.py [CALLS per
round (40)] [ROUNDS per way (3)]. Needs CUDA.
"""

import json
import sys
import time

import torch
import torch.multiprocessing as mp

from probe_common import spin_recv, summary

TASKS = {  # name: (input shapes, forward)
    "relu_1m": ([(1 << 20,)], lambda xs: torch.relu(xs[0])),
    "relu_16m": ([(1 << 24,)], lambda xs: torch.relu(xs[0])),
    "sgemm_2048": ([(2048, 2048), (2048, 2048)], lambda xs: xs[0] @ xs[1]),
}


def runner(conn):
    inputs, output, task = conn.recv()
    forward = TASKS[task][1]
    ready = torch.zeros_like(output)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    conn.send("ready")
    while True:
        message = spin_recv(conn)
        if message == "exit":
            return
        if message == "null":
            output.copy_(ready)
            torch.cuda.synchronize()
            conn.send(0.0)
            continue
        start.record()
        result = forward(inputs)
        end.record()
        torch.cuda.synchronize()
        output.copy_(result)
        torch.cuda.synchronize()
        conn.send(start.elapsed_time(end) * 1e3)


def probe(task, calls, rounds):
    shapes, forward = TASKS[task]
    inputs = [torch.empty(shape, device="cuda") for shape in shapes]  # the shared slot
    with torch.no_grad():
        output = torch.empty_like(forward([torch.zeros(s, device="cuda") for s in shapes]))
    ours, theirs = mp.Pipe()
    child = mp.get_context("spawn").Process(target=runner, args=(theirs,), daemon=True)
    child.start()
    ours.send((inputs, output, task))
    if ours.recv() != "ready":
        raise SystemExit("the runner did not start")
    pinned_out = torch.empty(output.shape, pin_memory=True)
    times = {f"{way}{null}": [] for way in ("now", "off_sm") for null in ("", "_null")}
    events = {"now": [], "off_sm": []}

    def call(way, kind, host_inputs=None):
        if way == "now":
            private = [torch.randn(s, device="cuda") for s in shapes]
            with torch.no_grad():
                forward(private)  # the reference
            output.fill_(float("nan"))
            torch.cuda.synchronize()
            began = time.perf_counter_ns()
            for slot, x in zip(inputs, private):
                slot.copy_(x)
        else:
            began = time.perf_counter_ns()
            for slot, x in zip(inputs, host_inputs):
                slot.copy_(x, non_blocking=True)
        torch.cuda.synchronize()
        ours.send(kind)
        event_us = spin_recv(ours)
        host_us = (time.perf_counter_ns() - began) / 1e3
        if way == "off_sm":
            pinned_out.copy_(output, non_blocking=True)  # kept for judging after the round
            torch.cuda.synchronize()
        return host_us, event_us

    for r in range(2 * rounds + 2):  # two warm-up rounds, then the ways alternate
        way = ("now", "off_sm")[r % 2]
        host_inputs = None
        if way == "off_sm":  # the round's inputs, drawn before it (a few distinct sets suffice here)
            host_inputs = [[torch.randn(s, device="cuda").cpu().pin_memory() for s in shapes] for _ in range(4)]
            torch.cuda.synchronize()
        for c in range(calls):
            kind = "null" if c % 4 == 3 else "call"
            host_us, event_us = call(way, kind, host_inputs[c % 4] if host_inputs else None)
            if r >= 2:
                times[way + ("_null" if kind == "null" else "")].append(host_us)
                if kind == "call":
                    events[way].append(event_us)
    ours.send("exit")
    child.join(10)
    return {way: summary(values, 1, 4) for way, values in times.items()} | {
        f"{way}_forward_event_us": summary(values, 1, 4) for way, values in events.items()}


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 77
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "calls": calls,
           "rounds": rounds, "tasks": {task: probe(task, calls, rounds) for task in TASKS}}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
