"""GPU check of libcudaagent_cupti.so, driven by tests/gpu/cupti_check.sh (read that first).

Subcommands, each run in its own process:
  run       under the injection: a torch elementwise op, a torch.matmul (cuBLAS), a kernel of an
            nvcc-built .so called through ctypes, a kernel on a side stream, one from a background
            thread; each between time.monotonic_ns() marks; then an explicit flush, one more kernel,
            and a normal exit (the at-exit flush). Writes the marks as JSON.
  fork      a parent that never touches CUDA forks a job child (as share/harness/worker.py does):
            the child traces to its own %p file, flushes and leaves with os._exit.
  overhead  10k small launches (torch add_, and the ctypes kernel), timed; run with and without
            the injection by the shell script.
  check     reads the traces and the marks and asserts; prints a report; exit 1 on any failure.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import threading
import time


def injection():
    path = os.environ.get("CUDA_INJECTION64_PATH")
    if not path:
        return None
    lib = ctypes.CDLL(path)
    lib.cudaagent_cupti_flush.restype = ctypes.c_int
    lib.cudaagent_cupti_stream_id.restype = ctypes.c_longlong
    lib.cudaagent_cupti_stream_id.argtypes = [ctypes.c_void_p]
    return lib


def custom_library(path):
    lib = ctypes.CDLL(path)
    lib.cupti_check_launch.restype = ctypes.c_int
    lib.cupti_check_launch.argtypes = [ctypes.c_void_p, ctypes.c_float, ctypes.c_int, ctypes.c_void_p]
    return lib


def custom_launch(lib, tensor, torch):
    rc = lib.cupti_check_launch(tensor.data_ptr(), 1.0001, tensor.numel(),
                                torch.cuda.current_stream().cuda_stream)
    if rc != 0:
        raise RuntimeError(f"cupti_check_launch returned CUDA error {rc}")


def command_run(args):
    import torch

    custom = custom_library(args.custom)
    x = torch.randn(1 << 20, device="cuda")  # initialises CUDA: the driver loads the injection here
    a = torch.randn(2048, 2048, device="cuda")
    b = torch.randn(2048, 2048, device="cuda")
    torch.cuda.synchronize()
    inj = injection()
    marks = {"pid": os.getpid(), "main_tid": threading.get_native_id(), "windows": {},
             "custom_so": os.path.realpath(args.custom)}
    main = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    marks["streams"] = {"main": inj.cudaagent_cupti_stream_id(main.cuda_stream),
                        "side": inj.cudaagent_cupti_stream_id(side.cuda_stream)}

    def window(name, work):
        time.sleep(0.002)
        t0 = time.monotonic_ns()
        work()
        torch.cuda.synchronize()
        marks["windows"][name] = [t0, time.monotonic_ns()]

    window("elementwise", lambda: torch.neg(x))
    window("matmul", lambda: torch.matmul(a, b))
    window("custom", lambda: custom_launch(custom, x, torch))

    def on_side():
        with torch.cuda.stream(side):
            torch.cos(x)
    window("side_stream", on_side)

    def from_thread():
        def work():
            marks["thread_tid"] = threading.get_native_id()
            torch.sin(x)
            torch.cuda.current_stream().synchronize()
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    window("thread", from_thread)

    marks["flush_rc"] = inj.cudaagent_cupti_flush()
    window("after_flush", lambda: torch.abs(x))  # reaches the trace only through the at-exit flush
    with open(args.marks, "w") as out:
        json.dump(marks, out, indent=1)
    return 0


def command_fork(args):
    import torch  # imported, as the warm worker does; CUDA is not touched in the parent

    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            x = torch.ones(4096, device="cuda")
            (x * 2).sum().item()
            torch.cuda.synchronize()
            code = 0 if injection().cudaagent_cupti_flush() == 0 else 4
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    with open(args.marks, "w") as out:
        json.dump({"parent_pid": os.getpid(), "child_pid": pid,
                   "child_exit": os.waitstatus_to_exitcode(status)}, out)
    return 0


def command_overhead(args):
    import torch

    custom = custom_library(args.custom)
    x = torch.zeros(1, device="cuda")
    y = torch.zeros(256, device="cuda")
    result = {"mode": args.mode, "launches": args.launches, "torch_us": [], "ctypes_us": []}
    for _ in range(2000):  # warm-up: caches, allocator, clocks
        x.add_(1)
        custom_launch(custom, y, torch)
    torch.cuda.synchronize()
    for _ in range(args.reps):
        t0 = time.perf_counter()
        for _ in range(args.launches):
            x.add_(1)
        torch.cuda.synchronize()
        result["torch_us"].append((time.perf_counter() - t0) * 1e6 / args.launches)
        t0 = time.perf_counter()
        for _ in range(args.launches):
            custom_launch(custom, y, torch)
        torch.cuda.synchronize()
        result["ctypes_us"].append((time.perf_counter() - t0) * 1e6 / args.launches)
    inj = injection()
    result["flush_rc"] = inj.cudaagent_cupti_flush() if inj else None
    result["expected_kernels"] = (2000 + args.reps * args.launches) * 2
    with open(args.out, "w") as out:
        json.dump(result, out)
    return 0


# ---------------------------------------------------------------------------------------------
# check

class Report:
    def __init__(self):
        self.failures = []

    def ok(self, condition, what, detail=""):
        line = f"{'PASS' if condition else 'FAIL'}: {what}" + (f" ({detail})" if detail else "")
        print(line)
        if not condition:
            self.failures.append(line)
        return condition


def read_trace(path):
    records = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            records.append(json.loads(line))
    return records


def launcher_class(path, candidate_dir):
    if not path:
        return "unknown"
    base = os.path.basename(path)
    if path.startswith(candidate_dir + "/"):
        return "candidate"
    if base.startswith(("libcublas", "libcudnn")):
        return "cuda_library"
    if base.startswith(("libtorch", "libc10")):
        return "torch"
    return "other"


def check_summary(report, records, pid, label):
    summaries = [r for r in records if r["kind"] == "summary" and r["pid"] == pid]
    if not report.ok(summaries, f"{label}: a summary line"):
        return None
    last = summaries[-1]
    print(f"  {label} summary: {json.dumps(last)}")
    report.ok(last["dropped"] == 0, f"{label}: dropped == 0", f"dropped={last['dropped']}")
    report.ok(last["buffer_errors"] == 0 and last["write_failures"] == 0,
              f"{label}: no buffer errors or write failures")
    report.ok(last["clock"] == "monotonic", f"{label}: CLOCK_MONOTONIC timestamps through CUPTI's callback",
              last["clock"])
    kernels = sum(1 for r in records if r["kind"] == "kernel")
    report.ok(last["records"]["kernel"] == kernels, f"{label}: summary counts every kernel line",
              f"summary {last['records']['kernel']}, lines {kernels}")
    errors = [r for r in records if r["kind"] == "error"]
    report.ok(not errors, f"{label}: no error lines", json.dumps(errors[:3]))
    return last


def command_check(args):
    report = Report()
    marks = json.load(open(args.marks))
    trace_path = os.path.join(args.trace_dir, f"trace-{marks['pid']}.jsonl")
    if not report.ok(os.path.exists(trace_path), "trace file of the run process", trace_path):
        return 1
    records = read_trace(trace_path)
    kernels = [r for r in records if r["kind"] == "kernel"]
    print(f"  {len(records)} lines, {len(kernels)} kernels, streams {marks['streams']}")
    last = check_summary(report, records, marks["pid"], "run")
    if last:
        report.ok(last["flush"] >= 2, "run: the at-exit flush wrote a second summary", f"flush={last['flush']}")
    main, side = marks["streams"]["main"], marks["streams"]["side"]
    report.ok(main >= 0 and side >= 0 and main != side, "cudaagent_cupti_stream_id names both streams",
              f"main={main} side={side}")
    candidate_dir = os.path.dirname(marks["custom_so"])
    slack = int(args.slack_us * 1000)  # integer ns: trace_summary reads integers only

    def in_window(name):
        t0, t1 = marks["windows"][name]
        return [k for k in kernels if k["start_ns"] >= t0 - slack and k["end_ns"] <= t1 + slack]

    expectations = [
        ("elementwise", "torch", main, lambda k: "at::native" in k["demangled"]),
        ("matmul", "cuda_library", main, lambda k: True),
        ("custom", "candidate", main, lambda k: "cupti_check_scale" in k["name"]),
        ("side_stream", "torch", side, lambda k: True),
        ("thread", "torch", main, lambda k: k.get("tid") == marks.get("thread_tid")),
        ("after_flush", "torch", main, lambda k: True),
    ]
    for name, expected_class, stream, predicate in expectations:
        t0, t1 = marks["windows"][name]
        found = [k for k in in_window(name) if predicate(k)]
        near = [k for k in kernels if k["end_ns"] >= t0 - 10**6 and k["start_ns"] <= t1 + 10**6]
        detail = "; ".join(f"{k['demangled'][:60]} stream={k['stream']} tid={k['tid']} "
                           f"launcher={k['launcher']} [{k['start_ns'] - t0}, {k['end_ns'] - t0}] ns"
                           for k in (found or near)[:4])
        if not report.ok(found, f"{name}: a kernel inside the monotonic window [{t0}, {t1}]", detail):
            continue
        report.ok(all(launcher_class(k["launcher"], candidate_dir) == expected_class for k in found),
                  f"{name}: launcher class {expected_class}",
                  ", ".join(sorted({str(k["launcher"]) for k in found})))
        report.ok(all(k["stream"] == stream for k in found), f"{name}: on stream {stream}",
                  ", ".join(sorted({str(k["stream"]) for k in found})))
        if name == "thread":
            report.ok(marks["thread_tid"] != marks["main_tid"], "thread: launched from another thread",
                      f"tid {marks['thread_tid']} vs main {marks['main_tid']}")
        if name == "custom":
            report.ok(found[0]["launcher"] == marks["custom_so"], "custom: launcher is the .so's path",
                      found[0]["launcher"])
    report.ok(marks["flush_rc"] == 0, "cudaagent_cupti_flush() returned 0", str(marks["flush_rc"]))
    unknown = [k for k in kernels if not k["launcher"]]
    report.ok(not unknown, "every kernel has a launcher",
              f"{len(unknown)} without: " + ", ".join(k["demangled"][:50] for k in unknown[:5]))

    # The C++ reader and classifier on the same trace.
    if args.helper and os.path.exists(args.helper):
        for name, klass in [("elementwise", "torch"), ("matmul", "cuda_library"), ("custom", "candidate")]:
            t0, t1 = marks["windows"][name]
            out = subprocess.run([args.helper, trace_path, str(t0 - slack), str(t1 + slack), str(main),
                                  candidate_dir], capture_output=True, text=True)
            if not report.ok(out.returncode == 0, f"trace_summary {name} ran", out.stderr.strip()[:300]):
                continue
            result = json.loads(out.stdout)
            share = result["summary"]["classes"][klass]["share"]
            report.ok(share > 0.99, f"trace_summary {name}: {klass} share", f"{share:.4f}")
            report.ok(result["health"]["rejected"] == 0 and result["health"]["dropped"] == 0,
                      f"trace_summary {name}: trace healthy", json.dumps(result["health"])[:300])
        t0 = marks["windows"]["elementwise"][0]
        t1 = marks["windows"]["thread"][1]
        out = subprocess.run([args.helper, trace_path, str(t0), str(t1), str(main), candidate_dir],
                             capture_output=True, text=True)
        if report.ok(out.returncode == 0, "trace_summary whole run ran", out.stderr.strip()[:300]):
            summary = json.loads(out.stdout)["summary"]
            off = summary["off_stream"]
            report.ok(off is not None and off["count"] >= 1, "trace_summary: side-stream work seen off the timed stream",
                      json.dumps(off))
            report.ok(summary["threads"] >= 2, "trace_summary: two launching threads", str(summary["threads"]))
            print("  whole-run summary: " + json.dumps(summary)[:2000])
    else:
        print(f"SKIP: C++ trace_summary helper not found at {args.helper}")

    # The forked job child.
    fork = json.load(open(args.fork_marks))
    report.ok(fork["child_exit"] == 0, "fork: the child traced, flushed and left with os._exit(0)",
              f"exit {fork['child_exit']}")
    child_trace = os.path.join(args.trace_dir, f"trace-{fork['child_pid']}.jsonl")
    if report.ok(os.path.exists(child_trace), "fork: the child's own %p trace file", child_trace):
        child = read_trace(child_trace)
        report.ok(any(r["kind"] == "kernel" for r in child), "fork: the child's kernels are in it")
        check_summary(report, child, fork["child_pid"], "fork child")
    report.ok(not os.path.exists(os.path.join(args.trace_dir, f"trace-{fork['parent_pid']}.jsonl")),
              "fork: no trace from the parent, which never touched CUDA")

    # Overhead of the injection on small launches.
    rows = []
    for mode in ("plain", "activity_only", "full"):
        path = os.path.join(args.trace_dir, f"overhead-{mode}.json")
        if not report.ok(os.path.exists(path), f"overhead run {mode}"):
            continue
        result = json.load(open(path))
        rows.append((mode, statistics.median(result["torch_us"]), statistics.median(result["ctypes_us"]), result))
    if rows:
        base_torch, base_ctypes = rows[0][1], rows[0][2]
        print(f"\n  overhead, {rows[0][3]['launches']} launches x {len(rows[0][3]['torch_us'])} reps, "
              "median us per launch (host loop + launch + CUPTI):")
        print("  mode            torch add_   (+us)    ctypes kernel  (+us)")
        for mode, t, c, _ in rows:
            print(f"  {mode:14s}  {t:9.2f}  {t - base_torch:+7.2f}   {c:11.2f}  {c - base_ctypes:+7.2f}")
        for mode, _, _, result in rows[1:]:
            report.ok(result["flush_rc"] == 0, f"overhead {mode}: flush returned 0", str(result["flush_rc"]))
            traces = [os.path.join(args.trace_dir, f) for f in os.listdir(args.trace_dir)
                      if f.startswith(f"overhead-{mode}-") and f.endswith(".jsonl")]
            if report.ok(len(traces) == 1, f"overhead {mode}: one trace", ", ".join(traces)):
                records = read_trace(traces[0])
                n = sum(1 for r in records if r["kind"] == "kernel")
                report.ok(n >= result["expected_kernels"], f"overhead {mode}: every launch traced",
                          f"{n} kernels, {result['expected_kernels']} launched")
                summaries = [r for r in records if r["kind"] == "summary"]
                report.ok(summaries and summaries[-1]["dropped"] == 0, f"overhead {mode}: dropped == 0",
                          json.dumps(summaries[-1]) if summaries else "no summary")
    print(f"\n{len(report.failures)} failure(s)")
    for line in report.failures:
        print("  " + line)
    return 1 if report.failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run")
    p.add_argument("--custom", required=True)
    p.add_argument("--marks", required=True)
    p = sub.add_parser("fork")
    p.add_argument("--marks", required=True)
    p = sub.add_parser("overhead")
    p.add_argument("--custom", required=True)
    p.add_argument("--mode", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--launches", type=int, default=10000)
    p.add_argument("--reps", type=int, default=5)
    p = sub.add_parser("check")
    p.add_argument("--marks", required=True)
    p.add_argument("--fork-marks", required=True)
    p.add_argument("--trace-dir", required=True)
    p.add_argument("--helper")
    p.add_argument("--slack-us", type=float, default=50.0)
    args = parser.parse_args()
    return {"run": command_run, "fork": command_fork, "overhead": command_overhead,
            "check": command_check}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
