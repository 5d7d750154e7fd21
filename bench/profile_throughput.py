#!/usr/bin/env python3
"""Throughput of cudaagent-profile with cached baselines (issue 4, benchmark 4): candidate
evaluations per GPU-hour for repeated candidates of one task. Goal: >= 1000 (3.6 s a candidate).

Candidates are copies of the example workspace (share/examples/workspaces/bias-relu-<device>), each
with a different comment in model_new.py (a distinct snapshot; the kernels stay a build-cache hit),
or with --edit-kernels also in every kernel source (a rebuild per candidate, as an agent's edit).
The pristine task is the example's model.py (--task). Phases, all with one --db:
  seed      one profile run that measures the baselines and stores them (not counted)
  per-call  one cudaagent-profile process per candidate, as an agent's tool call would run it
  batch     one cudaagent-profile process for all its candidates (workspace arguments)
  verify    per candidate, cudaagent-verify then cudaagent-profile (two processes), the whole
            evaluation of a candidate
GPU-hour: the machine's wall time, one candidate after another on one GPU. A phase not started by
--budget-s is skipped (said so). Prints a table, writes OUT/throughput.json and the records.
Usage: bench/profile_throughput.py --bin BIN_DIR --out OUT [--device cpu] [--candidates N] ...
"""

import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import profile_bench_lib as lib  # noqa: E402

PHASES = ["per-call", "batch", "verify"]
TIMINGS = ["build", "baseline_load", "candidate_load", "rounds", "total"]


def make_candidates(args, example, work):
    directories = []
    for k in range(args.candidates + 1):
        directory = os.path.join(work, f"c{k:02d}")
        if os.path.exists(directory):
            shutil.rmtree(directory)
        shutil.copytree(example, directory)
        with open(os.path.join(directory, "model_new.py"), "a") as f:
            f.write(f"# candidate {k}\n")
        if args.edit_kernels:
            kernels = os.path.join(directory, "kernels")
            for name in sorted(os.listdir(kernels)):
                if name.endswith((".cu", ".cpp")):
                    with open(os.path.join(kernels, name), "a") as f:
                        f.write(f"// candidate {k}\n")
        directories.append(directory)
    return directories


