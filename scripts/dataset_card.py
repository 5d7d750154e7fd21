#!/usr/bin/env python3
"""The dataset card of scripts/build_dataset.sh: card.json (every number) and CARD.md (the same,
for people), made only from the state folder and the shipped records, so the card cannot say
anything the records do not.

Usage: dataset_card.py --state DIR --tasks FILE --catalog FILE --depths FILE --shipped FILE --rebuild CMD
                       --json FILE --markdown FILE
Standard library only (it runs wherever the finish phase runs).
"""
import argparse
import collections
import hashlib
import json
import math
import os


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def quantiles(values):
    """p5 ... max by the nearest-rank rule (the bench scripts' rule), None when empty."""
    if not values:
        return {"n": 0}
    v = sorted(values)
    pick = lambda p: v[int((len(v) - 1) * p)]
    out = {"n": len(v), "min": v[0]}
    for p in (0.05, 0.25, 0.5, 0.75, 0.95):
        out["p%d" % round(p * 100)] = pick(p)
    out["max"] = v[-1]
    return {k: (round(x, 4) if isinstance(x, float) else x) for k, x in out.items()}


def counts(values):
    return dict(sorted(collections.Counter(values).items(), key=lambda kv: (-kv[1], str(kv[0]))))


def log_buckets(lo, hi, n):
    """n edges-spaced buckets from lo to hi (log scale), as (low, high) pairs."""
    step = (math.log10(hi) - math.log10(lo)) / n
    edges = [10 ** (math.log10(lo) + i * step) for i in range(n + 1)]
    return list(zip(edges[:-1], edges[1:]))


def phase_means(filters):
    """Mean seconds of each phase of the task's job, over the tasks whose records carry them
    (filter records from before the phases were recorded have none); in the job's order."""
    order = ["start", "torch", "load", "interface", "init", "inputs", "forward", "judge", "compile",
             "checked", "warmup", "timing", "compile_warmup", "compile_timing"]
    timed = [f["seconds"]["phases"] for f in filters if f.get("seconds", {}).get("phases")]
    if not timed:
        return {}
    return {"tasks": len(timed),
            "mean_s": {p: round(sum(t.get(p, 0) for t in timed) / len(timed), 3)
                       for p in order if any(p in t for t in timed)}}


def fmt(x):
    if x is None:
        return "-"
    return ("%.3g" % x) if isinstance(x, float) else str(x)


def bar(n, most, width=40):
    return "#" * (0 if most == 0 else max(1 if n else 0, round(width * n / most)))


