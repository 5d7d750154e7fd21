#!/usr/bin/env python3
"""A-A benchmark of cudaagent-profile (issue 4, benchmark 2): the eager model against itself.

Each task of bench/tasks/aa/ (one per time class: <10us, 10-100us, 0.1-1ms, >=1ms on an H200) gets
--repeats workspaces whose candidate is the task's Model itself (model_new.py: class
ModelNew(Model)). cudaagent-profile times them as it times any candidate: the pristine task in the
clean baseline process, the "candidate" in its sandboxed process, alternating rounds. Nothing in
profile is special-cased, so this tests the whole path a real candidate takes (the two processes,
the sandbox, fresh inputs, the statistics).

Goals: profile.comparison.eager is "no_significant_difference" in >= 95% of repeats; the CV of the
eager per-call times (profile.times_ms.eager.cv) <= 1% for tasks of >= 100 us. Also reported: the
CV within rounds, the CV of the eager median across repeats, the speedup's spread and interval.

All workspaces go to one cudaagent-profile run, interleaved (repeat 1 of every task, then repeat
2, ...), so a run stopped by --budget-s still covers every class. Prints tables to stdout, writes
OUT/aa.json (summary) and OUT/aa.jsonl (the records).
Usage: bench/profile_aa.py --bin BIN_DIR --out OUT [--device cpu] [--repeats N] ...
"""

