"""Could the owner time a runner's call on the GPU's clock instead of its host clock?

Today the owner times each call of the runner with its own host clock, around a message to the
runner and its reply: the kernels of a call are steady to 0.1-0.3% (the kernel trace's own times),
but the calls are not (the host's wake-ups, the runner's launches, the switch between the two
processes' GPU work: 3-5% per call for a 2.8 ms GEMM, 10-17% for a 0.4 ms one on an H100). This
probe measures the other way, in two processes of their own (no sandbox, no audit):

  host   the owner writes the call's inputs into the shared buffer and waits for it, then times
         (host clock) a message to the runner, the runner's forward, its copy into the shared
         output buffer and its synchronisation, and the reply. As the session does today.
  chain  the owner queues on its stream a gate (a sleep kernel long enough for the runner to queue
         its work), the copy of the inputs into the shared buffer, its own timing event T0 and an
         interprocess event S; then tells the runner, which queues a wait on S, its forward and
         its output copy, records an interprocess event E and replies; the owner's stream waits on
         E and records T1. The time is T1 - T0: from the inputs' arrival to the runner's "done",
         both marks the owner's own. What the runner queues before the gate opens costs nothing
         of the host's; a runner that records E early leaves its output unfinished when the owner
         reads it, and one that skips the wait reads the previous call's inputs.

Workloads (float32): relu of 4 Ki and 16 Mi elements, sgemm of 2048 and 4096. Prints one JSON
object: per workload and way, µs per call (median, p10, p90, CV), and for chain the calls whose
gate opened before the runner had queued its work ("late": then its launches count, as in host).
Usage: python3 event_chain_probe.py [CALLS] [GATE_MS]   (default 200 calls, a 2 ms gate)
"""

import json
import sys
import time

from probe_common import copy_in, fresh_inputs, spin_recv, summary

WORKLOADS = {"relu_4k": ("relu", 1 << 12), "relu_16m": ("relu", 1 << 24),
             "sgemm_2048": ("mm", 2048), "sgemm_4096": ("mm", 4096)}


def inputs_for(torch, kind, size):
    if kind == "relu":
        return [torch.empty(size, device="cuda")]
    return [torch.empty(size, size, device="cuda"), torch.empty(size, size, device="cuda")]


def forward(torch, kind, args):
    return torch.relu(args[0]) if kind == "relu" else torch.mm(args[0], args[1])


def runner(conn, shared, handles):
    import torch

    start = torch.cuda.Event.from_ipc_handle(0, handles[0])
    done = torch.cuda.Event.from_ipc_handle(0, handles[1])
    torch.cuda.synchronize()
    conn.send("ready")
    while True:
        message = spin_recv(conn)
        if message == "exit":
            return
        way, name = message
        kind = WORKLOADS[name][0]
        args, out = shared[name]
        if way == "host":
            out.copy_(forward(torch, kind, args))
            torch.cuda.synchronize()
            conn.send(0.0)
        else:
            stream = torch.cuda.current_stream()
            stream.wait_event(start)
            out.copy_(forward(torch, kind, args))
            done.record(stream)
            conn.send(time.perf_counter())  # when everything was queued, for "late"
            torch.cuda.synchronize()


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    gate_ms = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    import torch
    import torch.multiprocessing as mp

    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 77
    shared, staging = {}, {}
    for name, (kind, size) in WORKLOADS.items():
        args = inputs_for(torch, kind, size)
        shared[name] = (args, forward(torch, kind, args).clone())
        staging[name] = [torch.empty_like(a) for a in args]
    start = torch.cuda.Event(interprocess=True)
    done = torch.cuda.Event(interprocess=True)
    start.record()
    done.record()
    torch.cuda.synchronize()
    context = mp.get_context("spawn")
    ours, theirs = context.Pipe()
    child = context.Process(target=runner, args=(theirs, shared, (start.ipc_handle(), done.ipc_handle())), daemon=True)
    child.start()
    if spin_recv(ours) != "ready":
        raise SystemExit("the runner did not start")
    # The gate: a sleep kernel of about gate_ms (torch.cuda._sleep counts clock cycles: about 2e6
    # a millisecond at the 1.98 GHz of an H100 or H200).
    cycles = int(gate_ms * 2e6)
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gate_end = torch.cuda.Event(enable_timing=True)

    def one_call(way, name):
        args, _ = shared[name]
        fresh_inputs(torch, staging[name])
        if way == "host":
            copy_in(torch, args, staging[name])
            began = time.perf_counter()
            ours.send((way, name))
            spin_recv(ours)
            return (time.perf_counter() - began) * 1e6, False
        stream = torch.cuda.current_stream()
        gate_opened = time.perf_counter()
        torch.cuda._sleep(cycles)
        gate_end.record(stream)
        for a, s in zip(args, staging[name]):
            a.copy_(s)
        t0.record(stream)
        start.record(stream)
        ours.send((way, name))
        queued_at = spin_recv(ours)
        stream.wait_event(done)
        t1.record(stream)
        t1.synchronize()
        # Late: the runner finished queueing after the gate's planned end (its launches counted).
        late = queued_at - gate_opened > gate_ms * 1e-3
        return t0.elapsed_time(t1) * 1e3, late

    results = {}
    for name in WORKLOADS:
        for way in ("host", "chain"):
            for _ in range(10):
                one_call(way, name)
        samples = {"host": [], "chain": []}
        late = 0
        for i in range(calls):
            for way in (("host", "chain") if i % 2 == 0 else ("chain", "host")):
                us, was_late = one_call(way, name)
                samples[way].append(us)
                late += was_late
        results[name] = {"host_us": summary(samples["host"]), "chain_us": summary(samples["chain"]),
                         "chain_late_calls": late}
    ours.send("exit")
    child.join(10)
    print(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "calls": calls,
                      "gate_ms": gate_ms, "workloads": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
