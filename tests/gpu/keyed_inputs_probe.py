"""Would a one-forward call be steadier if no work of the owner's sat inside the timed window?

Today the owner starts its clock, copies the call's inputs into the shared slot on the device (a
kernel of the owner's context) and says "call": the runner's first kernel then pays the switch
between the two processes' GPU contexts (about 120 µs, context_switch_probe.py) inside the window.
The inputs cannot be put in the slot before the clock starts, since the candidate must have no
moment with its inputs and no call open. They can be put there masked: the owner XORs them with
a keystream it draws from a fresh private seed (Philox, the device generator's) and stages the
result before the clock; the runner gets a tiny kernel of its own run first (the switch, outside
the window); the call message then carries the seed, and the runner unmasks the inputs in its own
context. Until the seed arrives the staged bytes say nothing of the inputs.

Ways, in alternating rounds between two processes with shared device buffers (CUDA IPC):

  now           timed: the owner's device-to-device copy into the slot, the call, the answer
  keyed         untimed: masked inputs staged, the runner's tiny kernel; timed: the seed sent, the
                runner's unmasking (keystream + XOR), its forward and copy out, the answer
  keyed_noprep  as keyed without the runner's tiny kernel first (the switch back in the window)

and "null" calls of each (the runner copies a ready-made output: the fixed cost a profile
removes). Prints one JSON object: per task and way, the call's host time in µs (median, p10, p90,
CV) and the runner's forward between CUDA events; and whether the runner's unmasked inputs were
the owner's, bit for bit. Usage: python3 keyed_inputs_probe.py [CALLS per round (40)] [ROUNDS
per way (3)] [--device cpu: a smoke test of the protocol, no events].
"""

import json
import secrets
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
WAYS = ("now", "keyed", "keyed_noprep")


def keystream(words, seed, device):
    """`words` 64-bit words of Philox output under `seed`, every bit random (the full-range
    draw), the same in both processes for the same seed, device and torch."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return torch.empty(words, dtype=torch.int64, device=device).random_(-2**63, None, generator=generator)


def as_words(tensor):
    return tensor.view(-1).view(torch.int64)


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def runner(conn, device):
    inputs, staged, output, task = conn.recv()
    forward = TASKS[task][1]
    ready = torch.zeros_like(output)
    tiny = torch.zeros(1, device=device)
    timed = device == "cuda"
    if timed:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    conn.send("ready")
    while True:
        message = spin_recv(conn)
        if message == "exit":
            return
        if message == "prepare":  # the switch to this context, outside the window
            tiny.add_(1)
            sync(device)
            conn.send("prepared")
            continue
        kind, seed = message
        if seed is not None:
            for slot, masked in zip(inputs, staged):
                torch.bitwise_xor(as_words(masked), keystream(as_words(masked).numel(), seed, device),
                                  out=as_words(slot))
        if kind == "null":
            output.copy_(ready)
            sync(device)
            conn.send(0.0)
            continue
        if timed:
            start.record()
        result = forward(inputs)
        if timed:
            end.record()
        sync(device)
        output.copy_(result)
        sync(device)
        conn.send(start.elapsed_time(end) * 1e3 if timed else 0.0)


def probe(task, calls, rounds, device):
    shapes, forward = TASKS[task]
    inputs = [torch.empty(shape, device=device) for shape in shapes]  # the shared slot
    staged = [torch.empty(shape, device=device) for shape in shapes]  # masked inputs, shared
    with torch.no_grad():
        output = torch.empty_like(forward([torch.zeros(s, device=device) for s in shapes]))
    if device == "cpu":
        for tensor in inputs + staged + [output]:
            tensor.share_memory_()
    ours, theirs = mp.Pipe()
    child = mp.get_context("spawn").Process(target=runner, args=(theirs, device), daemon=True)
    child.start()
    ours.send((inputs, staged, output, task))
    if ours.recv() != "ready":
        raise SystemExit("the runner did not start")
    times = {f"{way}{null}": [] for way in WAYS for null in ("", "_null")}
    events = {way: [] for way in WAYS}
    mismatches = 0

    def call(way, kind):
        nonlocal mismatches
        private = [torch.randn(s, device=device) for s in shapes]
        with torch.no_grad():
            forward(private)  # the reference
        output.fill_(float("nan"))
        seed = None
        if way != "now":
            seed = secrets.randbits(63)
            for slot, x in zip(staged, private):
                torch.bitwise_xor(as_words(x), keystream(as_words(x).numel(), seed, device), out=as_words(slot))
        sync(device)
        if way == "keyed":
            ours.send("prepare")
            if spin_recv(ours) != "prepared":
                raise SystemExit("the runner did not prepare")
        began = time.perf_counter_ns()
        if way == "now":
            for slot, x in zip(inputs, private):
                slot.copy_(x)
            sync(device)
        ours.send((kind, seed))
        event_us = spin_recv(ours)
        host_us = (time.perf_counter_ns() - began) / 1e3
        if not all(torch.equal(as_words(slot), as_words(x)) for slot, x in zip(inputs, private)):
            mismatches += 1
        return host_us, event_us

    for r in range(len(WAYS) * (rounds + 1)):  # one warm-up round per way, then the ways alternate
        way = WAYS[r % len(WAYS)]
        for c in range(calls):
            kind = "null" if c % 4 == 3 else "call"
            host_us, event_us = call(way, kind)
            if r >= len(WAYS):
                times[way + ("_null" if kind == "null" else "")].append(host_us)
                if kind == "call":
                    events[way].append(event_us)
    ours.send("exit")
    child.join(10)
    return {way: summary(values, 1, 4) for way, values in times.items()} | {
        f"{way}_forward_event_us": summary(values, 1, 4) for way, values in events.items()} | {
        "inputs_not_restored": mismatches}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    device = "cpu" if "--device" in sys.argv[1:] and "cpu" in sys.argv[1:] else "cuda"
    calls = int(args[0]) if args else 40
    rounds = int(args[1]) if len(args) > 1 else 3
    if device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 77
    tasks = TASKS if device == "cuda" else {"relu_1m": TASKS["relu_1m"]}
    out = {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "torch": torch.__version__,
           "calls": calls, "rounds": rounds,
           "tasks": {task: probe(task, calls, rounds, device) for task in tasks}}
    print(json.dumps(out, indent=1))
    return 0 if all(t["inputs_not_restored"] == 0 for t in out["tasks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
