"""The owner of an evaluation session: the one trusted process that makes inputs, knows the right
answers, times every call with its own clock and judges every output. Runs the pristine model.py
and never any candidate code. One owner serves one task; runners (session_runner.py) attach to it.

Why it is built this way: a runner that holds candidate code is hostile, so nothing it says is
believed. The owner shares memory with each runner (shared_buffers.py): an input buffer the runner
maps read-only and an output buffer it maps read-write. A call is: the owner draws fresh inputs
from a seed in its private memory and computes the reference output (both before its clock starts),
flushes the L2 cache, fills the output buffer with values no right answer has, starts its clock,
copies the inputs into the shared buffer, tells the runner "call", waits for its reply, stops its
clock, then compares the output buffer with the reference on the device. Both sides may spin on
the call's two messages before they block (--spin-ms, call_wait.py): the wake-ups inside the clock
are then microseconds, not tens of them. With --call-timer gpu neither message is in the window:
the clock is two CUDA events on the owner's stream, the inputs' copy queued between them, ordered
against the runner's stream by flags the GPU itself writes and waits for (stream_flags.py), and the
owner judges a private copy of the outputs it took before the window closed. Every call is timed
and checked the same way, so a runner cannot tell a timed call from a checked one; inputs exist in
memory the runner can see only inside the owner's clock; and what the owner checks is memory it
reads itself, not a report.

Commands (one JSON object a line on stdin, from the C++ driver; replies on fd 3):
  {"cmd": "init", "seed": S, "socket_dir": D, "state_dir": W, "atol", "rtol", "device"}
      build Model from get_init_inputs() under seed S; write W/state.pt and W/init.pt for runners;
      draw one input set to fix the layout. -> {"ok", "inputs": [...], "outputs": [...],
      "input_bytes", "output_bytes", "device": {...}, "torch", "phases_s"}
  {"cmd": "attach", "arm": NAME, "token": T, "timeout_s": X}
      accept one runner on D/NAME/NAME.sock that presents T, hand it its two buffers, wait for its
      "ready". -> {"ok", "runner": {its ready message, untrusted}}
  {"cmd": "calls", "arm": NAME, "model": M, "seeds": [...], "timeout_s": X, "flush": true,
   "audit_fraction": F}
      one call per seed as above (with --forwards N, a call is N forwards, each on fresh inputs
      drawn from the call's seed and its slot, in its own slot of the buffers, and each judged;
      "host_ms" is the call's time over N); the arm's first call and a random share F of the
      others run under the runner's operator audit. M "null" (the cost of a call: the runner returns
      ready-made outputs) gets inputs like any call but no reference and no check ("check": null);
      its batch draws them once, from its first seed, and copies the same ones into every call.
      -> {"ok", "calls": [{"seed", "host_ms", "gpu_ms" (--call-timer gpu: the events' window over
      N), "check": {...}, "audited", "start_ns", "end_ns" (the
      call's window, CLOCK_MONOTONIC), "runner": {...}}], "stopped": null | {"call": k, "why":
      "timeout" | "runner ended" | "runner error", "detail"}, "owner_ms": {...}, "phases_ms":
      {...} (--diagnostics: call_phases, medians over the timed calls, and sd_<phase> their
      standard deviations)}
  {"cmd": "detach", "arm": NAME}   tell the runner to end and forget it -> {"ok", "runner": {...}}
  {"cmd": "exit"}
A failing command replies {"ok": false, "error": "..."}; the session stays usable when it can.
"""

import argparse
import gc
import importlib.util
import json
import os
import random
import math
import secrets
import select
import socket
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import call_wait  # noqa: E402
import compare  # noqa: E402
import shared_buffers  # noqa: E402
import stream_flags  # noqa: E402
from session_layout import flatten, layout_of, slot_seed, structure_of, views  # noqa: E402


