"""A runner of an evaluation session: holds one model and answers the owner's calls
(session_owner.py). Two roles:
  candidate  ModelNew from the built workspace (--work), with the task's weights. Hostile: it runs
             in the OS sandbox, confines itself before importing the candidate's code, and runs
             the forwards the owner picks under the operator audit. Nothing it says is believed:
             the owner times it with its own clock and judges the output buffer itself.
  baseline   the pristine Model (--task) as "eager", torch.compile of it as "compile" (where torch
             has it). Never sees candidate code.
Both roles also serve "null", which returns ready-made outputs: the cost of a call with no work in
it. The baseline's is what the timing subtracts; the candidate's is reported beside it, so that a
difference between the two processes' costs shows.

Start: the first line on stdin is the arm's token. The runner builds its model(s) before it
connects, so construction can see no input; then it connects to --socket, presents the token, maps
the two buffers the owner sends (inputs read-only), says "ready", and serves calls:
  owner -> {"cmd": "call", "model": M, "slot_scalars": [[...], ...], "audit": B}   the call's
            forwards' inputs are in their slots of the input buffer (the layout's "forwards",
            one or more, each "input_stride" bytes); B: run them under the operator audit (the
            owner chooses which calls)
  With the layout's "call_timer" "gpu" the call also carries "flag": n, and the runner orders its
  stream against the owner's through a third buffer (stream_flags.py): it queues a wait for "go"
  before anything else on its current stream, says "ready" from a side stream, and "done" behind
  the last copy. A forward's own streams must be ordered after the current stream (PyTorch's rule
  for tensors made on it): the inputs are in the slots only once "go" has passed there.
  runner -> {"ok": true, "slots": [{"structure": ..., "scalars": [...]}, ...]}   each forward's
            outputs are in its slot of the output buffer. With the layout's "forward_sync" "each"
            the device is synchronized after each forward and again after its copy (a forward may
            return a buffer it reuses, or leave its output on a side stream); with "call", once
            after the last copy: each copy is queued on the current stream behind its forward, so
            a buffer the next forward reuses on that stream is copied first
            {"ok": false, "error": "..."}                      a forward raised
  owner -> {"cmd": "exit"}  -> {"forbidden_ops": {...}, "calls": N, "audit_off": K}  and the runner
            ends (K: audited forwards after which the audit's probe went unseen)
Status lines for the C++ driver go to fd 3 (one JSON object a line): "connected", "ended".
"""

import argparse
import gc
import importlib.util
import json
import os
import socket
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECT_EVERY = 64  # calls between full collections of Python's garbage (see main)
sys.path.insert(0, HERE)
import call_wait  # noqa: E402
import shared_buffers  # noqa: E402
import stream_flags  # noqa: E402
from session_layout import flatten, structure_of, views  # noqa: E402


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def build_models(args, torch):
    state = torch.load(os.path.join(args.state, "state.pt"), map_location=args.device)
    init_inputs = torch.load(os.path.join(args.state, "init.pt"))
    models = {}
    if args.role == "candidate":
        sys.path.insert(0, args.work)
        candidate = load_module("model_new", os.path.join(args.work, "model_new.py"))
        model = candidate.ModelNew(*init_inputs).to(args.device)
        model.load_state_dict(state)
        models["candidate"] = model.eval()
    else:
        task = load_module("cudaagent_session_task", args.task)
        model = task.Model(*init_inputs).to(args.device)
        model.load_state_dict(state)
        models["eager"] = model.eval()
        if args.compile_mode != "none" and hasattr(torch, "compile"):
            models["compile"] = torch.compile(model, mode=None if args.compile_mode == "default"
                                              else args.compile_mode)
    return models


def copy_out(torch, result_leaves, result_structure, out_specs, out_views):
    """One forward's outputs into its slot of the output buffer; what the owner needs beside them:
    {"structure", "scalars"} (a leaf of the wrong dtype or shape, or a foreign type, is not copied
    and the structure says so)."""
    answer = {"structure": result_structure, "scalars": []}
    if len(result_leaves) == len(out_specs):
        for spec, view, (_, leaf) in zip(out_specs, out_views, result_leaves):
            if view is None:
                answer["scalars"].append(leaf if isinstance(leaf, (bool, int, float)) else None)
            elif type(leaf) is torch.Tensor and leaf.dtype == view.dtype and \
                    tuple(leaf.shape) == tuple(view.shape):
                view.copy_(leaf)
            elif type(leaf) is not torch.Tensor:  # a subclass or an impostor: never judged
                answer["structure"] = ["foreign", f"{type(leaf).__module__}.{type(leaf).__qualname__}"]
                break
            else:
                answer["structure"] = ["mismatch", str(leaf.dtype), list(leaf.shape)]
    return answer


def injection_function(name):
    """A function of the CUPTI injection library (lib/cuda/cupti_inject), when it traces this
    process (CUDA_INJECTION64_PATH and CUDAAGENT_CUPTI_OUT set), else None."""
    library = os.environ.get("CUDA_INJECTION64_PATH")
    if not library or not os.environ.get("CUDAAGENT_CUPTI_OUT"):
        return None
    import ctypes

    try:
        return getattr(ctypes.CDLL(library), name)
    except (OSError, AttributeError):
        return None


