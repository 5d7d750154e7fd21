"""Can the owner time a runner's call on its own GPU events, ordered by flags in shared memory?

event_chain_probe.py timed a call between two of the owner's CUDA events chained to the runner
through interprocess events, and found the calls steady to 0.2-0.8% where the host clock gives
1.6-13.5%. Two things keep that from the session: cudaStreamWaitEvent binds to an event's latest
record when it is queued, so the owner cannot queue its wait for the runner's "done" before the
runner has recorded it (it waited for a reply first, and a sleep kernel had to hold the start);
and legacy IPC handles do not cross the sandbox's PID namespace. Here the two processes order
their streams through three 32-bit flags in a buffer shared as the session shares its buffers
(shared_buffers.py: a file descriptor over a Unix socket), written and waited for by the GPU
itself (cuStreamWriteValue32 / cuStreamWaitValue32, the driver API through ctypes).

Per call n the owner queues, before it says anything:
    [wait ready >= n] [T0] [copy the inputs in] [write go = n] [wait done >= n]
    [copy the output slot to a private buffer] [T1]
and the runner, on the message, queues [wait go >= n] on its stream, writes ready = n from a side
stream at once (so a host sync inside a forward cannot deadlock on the owner's wait), runs the
forward, copies its output into the slot and writes done = n behind it. The sample is T1 - T0.
The owner judges its private copy, taken before T1: what the runner writes later cannot change
it, and everything right in it was written before T1. Inputs arrive after T0.

Ways, each on the same four workloads as event_chain_probe.py:
  host         the session's way today: the owner's host clock around message and reply
  flag         the design above
  flag_late    ready written after the forward is queued (no launch latency in the window; would
               deadlock a forward that synchronises, so only a measure of what the early write costs)
  flag_sync    an honest forward that synchronises the device in the middle (must not deadlock)
  early_done   a cheat: done written before the forward (the owner's copy must catch it)
  skip_go      a cheat: no wait for go, the forward reads the slot before the inputs arrive (the
               owner poisons the input slots after every call, so it reads NaN)
Prints one JSON object: per workload and way, µs per call (median, p10, p90, CV), the calls
whose private copy did not match the owner's own reference, and the calls that timed out.
Usage: python3 flag_chain_probe.py [CALLS]   (default 200)
"""

import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "share", "harness"))
import shared_buffers  # noqa: E402
from stream_flags import BYTES as FLAG_BYTES, StreamFlags  # noqa: E402
from event_chain_probe import WORKLOADS, forward  # noqa: E402
from probe_common import copy_in, fresh_inputs, summary  # noqa: E402

WAYS = ("host", "flag", "flag_late", "flag_sync", "early_done", "skip_go")
CHEATS = ("early_done", "skip_go")
TIMEOUT_S = 5.0


