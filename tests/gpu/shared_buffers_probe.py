"""Can a trusted process share GPU buffers with a process inside the OS sandbox, and what does a
call cost when the trusted side times it with its own clock?

  owner (this process, trusted): allocates an input and an output buffer (shared_buffers.py),
        hands them to the user over a Unix socket, then for each call: flushes L2, starts its clock,
        copies fresh inputs into the shared input buffer, says "go", waits for "done", stops its
        clock, and checks the output buffer itself.
  user  (started inside bwrap with a new PID, network and IPC namespace): maps the input read-only
        and the output read-write, and per call computes out = input @ input (fp32 GEMM) with CUDA
        events around the work, copies the result into the output buffer, synchronises, replies.

Prints one JSON object: per size, the trusted host-clock time and the user's event time per call
(median, CV, p10/p90) and their difference (the protocol's overhead); whether the read-only
mapping stopped a write; whether every output matched.
Usage: python3 shared_buffers_probe.py DIR [BWRAP]   (DIR: a scratch directory; BWRAP: path)
"""

import glob
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "share", "harness"))
import shared_buffers  # noqa: E402

SIZES = [1024, 2048, 4096]  # fp32 GEMM n: about 0.05, 0.35 and 2.8 ms on an H200
CALLS = 60


def stats(values):
    values = sorted(values)
    median = statistics.median(values)
    mean = statistics.fmean(values)
    cv = statistics.pstdev(values) / mean if mean else 0
    return {"median_ms": round(median, 5), "cv": round(cv, 4), "p10_ms": round(values[len(values) // 10], 5),
            "p90_ms": round(values[len(values) * 9 // 10], 5)}


def user(sock_path):
    import torch

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(sock_path)
    message, fds = shared_buffers.recv_fds(sock, 2)
    spec = json.loads(message)
    inp = shared_buffers.Buffer.open("cuda", spec["size"], fds[0], readonly=True)
    out = shared_buffers.Buffer.open("cuda", spec["size"], fds[1], readonly=False)
    sock.send(b"ready")
    while True:
        command = json.loads(sock.recv(4096))
        if command["cmd"] == "stop":
            break
        if command["cmd"] == "write_input":  # must fault: the input mapping is read-only
            try:
                inp.tensor(torch, torch.float32, (16,)).fill_(1.0)
                torch.cuda.synchronize()
                sock.send(json.dumps({"wrote": True}).encode())
            except Exception as error:
                sock.send(json.dumps({"wrote": False, "error": f"{type(error).__name__}: {error}"[:200]}).encode())
            break
        n = command["n"]
        a = inp.tensor(torch, torch.float32, (n, n))
        o = out.tensor(torch, torch.float32, (n, n))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        result = a @ a
        end.record()
        o.copy_(result)
        torch.cuda.synchronize()
        sock.send(json.dumps({"event_ms": start.elapsed_time(end)}).encode())


def owner(work_dir, bwrap):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.cuda.init()
    n_max = max(SIZES)
    size = n_max * n_max * 4
    inp = shared_buffers.Buffer.create("cuda", size)
    out = shared_buffers.Buffer.create("cuda", size)
    sock_path = os.path.join(work_dir, "xfer.sock")
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server.bind(sock_path)
    server.listen(1)
    argv = [sys.executable, os.path.abspath(__file__), "--user", sock_path]
    if bwrap:
        devs = []
        for node in sorted(glob.glob("/dev/nvidia*")):
            devs += ["--dev-bind", node, node]
        argv = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
                *devs, "--proc", "/proc", "--ro-bind", "/sys", "/sys", "--tmpfs", "/tmp",
                "--bind", work_dir, work_dir, "--"] + argv
    child = subprocess.Popen(argv)
    conn, _ = server.accept()
    shared_buffers.send_fds(conn, [inp.fd, out.fd], json.dumps({"size": size}).encode())
    assert conn.recv(16) == b"ready"
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    result = {"sandboxed": bool(bwrap), "sizes": {}}
    all_ok = True
    for n in SIZES:
        private = torch.randn(n, n, device="cuda")
        expect = private @ private
        host, event = [], []
        shared_in = inp.tensor(torch, torch.float32, (n, n))
        shared_out = out.tensor(torch, torch.float32, (n, n))
        for call in range(CALLS + 5):
            private.normal_()
            expect = private @ private
            shared_out.zero_()
            flush.zero_()
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            shared_in.copy_(private)
            torch.cuda.synchronize()
            conn.send(json.dumps({"cmd": "call", "n": n}).encode())
            reply = json.loads(conn.recv(4096))
            t1 = time.perf_counter_ns()
            ok = bool(torch.allclose(shared_out, expect, rtol=1e-4, atol=1e-3))
            all_ok = all_ok and ok
            if call >= 5:
                host.append((t1 - t0) / 1e6)
                event.append(reply["event_ms"])
        result["sizes"][str(n)] = {"host": stats(host), "event": stats(event),
                                   "overhead": stats([h - e for h, e in zip(host, event)])}
    before = inp.tensor(torch, torch.float32, (16,)).clone()
    conn.send(json.dumps({"cmd": "write_input"}).encode())
    try:
        result["write_to_readonly_input"] = json.loads(conn.recv(4096))
    except Exception as error:
        result["write_to_readonly_input"] = {"error": f"no reply: {error}"}
    result["input_unchanged_after_write"] = bool(torch.equal(before, inp.tensor(torch, torch.float32, (16,))))
    result["outputs_ok"] = all_ok
    child.wait(timeout=30)
    result["user_exit"] = child.returncode
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "--user":
        user(sys.argv[2])
    else:
        owner(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