# Under the GPU timer, how long after a runner's answer its stream may still take to say "done"
# (an honest runner answers only after its device work, so this is slack, not a call's time).
ANSWER_GRACE_S = 2.0


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def call_phases(started, sent, ended, runner):
    """One call's time by phase in ms, from the owner's clock readings (perf_counter_ns) and the
    runner's diagnostics (perf_counter seconds: the same CLOCK_MONOTONIC); None when the runner
    sent none or not numbers. A candidate's runner can write anything there, so these are for
    people looking for where time goes, never a sample."""
    keys = ("received", "forward_start", "forward_done", "outputs_done", "forward_gpu_ms")
    if not isinstance(runner, dict) or not all(
            isinstance(runner.get(key), (int, float)) and not isinstance(runner.get(key), bool)
            and math.isfinite(runner[key]) for key in keys):
        return None
    sent_s, ended_s = sent / 1e9, ended / 1e9
    return {"inputs_in": (sent - started) / 1e6,
            "to_runner": (runner["received"] - sent_s) * 1e3,
            "runner_before_forward": (runner["forward_start"] - runner["received"]) * 1e3,
            "forward": (runner["forward_done"] - runner["forward_start"]) * 1e3,
            "forward_gpu": float(runner["forward_gpu_ms"]),
            "outputs_out": (runner["outputs_done"] - runner["forward_done"]) * 1e3,
            "to_owner": (ended_s - runner["outputs_done"]) * 1e3,
            "total": (ended - started) / 1e6}


def _foreign_types(structure):
    """The first type name in a runner's structure that is not a tensor, a number, None or a
    sequence, or ''."""
    if isinstance(structure, list):
        if structure and structure[0] == "mismatch":  # a tensor of another dtype or shape
            return ""
        if len(structure) == 2 and structure[0] == "foreign":  # the runner met a non-tensor leaf
            return str(structure[1]) or "?"
        for item in structure[1:] if structure and structure[0] in ("tuple", "list") else structure:
            found = _foreign_types(item)
            if found:
                return found
        return ""
    if structure in ("t", "b", "n", None) or not isinstance(structure, str):
        return ""
    return structure


class Arm:
    def __init__(self, name, conn, inputs, outputs):
        self.name = name
        self.conn = conn
        self.inputs = inputs    # Buffer, read-only to the runner
        self.outputs = outputs  # Buffer, written by the runner
        self.forwards = 1    # forwards per call (attach's "forwards", at most --forwards)
        self.in_views = []   # per forward of a call, the views of its slot
        self.out_views = []
        self.calls = 0
        # The GPU call timer (--call-timer gpu): the flags shared with the runner, the count of
        # calls they have ordered, the owner's private copy of the output slots (what is judged),
        # a side stream that can release the owner's own stream when a runner never answers, and
        # the two events of the window.
        self.flags = None
        self.flag_buffer = None
        self.flag_count = 0
        self.private = None
        self.private_views = []
        self.side = None
        self.events = None
        self.lead_cycles = 0  # --call-lead-us in the GPU's clock cycles (torch.cuda._sleep's unit)

    def judged_views(self, slot):
        """The output slot the owner judges: its private copy under the GPU timer (taken before
        the window closed), else the shared slot itself."""
        return self.private_views[slot] if self.private is not None else self.out_views[slot]