def spin_receive(sock, timeout_s=None):
    """One message, polled without blocking (yielding the core), as the session's calls wait; a
    silent peer past timeout_s ends the probe (a hang is a finding, not a result to wait for)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        try:
            return json.loads(sock.recv(1 << 16, socket.MSG_DONTWAIT))
        except BlockingIOError:
            if deadline is not None and time.monotonic() > deadline:
                raise SystemExit(f"no answer within {timeout_s} s: the runner hangs")
            os.sched_yield()


def layout():
    """Byte offsets of each workload's float32 inputs and output in the shared buffers (the
    shapes event_chain_probe.inputs_for makes)."""
    offsets, in_bytes, out_bytes = {}, 0, 0
    for name, (kind, size) in WORKLOADS.items():
        in_shapes = [[size]] if kind == "relu" else [[size, size], [size, size]]
        out_shape = [size] if kind == "relu" else [size, size]
        in_offsets = []
        for shape in in_shapes:
            in_offsets.append(in_bytes)
            in_bytes += 4 * _numel(shape)
        offsets[name] = {"inputs": list(zip(in_offsets, in_shapes)), "output": (out_bytes, out_shape)}
        out_bytes += 4 * _numel(out_shape)
    return offsets, in_bytes, out_bytes


def _numel(shape):
    count = 1
    for dim in shape:
        count *= dim
    return count


def views(torch, buffer, places):
    return [buffer.tensor(torch, torch.float32, shape, offset) for offset, shape in places]


def runner(sock):
    import torch

    torch.zeros(1, device="cuda")
    message, fds = shared_buffers.recv_fds(sock, 3)
    sizes = json.loads(message)
    inputs = shared_buffers.Buffer.open("cuda", sizes["inputs"], fds[0], readonly=True)
    outputs = shared_buffers.Buffer.open("cuda", sizes["outputs"], fds[1], readonly=False)
    ops = StreamFlags(shared_buffers.Buffer.open("cuda", sizes["flags"], fds[2], readonly=False))
    offsets, _, _ = layout()
    side = torch.cuda.Stream()
    slots = {name: (views(torch, inputs, places["inputs"]), views(torch, outputs, [places["output"]])[0])
             for name, places in offsets.items()}
    torch.cuda.synchronize()
    sock.send(b'"ready"')
    while True:
        command = spin_receive(sock)
        if command == "exit":
            return
        way, name, n = command
        kind = WORKLOADS[name][0]
        args, out = slots[name]
        if way == "host":
            out.copy_(forward(torch, kind, args))
            torch.cuda.synchronize()
            sock.send(b"0")
            continue
        stream = torch.cuda.current_stream()
        if way != "skip_go":
            ops.wait(stream, "go", n)
        if way != "flag_late":
            ops.write(side, "ready", n)
        if way == "early_done":
            ops.write(stream, "done", n)
        if way == "flag_sync":
            mid = forward(torch, kind, args)
            torch.cuda.synchronize()  # an honest forward that waits for its own work
            result = torch.relu(mid) if kind == "relu" else mid
        else:
            result = forward(torch, kind, args)
        out.copy_(result)
        if way != "early_done":
            ops.write(stream, "done", n)
        if way == "flag_late":
            ops.write(side, "ready", n)
        sock.send(json.dumps(time.perf_counter()).encode())
        torch.cuda.synchronize()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--runner":
        return runner(socket.socket(fileno=int(sys.argv[2])))
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 77
    torch.zeros(1, device="cuda")
    offsets, in_bytes, out_bytes = layout()
    inputs = shared_buffers.Buffer.create("cuda", in_bytes)
    outputs = shared_buffers.Buffer.create("cuda", out_bytes)
    flags = shared_buffers.Buffer.create("cuda", FLAG_BYTES)
    flags.tensor(torch, torch.int32, [FLAG_BYTES // 4]).zero_()
    torch.cuda.synchronize()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--runner", str(theirs.fileno())],
                             pass_fds=[theirs.fileno()])
    theirs.close()
    shared_buffers.send_fds(ours, [inputs.fd, outputs.fd, flags.fd],
                            json.dumps({"inputs": in_bytes, "outputs": out_bytes, "flags": FLAG_BYTES}).encode())
    if spin_receive(ours, 120) != "ready":
        raise SystemExit("the runner did not start")
    ops = StreamFlags(flags)
    side = torch.cuda.Stream()
    slots = {name: (views(torch, inputs, places["inputs"]), views(torch, outputs, [places["output"]])[0])
             for name, places in offsets.items()}
    staging = {name: [torch.empty_like(a) for a in args] for name, (args, _) in slots.items()}
    private = {name: torch.empty_like(out) for name, (_, out) in slots.items()}
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    counter = [0]

    def one_call(way, name):
        """(µs, the private copy matched, timed out)"""
        kind = WORKLOADS[name][0]
        args, out = slots[name]
        out.fill_(float("nan"))
        fresh_inputs(torch, staging[name])
        if way == "host":
            copy_in(torch, args, staging[name])
            began = time.perf_counter()
            ours.send(json.dumps([way, name, 0]).encode())
            spin_receive(ours, 2 * TIMEOUT_S)
            elapsed, copy, timed_out = (time.perf_counter() - began) * 1e6, out, False
        else:
            counter[0] += 1
            n = counter[0]
            stream = torch.cuda.current_stream()
            ops.wait(stream, "ready", n)
            t0.record(stream)
            for a, s in zip(args, staging[name]):
                a.copy_(s)
            ops.write(stream, "go", n)
            ops.wait(stream, "done", n)
            private[name].copy_(out)
            t1.record(stream)
            ours.send(json.dumps([way, name, n]).encode())
            deadline = time.monotonic() + TIMEOUT_S
            while not t1.query() and time.monotonic() < deadline:
                os.sched_yield()
            timed_out = not t1.query()
            if timed_out:  # release our own stream: the runner never said ready or done
                ops.write(side, "ready", n)
                ops.write(side, "done", n)
                t1.synchronize()
            spin_receive(ours, 2 * TIMEOUT_S)
            elapsed, copy = t0.elapsed_time(t1) * 1e3, private[name]
        reference = forward(torch, kind, staging[name])
        matched = bool(torch.allclose(copy, reference, rtol=1e-3, atol=1e-3))
        for a in args:
            a.fill_(float("nan"))  # a runner that reads the slot before the next inputs reads this
        torch.cuda.synchronize()
        return elapsed, matched, timed_out

    results = {}
    for name in WORKLOADS:
        for way in WAYS:
            for _ in range(10):
                one_call(way, name)
        samples = {way: [] for way in WAYS}
        mismatched = {way: 0 for way in WAYS}
        timeouts = {way: 0 for way in WAYS}
        for i in range(calls):
            order = WAYS if i % 2 == 0 else tuple(reversed(WAYS))
            for way in order:
                us, matched, timed_out = one_call(way, name)
                samples[way].append(us)
                mismatched[way] += not matched
                timeouts[way] += timed_out
        results[name] = {way: {"us": summary(samples[way]), "mismatched": mismatched[way],
                               "timeouts": timeouts[way]} for way in WAYS}
    ours.send(b'"exit"')
    child.wait(10)
    honest_ok = all(results[name][way]["mismatched"] == 0 and results[name][way]["timeouts"] == 0
                    for name in results for way in WAYS if way not in CHEATS)
    cheats_caught = {way: sum(results[name][way]["mismatched"] for name in results) for way in CHEATS}
    print(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "calls": calls,
                      "honest_all_matched": honest_ok, "cheat_calls_caught": cheats_caught,
                      "workloads": results}, indent=1))
    return 0 if honest_ok else 1


if __name__ == "__main__":
    sys.exit(main())
