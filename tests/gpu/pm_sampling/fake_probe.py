#!/usr/bin/env python3
"""Stand-in for the compiled probe, so run.sh and analyse.py can be exercised
on a machine without a GPU:  PM_PROBE_FAKE=tests/gpu/pm_sampling/fake_probe.py
bash tests/gpu/pm_sampling/run.sh OUT.  It writes the same JSON-lines formats
with synthetic numbers (a perfect sampler: busy exactly inside each kernel's
%globaltimer span, sample clock = CLOCK_MONOTONIC + a fixed offset), so a
healthy pipeline reports ratio ~1 and ~0 busy outside. Proves nothing about
PM sampling itself."""
import json
import subprocess
import sys
import time

OFFSET = 7_000_000_000  # fake "GPU" clock = monotonic + OFFSET
ELAPSED = 1755.0        # fake cycles per 1 us


def arg(args, flag, default=None):
    return args[args.index(flag) + 1] if flag in args else default


def sample(args):
    if "--list-metrics" in args:
        print("PM sampling base metrics (counter, 2):\n  gr__cycles_active\n  gr__cycles_elapsed", file=sys.stderr)
        return 0
    if any(m.startswith("bogus") for m in arg(args, "--metrics").split(",")):
        print("probe: metric 'bogus' is not a PM-sampling base metric on FAKE", file=sys.stderr)
        return 2  # as the real probe does for a refused metric
    cmd = args[args.index("--") + 1:]
    iv = int(arg(args, "--interval-ns"))
    metrics = arg(args, "--metrics").split(",")
    c0 = time.monotonic_ns()
    rc = subprocess.call(cmd)
    c1 = time.monotonic_ns()
    windows = []
    if "workload" in cmd:
        with open(arg(cmd, "--out")) as f:
            for line in f:
                k = json.loads(line)
                if not k.get("header"):
                    windows.append((k["gt_start"] - OFFSET, k["gt_end"] - OFFSET))
    lines, wi, s = [], 0, c0
    while s + iv <= c1:
        e = s + iv
        while wi < len(windows) and windows[wi][1] <= s:
            wi += 1
        act = 0.0
        if wi < len(windows):
            a, b = windows[wi]
            act = max(0, min(b, e) - max(a, s)) / iv * ELAPSED
        lines.append('{"s":%d,"e":%d,"v":[%s]}' % (s + OFFSET, e + OFFSET, ",".join(
            repr(act if "active" in m else ELAPSED) for m in metrics)))
        s = e
    hdr = {"header": True, "chip": "FAKE", "device": "fake", "interval_ns": iv, "trigger": "gpu_time",
           "metrics": metrics, "overflow": False, "samples": len(lines), "decode_calls": 1,
           "image_recycles": 0, "own_context": "--no-context" not in args,
           "pairs": [{"cupti": c0 + OFFSET, "mono": c0, "width": 0}, {"cupti": c1 + OFFSET, "mono": c1, "width": 0}],
           "started_mono": c0, "child_exit_mono": c1, "child_rc": rc}
    with open(arg(args, "--out"), "w") as f:
        f.write(json.dumps(hdr) + "\n" + "\n".join(lines) + "\n")
    return 0 if rc == 0 else 3


def workload(args):
    d, n, g = int(arg(args, "--kernel-us")), int(arg(args, "--count")), int(arg(args, "--gap-us"))
    with open(arg(args, "--out"), "w") as f:
        f.write(json.dumps({"header": True, "kernel_us": d, "count": n, "gap_us": g, "blocks": 132, "sms": 132}) + "\n")
        for i in range(n + 5):
            t0 = time.monotonic_ns()
            gs = t0 + 6000
            ge = gs + d * 1000
            t1 = ge + 9000
            while time.monotonic_ns() < t1:
                time.sleep(max(0, (t1 - time.monotonic_ns()) / 1e9))
            t1 = max(t1, time.monotonic_ns())
            f.write(json.dumps({"i": i, "warmup": i < 5, "t0": t0, "t1": t1, "event_us": d + 1.5,
                                "gt_start": gs + OFFSET, "gt_end": ge + OFFSET}) + "\n")
            time.sleep(g / 1e6)
    return 0


def main():
    role, args = sys.argv[1], sys.argv[2:]
    if role == "devices":
        print("1 CUDA device(s) (fake)")
        return 0
    return {"sample": sample, "workload": workload}[role](args)


if __name__ == "__main__":
    sys.exit(main())
