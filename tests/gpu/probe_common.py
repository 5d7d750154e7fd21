"""What the GPU probes share: the summary they print of a list of times (median, 10th and 90th
percentiles, coefficient of variation), and a receive that spins as the session's calls do."""

import os
import statistics


def spin_recv(conn):
    """A message from a multiprocessing connection, polled without blocking (yielding the core
    at every turn), so that a wake-up's latency is not part of what a probe times."""
    while not conn.poll(0):
        os.sched_yield()
    return conn.recv()


def fresh_inputs(torch, staging):
    """New values in the owner's private input tensors, drawn before a call, and the device idle."""
    for tensor in staging:
        tensor.normal_()
    torch.cuda.synchronize()


def copy_in(torch, shared, staging):
    """The private inputs copied into the shared slots, finished before the host goes on (the host
    timer's way: the runner is told only afterwards)."""
    for target, source in zip(shared, staging):
        target.copy_(source)
    torch.cuda.synchronize()


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values, digits=2, cv_digits=3):
    mean = statistics.fmean(values)
    return {"median": round(statistics.median(values), digits), "p10": round(quantile(values, 0.1), digits),
            "p90": round(quantile(values, 0.9), digits),
            "cv": round(statistics.pstdev(values) / mean, cv_digits) if mean else None}
