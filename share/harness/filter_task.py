"""The filter's task process: runs one synthesized task (model.py with Model, get_inputs and
get_init_inputs) inside the OS sandbox, as one job that checks the task and then times it.

  checks  builds the model, draws an input set from a fixed seed, runs eager forward on it twice,
          then on a second draw once, then torch.compile on the first set (when asked, torch has
          it, and eager found nothing wrong). The outputs are judged here, where they are
          (share/harness/output_judge.py: degenerate values, determinism, input dependence,
          compile against eager), and the findings go into the report's "outputs"; the C++ side
          validates them and decides.
  memory  with --memory-turns, the process says "compiling" when torch.compile starts working
          on the CPU and "compiled" when it is done, then waits for "go" before the compiled
          graph runs (lend_memory_while_compiling): the filter lends the task's device memory
          beyond its inputs and first output to other tasks meanwhile.
  timing  with --await-go (an interactive job), the process then says "checked" and waits. The
          C++ side reads its findings meanwhile; for a task that passed, it takes the device's
          timing slot and says "go": warm-up calls, then timed calls of eager forward on the first
          input set until --runs samples or --budget-s seconds, then the same for the compiled
          model, in this process, so the model is built, the inputs drawn and the graph compiled
          once (seconds of CPU work that never hold the slot). Then it says "timed", and the slot
          is given back before the process ends. stdin closed instead of "go": the task was
          rejected, nothing is timed. The statistics are computed on the C++ side.

The report (report.json in --out) is kept up to date (written whole, then renamed), so a process
that hangs or dies still says which phase it was in. Task code runs in this process, so the C++
side reads the report as untrusted data, validated and bounded. The filter guards the training set
against broken tasks, not hostile ones (output_judge.py says why its checks run here). Exit
status: 0 done, 3 the task raised (the report says where), 4 torch could not be imported.
"""

import argparse
import importlib.util
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import device_check  # noqa: E402  (our own modules, from the harness directory only)
import output_judge  # noqa: E402

MESSAGE_LIMIT = 2000


class Report:
    def __init__(self, out_dir, mode):
        self.path = os.path.join(out_dir, "report.json")
        self.data = {"mode": mode, "phase": "start", "done": False, "error": None,
                     "torch": "", "has_compile": False, "inputs_equal": None, "compile": None,
                     "warmup_calls": 0, "warmup_max_ms": 0.0, "samples_ms": [],
                     "compile_samples_ms": [], "phase_seconds": {}, "outputs": None,
                     "peak_bytes": 0}
        self._phase_started = time.perf_counter()
        self.save()

    def save(self):
        temp = self.path + ".tmp"
        with open(temp, "w") as out:
            json.dump(self.data, out, allow_nan=False)
        os.replace(temp, self.path)

    def phase(self, name):
        self.close_phase()
        self.data["phase"] = name
        self.save()

    def close_phase(self):
        """Adds the time since the last phase began to that phase's total: where a task's seconds
        go, for people sizing a run (the C++ side records it, never judges by it)."""
        now = time.perf_counter()
        spent = self.data["phase_seconds"]
        spent[self.data["phase"]] = spent.get(self.data["phase"], 0.0) + (now - self._phase_started)
        self._phase_started = now

    def fail(self, error):
        self.close_phase()
        message = f"{type(error).__name__}: {error}"
        self.data["error"] = {"phase": self.data["phase"], "type": type(error).__name__,
                              "message": message[:MESSAGE_LIMIT]}
        self.save()


def load_task(path):
    spec = importlib.util.spec_from_file_location("cudaagent_filter_task", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def check_interface(task):
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(task, name):
            raise AttributeError(f"model.py defines no {name}")
        if not callable(getattr(task, name)):
            raise TypeError(f"{name} in model.py is not callable")


def as_list(value, name):
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name}() returned {type(value).__name__}, not a list or tuple")
    return list(value)


