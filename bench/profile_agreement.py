#!/usr/bin/env python3
"""Agreement of cudaagent-profile with a plain CUDA-event timing (issue 4, benchmark 5).

The 20 KernelBench-style tasks of bench/tasks/agreement/ (convolutions, matrix products,
attention, norms, softmax, reductions, pooling, a scan, elementwise chains; written for this
benchmark) are profiled with the task's own Model as the candidate, and bench/plain_timing.py
times the same model.py files in one plain process (CUDA events, warm-up, many calls, median; cold
L2 as profile). Goal: profile's eager and compile medians within 3% of the plain ones.

torch.compile costs seconds per task in both, so it runs on a subset (--compile-tasks):
  1. profile, --compile-mode none, every task          -> eager medians
  2. plain, eager, every task (each --plain-variants)
  3. profile, --compile-mode MODE, the compile tasks   -> compile medians (and eager again)
  4. plain, compile, the compile tasks
Each step may run until its share of --budget-s (--shares: 50%, 62%, 85%, 100%); what did not fit is
reported as missing. Variants of the plain eager timing (the first is the one the goal uses):
flush (L2 flushed per call, end event after the call), no-flush (warm L2), sync-before-end (a
synchronise before the end event, as profile does). Prints a table, writes OUT/agreement.json.
Usage: bench/profile_agreement.py --bin BIN_DIR --out OUT [--device cpu] [--tasks ...] ...
"""

import argparse
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import profile_bench_lib as lib  # noqa: E402