def summarize(name, walls, records, planned):
    profiles = [p for p in (lib.profile_of(r) for r in records) if p]
    verdicts, sources = {}, {}
    for p in profiles:
        verdicts[p.get("verdict")] = verdicts.get(p.get("verdict"), 0) + 1
        source = p.get("baselines", {}).get("source")
        sources[source] = sources.get(source, 0) + 1
    total = sum(walls)
    done = len(profiles)
    return {"phase": name, "planned": planned, "candidates": done, "wall_s": total,
            "per_candidate_s_mean": total / done if done else None,
            "per_candidate_s_median": lib.median(walls) if len(walls) == done else None,
            "per_gpu_hour": 3600 * done / total if done and total > 0 else None,
            "verdicts": verdicts, "baseline_sources": sources,
            "errors": sum(1 for r in records if "error" in r),
            # A flag raised against stored baselines makes profile measure again beside fresh ones.
            "rechecked": sum(1 for p in profiles if p.get("baselines", {}).get("rechecked_after_stored_flag")),
            "timings_s_median": {k: lib.median([(p.get("timings_s") or {}).get(k) for p in profiles])
                                 for k in TIMINGS},
            "speedup_eager_median": lib.median([(p.get("speedup") or {}).get("eager", {}).get("median")
                                                for p in profiles if p.get("speedup")])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    lib.common_arguments(parser, budget_s=70)
    parser.add_argument("--candidates", type=int, default=12, help="candidates per phase")
    parser.add_argument("--verify-candidates", type=int, default=4, help="candidates of the verify phase")
    parser.add_argument("--phases", default=",".join(PHASES), help="comma-separated: " + ",".join(PHASES))
    parser.add_argument("--edit-kernels", action="store_true",
                        help="change every kernel source per candidate (a rebuild each)")
    args = parser.parse_args()
    phases = [p for p in args.phases.split(",") if p]
    if any(p not in PHASES for p in phases) or args.candidates < 1 or args.verify_candidates < 0:
        parser.error("bad --phases, --candidates or --verify-candidates")
    python, torch_version = lib.find_python(args.python)
    os.makedirs(args.out, exist_ok=True)
    example = os.path.join(lib.EXAMPLES, f"bias-relu-{args.device}")
    task = os.path.join(example, "model.py")
    with open(task) as f:
        model_py = f.read()
    work = lib.work_dir(args, "throughput")
    candidates = make_candidates(args, example, os.path.join(work, "candidates"))
    db = os.path.join(work, "throughput.db")
    if os.path.exists(db):
        os.remove(db)
    log = os.path.join(args.out, "throughput-log.txt")
    profile = lib.profile_command(args, python, ["--quiet", "--db", db, "--task", task])
    profile_jsonl = lib.profile_command(args, python, ["--quiet", "--db", db])  # verify's records
    deadline = lib.Deadline(args.budget_s)
    raw = os.path.join(args.out, "throughput-records")
    os.makedirs(raw, exist_ok=True)

    status, seed_wall, seed_records = lib.run_until(profile + [candidates[0]], os.path.join(raw, "seed.jsonl"),
                                                    log, deadline.left())
    seed = summarize("seed", [seed_wall], seed_records, 1)
    results = []
    # After the seed, each phase may use time up to its share of what is left.
    shares = {"per-call": 0.4, "batch": 0.3, "verify": 0.3}
    left_after_seed = deadline.left()
    share_end = 0.0
    for phase in phases:
        share_end += shares[phase] / sum(shares[p] for p in phases)
        phase_deadline = deadline.end - left_after_seed * (1 - share_end)
        walls, records = [], []
        chosen = candidates[1:1 + (args.verify_candidates if phase == "verify" else args.candidates)]
        if phase == "batch":
            left = phase_deadline - time.monotonic()
            if left > 5:
                _, wall, records = lib.run_until(profile + chosen, os.path.join(raw, "batch.jsonl"), log, left)
                walls = [wall]
        else:
            for k, workspace in enumerate(chosen):
                if phase_deadline - time.monotonic() < 5:
                    break
                out = os.path.join(raw, f"{phase}-{k:02d}.jsonl")
                started = time.monotonic()
                if phase == "per-call":
                    _, _, got = lib.run_until(profile + [workspace], out, log, phase_deadline - time.monotonic())
                else:
                    _, _, verified = lib.run_until(
                        [lib.binary(args.bin, "cudaagent-verify"), "--quiet", "--device", args.device, "--python",
                         python, "--task", task] + (["--no-sandbox", "--allow-unsandboxed"] if args.no_sandbox else [])
                        + [workspace], out + ".verify", log, phase_deadline - time.monotonic())
                    lines = []
                    for record in verified:
                        record.setdefault("task", {})["model_py"] = model_py
                        record.setdefault("candidate", {})["workspace"] = workspace
                        lines.append(json.dumps(record))
                    got = []
                    if lines:
                        _, _, got = lib.run_until(profile_jsonl, out, log, phase_deadline - time.monotonic(),
                                                  stdin_data="\n".join(lines) + "\n")
                walls.append(time.monotonic() - started)
                records += got
        summary = summarize(phase, walls, records, len(chosen))
        if phase == "batch":
            summary["per_candidate_s_median"] = None  # one process: only the mean exists
        results.append(summary)

    overall = [r for r in results if r["per_gpu_hour"] is not None]
    report = {"benchmark": "profile throughput with cached baselines (issue 4, benchmark 4)",
              "environment": lib.environment(python, torch_version, args),
              "settings": {"candidates": args.candidates, "verify_candidates": args.verify_candidates,
                           "edit_kernels": args.edit_kernels, "task": os.path.relpath(task, lib.ROOT),
                           "profile": profile},
              "seed": seed, "phases": results, "goal_per_gpu_hour": 1000,
              "goal_met": {r["phase"]: r["per_gpu_hour"] >= 1000 for r in overall}}
    lib.write_json(os.path.join(args.out, "throughput.json"), report)

    print(f"## Throughput with cached baselines, device {args.device}, torch {torch_version}, "
          f"example bias-relu-{args.device}, edit kernels: {'yes' if args.edit_kernels else 'no'}")
    print(f"seed (measures and stores the baselines): {seed_wall:.1f} s, verdict "
          f"{','.join(seed['verdicts']) or '-'}, exit {status}")
    print(lib.table(["phase", "done/planned", "wall s", "s/cand mean", "s/cand med", "per GPU-hour", "verdicts",
                     "baselines (rechecked)", "median s: build/base load/cand load/rounds/total"],
                    [[r["phase"], f"{r['candidates']}/{r['planned']}", lib.fmt(r["wall_s"], ".1f"),
                      lib.fmt(r["per_candidate_s_mean"], ".2f"), lib.fmt(r["per_candidate_s_median"], ".2f"),
                      lib.fmt(r["per_gpu_hour"], ".0f"),
                      " ".join(f"{k}:{v}" for k, v in r["verdicts"].items()) or "-",
                      (" ".join(f"{k}:{v}" for k, v in r["baseline_sources"].items()) or "-") + f" ({r['rechecked']})",
                      "/".join(lib.fmt(r["timings_s_median"][k], ".2f") for k in TIMINGS)] for r in results]))
    print("goal >= 1000 candidates per GPU-hour: " + (", ".join(
        f"{r['phase']} {'MET' if r['per_gpu_hour'] >= 1000 else 'NOT MET'}" for r in overall) or "nothing measured"))
    return 0 if overall else 1


if __name__ == "__main__":
    sys.exit(main())
