"""The summaries the GPU probes print: a median, the 10th and 90th percentiles, and the coefficient
of variation of a list of times."""

import statistics


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values, digits=2, cv_digits=3):
    mean = statistics.fmean(values)
    return {"median": round(statistics.median(values), digits), "p10": round(quantile(values, 0.1), digits),
            "p90": round(quantile(values, 0.9), digits),
            "cv": round(statistics.pstdev(values) / mean, cv_digits) if mean else None}
