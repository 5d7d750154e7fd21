#!/usr/bin/env python3
"""Compare PM-sampling busy time (seen by a trusted sampler) with the
workload's own per-kernel timings (CUDA events, host clock, %globaltimer).

usage: analyse.py SAMPLES.jsonl WORKLOAD.jsonl [--json OUT.json]
         [--active METRIC] [--elapsed METRIC]

Standard library only. Prints one human summary; --json writes the numbers.
"""
import argparse
import bisect
import json
import statistics
import sys


NULLS = [0]  # samples that had a non-finite (null) metric value, read as 0


def load(path):
    header, rows = None, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            obj = json.loads(line)
            if obj.get("header"):
                header = obj
            else:
                if "v" in obj and None in obj["v"]:  # non-finite metric value
                    obj["v"] = [0.0 if x is None else x for x in obj["v"]]
                    NULLS[0] += 1
                rows.append(obj)
    return header, rows


def clock_fit(pairs):
    """mono = slope * cupti + offset from the before/after pairs. With two
    points the slope is exact; it should be ~1 if both are ns clocks."""
    (c0, m0), (c1, m1) = [(p["cupti"], p["mono"]) for p in pairs]
    slope = (m1 - m0) / (c1 - c0) if c1 != c0 else 1.0
    return slope, m0 - slope * c0


def cv(xs):
    if len(xs) < 2:
        return float("nan")
    m = statistics.mean(xs)
    return statistics.pstdev(xs) / m if m else float("nan")


class BusyIndex:
    """Samples sorted by start, with a prefix sum of busy ns, so the busy
    time of all samples overlapping [a, b] is two bisects away."""

    def __init__(self, starts, ends, busy):
        order = sorted(range(len(starts)), key=starts.__getitem__)
        self.s = [starts[i] for i in order]
        self.e = [ends[i] for i in order]
        self.b = [busy[i] for i in order]
        self.prefix = [0.0]
        for v in self.b:
            self.prefix.append(self.prefix[-1] + v)
        # samples are back to back and do not overlap, so ends are sorted too
        self.max_len = max((e - s for s, e in zip(self.s, self.e)), default=0)

    def busy_in(self, a, b, shift=0.0):
        """Busy ns of samples (shifted by `shift`) that overlap [a, b]."""
        lo = bisect.bisect_right(self.s, a - shift - self.max_len)
        while lo < len(self.s) and self.e[lo] + shift < a:
            lo += 1
        hi = bisect.bisect_right(self.s, b - shift)
        return self.prefix[hi] - self.prefix[lo] if hi > lo else 0.0, max(0, hi - lo)

    def total(self):
        return self.prefix[-1]


