"""Shared plumbing of the cudaagent-profile benchmarks (profile_aa.py, profile_throughput.py,
profile_agreement.py): finding the binaries and a Python with torch, task files sized for a device,
workspaces, running cudaagent-profile under a deadline, small statistics and compact tables.
Standard library only: the scripts run under any python3; torch is needed only by the interpreter
handed to cudaagent-profile and plain_timing.py.
"""

import atexit
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TASKS = os.path.join(HERE, "tasks")
EXAMPLES = os.path.join(ROOT, "share", "examples", "workspaces")

# The candidate of an A-A test: the reference module itself, loaded in the candidate's slot. Its
# import of `model` is outside model_new.py's static policy, so profiles of it take SELF_FLAGS.
SELF_FLAGS = ["--no-python-policy"]
SELF_CANDIDATE = '''from model import Model


class ModelNew(Model):
    """The reference itself in the candidate's slot: an A-A test of the timing."""
'''

# Time classes of lib/profile/timing_stats.cpp (classify_time_ms): half-open, in milliseconds.
CLASSES = [("<10us", 0.0, 0.01), ("10us-100us", 0.01, 0.1), ("100us-1ms", 0.1, 1.0), (">=1ms", 1.0, math.inf)]


def time_class(ms):
    for name, low, high in CLASSES:
        if low <= ms < high:
            return name
    return "unknown"


def common_arguments(parser, budget_s):
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "release", "bin"),
                        help="directory with cudaagent-profile (and cudaagent-verify)")
    parser.add_argument("--out", required=True, help="directory for JSON results and raw records")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: tiny task sizes, a smoke test of the script itself")
    parser.add_argument("--python", default="", help="interpreter with torch (default: $CUDAAGENT_PYTHON, "
                        "python3 on PATH, /usr/bin/python3: the first that imports torch)")
    parser.add_argument("--budget-s", type=float, default=budget_s,
                        help="wall-clock budget; work not started by then is skipped and reported as such")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="pass --no-sandbox --allow-unsandboxed to cudaagent-profile (a diagnostic)")
    parser.add_argument("--work", default="", help="where workspaces and the store go (default: a temporary "
                        "directory, removed at the end; OUT gets only results)")
    parser.add_argument("--profile-arg", action="append", default=[],
                        help="extra argument for cudaagent-profile (repeatable)")


def work_dir(args, name):
    """args.work/name, or a temporary directory removed when the script ends."""
    if args.work:
        path = os.path.join(os.path.abspath(args.work), name)
        os.makedirs(path, exist_ok=True)
        return path
    path = tempfile.mkdtemp(prefix=f"cudaagent-bench-{name}-")
    atexit.register(shutil.rmtree, path, True)
    return path


def find_python(requested):
    candidates = [requested] if requested else [os.environ.get("CUDAAGENT_PYTHON", ""),
                                                shutil.which("python3") or "", "/usr/bin/python3"]
    for python in candidates:
        if not python:
            continue
        try:
            done = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                                  capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return python, done.stdout.strip()
    sys.exit("no Python that imports torch among: " + ", ".join(c for c in candidates if c))


def binary(bin_dir, name):
    path = os.path.join(bin_dir, name)
    if not os.access(path, os.X_OK):
        sys.exit(f"cannot run '{path}' (give --bin DIR)")
    return path


def sized_task(path, device):
    """The task's source for a device: task files pick their sizes with a line SIZE = "cuda"."""
    with open(path) as f:
        source = f.read()
    if not re.search(r'^SIZE = "cuda"', source, re.M):
        raise ValueError(f"{path}: no line 'SIZE = \"cuda\"' to size the task by")
    return re.sub(r'^SIZE = "cuda"', f'SIZE = "{device}"', source, count=1, flags=re.M)


def task_note(source, key):
    """'# key: value' lines of a task file (e.g. '# class: 100us-1ms', '# estimate: ...')."""
    found = re.search(rf"^# {key}: (.*(?:\n#   .*)*)", source, re.M)
    return re.sub(r"\s*\n#\s+", " ", found.group(1)).strip() if found else ""


