#!/usr/bin/env python3
"""Calibrates cudaagent-synth's device model from eager times that cudaagent-filter measured.

synth estimates a task's eager time as the sum over its operators of
    kernels * launch_us + max(flops / throughput(math), bytes / bandwidth)
with throughput fp32_tflops or conv_tflops by the operator's math (none: memory only), and keeps
tasks whose estimate lands in the filter's window. Each synth record carries those terms per
operator (task.meta.costs); each filter record the measured eager median (filter.eager_ms.median).
This script reports how the estimate compares with the measurement and fits the four device
parameters so that the estimate follows the measurement in relative terms.

The fit alternates two steps until the assignment stops changing: each operator is put in the
regime (compute or memory) the current parameters give it, which makes the model linear in
(launch, 1/fp32, 1/conv, 1/bandwidth); then those four are solved by least squares on relative
errors (each task's row divided by its measured time), kept positive. numpy does the algebra.

Usage: calibrate_synth.py FILTERED.jsonl [--window LO,HI] [--json OUT]   (a Python with numpy:
       Debian's python3, or the GPU machine's)
  FILTERED.jsonl   cudaagent-filter's output over synth's tasks (rejected tasks with a measured
                   eager time count too: the point is the device, not the window)
Prints a table (before and after: median and spread of estimate/measured, share inside the
window) and the synth flags of the fitted model. Exit 1 when fewer than 8 tasks have both numbers.
"""

import argparse
import json
import math
import sys

import numpy

PARAMETERS = ("launch_us", "fp32_tflops", "conv_tflops", "bandwidth_tbs")
DEFAULTS = {"launch_us": 89.0, "fp32_tflops": 45.0, "conv_tflops": 207.0, "bandwidth_tbs": 3.65}  # synth's


def read_tasks(path):
    """(costs, measured_ms) for every record that has both."""
    tasks = []
    with open(path) as lines:
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            costs = ((record.get("task") or {}).get("meta") or {}).get("costs")
            eager = ((record.get("filter") or {}).get("eager_ms") or {}).get("median")
            if costs and isinstance(eager, (int, float)) and eager > 0:
                tasks.append((costs, float(eager)))
    return tasks


def op_ms(op, p):
    """One operator's estimate in ms under parameters p, as synth computes it."""
    if op["kernels"] == 0:
        return 0.0
    compute = 0.0
    if op["math"] == "fp32":
        compute = op["flops"] / (p["fp32_tflops"] * 1e12)
    elif op["math"] == "conv":
        compute = op["flops"] / (p["conv_tflops"] * 1e12)
    memory = op["bytes"] / (p["bandwidth_tbs"] * 1e12)
    return op["kernels"] * p["launch_us"] * 1e-3 + max(compute, memory) * 1e3


def estimate(costs, p):
    return sum(op_ms(op, p) for op in costs)


def regimes(tasks, p):
    """Per operator: 'fp32', 'conv' or 'memory', whichever term the max() takes under p."""
    out = []
    for costs, _ in tasks:
        row = []
        for op in costs:
            memory = op["bytes"] / (p["bandwidth_tbs"] * 1e12)
            compute = 0.0
            if op["math"] in ("fp32", "conv"):
                compute = op["flops"] / (p[op["math"] + "_tflops"] * 1e12)
            row.append(op["math"] if compute > memory else "memory")
        out.append(row)
    return out


def solve(tasks, assignment, p):
    """Least squares for (launch ms, ms per fp32 FLOP, ms per conv FLOP, ms per byte) on relative
    errors; a coefficient with no data behind it keeps its current value."""
    columns = {"launch": 0, "fp32": 1, "conv": 2, "memory": 3}
    a = numpy.zeros((len(tasks), 4))
    b = numpy.ones(len(tasks))
    for i, ((costs, measured), row) in enumerate(zip(tasks, assignment)):
        for op, regime in zip(costs, row):
            if op["kernels"] == 0:
                continue
            a[i, columns["launch"]] += op["kernels"]
            a[i, columns[regime]] += op["bytes"] if regime == "memory" else op["flops"]
        a[i] /= measured
    current = numpy.array([p["launch_us"] * 1e-3, 1e-9 / p["fp32_tflops"], 1e-9 / p["conv_tflops"],
                           1e-9 / p["bandwidth_tbs"]])
    used = numpy.flatnonzero(numpy.abs(a).sum(axis=0) > 0)
    # Columns differ by ten orders of magnitude (kernels against FLOPs): scale before solving.
    scale = numpy.abs(a[:, used]).max(axis=0)
    x, *_ = numpy.linalg.lstsq(a[:, used] / scale, b, rcond=None)
    solved = current.copy()
    solved[used] = x / scale
    solved = numpy.where(solved > 0, solved, current)  # a throughput is never negative
    return {"launch_us": solved[0] * 1e3, "fp32_tflops": 1e-9 / solved[1],
            "conv_tflops": 1e-9 / solved[2], "bandwidth_tbs": 1e-9 / solved[3]}


def fit(tasks, start):
    p = dict(start)
    assignment = None
    for _ in range(50):
        now = regimes(tasks, p)
        if now == assignment:
            break
        assignment = now
        p = solve(tasks, assignment, p)
    return p


def report(tasks, p, window):
    ratios = sorted(estimate(costs, p) / measured for costs, measured in tasks)
    logs = [abs(math.log(r)) for r in ratios]
    inside = sum(window[0] <= measured <= window[1] for _, measured in tasks)
    est_inside = sum(window[0] <= estimate(costs, p) <= window[1] for costs, _ in tasks)
    q = lambda f: ratios[min(len(ratios) - 1, int(f * len(ratios)))]
    return {"tasks": len(tasks), "ratio_p10": q(0.1), "ratio_median": q(0.5), "ratio_p90": q(0.9),
            "median_abs_log_error": sorted(logs)[len(logs) // 2],
            "measured_in_window": inside, "estimated_in_window": est_inside}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("filtered")
    parser.add_argument("--window", default="1,100", help="LO,HI ms (default 1,100)")
    parser.add_argument("--json", help="write the reports and both models here")
    args = parser.parse_args()
    window = [float(x) for x in args.window.split(",")]
    tasks = read_tasks(args.filtered)
    if len(tasks) < 8:
        print(f"calibrate_synth: {len(tasks)} tasks with per-operator costs and a measured eager time; "
              f"8 or more are needed", file=sys.stderr)
        return 1
    fitted = fit(tasks, DEFAULTS)
    before, after = report(tasks, DEFAULTS, window), report(tasks, fitted, window)
    print("| model | tasks | estimate/measured p10 | median | p90 | median |log error| | measured in window | estimated in window |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in (("synth's defaults", before), ("fitted", after)):
        print(f"| {name} | {r['tasks']} | {r['ratio_p10']:.3g} | {r['ratio_median']:.3g} | {r['ratio_p90']:.3g} | "
              f"{r['median_abs_log_error']:.3g} | {r['measured_in_window']} | {r['estimated_in_window']} |")
    flags = " ".join(f"--{name.replace('_', '-')} {fitted[name]:.4g}" for name in PARAMETERS)
    print(f"\nsynth flags of the fitted model: {flags}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"defaults": DEFAULTS, "fitted": fitted, "before": before, "after": after,
                       "flags": flags}, out, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