import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import profile_bench_lib as lib  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    lib.common_arguments(parser, budget_s=130)
    parser.add_argument("--repeats", type=int, default=20, help="A-A repeats per task")
    parser.add_argument("--tasks", nargs="*", default=None,
                        help="task files (default: bench/tasks/aa/*.py)")
    parser.add_argument("--rounds", type=int, default=10, help="profile --rounds")
    parser.add_argument("--round-ms", type=float, default=10, help="profile --round-ms")
    parser.add_argument("--max-calls", type=int, default=50, help="profile --max-calls (the tiny tasks' "
                        "calls per round: each costs an L2 flush and synchronisations outside the timed region)")
    parser.add_argument("--warmup-ms", type=float, default=100, help="profile --warmup-ms")
    parser.add_argument("--goal-same", type=float, default=0.95,
                        help="fraction of repeats that must say no_significant_difference")
    parser.add_argument("--goal-cv", type=float, default=0.01, help="CV goal for tasks of >= 100 us")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    python, torch_version = lib.find_python(args.python)
    tasks = args.tasks or sorted(glob.glob(os.path.join(lib.TASKS, "aa", "*.py")))
    if not tasks:
        sys.exit("no task files")
    order = [name for name, _, _ in lib.CLASSES]
    tasks.sort(key=lambda path: order.index(lib.task_note(open(path).read(), "class"))
               if lib.task_note(open(path).read(), "class") in order else len(order))
    os.makedirs(args.out, exist_ok=True)
    work = lib.work_dir(args, "aa")

    # Workspaces, interleaved by repeat.
    names, notes, workspaces = [], {}, []
    for path in tasks:
        name = os.path.splitext(os.path.basename(path))[0]
        source = lib.sized_task(path, args.device)
        names.append(name)
        notes[name] = {"file": os.path.relpath(path, lib.ROOT), "intended": lib.task_note(source, "class"),
                       "estimate": lib.task_note(source, "estimate")}
        for r in range(1, args.repeats + 1):
            lib.self_workspace(os.path.join(work, f"{name}-r{r:02d}"), source)
    for r in range(1, args.repeats + 1):
        workspaces += [os.path.join(work, f"{name}-r{r:02d}") for name in names]

    settings = ["--compile-mode", "none", "--rounds", str(args.rounds), "--round-ms", str(args.round_ms),
                "--max-calls", str(args.max_calls),
                "--warmup-ms", str(args.warmup_ms)] + lib.SELF_FLAGS
    command = lib.profile_command(args, python, settings) + workspaces
    deadline = lib.Deadline(args.budget_s)
    status, wall, records = lib.run_until(command, os.path.join(args.out, "aa.jsonl"),
                                          os.path.join(args.out, "aa-log.txt"), deadline.left())

    rows = []
    for record in records:
        p = lib.profile_of(record)
        name = record.get("id", "?").rsplit("-r", 1)[0]
        row = {"id": record.get("id"), "task": name, "verdict": p and p.get("verdict"),
               "error": record.get("error")}
        if p and p.get("times_ms"):
            eager, cand = p["times_ms"]["eager"], p["times_ms"]["candidate"]
            speed = p["speedup"]["eager"]
            row.update({"eager_ms": eager["median"], "candidate_ms": cand["median"],
                        "eager_cv": eager["cv"], "eager_cv_within_round": eager["cv_within_round"],
                        "candidate_cv": cand["cv"], "candidate_cv_within_round": cand["cv_within_round"],
                        "calls_per_round": p["baselines"]["calls_per_round"],
                        "speedup": speed["median"], "speedup_ci95": speed["ci95"],
                        "comparison": p["comparison"]["eager"],
                        "raised_flags": [f["name"] for f in p.get("flags", []) if f.get("raised")],
                        "timings_s": p.get("timings_s"), "sm_mhz": [c.get("sm_mhz") for c in
                                                                     p.get("gpu", {}).get("clocks", [])]})
        rows.append(row)

    per_task = []
    for name in names:
        mine = [r for r in rows if r["task"] == name]
        timed = [r for r in mine if "eager_ms" in r]
        same = sum(r["comparison"] == "no_significant_difference" for r in timed)
        eager_ms = lib.median([r["eager_ms"] for r in timed])
        widths = [r["speedup_ci95"][1] / r["speedup_ci95"][0] - 1 for r in timed
                  if r["speedup_ci95"][0] and r["speedup_ci95"][1]]
        per_task.append({
            "task": name, **notes[name], "planned": args.repeats, "records": len(mine), "timed": len(timed),
            "not_pass": sorted({r["verdict"] or "error" for r in mine if r["verdict"] != "PASS"}),
            "same": same, "same_fraction": same / len(timed) if timed else None,
            "faster": sum(r["comparison"] == "faster" for r in timed),
            "slower": sum(r["comparison"] == "slower" for r in timed),
            "eager_ms": eager_ms, "measured_class": lib.time_class(eager_ms) if eager_ms else None,
            "speedup_median": lib.median([r["speedup"] for r in timed]),
            "speedup_min": min((r["speedup"] for r in timed), default=None),
            "speedup_max": max((r["speedup"] for r in timed), default=None),
            "ci_width_median": lib.median(widths),
            "eager_cv_median": lib.median([r["eager_cv"] for r in timed]),
            "eager_cv_max": max((r["eager_cv"] for r in timed), default=None),
            "eager_cv_within_round_median": lib.median([r["eager_cv_within_round"] for r in timed]),
            "candidate_cv_median": lib.median([r["candidate_cv"] for r in timed]),
            "eager_median_cv_across_repeats": lib.cv([r["eager_ms"] for r in timed]),
            "candidate_over_eager_median": lib.median([r["candidate_ms"] / r["eager_ms"] for r in timed]),
        })

    per_class = []
    for cls, _, _ in lib.CLASSES:
        mine = [t for t in per_task if t["measured_class"] == cls]
        timed = [r for r in rows if "eager_ms" in r and any(t["task"] == r["task"] for t in mine)]
        same = sum(r["comparison"] == "no_significant_difference" for r in timed)
        per_class.append({"class": cls, "tasks": [t["task"] for t in mine], "repeats": len(timed),
                          "same_fraction": same / len(timed) if timed else None,
                          "eager_cv_median": lib.median([r["eager_cv"] for r in timed]),
                          "eager_cv_max": max((r["eager_cv"] for r in timed), default=None),
                          "eager_cv_within_round_median": lib.median([r["eager_cv_within_round"] for r in timed]),
                          "eager_median_cv_across_repeats": lib.median(
                              [t["eager_median_cv_across_repeats"] for t in mine])})

    all_timed = [r for r in rows if "eager_ms" in r]
    same_all = sum(r["comparison"] == "no_significant_difference" for r in all_timed)
    long_tasks = [t for t in per_task if t["eager_ms"] is not None and t["eager_ms"] >= 0.1]
    goals = {
        "same_fraction": same_all / len(all_timed) if all_timed else None,
        "same_goal_met": bool(all_timed) and same_all >= args.goal_same * len(all_timed),
        "same_goal_met_every_task": bool(all_timed) and all(
            t["timed"] and t["same"] >= args.goal_same * t["timed"] for t in per_task),
        "cv_goal_tasks": [t["task"] for t in long_tasks],
        "cv_goal_met": bool(long_tasks) and all(t["eager_cv_median"] is not None and
                                                t["eager_cv_median"] <= args.goal_cv for t in long_tasks),
    }
    coverage = {"planned": len(workspaces), "records": len(records), "exit_status": status,
                "stopped_by_budget": status is None and len(records) < len(workspaces), "wall_s": wall}
    summary = {"benchmark": "profile A-A (issue 4, benchmark 2)",
               "environment": lib.environment(python, torch_version, args),
               "settings": {"repeats": args.repeats, "profile_args": settings, "goal_same": args.goal_same,
                            "goal_cv": args.goal_cv},
               "coverage": coverage, "goals": goals, "per_class": per_class, "per_task": per_task, "repeats": rows}
    lib.write_json(os.path.join(args.out, "aa.json"), summary)

    print(f"## A-A: eager against itself (ModelNew = Model), device {args.device}, torch {torch_version}, "
          f"{args.repeats} repeats x {len(names)} tasks, rounds {args.rounds} x {args.round_ms:g} ms "
          f"(at most {args.max_calls} calls), sandbox {'off' if args.no_sandbox else 'on'}")
    print(f"{len(records)} of {len(workspaces)} records in {wall:.1f} s"
          + (" (stopped by --budget-s)" if coverage["stopped_by_budget"] else f", profile exit {status}"))
    print(lib.table(
        ["task", "intended", "eager ms", "class", "same", "faster/slower", "speedup med [min,max]",
         "CI width", "cv call", "cv in round", "cv of medians", "cand/eager", "not PASS"],
        [[t["task"], t["intended"], lib.fmt(t["eager_ms"]), t["measured_class"] or "-",
          f"{t['same']}/{t['timed']}", f"{t['faster']}/{t['slower']}",
          f"{lib.fmt(t['speedup_median'], '.3f')} "
          f"[{lib.fmt(t['speedup_min'], '.3f')},{lib.fmt(t['speedup_max'], '.3f')}]",
          lib.pct(t["ci_width_median"], 1), lib.pct(t["eager_cv_median"]), lib.pct(t["eager_cv_within_round_median"]),
          lib.pct(t["eager_median_cv_across_repeats"]), lib.fmt(t["candidate_over_eager_median"], ".4f"),
          ",".join(t["not_pass"]) or "-"] for t in per_task]))
    print(lib.table(["class (measured)", "tasks", "repeats", "same", "cv call med/max", "cv in round",
                     "cv of medians"],
                    [[c["class"], ",".join(c["tasks"]) or "-", c["repeats"], lib.pct(c["same_fraction"], 0),
                      f"{lib.pct(c['eager_cv_median'])}/{lib.pct(c['eager_cv_max'])}",
                      lib.pct(c["eager_cv_within_round_median"]), lib.pct(c["eager_median_cv_across_repeats"])]
                     for c in per_class]))
    print(f"goal A-A same >= {args.goal_same:.0%}: {lib.pct(goals['same_fraction'], 1)} overall -> "
          f"{'MET' if goals['same_goal_met'] else 'NOT MET'} (every task: "
          f"{'yes' if goals['same_goal_met_every_task'] else 'no'}); goal cv call <= {args.goal_cv:.0%} for "
          f">= 100 us ({','.join(goals['cv_goal_tasks']) or 'none'}): {'MET' if goals['cv_goal_met'] else 'NOT MET'}")
    return 0 if records else 1


if __name__ == "__main__":
    sys.exit(main())