def analyse(samples_path, workload_path, active=None, elapsed=None):
    sh, samples = load(samples_path)
    wh, kernels = load(workload_path)
    if sh is None or wh is None:
        sys.exit("analyse: missing header line")
    metrics = sh["metrics"]
    active = active or metrics[0]
    elapsed = elapsed or metrics[1]
    ia, ie = metrics.index(active), metrics.index(elapsed)
    # warm-up kernels are not measured but are known GPU work, so they
    # count as "inside a kernel" when looking for busy time outside any.
    all_kernels = kernels
    kernels = [k for k in kernels if not k["warmup"]]
    res = {"chip": sh["chip"], "interval_ns": sh["interval_ns"], "overflow": sh["overflow"],
           "null_samples": NULLS[0],
           "truncated": sh.get("truncated", False), "dropped": sh.get("dropped", 0),
           "final_evaluate_ms": sh.get("final_evaluate_ms"),
           "samples": len(samples), "kernel_us": wh["kernel_us"], "kernels": len(kernels),
           "active_metric": active, "elapsed_metric": elapsed}
    if not samples or not kernels:
        res["error"] = "no samples" if not samples else "no kernels"
        return res

    durs = [r["e"] - r["s"] for r in samples]
    res["sample_ns_median"] = statistics.median(durs)
    res["sample_ns_min"], res["sample_ns_max"] = min(durs), max(durs)
    gaps = [b["s"] - a["e"] for a, b in zip(samples, samples[1:])]
    res["sample_gap_ns_max"] = max(gaps) if gaps else 0

    slope, offset = clock_fit(sh["pairs"])
    res["clock_slope"] = slope
    c_lo, c_hi = sh["pairs"][0]["cupti"], sh["pairs"][1]["cupti"]
    inside = sum(1 for r in samples if c_lo <= r["s"] <= c_hi)
    # If sample timestamps are not in cuptiGetTimestamp's domain this is ~0
    # and the host-clock mapping below is meaningless (globaltimer is then the
    # fallback: the workload records each kernel's %globaltimer span).
    res["samples_within_timestamp_pairs"] = inside / len(samples)

    starts = [slope * r["s"] + offset for r in samples]
    ends = [slope * r["e"] + offset for r in samples]
    busy = []
    for r, d in zip(samples, durs):
        a, e = r["v"][ia], r["v"][ie]
        busy.append(a / e * d if e > 0 else 0.0)
    idx = BusyIndex(starts, ends, busy)
    # Only kernels the samples cover (all of them unless evaluation was cut
    # short or sampling started late).
    lo_cov, hi_cov = min(starts), max(ends)
    covered = [k for k in kernels if k["t0"] >= lo_cov and k["t1"] <= hi_cov]
    res["kernels_not_covered"] = len(kernels) - len(covered)
    kernels = covered
    all_kernels = [k for k in all_kernels if k["t0"] >= lo_cov and k["t1"] <= hi_cov]
    if not kernels:
        res["error"] = "no kernel inside the sampled span"
        return res
    res["busy_total_us"] = idx.total() / 1e3

    ev = [k["event_us"] for k in kernels]
    host = [(k["t1"] - k["t0"]) / 1e3 for k in kernels]
    gt = [(k["gt_end"] - k["gt_start"]) / 1e3 for k in kernels]
    res["event_us_median"] = statistics.median(ev)
    res["host_us_median"] = statistics.median(host)
    res["globaltimer_us_median"] = statistics.median(gt)

    def windows_busy(win, shift):
        per, n = [], []
        for a, b in win:
            v, c = idx.busy_in(a, b, shift)
            per.append(v)
            n.append(c)
        return per, n

    # Host windows [launch, sync]: what the owner could bracket itself.
    host_win = [(k["t0"], k["t1"]) for k in kernels]
    # A residual offset between the clocks would push busy out of the
    # windows; search a small shift (reported, so a large one is visible).
    step = max(res["sample_ns_median"], 500)
    best = (-1.0, 0.0)
    # nearest-first, strict improvement: among equally good shifts keep the smallest
    for j in sorted(range(-400, 401), key=abs):
        shift = j * step
        inside_busy = sum(windows_busy(host_win, shift)[0])
        if inside_busy > best[0]:
            best = (inside_busy, shift)
    shift = best[1]
    res["host_shift_us"] = shift / 1e3
    all_win = [(k["t0"], k["t1"]) for k in all_kernels]
    for name, s in (("mapped", 0.0), ("shifted", shift)):
        per, n = windows_busy(host_win, s)
        known = sum(windows_busy(all_win, s)[0])
        est = [v / 1e3 for v in per]
        res[f"{name}_est_us_median"] = statistics.median(est)
        res[f"{name}_est_cv"] = cv(est)
        res[f"{name}_ratio_to_event"] = statistics.median(est) / res["event_us_median"]
        res[f"{name}_samples_per_kernel_median"] = statistics.median(n)
        lo = min(a for a, _ in all_win) - 10_000_000
        hi = max(b for _, b in all_win) + 10_000_000
        span_busy = idx.busy_in(lo, hi, s)[0]
        res[f"{name}_busy_outside_us"] = (span_busy - known) / 1e3
        res[f"{name}_busy_outside_per_kernel_us"] = (span_busy - known) / 1e3 / len(kernels)

    # Same, in GPU time: the kernel's %globaltimer span vs raw sample stamps
    # (valid if PM sample timestamps are globaltimer ns, which is likely).
    gidx = BusyIndex([float(r["s"]) for r in samples], [float(r["e"]) for r in samples], busy)
    gt_win = [(k["gt_start"], k["gt_end"]) for k in kernels]
    per = [gidx.busy_in(a, b)[0] / 1e3 for a, b in gt_win]
    res["gt_est_us_median"] = statistics.median(per)
    res["gt_est_cv"] = cv(per)
    res["gt_ratio_to_globaltimer"] = statistics.median(per) / res["globaltimer_us_median"]
    res["gt_windows_with_samples"] = sum(1 for a, b in gt_win if gidx.busy_in(a, b)[1] > 0) / len(gt_win)
    # A third metric (default sm__cycles_active.avg) as a second estimator
    # over the same elapsed cycles: SM-level rather than engine-level activity.
    if len(metrics) > 2:
        i3 = 2
        alt = [r["v"][i3] / r["v"][ie] * d if r["v"][ie] > 0 else 0.0 for r, d in zip(samples, durs)]
        aidx = BusyIndex(starts, ends, alt)
        per = [aidx.busy_in(a, b, shift)[0] / 1e3 for a, b in host_win]
        res["alt_metric"] = metrics[i3]
        res["alt_est_us_median"] = statistics.median(per)
        res["alt_est_cv"] = cv(per)
        res["alt_ratio_to_event"] = statistics.median(per) / res["event_us_median"]
    # the best estimate the owner can form without the workload's help:
    # per-kernel errors vs the kernel's own event time
    est = [idx.busy_in(a, b, shift)[0] / 1e3 for a, b in host_win]
    err = [e - v for e, v in zip(est, ev)]
    res["shifted_abs_err_us_median"] = statistics.median(abs(x) for x in err)
    res["shifted_abs_err_us_p90"] = sorted(abs(x) for x in err)[int(0.9 * (len(err) - 1))]
    return res