def output_marker():
    """The kernel trace's mark of a forward's end (cudaagent_cupti_mark): called once the forward
    has returned and before its output is copied, with the stream the copies go on. The trusted
    side then checks that nothing the forward launched was still running once its first copy
    began: with one wait per call ("forward_sync" "call") work left on a stream never joined back
    would otherwise run past the timed window. A function of the stream; a no-op where nothing
    traces (the trusted side then reads the calls as unmarked)."""
    mark = injection_function("cudaagent_cupti_mark")
    if mark is None:
        return lambda stream: None
    import ctypes

    mark.argtypes = [ctypes.c_void_p]
    mark.restype = ctypes.c_int
    return lambda stream: mark(ctypes.c_void_p(stream.cuda_stream))


def flush_kernel_trace():
    """Writes out the kernel trace of this process, when the CUPTI injection library traces it:
    the worker ends a job with os._exit, which skips the library's own flush at exit. Before the
    answer to "exit", so the trace is whole once the owner replies. Without the library's function
    the trace lacks its summary line, which the trusted side reads as a gap."""
    flush = injection_function("cudaagent_cupti_flush")
    if flush is not None:
        flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["candidate", "baseline"], required=True)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--state", required=True, help="the owner's state.pt and init.pt")
    parser.add_argument("--work", help="candidate: the built workspace (model_new.py, the extension)")
    parser.add_argument("--task", help="baseline: the pristine model.py")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--policy", default=os.path.join(HERE, "policy.json"))
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument("--status-fd", type=int, default=3)
    args = parser.parse_args()
    status = os.fdopen(args.status_fd, "w", buffering=1)

    def tell(message):
        try:
            status.write(json.dumps(message) + "\n")
            status.flush()
        except BrokenPipeError:  # the driver is gone; the owner still gets its answers
            pass

    token = sys.stdin.readline().strip()
    started = time.monotonic()
    import torch

    cuda = args.device.startswith("cuda")
    if cuda:
        # The context and the device files, before the write restrictions apply.
        torch.cuda.init()
        torch.zeros(1, device=args.device)
        torch.cuda.synchronize()
    phases = {"cuda_init": time.monotonic() - started}
    layers = []
    audit = None
    if args.role == "candidate":
        import confine
        import operator_audit

        layers = confine.restrict_self("/tmp")
        with open(args.policy) as policy_file:
            policy = json.load(policy_file)
        audit = operator_audit.make_audit(torch, set(policy["allowed_ops"]), policy.get("host_read_ops", ()),
                                          policy.get("host_reads_per_forward"), policy.get("host_write_ops", ()),
                                          policy.get("host_writes_per_forward"))
    mark = time.monotonic()
    with torch.no_grad():
        models = build_models(args, torch)
    if cuda:
        torch.cuda.synchronize()
    phases["build_model"] = time.monotonic() - mark

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.connect(args.socket)
    conn.send(json.dumps({"token": token}).encode())
    raw, fds = shared_buffers.recv_fds(conn, 3)
    layout = json.loads(raw)
    inputs = shared_buffers.Buffer.open(args.device, layout["input_bytes"], fds[0], readonly=True)
    outputs = shared_buffers.Buffer.open(args.device, layout["output_bytes"], fds[1], readonly=False)
    # A call is `forwards` forwards (the owner's choice), each with its own slot of both buffers.
    forwards = int(layout.get("forwards", 1))
    slot_in = [views(torch, inputs, layout["inputs"], k * int(layout.get("input_stride", 0)))
               for k in range(forwards)]
    slot_out = [views(torch, outputs, layout["outputs"], k * int(layout.get("output_stride", 0)))
                for k in range(forwards)]
    out_specs = layout["outputs"]
    # The GPU call timer (stream_flags.py): the owner's flags, and a side stream for "ready".
    flags = side = None
    if layout.get("call_timer") == "gpu" and cuda:
        flag_buffer = shared_buffers.Buffer.open(args.device, int(layout["flag_bytes"]), fds[2], readonly=False)
        flags = stream_flags.StreamFlags(flag_buffer)
        side = torch.cuda.Stream()
    # "null": outputs of the right shapes, made once; a call copies them like any other. Both roles
    # serve it, so the cost of a call is measured in each arm's own process (no candidate code runs
    # in a null call: the owner alone names the model).
    ready_made = [torch.zeros(spec["shape"], dtype=getattr(torch, spec["dtype"]), device=args.device)
                  if "dtype" in spec else spec["value"] for spec in out_specs]
    structure = layout["output_structure"]
    spin_s = float(layout.get("spin_ms", 0)) / 1e3  # the owner's choice (call_wait.py)
    # Diagnostics (the owner's choice): when each phase of a call ended, on CLOCK_MONOTONIC (the
    # owner's perf_counter too), and the forward's device time between two CUDA events. For people
    # finding where a call's time goes; the owner never times anything with them.
    diagnose = bool(layout.get("diagnostics"))
    sync_each = layout.get("forward_sync", "each") != "call"
    mark_output = output_marker()
    # One pair of events per forward: read after the call's last synchronization, so that with
    # "call" the diagnostics add no wait of their own.
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(forwards)] if diagnose and cuda else None
    tell({"connected": True, "phases_s": phases, "sandbox_layers": layers})
    # "pid": the process id the kernel trace's summary lines carry (this process's own account).
    conn.send(json.dumps({"ready": True, "pid": os.getpid(), "phases_s": phases, "sandbox_layers": layers,
                          "models": sorted(models), "torch": torch.__version__}).encode())
    # Python's collector never runs inside a call: a collection that happened to fall between a
    # forward and its copy would be in the timed window (an outlier of milliseconds). The objects
    # made so far (torch, the models) are frozen out of every later collection; the young ones are
    # collected after each answer and everything every COLLECT_EVERY calls, with the window shut.
    gc.freeze()
    gc.disable()
    calls = 0
    while True:
        raw = call_wait.receive(conn, 1 << 16, spin_s)
        received = time.perf_counter()
        if not raw:
            break
        command = json.loads(raw)
        if command.get("cmd") == "exit":
            if cuda:
                torch.cuda.synchronize()
                flush_kernel_trace()
            conn.send(json.dumps({"forbidden_ops": audit.forbidden if audit else {}, "calls": calls,
                                  "audit_off": audit.switched_off if audit else 0}).encode())
            break
        calls += 1
        slot_scalars = command.get("slot_scalars") or []
        flag = int(command.get("flag", 0)) if flags is not None else 0
        try:
            if flags is not None:
                # Everything this call queues on the current stream runs after the owner's "go"
                # (its inputs are in the slots only then); "ready" at once, from a side stream, so
                # that a forward that waits for the device cannot wait for the owner forever.
                flags.wait(torch.cuda.current_stream(), "go", flag)
                flags.write(side, "ready", flag)
            name = command.get("model", "candidate")
            audited = audit is not None and bool(command.get("audit"))
            answer = {"ok": True, "slots": []}
            mark = forward_done = time.perf_counter()
            first_forward = None
            forward_gpu_ms = 0.0
            for slot in range(forwards):
                scalars = iter(slot_scalars[slot] if slot < len(slot_scalars) else [])
                args_in = [view if view is not None else next(scalars) for view in slot_in[slot]]
                if name == "null":
                    result_leaves = list(zip([s["path"] for s in out_specs], ready_made))
                    result_structure = structure
                else:
                    model = models[name]
                    if first_forward is None:
                        first_forward = time.perf_counter()
                    if events:
                        events[slot][0].record()
                    with torch.no_grad():
                        if audited:
                            with audit:
                                result = model(*args_in)
                                audit.probe()
                        else:
                            result = model(*args_in)
                    if events:
                        events[slot][1].record()
                    if cuda:  # before the wait below: the mark costs no time the GPU is idle for
                        mark_output(torch.cuda.current_stream())
                    if cuda and sync_each:
                        # Every stream of this process, not only the current one: a kernel on a
                        # side stream must be done before its output is copied out.
                        torch.cuda.synchronize()
                    forward_done = time.perf_counter()
                    result_leaves = flatten(torch, result, strict=False)
                    result_structure = structure_of(torch, result)
                answer["slots"].append(copy_out(torch, result_leaves, result_structure, out_specs, slot_out[slot]))
                if cuda and sync_each and slot + 1 < forwards:
                    torch.cuda.synchronize()  # copied out before the next forward can touch it
            if flags is not None:
                flags.write(torch.cuda.current_stream(), "done", flag)  # behind the last copy
            if first_forward is not None:
                mark = first_forward
            if calls == 1:  # where a first call's time goes (lazy loading of kernels), for people
                answer["first_call_s"] = {"forward": forward_done - mark}
            if cuda:
                torch.cuda.synchronize()
            if events and name != "null":
                forward_gpu_ms = sum(start.elapsed_time(end) for start, end in events)
            if calls == 1:
                answer["first_call_s"]["total"] = time.perf_counter() - mark
            if diagnose:
                answer["diagnostics"] = {"received": received, "forward_start": mark,
                                         "forward_done": forward_done, "outputs_done": time.perf_counter(),
                                         "forward_gpu_ms": forward_gpu_ms}
        except Exception as error:
            answer = {"ok": False, "error": "".join(traceback.format_exception_only(type(error), error))[-2000:]}
            if flags is not None:  # the owner's stream waits for both; its judgement reads the error
                try:
                    flags.write(side, "ready", flag)
                    flags.write(side, "done", flag)
                    torch.cuda.synchronize()
                except Exception:  # a lost context: the owner's own release and timeout take over
                    pass
        conn.send(json.dumps(answer, default=str).encode())
        gc.collect(2 if calls % COLLECT_EVERY == 0 else 0)
    tell({"ended": True, "calls": calls, "forbidden_ops": audit.forbidden if audit else {}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