VARIANTS = {"flush": [], "no-flush": ["--no-flush"], "sync-before-end": ["--sync-before-end"]}
COMPILE_TASKS = "conv2d_relu,attention,layernorm_gelu,softmax,elementwise_chain"
SHARES = "0.5,0.62,0.85,1.0"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    lib.common_arguments(parser, budget_s=160)
    parser.add_argument("--tasks", nargs="*", default=None,
                        help="task files (default: bench/tasks/agreement/*.py)")
    parser.add_argument("--compile-mode", default="default", help="torch.compile mode of step 3 and 4, or none "
                        "(skips them)")
    parser.add_argument("--compile-tasks", default=COMPILE_TASKS, help="tasks of steps 3 and 4 (comma-separated "
                        "names, or 'all')")
    parser.add_argument("--rounds", type=int, default=5, help="profile --rounds")
    parser.add_argument("--round-ms", type=float, default=20, help="profile --round-ms")
    parser.add_argument("--warmup-ms", type=float, default=100, help="profile --warmup-ms")
    parser.add_argument("--plain-reps", type=int, default=100, help="plain timed calls per arm, at most")
    parser.add_argument("--plain-max-arm-ms", type=float, default=600, help="plain: wall time per arm, at most")
    parser.add_argument("--plain-variants", default="flush", help="comma-separated: " + ",".join(VARIANTS))
    parser.add_argument("--tolerance", type=float, default=0.03, help="the agreement goal")
    parser.add_argument("--shares", default=SHARES, help="cumulative fractions of --budget-s at which steps 1-4 "
                        "must end")
    args = parser.parse_args()
    try:
        shares = [float(x) for x in args.shares.split(",")]
    except ValueError:
        shares = []
    if len(shares) != 4 or shares != sorted(shares) or not 0 < shares[0] <= shares[3] <= 1:
        parser.error("--shares takes 4 increasing fractions in (0, 1]")
    variants = [v for v in args.plain_variants.split(",") if v]
    if not variants or any(v not in VARIANTS for v in variants):
        parser.error("bad --plain-variants")
    python, torch_version = lib.find_python(args.python)
    tasks = args.tasks or sorted(glob.glob(os.path.join(lib.TASKS, "agreement", "*.py")))
    if not tasks:
        sys.exit("no task files")
    os.makedirs(args.out, exist_ok=True)
    work = lib.work_dir(args, "agreement")
    names, estimates = [], {}
    for path in tasks:
        name = os.path.splitext(os.path.basename(path))[0]
        source = lib.sized_task(path, args.device)
        lib.self_workspace(os.path.join(work, name), source)
        names.append(name)
        estimates[name] = lib.task_note(source, "estimate")
    wanted = names if args.compile_tasks == "all" else [n for n in args.compile_tasks.split(",") if n]
    compile_names = [] if args.compile_mode == "none" else [n for n in names if n in wanted]
    unknown = [n for n in wanted if n not in names]
    if unknown:
        parser.error("--compile-tasks names no task: " + ",".join(unknown))

    deadline = lib.Deadline(args.budget_s)
    log = os.path.join(args.out, "agreement-log.txt")

    def until(share):
        return deadline.start + args.budget_s * share - time.monotonic()

    def profile(mode, chosen, path, share):
        settings = ["--compile-mode", mode, "--rounds", str(args.rounds), "--round-ms", str(args.round_ms),
                    "--warmup-ms", str(args.warmup_ms)] + lib.SELF_FLAGS
        if not chosen or until(share) < 5:
            return {}, {"tasks": len(chosen), "records": 0, "exit": None, "stopped_by_budget": bool(chosen),
                        "wall_s": 0, "args": settings}
        command = lib.profile_command(args, python, settings) + [os.path.join(work, n) for n in chosen]
        status, wall, records = lib.run_until(command, path, log, until(share))
        return ({r.get("id"): lib.profile_of(r) for r in records},
                {"tasks": len(chosen), "records": len(records), "exit": status,
                 "stopped_by_budget": status is None and len(records) < len(chosen),
                 "wall_s": wall, "args": settings})

    def plain(arm, variant, chosen, share):
        out = os.path.join(args.out, f"agreement-plain-{arm}-{variant}.jsonl")
        if os.path.exists(out):
            os.remove(out)
        if not chosen or until(share) < 5:
            return {}, 0
        command = [python, os.path.join(lib.HERE, "plain_timing.py"), "--device", args.device, "--out", out,
                   "--arms", arm, "--compile-mode", args.compile_mode, "--reps", str(args.plain_reps),
                   "--max-arm-ms", str(args.plain_max_arm_ms), "--warmup-ms", "100"] + VARIANTS[variant] + \
            [os.path.join(work, n, "model.py") for n in chosen]
        _, wall, _ = lib.run_until(command, os.path.join(work, f"plain-{arm}-{variant}.stdout"), log, until(share))
        found = {}
        for row in lib.read_records(out):
            entry = (row.get("arms") or {}).get(arm) or {}
            found[os.path.basename(os.path.dirname(row["task"]))] = entry
        return found, wall

    eager_profile, eager_run = profile("none", names, os.path.join(args.out, "agreement-profile-eager.jsonl"),
                                       shares[0])
    timed_eager = [n for n in names if (eager_profile.get(n) or {}).get("times_ms")]
    plain_eager, plain_walls = {}, {}
    for k, variant in enumerate(variants):
        share = shares[0] + (shares[1] - shares[0]) * (k + 1) / len(variants)
        plain_eager[variant], plain_walls[f"eager-{variant}"] = plain("eager", variant, timed_eager, share)
    compile_profile, compile_run = profile(args.compile_mode, compile_names,
                                           os.path.join(args.out, "agreement-profile-compile.jsonl"), shares[2])
    timed_compile = [n for n in compile_names if ((compile_profile.get(n) or {}).get("times_ms") or {}).get("compile")]
    plain_compile, plain_walls["compile"] = plain("compile", variants[0], timed_compile, shares[3])

    def diff(prof, entry):
        ms = entry.get("median_ms") if entry and entry.get("ok") else None
        return ms, (prof / ms - 1 if prof and ms else None)

    rows = []
    for name in names:
        p, c = eager_profile.get(name) or {}, compile_profile.get(name) or {}
        e_times, c_times = p.get("times_ms") or {}, c.get("times_ms") or {}
        row = {"task": name, "estimate": estimates[name], "eager_verdict": p.get("verdict"), "compile_verdict": c.get("verdict"),
               "profile_eager_ms": (e_times.get("eager") or {}).get("median"),
               "profile_eager_cv": (e_times.get("eager") or {}).get("cv"),
               "profile_eager_ms_compile_run": (c_times.get("eager") or {}).get("median"),
               "profile_compile_ms": (c_times.get("compile") or {}).get("median"),
               "profile_compile_cv": (c_times.get("compile") or {}).get("cv"),
               "compile_status": ((c.get("baselines") or {}).get("compile") or {}).get("status")}
        for variant in variants:
            entry = plain_eager[variant].get(name)
            row[f"plain_eager_{variant}_ms"], row[f"diff_eager_{variant}"] = diff(row["profile_eager_ms"], entry)
            if entry and not entry.get("ok"):
                row[f"plain_eager_{variant}_reason"] = entry.get("reason")
        entry = plain_compile.get(name)
        row["plain_compile_ms"], row["diff_compile"] = diff(row["profile_compile_ms"], entry)
        if entry and not entry.get("ok"):
            row["plain_compile_reason"] = entry.get("reason")
        # The eager median of the compile run against the plain one: a second eager data point.
        _, row["diff_eager_compile_run"] = diff(row["profile_eager_ms_compile_run"], plain_eager[variants[0]].get(name))
        rows.append(row)

    primary = variants[0]
    diffs = [r[f"diff_eager_{primary}"] for r in rows] + [r["diff_compile"] for r in rows]
    diffs = [d for d in diffs if d is not None]
    within = [d for d in diffs if abs(d) <= args.tolerance]
    goals = {"compared": len(diffs), "within": len(within), "tolerance": args.tolerance,
             "goal_met": bool(diffs) and len(within) == len(diffs),
             "eager_compared": sum(r[f"diff_eager_{primary}"] is not None for r in rows),
             "compile_compared": sum(r["diff_compile"] is not None for r in rows),
             "worst": max(diffs, key=abs) if diffs else None}
    summary = {"benchmark": "profile agreement with a plain CUDA-event timing (issue 4, benchmark 5)",
               "environment": lib.environment(python, torch_version, args),
               "settings": {"plain_variants": variants, "plain_reps": args.plain_reps,
                            "plain_max_arm_ms": args.plain_max_arm_ms, "compile_mode": args.compile_mode,
                            "compile_tasks": compile_names, "shares": shares},
               "coverage": {"tasks": len(names), "profile_eager": eager_run, "profile_compile": compile_run,
                            "plain_wall_s": plain_walls,
                            "plain_eager_tasks": {v: len(plain_eager[v]) for v in variants},
                            "plain_compile_tasks": len(plain_compile)},
               "goals": goals, "tasks": rows}
    lib.write_json(os.path.join(args.out, "agreement.json"), summary)

    def said(run):
        return f"{run['records']} of {run['tasks']} tasks in {run['wall_s']:.1f} s" + \
            (" (stopped by budget)" if run["stopped_by_budget"] else "")
    print(f"## Agreement with a plain CUDA-event timing, device {args.device}, torch {torch_version}, "
          f"profile rounds {args.rounds} x {args.round_ms:g} ms")
    print(f"profile eager-only: {said(eager_run)}; profile with compile ({args.compile_mode}): {said(compile_run)}; "
          "plain: " + ", ".join(f"{k} {v:.1f} s" for k, v in plain_walls.items()))
    header = ["task", "verdicts", "eager ms", "plain", "diff", "eager ms (2)", "diff", "compile ms", "plain", "diff"]
    header += [f"diff ({v})" for v in variants[1:]]
    body = []
    for r in rows:
        line = [r["task"], f"{r['eager_verdict'] or '-'}/{r['compile_verdict'] or '-'}",
                lib.fmt(r["profile_eager_ms"]), lib.fmt(r[f"plain_eager_{primary}_ms"]),
                lib.pct(r[f"diff_eager_{primary}"], 1), lib.fmt(r["profile_eager_ms_compile_run"]),
                lib.pct(r["diff_eager_compile_run"], 1), lib.fmt(r["profile_compile_ms"]),
                lib.fmt(r["plain_compile_ms"]), lib.pct(r["diff_compile"], 1)]
        line += [lib.pct(r[f"diff_eager_{v}"], 1) for v in variants[1:]]
        body.append(line)
    print(lib.table(header, body))
    print("(2): eager median of the run with torch.compile, against the same plain median")
    print(f"goal |profile/plain - 1| <= {args.tolerance:.0%}: {len(within)} of {len(diffs)} medians "
          f"({goals['eager_compared']} eager, {goals['compile_compared']} compile; worst {lib.pct(goals['worst'], 1)}) "
          f"-> {'MET' if goals['goal_met'] else 'NOT MET'}")
    return 0 if diffs else 1


if __name__ == "__main__":
    sys.exit(main())