class Owner:
    def __init__(self, args, torch):
        self.args = args
        self.torch = torch
        self.device = args.device
        self.cuda = self.device.startswith("cuda")
        self.task = load_module("cudaagent_session_task", args.task)
        self.arms = {}
        self.flush_buffer = None
        self.model = None
        self.chooser = random.SystemRandom()

    # Inputs: the task's own get_inputs(), seeded, made on the device where torch can.
    def make_inputs(self, seed):
        torch = self.torch
        torch.manual_seed(int(seed) % (1 << 63))
        if self.cuda and hasattr(torch.device("cuda"), "__enter__"):
            try:
                with torch.device(self.device):
                    inputs = list(self.task.get_inputs())
            except Exception:  # task code that cannot run under a default device: the usual way
                torch.manual_seed(int(seed) % (1 << 63))
                inputs = list(self.task.get_inputs())
        else:
            inputs = list(self.task.get_inputs())
        return [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]

    def inputs_of_call(self, seed):
        """Fresh inputs from `seed`, their leaves and their number leaves (sent in the call's
        message); a ValueError when get_inputs() no longer fits the session's layout."""
        torch = self.torch
        inputs = self.make_inputs(seed)
        leaves = flatten(torch, inputs, "input")
        scalars = []
        for spec, (_, leaf) in zip(self.input_layout, leaves):
            if "dtype" in spec:
                if not isinstance(leaf, torch.Tensor) or list(leaf.shape) != spec["shape"] or \
                        str(leaf.dtype).replace("torch.", "") != spec["dtype"]:
                    raise ValueError(f"{spec['path']}: get_inputs() changed shape or dtype between "
                                     f"seeds; a session needs a fixed layout")
            else:
                scalars.append(leaf)
        return inputs, leaves, scalars

    def init(self, command):
        torch = self.torch
        started = time.monotonic()
        phases = {}
        self.atol = float(command.get("atol", 1e-2))
        self.rtol = float(command.get("rtol", 1e-2))
        seed = int(command["seed"])
        torch.manual_seed(seed % (1 << 63))
        init_inputs = list(self.task.get_init_inputs())
        self.model = self.task.Model(*init_inputs).to(self.device).eval()
        state_dir = command["state_dir"]
        torch.save(self.model.state_dict(), os.path.join(state_dir, "state.pt"))
        torch.save(init_inputs, os.path.join(state_dir, "init.pt"))
        phases["build_model"] = time.monotonic() - started
        mark = time.monotonic()
        inputs = self.make_inputs(seed ^ 0x5DEECE66D)
        with torch.no_grad():
            output = self.model(*inputs)
        if self.cuda:
            torch.cuda.synchronize()
        phases["first_call"] = time.monotonic() - mark
        self.input_leaves = flatten(torch, inputs, "input")
        self.input_layout, self.input_bytes = layout_of(torch, self.input_leaves)
        self.output_leaves = flatten(torch, output)
        self.output_layout, self.output_bytes = layout_of(torch, self.output_leaves)
        self.output_structure = structure_of(torch, output)
        self.socket_dir = command["socket_dir"]
        # Every kernel a call's own work uses (the comparison, the poison fill), once here: their
        # first use loads them (seconds with lazily loaded, compressed kernel images), and that
        # must not land in a candidate's first call.
        mark = time.monotonic()
        tensors = [(path, leaf) for path, leaf in flatten(torch, output) if isinstance(leaf, torch.Tensor)]
        compare.compare_outputs(torch, tensors, [(path, leaf.clone()) for path, leaf in tensors],
                                self.atol, self.rtol)
        for _, leaf in tensors:
            self.poison(leaf.clone())
        for _, leaf in self.input_leaves:
            if isinstance(leaf, torch.Tensor):
                leaf.clone().copy_(leaf)
        device = {"type": "cuda" if self.cuda else "cpu"}
        if self.cuda:
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            l2 = int(getattr(props, "L2_cache_size", 0) or 0)
            flush = max(2 * l2, 256 << 20)
            self.flush_buffer = torch.empty(flush, dtype=torch.uint8, device=self.device)
            self.flush_buffer.zero_()
            torch.cuda.synchronize()
            device.update({"name": props.name, "l2_bytes": l2 or None, "flush_bytes": flush,
                           "sm_count": props.multi_processor_count})
        phases["warm_call_path"] = time.monotonic() - mark
        return {"ok": True, "inputs": self.input_layout, "outputs": self.output_layout,
                "output_structure": self.output_structure, "input_bytes": self.input_bytes,
                "output_bytes": self.output_bytes, "device": device, "torch": torch.__version__,
                "phases_s": phases}

    def attach(self, command):
        name = command["arm"]
        # The evaluator's N for this task (cut to fit its memory for the slots), never above
        # --forwards; checked before any runner connects.
        forwards = int(command.get("forwards", self.args.forwards))
        if not 1 <= forwards <= self.args.forwards:
            raise ValueError(f"attach asked for {forwards} forwards per call; --forwards allows 1 to "
                             f"{self.args.forwards}")
        if name in self.arms:
            self.detach({"arm": name})
        # Each arm's socket in its own directory: a runner's sandbox sees its own arm's alone.
        path = os.path.join(self.socket_dir, name, f"{name}.sock")
        if os.path.exists(path):
            os.unlink(path)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server.bind(path)
        os.chmod(path, 0o666)  # a runner may run as another user than the owner
        server.listen(1)
        server.settimeout(float(command.get("timeout_s", 300)))
        try:
            conn, _ = server.accept()
        finally:
            server.close()
            os.unlink(path)  # nobody else connects to this arm
        conn.settimeout(float(command.get("timeout_s", 300)))
        hello = json.loads(conn.recv(4096) or b"{}")
        if not secrets.compare_digest(str(hello.get("token", "")), str(command["token"])):
            conn.close()
            raise PermissionError(f"the runner on {name}.sock did not present the arm's token")
        inputs = shared_buffers.Buffer.create(self.device, max(forwards * self.input_bytes, 1))
        outputs = shared_buffers.Buffer.create(self.device, max(forwards * self.output_bytes, 1))
        arm = Arm(name, conn, inputs, outputs)
        arm.forwards = forwards
        arm.in_views = [views(self.torch, inputs, self.input_layout, k * self.input_bytes)
                        for k in range(forwards)]
        arm.out_views = [views(self.torch, outputs, self.output_layout, k * self.output_bytes)
                         for k in range(forwards)]
        shared = [inputs.fd, outputs.fd]
        if self.args.call_timer == "gpu":
            self.arm_gpu_timer(arm)
            shared.append(arm.flag_buffer.fd)
        layout = {"device": self.device, "input_bytes": inputs.size, "output_bytes": outputs.size,
                  "inputs": self.input_layout, "outputs": self.output_layout,
                  "forwards": forwards, "input_stride": self.input_bytes,
                  "output_stride": self.output_bytes,
                  "output_structure": self.output_structure, "spin_ms": self.args.spin_ms,
                  "diagnostics": self.args.diagnostics, "forward_sync": self.args.forward_sync,
                  "call_timer": self.args.call_timer, "flag_bytes": stream_flags.BYTES}
        shared_buffers.send_fds(conn, shared, json.dumps(layout).encode())
        ready = json.loads(conn.recv(1 << 16) or b"{}")
        if not ready.get("ready"):
            conn.close()
            raise RuntimeError(f"the runner of {name} did not get ready: {str(ready)[:300]}")
        self.arms[name] = arm
        return {"ok": True, "runner": ready}

    def detach(self, command):
        arm = self.arms.pop(command["arm"], None)
        if arm is None:
            return {"ok": True, "runner": None}
        report = None
        try:
            # The report decides the verdict (a runner without one earns no PASS), and the runner
            # flushes its kernel trace before it answers: time for that, inside the driver's 30 s.
            arm.conn.settimeout(20)
            arm.conn.send(json.dumps({"cmd": "exit"}).encode())
            report = json.loads(arm.conn.recv(1 << 16) or b"null")
        except (OSError, ValueError):
            pass
        arm.conn.close()
        arm.inputs.close()
        arm.outputs.close()
        for buffer in (arm.flag_buffer, arm.private):
            if buffer is not None:
                buffer.close()
        return {"ok": True, "runner": report}

    def arm_gpu_timer(self, arm):
        """What the GPU call timer needs per arm (stream_flags.py): the flags, zeroed before the
        runner maps them, and a private copy of the output slots of the same layout."""
        torch = self.torch
        arm.flag_buffer = shared_buffers.Buffer.create(self.device, stream_flags.BYTES)
        arm.flag_buffer.tensor(torch, torch.int32, [stream_flags.BYTES // 4]).zero_()
        arm.flags = stream_flags.StreamFlags(arm.flag_buffer)
        arm.private = shared_buffers.Buffer.create(self.device, arm.outputs.size)  # never shared
        arm.private_views = [views(torch, arm.private, self.output_layout, k * self.output_bytes)
                             for k in range(arm.forwards)]
        arm.side = torch.cuda.Stream()
        arm.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        if self.args.call_lead_us > 0:
            arm.lead_cycles = int(self.args.call_lead_us * self.sleep_cycles_per_us())
        torch.cuda.synchronize()

    def sleep_cycles_per_us(self):
        """How many of torch.cuda._sleep's clock cycles make a microsecond on this GPU now, from
        one timed sleep (the SM clock moves a little with the load: the lead is approximate)."""
        torch = self.torch
        if getattr(self, "_cycles_per_us", None) is None:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(1000)  # loaded before it is timed
            start.record()
            torch.cuda._sleep(2_000_000)
            end.record()
            end.synchronize()
            self._cycles_per_us = 2_000_000 / max(start.elapsed_time(end) * 1e3, 1.0)
        return self._cycles_per_us

    def poison(self, view):
        """Fills an output slot with what no right answer holds: NaN, or random integers."""
        torch = self.torch
        if view.is_floating_point():
            view.fill_(float("nan"))
        elif view.dtype == torch.bool:
            view.fill_(True)
        else:
            view.copy_(torch.randint(-(1 << 30), 1 << 30, view.shape, device=view.device).to(view.dtype))

    def poison_slots(self, slot_views):
        """Poisons every tensor view of every slot (number leaves have no view)."""
        for views_of_slot in slot_views:
            for view in views_of_slot:
                if view is not None:
                    self.poison(view)

    def calls(self, command):
        torch = self.torch
        arm = self.arms[command["arm"]]
        model = command.get("model", "candidate")
        timeout = float(command.get("timeout_s", 60))
        flush = bool(command.get("flush", True)) and self.flush_buffer is not None
        # Which calls run under the runner's operator audit is chosen here, where the candidate
        # cannot see it; an audited call is checked like any other but its time is not a sample.
        audit_fraction = float(command.get("audit_fraction", 0.0))
        results, stopped = [], None
        # Where the owner's own time goes around the timed calls (inputs, reference, preparation,
        # judgement), summed over the batch, in ms: the price of checking every call.
        owner_ms = {"inputs": 0.0, "reference": 0.0, "prepare": 0.0, "judge": 0.0}
        phases = []  # with --diagnostics: where each timed call's time went (call_phases)
        forwards = arm.forwards
        arm.conn.settimeout(timeout)
        # A null call's inputs are copied in like any call's but read by no model and judged by
        # no one: drawing them afresh for every null call would cost the owner's time (a
        # millisecond a call for 16 MB on an H100, outside the timed window) and change nothing
        # the window holds, so a null batch draws them once.
        null_inputs = None
        gc.disable()
        try:
            for index, seed in enumerate(command["seeds"]):
                mark = time.perf_counter()
                # A call is the arm's forwards, each on its own fresh inputs in its own slot.
                if null_inputs is not None:
                    slot_inputs, slot_leaves, slot_scalars = null_inputs
                else:
                    slot_inputs, slot_leaves, slot_scalars = [], [], []
                    for slot in range(forwards):
                        inputs, leaves, scalars = self.inputs_of_call(slot_seed(seed, slot))
                        slot_inputs.append(inputs)
                        slot_leaves.append(leaves)
                        slot_scalars.append(scalars)
                    if model == "null":
                        null_inputs = (slot_inputs, slot_leaves, slot_scalars)
                owner_ms["inputs"] += (time.perf_counter() - mark) * 1e3
                mark = time.perf_counter()
                expected = None
                if model != "null":  # a null call's outputs are ready-made zeros: nothing to judge
                    expected = []
                    with torch.no_grad():
                        for inputs in slot_inputs:
                            expected.append(flatten(torch, self.model(*inputs)))
                    if self.cuda:
                        torch.cuda.synchronize()
                owner_ms["reference"] += (time.perf_counter() - mark) * 1e3
                mark = time.perf_counter()
                self.poison_slots(arm.out_views)
                if flush:
                    self.flush_buffer.zero_()
                if self.cuda:
                    torch.cuda.synchronize()
                audited = audit_fraction > 0 and (arm.calls == 0 or self.chooser.random() < audit_fraction)
                arm.calls += 1
                command_out = {"cmd": "call", "model": model, "slot_scalars": slot_scalars, "audit": audited}
                owner_ms["prepare"] += (time.perf_counter() - mark) * 1e3
                exchange = self.exchange_gpu if arm.flags is not None else self.exchange_host
                started, sent, ended, raw, gpu_ms, lost = exchange(arm, slot_leaves, command_out, timeout)
                if lost:
                    stopped = dict(lost, call=index)
                    break
                # The time of one forward: the call's, over its forwards.
                host_ms = (ended - started) / 1e6 / forwards
                timing = {"host_ms": host_ms} if gpu_ms is None else {"host_ms": host_ms, "gpu_ms": gpu_ms / forwards}
                if not raw:
                    stopped = {"call": index, "why": "runner ended", "detail": "the runner closed the session"}
                    break
                try:
                    reply = json.loads(raw)
                except ValueError:
                    reply = {"ok": False, "error": "an answer that is not JSON"}
                if self.cuda:
                    torch.cuda.synchronize()
                if not isinstance(reply, dict) or not reply.get("ok"):
                    detail = str(reply.get("error", reply) if isinstance(reply, dict) else reply)[:2000]
                    stopped = {"call": index, "why": "runner error", "detail": detail}
                    results.append({"seed": seed, **timing, "check": None,
                                    "start_ns": started, "end_ns": ended,
                                    "runner": reply if isinstance(reply, dict) else None})
                    break
                mark = time.perf_counter()
                check = self.judge_call(arm, expected, slot_leaves, reply) if expected is not None else None
                owner_ms["judge"] += (time.perf_counter() - mark) * 1e3
                if self.args.diagnostics and not audited:
                    call = call_phases(started, sent, ended, reply.get("diagnostics"))
                    if call:
                        phases.append(call)
                if arm.flags is not None:  # a runner that reads a slot before "go" reads poison
                    self.poison_slots(arm.in_views)
                # start_ns and end_ns: the call's window on CLOCK_MONOTONIC (perf_counter_ns),
                # the clock the candidate's kernel trace is stamped with.
                results.append({"seed": seed, **timing, "check": check,
                                "audited": audited, "start_ns": started, "end_ns": ended,
                                "runner": {k: reply[k] for k in ("first_call_s",) if k in reply}})
        finally:
            gc.enable()
        answer = {"ok": True, "calls": results, "stopped": stopped,
                  "owner_ms": {name: round(value, 3) for name, value in owner_ms.items()}}
        if phases:
            # Each phase's median, and its spread over the calls (sd_<phase>): which phase carries
            # the calls' variance is what decides where precision is lost.
            answer["phases_ms"] = {name: round(statistics.median(p[name] for p in phases), 4) for name in phases[0]}
            answer["phases_ms"].update({"sd_" + name: round(statistics.pstdev(p[name] for p in phases), 4)
                                        for name in phases[0]})
        return answer

    def copy_inputs(self, arm, slot_leaves):
        for slot_views, leaves in zip(arm.in_views, slot_leaves):
            for view, (_, leaf) in zip(slot_views, leaves):
                if view is not None:
                    view.copy_(leaf)

    def exchange_host(self, arm, slot_leaves, command, timeout):
        """One call timed on the owner's host clock: the inputs copied in (and finished), the
        message, the answer. -> (started_ns, sent_ns, ended_ns, raw answer, None, lost)"""
        started = time.perf_counter_ns()
        self.copy_inputs(arm, slot_leaves)
        if self.cuda:
            self.torch.cuda.synchronize()
        sent = time.perf_counter_ns()
        try:
            arm.conn.send(json.dumps(command).encode())
            raw = call_wait.receive(arm.conn, 1 << 16, self.args.spin_ms / 1e3)
        except socket.timeout:
            return started, sent, 0, None, None, {"why": "timeout", "detail": f"no answer within {timeout:g} s"}
        except OSError as error:
            return started, sent, 0, None, None, {"why": "runner ended", "detail": str(error)[:200]}
        return started, sent, time.perf_counter_ns(), raw, None, None

    def exchange_gpu(self, arm, slot_leaves, command, timeout):
        """One call timed on the owner's CUDA events, ordered against the runner's stream by the
        flags (stream_flags.py); the whole chain is queued before the message, so neither message
        is in the window. -> (started_ns, sent_ns, ended_ns, raw answer, window ms, lost)"""
        torch = self.torch
        stream = torch.cuda.current_stream()
        flags, (t0, t1) = arm.flags, arm.events
        arm.flag_count += 1
        n = arm.flag_count
        started = time.perf_counter_ns()
        flags.wait(stream, "ready", n)
        if arm.lead_cycles:
            # The runner has the call; a pause on the owner's stream, before the window opens,
            # lets its launches of the forward be queued by the time "go" is written.
            torch.cuda._sleep(arm.lead_cycles)
        t0.record(stream)
        self.copy_inputs(arm, slot_leaves)
        flags.write(stream, "go", n)
        flags.wait(stream, "done", n)
        size = arm.outputs.size
        arm.private.tensor(torch, torch.uint8, [size]).copy_(arm.outputs.tensor(torch, torch.uint8, [size]))
        t1.record(stream)
        sent = time.perf_counter_ns()
        try:
            arm.conn.send(json.dumps(dict(command, flag=n)).encode())
        except OSError as error:
            self.release(arm, n)
            return started, sent, 0, None, None, {"why": "runner ended", "detail": str(error)[:200]}
        lost = self.wait_window(arm, t1, timeout)
        if lost:
            self.release(arm, n)
            if lost.get("answer") is not None:  # an error the runner reported: the caller's to judge
                return started, sent, time.perf_counter_ns(), lost["answer"], None, None
            return started, sent, 0, None, None, lost
        try:
            raw = call_wait.receive(arm.conn, 1 << 16, self.args.spin_ms / 1e3)
        except socket.timeout:
            return started, sent, 0, None, None, {"why": "timeout", "detail": f"no answer within {timeout:g} s"}
        except OSError as error:
            return started, sent, 0, None, None, {"why": "runner ended", "detail": str(error)[:200]}
        return started, sent, time.perf_counter_ns(), raw, t0.elapsed_time(t1), None

    def wait_window(self, arm, t1, timeout):
        """Waits until the window's end event has run. None, or why it never will: the runner's
        stream never said done within the call's timeout, or the runner answered (or ended) and its
        stream still had not said done ANSWER_GRACE_S later. A runner's error answer comes back as
        {"answer": raw}, for the caller to read as any answer."""
        spin_until = time.perf_counter() + self.args.spin_ms / 1e3
        deadline = time.monotonic() + timeout
        answered = None
        while not t1.query():
            now = time.monotonic()
            if answered is None and select.select([arm.conn], [], [], 0)[0]:
                answered = now
            if answered is not None and now - answered > ANSWER_GRACE_S:
                try:
                    raw = arm.conn.recv(1 << 16)
                except OSError:
                    raw = b""
                if not raw:
                    return {"why": "runner ended", "detail": "the runner closed the session"}
                try:
                    said_ok = json.loads(raw).get("ok")
                except (ValueError, AttributeError):
                    said_ok = None
                if said_ok is False:
                    return {"answer": raw}
                return {"why": "timeout", "detail": f"the runner answered, but its stream never said done "
                                                    f"within {ANSWER_GRACE_S:g} s"}
            if now > deadline:
                return {"why": "timeout", "detail": f"the runner's stream did not say done within {timeout:g} s"}
            if time.perf_counter() < spin_until:
                os.sched_yield()
            else:
                time.sleep(2e-4)  # a long call: the host's wake-up is outside the GPU's window
        return None

    def release(self, arm, n):
        """Frees the owner's stream from a runner that never said ready or done: the flags written
        from the owner's side stream, then the window's end waited for."""
        arm.flags.write(arm.side, "ready", n)
        arm.flags.write(arm.side, "done", n)
        arm.events[1].synchronize()

    def judge_call(self, arm, expected, slot_leaves, reply):
        """Every forward of a call judged by the same rules: the first that fails is the call's
        check; when all match, the call's errors are the worst of its forwards'."""
        answers = reply.get("slots")
        if not isinstance(answers, list) or len(answers) != len(slot_leaves):
            return {"match": False, "failure": "format",
                    "reason": f"the runner answered for {len(answers) if isinstance(answers, list) else 'no'} "
                              f"forwards of {len(slot_leaves)}",
                    "max_abs_error": 0.0, "max_rel_error": 0.0, "mismatched": 0, "worst": ""}
        worst = None
        for slot, (want, leaves, answer) in enumerate(zip(expected, slot_leaves, answers)):
            check = self.judge(arm, slot, want, leaves, answer if isinstance(answer, dict) else {})
            if not check.get("match"):
                return check
            if worst is None or check.get("max_rel_error", 0) > worst.get("max_rel_error", 0):
                worst = check
        return worst

    def judge(self, arm, slot, expected, leaves, reply):
        torch = self.torch
        want_tensors, got_tensors = [], []
        scalar_values = reply.get("scalars", [])
        scalar_index = 0
        structure_ok = reply.get("structure") == self.output_structure
        for spec, view, (path, leaf) in zip(self.output_layout, arm.judged_views(slot), expected):
            if view is not None:
                want_tensors.append((path, leaf))
                got_tensors.append((path, view))
            else:
                got = scalar_values[scalar_index] if scalar_index < len(scalar_values) else None
                scalar_index += 1
                want_tensors.append((path, torch.tensor([leaf], dtype=torch.float64)))
                if not isinstance(got, (bool, int, float)) or isinstance(got, bool) != isinstance(leaf, bool):
                    structure_ok = False
                    got = 0.0
                got_tensors.append((path, torch.tensor([got], dtype=torch.float64)))
        if not structure_ok:
            foreign = _foreign_types(reply.get("structure"))
            if foreign:
                return {"match": False, "failure": "type",
                        "reason": f"the output holds a foreign type ({foreign[:100]}) where the reference "
                                  f"has plain tensors and numbers",
                        "max_abs_error": 0.0, "max_rel_error": 0.0, "mismatched": 0, "worst": ""}
            got = reply.get("structure")
            if isinstance(got, list) and got and got[0] == "mismatch":
                reason = f"an output tensor is {str(got[1])[:40]} {str(got[2])[:80]} where the reference's is not"
            else:
                reason = (f"the output's structure {str(got)[:200]} is not the reference's "
                          f"{str(self.output_structure)[:200]}")
            return {"match": False, "failure": "format", "reason": reason,
                    "max_abs_error": 0.0, "max_rel_error": 0.0, "mismatched": 0, "worst": ""}
        result = compare.compare_outputs(torch, want_tensors, got_tensors, self.atol, self.rtol)
        # The runner maps its inputs read-only, so a write faults in the runner; checked anyway.
        for view, (path, leaf) in zip(arm.in_views[slot], leaves):
            if view is not None and not torch.equal(view, leaf):
                result.update(match=False, failure="inputs_modified",
                              reason=f"{path}: the shared input changed during the call")
                break
        return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", required=True, help="the pristine model.py")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--spin-ms", type=float, default=0.0,
                        help="how long the owner and its runners spin on a call's messages before "
                             "they block (call_wait.py); 0 blocks at once")
    parser.add_argument("--diagnostics", action="store_true",
                        help="runners report when each phase of a call ended; a calls reply adds "
                             "phases_ms, the median time of each phase over its timed calls and "
                             "its standard deviation (sd_<phase>)")
    parser.add_argument("--forwards", type=int, default=1,
                        help="the most forwards per call (an attach says how many for its arm), each on "
                             "its own fresh inputs in its own slot of the "
                             "shared buffers and each judged; a call's time over them is one sample, "
                             "so the fixed cost of a call weighs 1/N as much")
    parser.add_argument("--forward-sync", choices=("each", "call"), default="each",
                        help="when a runner waits for the device in a call: after each forward and "
                             "its copy (each), or once after the last (call)")
    parser.add_argument("--call-timer", choices=("host", "gpu"), default="host",
                        help="what times a call: the owner's host clock around the inputs' copy, the "
                             "message and the answer (host), or two CUDA events on the owner's stream "
                             "ordered against the runner's by flags the GPU writes (gpu, stream_flags.py)")
    parser.add_argument("--call-lead-us", type=float, default=0.0,
                        help="--call-timer gpu: how long the owner's stream pauses after the runner "
                             "says ready and before the window opens, so that the runner's launches "
                             "are queued before the inputs' copy ends (0: no pause)")
    parser.add_argument("--reply-fd", type=int, default=3)
    args = parser.parse_args()
    if not 1 <= args.forwards <= 64:
        parser.error("--forwards must be 1 to 64")
    if args.call_timer == "gpu" and not args.device.startswith("cuda"):
        parser.error("--call-timer gpu needs a CUDA device")
    if not 0 <= args.call_lead_us <= 10000:
        parser.error("--call-lead-us must be 0 to 10000")
    reply_file = os.fdopen(args.reply_fd, "w", buffering=1)

    def reply(message):
        reply_file.write(json.dumps(message, allow_nan=False, default=float) + "\n")
        reply_file.flush()

    import torch

    if args.device.startswith("cuda"):
        torch.cuda.init()
        torch.zeros(1, device=args.device)
    owner = Owner(args, torch)
    for line in sys.stdin:
        if not line.strip():
            continue
        command = json.loads(line)
        name = command.get("cmd")
        try:
            if name == "init":
                reply(owner.init(command))
            elif name == "attach":
                reply(owner.attach(command))
            elif name == "calls":
                reply(owner.calls(command))
            elif name == "detach":
                reply(owner.detach(command))
            elif name == "exit":
                for arm in list(owner.arms):
                    owner.detach({"arm": arm})
                reply({"ok": True})
                return 0
            else:
                raise ValueError(f"unknown command {name!r}")
        except Exception as error:  # the driver decides what a failed command means
            import traceback

            traceback.print_exc()
            reply({"ok": False, "error": f"{type(error).__name__}: {error}"[:2000]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