def to_device(torch, values, device):
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def cloned(torch, values):
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def same_values(torch, a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            # Compared where they are (both on the task's device): copying gigabytes of inputs
            # to the host only to compare them cost seconds of CPU per task.
            if x.shape != y.shape or x.dtype != y.dtype or x.device != y.device \
                    or not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True


def synchronize(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


def release_cached(torch, device):
    """Hands the memory torch's allocator keeps cached back to the device. Jobs of other tasks
    share the GPU, and this one is about to spend seconds on the CPU (torch.compile's tracing and
    code generation, the wait for the timing slot) holding a forward's peak for nothing."""
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def seeded(torch, seed, device, make):
    """make() after torch.manual_seed(seed). On CUDA (torch 2.0 on), first with the GPU as the
    default device of factory calls, so that the model's parameters are initialised and
    torch.randn inputs drawn on the GPU instead of by one CPU thread (seconds per gigabyte); task
    code that cannot run so (a CPU-only call, a tensor it makes on the CPU and mixes in) raises,
    and runs again the usual way from the same seed: that run's error, if any, is the one reported.
    Either way two draws from two seeds differ and one seed gives one draw."""
    if device == "cuda" and hasattr(torch.device, "__enter__"):
        torch.manual_seed(seed)
        try:
            with torch.device(device):
                return make()
        except Exception:  # noqa: BLE001  (any failure: the usual way decides)
            pass
    torch.manual_seed(seed)
    return make()


def build(torch, report, args):
    """Loads the task and builds the model; returns (model, draw), draw(seed) an input set."""
    report.phase("load")
    task = load_task(args.task)
    report.phase("interface")
    check_interface(task)
    report.phase("init")
    model = seeded(torch, args.seed, args.device,
                   lambda: task.Model(*as_list(task.get_init_inputs(), "get_init_inputs")))
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"Model(...) is a {type(model).__name__}, not a torch.nn.Module")
    model = model.to(args.device)

    def draw(seed):
        inputs = seeded(torch, seed, args.device, lambda: as_list(task.get_inputs(), "get_inputs"))
        return to_device(torch, inputs, args.device)

    return model, draw


def forward(torch, report, args, model, inputs):
    """One eager call in the "forward" phase (a failure in it is the task's eager failure); the
    phase is "judge" after it."""
    report.phase("forward")
    with torch.no_grad():
        output = model(*inputs)
    synchronize(torch, args.device)
    report.phase("judge")
    return output


def lend_memory_while_compiling(torch):
    """Tells the filter when torch.compile starts working on the CPU ("compiling": the job holds
    only its inputs and the first eager output then, and the filter lends the rest of the task's
    memory to other tasks) and when it is done ("compiled"), then waits for "go": the memory is
    the task's again before the compiled graph runs. The first compilation only (a graph break
    compiles again, with the memory held). Returns a function that removes the callbacks; does
    nothing on a torch without Dynamo's compile callbacks."""
    try:
        from torch._dynamo.callback import callback_handler
    except ImportError:
        return lambda: None
    state = {"started": False, "ended": False}

    def started(*_):
        if not state["started"]:
            state["started"] = True
            os.write(3, b"compiling\n")

    def ended(*_):
        if state["started"] and not state["ended"]:
            state["ended"] = True
            os.write(3, b"compiled\n")
            if sys.stdin.readline().strip() != "go":
                raise RuntimeError("the filter did not give the task's device memory back")

    callback_handler.register_start_callback(started)
    callback_handler.register_end_callback(ended)

    def remove():
        callback_handler.remove_start_callback(started)
        callback_handler.remove_end_callback(ended)
    return remove


def save_outputs(report, judgement, compile_differs=None):
    report.data["outputs"] = {"determinism": judgement.determinism,
                              "findings": [{"check": check, "detail": detail[:MESSAGE_LIMIT]}
                                           for check, detail in judgement.findings],
                              "compile_differs": compile_differs}
    report.save()


def check(torch, report, args):
    """The checks; returns (model, inputs_a, compiled) for the timing, compiled None when
    torch.compile was not asked for, is missing, failed or was not worth running (eager's outputs
    already fail). The job holds one input draw, a copy of it for the call, the first output and
    the call's own memory at a time: every other output is freed once judged."""
    model, draw = build(torch, report, args)
    report.phase("inputs")
    inputs_a = draw(args.seed + 1)
    judgement = output_judge.Judgement(torch, args.atol, args.rtol)
    # The RNG is not reseeded between the calls: a forward that draws random numbers gives two
    # different results for the same inputs. Each call on the first draw gets its own copy of
    # it, so a forward that modifies its inputs does not change what the next call sees.
    judgement.first_call(forward(torch, report, args, model, cloned(torch, inputs_a)))
    judgement.second_call(forward(torch, report, args, model, cloned(torch, inputs_a)))
    report.phase("inputs")
    inputs_b = draw(args.seed + 2)
    report.data["inputs_equal"] = same_values(torch, inputs_a, inputs_b)
    judgement.other_draw(forward(torch, report, args, model, inputs_b), report.data["inputs_equal"])
    del inputs_b
    save_outputs(report, judgement)
    compiled = None
    if args.compile and report.data["has_compile"] and not judgement.findings:
        release_cached(torch, args.device)
        report.phase("compile")
        started = time.perf_counter()
        stop_lending = lend_memory_while_compiling(torch) if args.memory_turns else (lambda: None)
        try:
            compiled = torch.compile(model)
            # The first draw itself, not a copy: while the graph is compiled the job holds what
            # the filter counts as resident (one input draw, the first output). Eager's timing
            # calls use it as it is too.
            with torch.no_grad():
                output = compiled(*inputs_a)
            synchronize(torch, args.device)
            report.data["compile"] = {"ok": True, "error": "",
                                      "seconds": time.perf_counter() - started}
        except Exception as error:  # a compile failure is a finding about the task, not a crash
            compiled = None
            message = f"{type(error).__name__}: {error}"
            report.data["compile"] = {"ok": False, "error": message[:MESSAGE_LIMIT],
                                      "seconds": time.perf_counter() - started}
        finally:
            stop_lending()
        if compiled is not None:
            report.phase("judge")
            save_outputs(report, judgement, judgement.compiled_differs(output))
            del output
        report.save()
    judgement.release()
    release_cached(torch, args.device)
    return model, inputs_a, compiled


def note_peak(torch, report, device):
    """The most device memory torch's allocator held at once so far: beside the filter's estimate
    of it in the record, so that the estimate can be checked against real runs."""
    if device == "cuda":
        report.data["peak_bytes"] = int(torch.cuda.max_memory_allocated())
        report.save()


def timed_call(torch, model, inputs, device):
    synchronize(torch, device)
    started = time.perf_counter()
    model(*inputs)
    synchronize(torch, device)
    return (time.perf_counter() - started) * 1000.0


def await_go(report):
    """Says "checked" on fd 3 and waits for "go" on stdin: the C++ side judges the check's files
    and takes the device's timing slot in between, so building, drawing and compiling never hold
    the slot. Returns False when told to stop instead (stdin closed: the task was rejected)."""
    report.phase("checked")
    os.write(3, b"checked\n")
    return sys.stdin.readline().strip() == "go"


def time_calls(torch, report, args, model, inputs, key, phases):
    """Warm-up calls, then timed calls into report.data[key]; phases names the two phases (a
    failure in them is filed under eager or compile). Returns True when the first calls were so
    far beyond the window that one timed call says enough."""
    report.phase(phases[0])
    started = time.perf_counter()
    slow = False
    with torch.no_grad():
        # At least --warmup calls and --warmup-s seconds, at most 1000. The allocator, cuDNN's
        # choices and the compiled graph's first-run work settled in the checks, which ran each
        # model on these inputs already; what is left to settle is the device's clocks and caches,
        # and the device is kept busy by the other tasks' checks. Every task holds the device's
        # one timing slot for its warm-up, so this time is paid once per task, in turn.
        calls = 0
        while calls < args.warmup or (time.perf_counter() - started < args.warmup_s and calls < 1000):
            ms = timed_call(torch, model, inputs, args.device)
            calls += 1
            if key == "samples_ms":
                report.data["warmup_calls"] = calls
                report.data["warmup_max_ms"] = max(report.data["warmup_max_ms"], ms)
            # Far beyond the window: one timed call says enough. Never the first call alone: it
            # pays the device's one-time costs (CUDA's lazy module loading, cuBLAS and cuDNN
            # handles and heuristics), which can pass the cut for a task well inside the window.
            if args.slow_ms > 0 and ms > args.slow_ms and calls >= 2:
                slow = True
                break
        report.phase(phases[1])
        started = time.perf_counter()
        runs = 1 if slow else args.runs
        while len(report.data[key]) < runs:
            report.data[key].append(timed_call(torch, model, inputs, args.device))
            if len(report.data[key]) >= 3 and time.perf_counter() - started > args.budget_s:
                break
    report.save()
    return slow


def time_task(torch, report, args, model, inputs, compiled):
    """Eager, then the compiled model (not for a task eager already puts far beyond the window)."""
    synchronize(torch, args.device)
    slow = time_calls(torch, report, args, model, inputs, "samples_ms", ("warmup", "timing"))
    if compiled is not None and not slow:
        time_calls(torch, report, args, compiled, inputs, "compile_samples_ms",
                   ("compile_warmup", "compile_timing"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", required=True, help="the task's model.py")
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--warmup-s", type=float, default=0.05)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--budget-s", type=float, default=2.0)
    parser.add_argument("--slow-ms", type=float, default=0.0)
    parser.add_argument("--memory-turns", action="store_true",
                        help='say "compiling" and "compiled" on fd 3 (lend_memory_while_compiling)')
    parser.add_argument("--atol", type=float, default=1e-2, help="tolerance of the output checks")
    parser.add_argument("--rtol", type=float, default=1e-2)
    parser.add_argument("--await-go", action="store_true",
                        help="an interactive job: time the task after the checks (see await_go)")
    args = parser.parse_args()
    report = Report(args.out, "check")
    report.phase("torch")
    try:
        import torch

        if args.device == "cuda":
            # Before any task code: a device that will not work is ours to fix, never the task's.
            device_check.put_to_work(torch)
    except BaseException as error:
        report.fail(error)
        return 4
    report.data["torch"] = str(torch.__version__)
    report.data["has_compile"] = hasattr(torch, "compile")
    try:
        model, inputs, compiled = check(torch, report, args)
        note_peak(torch, report, args.device)
        if args.await_go and await_go(report):
            time_task(torch, report, args, model, inputs, compiled)
            note_peak(torch, report, args.device)
            # The C++ side gives the device's timing slot back now: nothing below is timed.
            os.write(3, b"timed\n")
    except BaseException as error:  # SystemExit and KeyboardInterrupt from task code included
        report.fail(error)
        return 3
    report.close_phase()
    report.data["done"] = True
    report.save()
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit: a thread or atexit handler the task left behind can neither keep the process
    # alive nor change its status once the report is complete.
    os._exit(status)