def fmt(res):
    if "error" in res:
        return f"interval {res['interval_ns']} ns, D={res['kernel_us']} us: {res['error']}"
    return (
        f"interval {res['interval_ns']} ns, D={res['kernel_us']} us ({res['kernels']} kernels, "
        f"{res['samples']} samples of {res['sample_ns_median']:.0f} ns [{res['sample_ns_min']}..{res['sample_ns_max']}], "
        f"max gap {res['sample_gap_ns_max']} ns, overflow={res['overflow']}, truncated={res['truncated']} "
        f"dropped {res['dropped']}, final evaluate {res['final_evaluate_ms']} ms, "
        f"kernels not covered {res['kernels_not_covered']}, null samples {res['null_samples']})\n"
        f"  samples inside timestamp pairs: {res['samples_within_timestamp_pairs']:.3f}, clock slope {res['clock_slope']:.9f}, "
        f"best host shift {res['host_shift_us']:.1f} us\n"
        f"  event median {res['event_us_median']:.2f} us, host [launch,sync] {res['host_us_median']:.2f} us, "
        f"globaltimer span {res['globaltimer_us_median']:.2f} us\n"
        f"  PM est (host windows, mapped):  {res['mapped_est_us_median']:.2f} us ratio {res['mapped_ratio_to_event']:.3f} "
        f"CV {res['mapped_est_cv']:.3f}, outside {res['mapped_busy_outside_per_kernel_us']:.2f} us/kernel\n"
        f"  PM est (host windows, shifted): {res['shifted_est_us_median']:.2f} us ratio {res['shifted_ratio_to_event']:.3f} "
        f"CV {res['shifted_est_cv']:.3f}, outside {res['shifted_busy_outside_per_kernel_us']:.2f} us/kernel, "
        f"|err| median {res['shifted_abs_err_us_median']:.2f} p90 {res['shifted_abs_err_us_p90']:.2f} us\n"
        f"  PM est (globaltimer windows):   {res['gt_est_us_median']:.2f} us ratio {res['gt_ratio_to_globaltimer']:.3f} "
        f"CV {res['gt_est_cv']:.3f}, windows with samples {res['gt_windows_with_samples']:.2f}\n"
        + (f"  {res['alt_metric']}/elapsed (shifted host windows): {res['alt_est_us_median']:.2f} us "
           f"ratio {res['alt_ratio_to_event']:.3f} CV {res['alt_est_cv']:.3f}\n" if "alt_metric" in res else "")
        + f"  busy total {res['busy_total_us']:.1f} us"
    )


def idle(samples_path, active=None, elapsed=None):
    """Busy time a sampler sees with no kernels of ours: the noise floor."""
    sh, samples = load(samples_path)
    metrics = sh["metrics"]
    ia = metrics.index(active or metrics[0])
    ie = metrics.index(elapsed or metrics[1])
    busy = [r["v"][ia] / r["v"][ie] * (r["e"] - r["s"]) for r in samples if r["v"][ie] > 0]
    span = (samples[-1]["e"] - samples[0]["s"]) if samples else 0
    durs = sorted(r["e"] - r["s"] for r in samples)
    return {"interval_ns": sh["interval_ns"], "samples": len(samples), "overflow": sh["overflow"],
            "span_ms": span / 1e6, "busy_us": sum(busy) / 1e3,
            "busy_us_per_s": (sum(busy) / 1e3) / (span / 1e9) if span else float("nan"),
            "nonzero_samples": sum(1 for b in busy if b > 0),
            "sample_ns_median": durs[len(durs) // 2] if durs else None}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--idle":
        ap = argparse.ArgumentParser()
        ap.add_argument("--idle", dest="samples", required=True)
        ap.add_argument("--json")
        a = ap.parse_args()
        res = idle(a.samples)
        print(f"idle: interval {res['interval_ns']} ns, {res['samples']} samples "
              f"(median {res['sample_ns_median']} ns) over {res['span_ms']:.1f} ms, "
              f"busy {res['busy_us']:.1f} us ({res['busy_us_per_s']:.1f} us/s), "
              f"{res['nonzero_samples']} samples non-zero, overflow={res['overflow']}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(res, f, indent=1)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("samples")
    ap.add_argument("workload")
    ap.add_argument("--json")
    ap.add_argument("--active")
    ap.add_argument("--elapsed")
    a = ap.parse_args()
    res = analyse(a.samples, a.workload, a.active, a.elapsed)
    print(fmt(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
