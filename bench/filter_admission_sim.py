#!/usr/bin/env python3
"""Replays one part of the training set's filter through DeviceShare's admission rules.

Each task of the part, in stream order, gets the phases its record measured: the checks before
torch.compile (its whole estimate held), the compile (only its resident bytes held, the rest lent),
the growth back (waiting until it fits), then the one timing slot per GPU, and its end. JOBS tasks
are in flight at once, as `--jobs`. Two admission rules are compared:

  reserve  a task is let in only with room left for the largest growth a seated task may still
           ask back (cudaagent-filter before e109366)
  none     a task is let in when its estimate fits beside what the others hold now

Both keep tasks in turn (no overtaking), let no task in while one waits to grow, and let a task
whose estimate exceeds the budget in alone. What the replay leaves out, so its seconds are a lower
bound: the workers' start (each part's first 15-20 s), the job's own overhead outside its phases,
and CPU contention changing with the number of jobs at work.

Usage: bench/filter_admission_sim.py RESULTS_JSONL_GZ PART [--jobs 15] [--budget-gb 114]
RESULTS_JSONL_GZ: a state's results (.data/ops6k/results.jsonl.gz, or a saved part's file).
"""
import argparse
import gzip
import heapq
import json


def load_tasks(path, part):
    tasks = []
    with gzip.open(path, "rt") as lines:
        for line in lines:
            record = json.loads(line)
            if record.get("part") != part:
                continue
            seconds = record["filter"].get("seconds", {})
            memory = record["filter"].get("memory", {})
            estimate = memory.get("estimate_bytes") or 0
            resident = min(memory.get("resident_bytes") or estimate, estimate)
            compile_s = seconds.get("compile") or 0
            tasks.append({
                "estimate": estimate,
                "growth": estimate - resident,
                "before_compile": max(0.0, (seconds.get("check") or 0) - compile_s),
                "compile": compile_s,
                "slot": seconds.get("slot") or 0,
            })
    return tasks


class Replay:
    def __init__(self, tasks, rule, jobs, budget):
        self.tasks, self.rule, self.jobs, self.budget = tasks, rule, jobs, budget
        self.now = 0.0
        self.held = 0.0
        self.seated = {}       # task -> {"shrunk", "may_shrink", "grown"}
        self.waiting = []      # tasks with a job, waiting for a seat, in turn
        self.growing = []      # tasks waiting to grow back
        self.asked_at = {}
        self.events = []
        self.sequence = 0
        self.slot_free_at = 0.0
        self.seat_wait = 0.0
        self.held_area = 0.0
        self.ended = 0

    def pending_growth(self):
        return max([self.tasks[i]["growth"] for i, s in self.seated.items()
                    if s["may_shrink"] and not s["grown"]] or [0])

    def fits(self, task):
        t = self.tasks[task]
        if self.rule == "reserve":
            return self.held + t["estimate"] + max(self.pending_growth(), t["growth"]) <= self.budget
        return self.held + t["estimate"] <= self.budget

    def at(self, when, kind, task):
        heapq.heappush(self.events, (when, self.sequence, kind, task))
        self.sequence += 1

    def admit(self):
        while self.waiting:
            task = self.waiting[0]
            t = self.tasks[task]
            if self.seated and (self.growing or not self.fits(task)):
                return
            self.waiting.pop(0)
            self.seat_wait += self.now - self.asked_at[task]
            # As DeviceShare: "reserve" lends only with room for the growth (not a task let in
            # because the device was empty); "none", any task whose estimate fits the budget.
            lends = self.fits(task) if self.rule == "reserve" else t["estimate"] <= self.budget
            may_shrink = lends and t["growth"] > 0 and t["compile"] > 0
            self.seated[task] = {"shrunk": False, "may_shrink": may_shrink, "grown": False}
            self.held += t["estimate"]
            self.at(self.now + t["before_compile"], "compiling", task)

    def grow(self):
        for task in list(self.growing):  # each waiter on its own, as DeviceShare::grow
            if self.held + self.tasks[task]["growth"] <= self.budget:
                self.growing.remove(task)
                self.held += self.tasks[task]["growth"]
                self.seated[task].update(shrunk=False, grown=True)
                self.at(self.now, "compiled", task)

    def next_task(self, queue):
        if queue:
            task = queue.pop(0)
            self.asked_at[task] = self.now
            self.waiting.append(task)

    def run(self):
        queue = list(range(len(self.tasks)))
        for _ in range(self.jobs):
            self.next_task(queue)
        self.admit()
        last = 0.0
        while self.events:
            when, _, kind, task = heapq.heappop(self.events)
            self.held_area += self.held * (when - last)
            last = self.now = when
            seat, t = self.seated.get(task), self.tasks[task]
            if kind == "compiling":
                if seat["may_shrink"]:
                    seat["shrunk"] = True
                    self.held -= t["growth"]
                self.at(self.now + t["compile"], "grow", task)
            elif kind == "grow":
                if seat["shrunk"]:
                    self.growing.append(task)
                else:
                    self.at(self.now, "compiled", task)
            elif kind == "compiled":
                self.slot_free_at = max(self.now, self.slot_free_at) + t["slot"]
                self.at(self.slot_free_at, "end", task)
            elif kind == "end":
                self.held -= t["estimate"] - (t["growth"] if seat["shrunk"] else 0)
                del self.seated[task]
                self.ended += 1
                self.next_task(queue)
            self.grow()
            self.admit()
            self.grow()
        if self.ended < len(self.tasks):
            raise SystemExit(f"{self.rule}: deadlocked with {self.ended} of {len(self.tasks)} ended")
        return {"seconds": self.now, "per_task": self.now / len(self.tasks),
                "mean_held_gb": self.held_area / self.now / 1e9,
                "seat_wait": self.seat_wait / len(self.tasks)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results")
    parser.add_argument("part", type=int)
    parser.add_argument("--jobs", type=int, default=15)
    parser.add_argument("--budget-gb", type=float, default=114)
    args = parser.parse_args()
    tasks = load_tasks(args.results, args.part)
    if not tasks:
        raise SystemExit(f"no records of part {args.part} in {args.results}")
    print(f"part {args.part}: {len(tasks)} tasks, --jobs {args.jobs}, budget {args.budget_gb:g} GB")
    print("| rule | replayed s | s per task | mean held GB | seat wait s |")
    print("|---|---|---|---|---|")
    for rule in ("reserve", "none"):
        r = Replay(tasks, rule, args.jobs, args.budget_gb * 1e9).run()
        print(f"| {rule} | {r['seconds']:.0f} | {r['per_task']:.3f} | {r['mean_held_gb']:.0f} | "
              f"{r['seat_wait']:.2f} |")


if __name__ == "__main__":
    main()