def repository_relative(path):
    """A reference set's path as the rebuild command gives it: relative to the repository when it
    lies inside it, so the card names no build machine's folders."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isabs(path) and os.path.commonpath([root, path]) == root:
        return os.path.relpath(path, root)
    return path


def main():
    ap = argparse.ArgumentParser()
    for name in ("state", "tasks", "catalog", "depths", "shipped", "rebuild", "json", "markdown"):
        ap.add_argument("--" + name, required=True)
    ap.add_argument("--budget-gpu-hours", type=float, default=None,
                    help="the filter's budget for the target: the card says whether the build kept to it")
    a = ap.parse_args()

    state = json.load(open(os.path.join(a.state, "state.json"), encoding="utf-8"))
    parts = read_jsonl(os.path.join(a.state, "parts.jsonl"))
    results = read_jsonl(os.path.join(a.state, "results.jsonl"))
    tasks = read_jsonl(a.tasks)
    catalog = json.load(open(a.catalog, encoding="utf-8"))
    family = {op["name"]: op["family"] for op in catalog["operators"]}
    with open(a.shipped, "rb") as f:
        shipped_bytes = f.read()

    lo, hi = state["window_ms"]
    filters = [r["filter"] for r in results]
    rejected = [f for f in filters if not f["kept"]]
    kept_results = [f for f in filters if f["kept"]]
    shipped_filters = [t["filter"] for t in tasks]

    # The machine the filter ran on, as the records say (every distinct value, with its count).
    env = {key: counts(str(f.get(key)) for f in filters if f.get(key) is not None)
           for key in ("device", "gpu", "torch", "python", "seed", "rules", "sandbox")}

    # Eager time of the shipped tasks against the window: 10 log-spaced buckets over it.
    eager = [f["eager_ms"]["median"] for f in shipped_filters if f.get("eager_ms")]
    # torch.compile's time (timed after eager, same process and inputs) and eager over it.
    compiled = [f["compile_ms"]["median"] for f in shipped_filters if f.get("compile_ms")]
    compile_speedup = [f["eager_ms"]["median"] / f["compile_ms"]["median"] for f in shipped_filters
                       if f.get("eager_ms") and f.get("compile_ms") and f["compile_ms"]["median"] > 0]
    buckets = []
    for b_lo, b_hi in log_buckets(lo, hi, 10):
        n = sum(1 for x in eager if b_lo <= x < b_hi or (b_hi == hi and x == hi))
        buckets.append({"from_ms": round(b_lo, 4), "to_ms": round(b_hi, 4), "tasks": n})
    eager_reasons = [r["detail"] for f in rejected for r in f["reasons"] if r["check"] == "eager_time"]

    depth = counts(t["task"]["meta"]["depth"] for t in tasks)
    families_per_task = counts(fam for t in tasks for fam in sorted({family.get(op, "unknown") for op in t["task"]["ops"]}))
    op_uses = counts(op for t in tasks for op in t["task"]["ops"])
    family_uses = counts(family.get(op, "unknown") for t in tasks for op in t["task"]["ops"])

    kb = [t.get("nearest_kernelbench") or {} for t in tasks]
    kb_scores = [k.get("score", 0) for k in kb]
    kb_hist = collections.OrderedDict()
    for i in range(10):
        b_lo, b_hi = i / 10, (i + 1) / 10
        kb_hist["%.1f-%.1f" % (b_lo, b_hi)] = sum(
            1 for s in kb_scores if (b_lo < s <= b_hi) or (i == 0 and s == 0))
    nearest_kb = sorted(
        ({"id": t["id"], "ops": t["task"]["ops"], "score": round(k.get("score", 0), 4),
          "reference": (k.get("nearest") or {}).get("set", "") + "/" + (k.get("nearest") or {}).get("name", "")}
         for t, k in zip(tasks, kb)), key=lambda x: -x["score"])[:10]
    stream_scores = [(t.get("dedup") or {}).get("score", 0) for t in tasks]

    seconds = lambda key, fs: [f["seconds"][key] for f in fs if f.get("seconds", {}).get(key, 0) > 0]
    device_seconds = sum((p["seconds"] or 0) * max(p.get("gpus") or 0, 1) for p in parts)
    wall = sum(p["seconds"] or 0 for p in parts)
    fresh = sum(p["fresh"] or 0 for p in parts)
    card = {
        "name": state["name"],
        "shipped": len(tasks),
        "target": state["target"],
        "file": {"name": os.path.basename(a.shipped), "bytes": len(shipped_bytes),
                 "sha256": hashlib.sha256(shipped_bytes).hexdigest()},
        "made": {"commit": state["commit"], "commit_dirty": state["commit_dirty"],
                 "prepared": state["created"], "versions": state["versions"],
                 "filter_versions": counts(p["filter_version"] for p in parts if p.get("filter_version")),
                 "seed": state["seed"], "count": state["count"], "synth_args": state["synth_args"],
                 "window_ms": state["window_ms"], "timeout_s": state["timeout_s"],
                 "filter_device": state["device"], "dedup_threshold": state["threshold"],
                 "references": [dict(r, path=repository_relative(r["path"])) for r in state["references"]],
                 "rebuild": a.rebuild},
        "environment": env,
        "pipeline": {"synthesised": state["synth"]["records"], "synth_errors": state["synth"]["errors"],
                     "near_reference": state["dedup"]["near_reference"],
                     "near_earlier_task": state["dedup"]["near_stream"],
                     "dedup_errors": state["dedup"]["errors"],
                     "candidates": state["dedup"]["candidates"], "filtered": len(filters),
                     "kept": len(kept_results), "rejected": len(rejected),
                     "not_filtered": state["dedup"]["candidates"] - len(filters),
                     "keep_rate": round(len(kept_results) / len(filters), 4) if filters else None,
                     "shipped": len(tasks)},
        "parts": parts,
        "filter_time": {"parts": len(parts), "wall_s": wall,
                        "gpu_hours": round(device_seconds / 3600, 4),
                        "budget_gpu_hours": a.budget_gpu_hours,
                        "within_budget": (None if a.budget_gpu_hours is None
                                          else device_seconds / 3600 <= a.budget_gpu_hours),
                        "fresh": fresh, "s_per_task": round(wall / fresh, 4) if fresh else None,
                        "check_job_s": quantiles(seconds("check", filters)),
                        "timing_job_s": quantiles(seconds("time", filters)),
                        "task_total_s": quantiles(seconds("total", filters)),
                        "seat_wait_s": quantiles(seconds("seat_wait", filters)),
                        "phases_mean_s": phase_means(filters)},
        "depth": depth,
        "families": {"tasks_using": families_per_task, "operator_uses": family_uses},
        "operators": {"distinct": len(op_uses), "top": dict(list(op_uses.items())[:20])},
        "eager_ms": {"window": [lo, hi], "quantiles": quantiles(eager), "buckets": buckets,
                     "rejected_below": sum(1 for d in eager_reasons if "below" in d),
                     "rejected_above": sum(1 for d in eager_reasons if "below" not in d)},
        "compile": {"shipped": counts(f["compile"].split(":")[0] for f in shipped_filters),
                    "filtered": counts(f["compile"].split(":")[0] for f in filters),
                    "check_job_s_shipped": quantiles(seconds("check", shipped_filters)),
                    "timed": len(compiled), "compile_ms": quantiles(compiled),
                    "eager_over_compile": quantiles(compile_speedup),
                    "compile_faster": sum(1 for x in compile_speedup if x > 1)},
        "rejections": {"first_reason": counts(f["reasons"][0]["check"] for f in rejected if f["reasons"]),
                       "every_reason": counts(r["check"] for f in rejected for r in f["reasons"]),
                       # Tasks whose first run failed for memory or disk beside other tasks and
                       # ran again with the GPU to themselves (filter-6 on).
                       "retried_alone": sum(1 for f in filters if f.get("first_run_shared")),
                       "retried_alone_kept": sum(1 for f in filters
                                                 if f.get("first_run_shared") and f.get("kept")),
                       "keep_rate_by_depth": {}},
        "kernelbench": {"measure": next((k.get("measure") for k in kb if k.get("measure")), None),
                        "dropped_near": state["dedup"]["near_reference"],
                        "dropped_near_tasks": state["dedup"].get("near_reference_tasks", [])[:10],
                        "score_quantiles": quantiles(kb_scores), "score_buckets": kb_hist,
                        "nearest": nearest_kb},
        "within_dataset": {"nearest_earlier_score": quantiles(stream_scores)},
    }
    # Keep rate by depth, over every filtered candidate (the depths come from the candidates).
    depth_of = {d["id"]: d["depth"] for d in read_jsonl(a.depths)}
    by_depth = collections.defaultdict(lambda: [0, 0])
    for r in results:
        d = by_depth[depth_of.get(r["id"], "unknown")]
        d[0] += r["filter"]["kept"]
        d[1] += 1
    card["rejections"]["keep_rate_by_depth"] = {
        str(d): {"kept": kn[0], "filtered": kn[1], "rate": round(kn[0] / kn[1], 4)}
        for d, kn in sorted(by_depth.items(), key=lambda kv: str(kv[0]))}

    with open(a.json, "w", encoding="utf-8") as f:
        json.dump(card, f, indent=1)
        f.write("\n")
    with open(a.markdown, "w", encoding="utf-8") as f:
        f.write(markdown(card))


def table(rows, head):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def quant_line(q):
    if q.get("n", 0) == 0:
        return "none"
    return ", ".join("%s %s" % (k, fmt(v)) for k, v in q.items())


def markdown(c):
    m, p, e, k = c["made"], c["pipeline"], c["eager_ms"], c["kernelbench"]
    s = []
    s.append("# %s: %d PyTorch tasks for CUDA kernel training\n\n" % (c["name"], c["shipped"]))
    s.append("Generated by `scripts/dataset_card.py` from the build's state; do not edit by hand.\n\n")
    if c["shipped"] < c["target"]:
        s.append("**A partial build: %d of the %d tasks wanted.**\n" % (c["shipped"], c["target"]))
        s.append("\n")
    s.append("`%s`: %d bytes, sha256 `%s`. One JSON record a line (`zstd -dc %s | jq ...`): "
             "`id`, `task` (cudaagent-synth's: `model_py`, `ops`, `meta`), `filter` "
             "(cudaagent-filter's verdict and eager time), `dedup` (the nearest earlier task of "
             "the stream) and `nearest_kernelbench` (the nearest KernelBench task).\n"
             % (c["file"]["name"], c["file"]["bytes"], c["file"]["sha256"], c["file"]["name"]))
    s.append("\n")
    s.append("## How it was made\n\n")
    s.append("Rebuild (on a machine with the filter's device; the state folder makes it resumable):\n\n"
             "```sh\n%s\n```\n\n" % m["rebuild"])
    refs = ", ".join("%s (%d files, sha256 %s…)" % (r["name"], r["files"], r["sha256_16"]) for r in m["references"])
    s.append(table([
        ["commit", m["commit"] + (" (with uncommitted changes)" if m["commit_dirty"] else "")],
        ["prepared", m["prepared"]],
        ["programs", "; ".join([m["versions"]["synth"], m["versions"]["dedup"]] + list(m["filter_versions"]))],
        ["synth", "seed %d, %d tasks: `%s`" % (m["seed"], m["count"], " ".join(m["synth_args"]))],
        ["dedup", "threshold %s against %s, then the stream against itself, before filtering" % (m["dedup_threshold"], refs)],
        ["filter", "device %s, eager window %s-%s ms, %d s per job" % (m["filter_device"], m["window_ms"][0], m["window_ms"][1], m["timeout_s"])],
    ] + [[key, "; ".join("%s (%d)" % kv for kv in vals.items()) or "-"] for key, vals in c["environment"].items()],
        ["what", "value"]))
    s.append("\n## Counts through the pipeline\n\n")
    s.append(table([[key.replace("_", " "), val] for key, val in p.items()], ["stage", "tasks"]))
    s.append("\nTasks are deduplicated before filtering, so the GPU filters only distinct tasks; a "
             "task dropped as a look-alike of an earlier one stays dropped even when that earlier "
             "one is then rejected by the filter. The shipped tasks are the first %d kept, in stream "
             "order.\n" % c["shipped"])
    ft = c["filter_time"]
    s.append("\n## Filter time\n\n")
    s.append("%d parts, %s s of wall clock (%s GPU-hours), %d tasks filtered afresh: %s s per task.\n\n"
             % (ft["parts"], ft["wall_s"], ft["gpu_hours"], ft["fresh"], fmt(ft["s_per_task"]) if ft["s_per_task"] else "-"))
    if ft.get("budget_gpu_hours") is not None:
        budget = "%s GPU-hour%s" % (fmt(ft["budget_gpu_hours"]), "" if ft["budget_gpu_hours"] == 1 else "s")
        if ft["within_budget"]:
            s.append("Within the budget of %s for %d tasks.\n\n" % (budget, c["target"]))
        else:
            s.append("**Over the budget of %s for %d tasks**: %s GPU-hours%s, %.0f%% more.\n\n"
                     % (budget, c["target"], ft["gpu_hours"], " so far" if c["shipped"] < c["target"] else "",
                        100 * (ft["gpu_hours"] / ft["budget_gpu_hours"] - 1)))
    s.append(table([[q["part"], q["started"], q["seconds"], q["fresh"], q["from_store"], q["errors"],
                     q["jobs"], q.get("gpu") or q["device"], q["stop"]] for q in c["parts"]],
                   ["part", "started", "s", "filtered", "from store", "errors", "jobs", "device", "stopped"]))
    s.append("\nPer task (seconds): checks (build, eager, torch.compile) %s; after them (timing, the slot's wait left out) %s; whole task %s.\n"
             % (quant_line(ft["check_job_s"]), quant_line(ft["timing_job_s"]), quant_line(ft["task_total_s"])))
    if ft.get("seat_wait_s", {}).get("n"):
        s.append("Waiting for a place on the device (its memory, or --jobs) before the checks %s.\n"
                 % quant_line(ft["seat_wait_s"]))
    if ft.get("phases_mean_s"):
        pm = ft["phases_mean_s"]
        s.append("Mean seconds by phase of the task's job (%d tasks; judge = checking the outputs on their device, checked = waiting for the slot): %s.\n"
                 % (pm["tasks"], ", ".join("%s %s" % (p, fmt(v)) for p, v in pm["mean_s"].items())))
    s.append("\n## Depth and operators\n\n")
    s.append(table([[d, n] for d, n in sorted(c["depth"].items(), key=lambda kv: int(kv[0]))], ["operators in the chain", "tasks"]))
    s.append("\n")
    fam = c["families"]
    s.append(table([[f, n, fam["operator_uses"].get(f, 0)] for f, n in fam["tasks_using"].items()],
                   ["operator family", "tasks using it", "operator uses"]))
    s.append("\n%d distinct operators; the most used: %s.\n" % (
        c["operators"]["distinct"], ", ".join("%s %d" % kv for kv in c["operators"]["top"].items())))
    s.append("\n## Eager time against the window (%s-%s ms)\n\n" % tuple(e["window"]))
    s.append("Median eager time of each shipped task (%s):\n\n```\n" % quant_line(e["quantiles"]))
    most = max([b["tasks"] for b in e["buckets"]] + [0])
    for b in e["buckets"]:
        s.append("%9s-%-9s ms %6d %s\n" % (fmt(b["from_ms"]), fmt(b["to_ms"]), b["tasks"], bar(b["tasks"], most)))
    s.append("```\n\nRejected for eager time: %d below the window, %d above.\n" % (e["rejected_below"], e["rejected_above"]))
    cc = c["compile"]
    s.append("\ntorch.compile: shipped %s; all filtered %s. Check seconds of the shipped tasks "
             "(torch.compile's work included where it ran): %s.\n" % (
                 ", ".join("%s %d" % kv for kv in cc["shipped"].items()) or "-",
                 ", ".join("%s %d" % kv for kv in cc["filtered"].items()) or "-",
                 quant_line(cc["check_job_s_shipped"])))
    if cc.get("timed"):
        s.append("The compiled model, timed after eager in the same process on the same inputs, for "
                 "%d shipped tasks: %s ms; eager over compiled %s (compiled faster in %d).\n" % (
                     cc["timed"], quant_line(cc["compile_ms"]), quant_line(cc["eager_over_compile"]),
                     cc["compile_faster"]))
    r = c["rejections"]
    s.append("\n## Rejections\n\n")
    s.append(table([[reason, n, r["every_reason"].get(reason, 0)] for reason, n in r["first_reason"].items()]
                   + [[reason, 0, n] for reason, n in r["every_reason"].items() if reason not in r["first_reason"]],
                   ["check", "first reason", "any reason"]))
    s.append("\nRun again with the GPU to themselves after running out of memory or disk beside "
             "other tasks: %d (%d of them kept).\n" % (r["retried_alone"], r["retried_alone_kept"]))
    s.append("\nKeep rate by depth: %s.\n" % ", ".join(
        "%s: %d of %d" % (d, v["kept"], v["filtered"]) for d, v in r["keep_rate_by_depth"].items()))
    s.append("\n## Nearest KernelBench task\n\n")
    s.append("Measure `%s`; tasks scoring above %s were dropped before filtering (%d). Scores of the "
             "shipped tasks (%s):\n\n```\n" % (k["measure"], m["dedup_threshold"], k["dropped_near"], quant_line(k["score_quantiles"])))
    most = max(list(k["score_buckets"].values()) + [0])
    for bucket, n in k["score_buckets"].items():
        s.append("%s %6d %s\n" % (bucket, n, bar(n, most)))
    s.append("```\n\n")
    s.append(table([[x["score"], ",".join(x["ops"]), x["reference"], x["id"][:12]] for x in k["nearest"]],
                   ["score", "operators", "nearest KernelBench task", "id"]))
    s.append("\nNearest earlier task of the dataset: %s.\n" % quant_line(c["within_dataset"]["nearest_earlier_score"]))
    return "".join(s)


if __name__ == "__main__":
    main()