def self_workspace(directory, model_py):
    """A workspace whose candidate is the task's Model itself, with no kernels of its own."""
    if os.path.exists(directory):
        shutil.rmtree(directory)
    os.makedirs(os.path.join(directory, "kernels"))
    with open(os.path.join(directory, "model.py"), "w") as f:
        f.write(model_py)
    with open(os.path.join(directory, "model_new.py"), "w") as f:
        f.write(SELF_CANDIDATE)


def profile_command(args, python, extra):
    command = [binary(args.bin, "cudaagent-profile"), "--device", args.device, "--python", python]
    if args.no_sandbox:
        command += ["--no-sandbox", "--allow-unsandboxed"]
    return command + extra + list(args.profile_arg)


class Deadline:
    def __init__(self, seconds):
        self.start = time.monotonic()
        self.end = self.start + seconds

    def left(self):
        return self.end - time.monotonic()

    def elapsed(self):
        return time.monotonic() - self.start


def run_until(command, stdout_path, log_path, timeout_s, stdin_data=None):
    """Runs a command with stdout to a file; past timeout_s it gets SIGTERM (then SIGKILL after
    30 s). Returns (exit status or None when stopped, wall seconds, complete JSON lines written)."""
    started = time.monotonic()
    stopped = False
    with open(stdout_path, "wb") as out, open(log_path, "ab") as log:
        log.write(("$ " + " ".join(command) + "\n").encode())
        log.flush()
        process = subprocess.Popen(command, stdout=out, stderr=log,
                                   stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL)
        if stdin_data is not None:
            try:
                process.stdin.write(stdin_data.encode())
                process.stdin.close()
            except BrokenPipeError:
                pass
        try:
            status = process.wait(timeout=max(timeout_s, 1))
        except subprocess.TimeoutExpired:
            stopped = True
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            status = None
    wall = time.monotonic() - started
    return (None if stopped else status), wall, read_records(stdout_path)


def read_records(path):
    records = []
    with open(path, "rb") as f:
        for line in f.read().split(b"\n"):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError:  # a torn last line of a stopped run
                pass
    return records


def profile_of(record):
    value = record.get("profile")
    return value if isinstance(value, dict) else None


def median(values):
    values = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(values) if values else None


def cv(values):
    values = [v for v in values if v is not None and math.isfinite(v)]
    if len(values) < 2 or statistics.mean(values) == 0:
        return None
    return statistics.stdev(values) / statistics.mean(values)


def fmt(value, spec=".4g", none="-"):
    return none if value is None else format(value, spec)


def pct(value, digits=2, none="-"):
    return none if value is None else f"{100 * value:.{digits}f}%"


def table(header, rows):
    """A compact Markdown table (the lead's GPU tool returns only stdout's tail)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=1, sort_keys=True, allow_nan=False,
                  default=lambda o: None)
        f.write("\n")


def finite_or_none(value):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def environment(python, torch_version, args):
    return {"python": python, "torch": torch_version, "device": args.device, "bin": args.bin,
            "cache_dir": os.environ.get("CUDAAGENT_CACHE_DIR", ""), "no_sandbox": args.no_sandbox,
            "profile_args": args.profile_arg, "budget_s": args.budget_s,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commit": git_commit()}


def git_commit():
    try:
        done = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        return done.stdout.strip() or None
    except OSError:
        return None


if __name__ == "__main__":
    # bench/profile_bench_lib.py self-workspace DIR TASK.py DEVICE: one A-A workspace (for scripts).
    if len(sys.argv) != 5 or sys.argv[1] != "self-workspace":
        sys.exit("usage: profile_bench_lib.py self-workspace DIR TASK.py DEVICE")
    self_workspace(sys.argv[2], sized_task(sys.argv[3], sys.argv[4]))
