"""A warm harness worker: imports torch once, then runs each job in a fresh forked child.

The verifier keeps one worker for the reference and one for candidates (each in its own OS
sandbox), so a candidate costs a fork instead of a Python start and a torch import. The parent never
runs job code and never touches the GPU (CUDA does not survive fork): every job starts from the same
clean state, and a crash, a hang or a poisoned interpreter ends with its child.

Protocol, one JSON object per line. The worker writes {"ready": true, "torch": VERSION} once
imported. Each request on stdin: {"job": NONCE, "script": PATH, "argv": [...], "stdin": TEXT,
"cwd": DIR, "limits": {"cpu_seconds", "address_space_bytes", "data_bytes", "file_size_bytes"}, "output_cap": N,
and optionally "cpus": [N, ...], the child's CPU affinity, set before anything of the job runs};
the reply on stdout: {"job": NONCE, "exit": CODE} or {"job": NONCE, "signal": N}, with "output"
(the first output_cap bytes of the child's stdout and stderr, merged), "truncated", and the child's
"wall_seconds", "user_cpu_seconds", "system_cpu_seconds", "max_rss_bytes". The parent is not
dumpable, and a child keeps none of its descriptors, so job code cannot write on this channel;
the verifier's timeouts and verdicts never depend on it anyway, beyond "how did the child end".

What a job leaves running is ended with it: the worker is a child subreaper, so every process a
job forked and orphaned (a double-forked, setsid daemon — attack catalog case 38) becomes the
worker's child; once the job's child has ended, the worker kills and reaps all of them before it
answers, and says how many in "stray_processes" (a job that leaves processes behind is not an
honest harness job: the verifier flags it). If some cannot be ended, "strays_survived": true, and
the driver must replace the worker.

Interactive jobs ("interactive": true, for cudaagent-profile's timing sessions): the child also
gets a command pipe as its stdin and a reply pipe as fd 3 (its sys.argv is followed by nothing
new: the script knows to answer on fd 3). While the child runs, each driver line
{"job": NONCE, "send": TEXT} is written to the child's stdin as TEXT + newline, and
{"job": NONCE, "close": true} closes it; each line the child writes on fd 3 comes back as
{"job": NONCE, "line": TEXT} (at most 1 MiB; longer lines are cut and marked "cut": true). The
final answer is the one above. The child writes only into pipes this process reads and wraps: a
line it writes is a string inside our JSON, never a message of ours.
"""

import ctypes
import fcntl
import importlib
import json
import os
import resource
import runpy
import select
import shutil
import signal
import sys
import threading
import time

_LIMITS = {
    "cpu_seconds": resource.RLIMIT_CPU,
    "address_space_bytes": resource.RLIMIT_AS,
    "data_bytes": resource.RLIMIT_DATA,
    "file_size_bytes": resource.RLIMIT_FSIZE,
    "processes": resource.RLIMIT_NPROC,  # binds only a job that does not run as root
}


PR_SET_CHILD_SUBREAPER = 36


def _child_pids():
    """Our children, from /proc (in the sandbox's PID namespace, its own /proc is small)."""
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses; cut at the last ')'.
        fields = text[text.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(name))
    return found


def _end_strays():
    """Kills and reaps every child left after a job (orphans adopted as subreaper). Returns
    (killed, all_ended). Repeats, since a stray may fork while its siblings are killed."""
    killed = 0
    for _ in range(100):
        while True:  # reap what has already ended
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
        children = _child_pids()
        if not children:
            return killed, True
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    return killed, not _child_pids()


def _scrub(directories):
    """Empties each directory (the sandbox's private /tmp and /dev/shm) once a job and everything
    it started have ended, so the next job of this worker starts from empty writable space.
    Returns the number of entries removed, or None when nothing was asked."""
    if not directories:
        return None
    removed = 0
    for directory in directories:
        try:
            entries = os.listdir(directory)
        except OSError:
            continue
        for name in entries:
            path = os.path.join(directory, name)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
                removed += 1
            except OSError:
                pass
    return removed


def _drain(fd, cap, sink):
    """Reads fd to its end, keeping the first `cap` bytes; sink = [bytes, truncated]."""
    kept = bytearray()
    truncated = False
    while True:
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:
            continue
        if not chunk:
            break
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        if len(chunk) > max(room, 0):
            truncated = True
    os.close(fd)
    sink[0] = bytes(kept)
    sink[1] = truncated


def _run_child(request, output_fd, session=None):
    """In the forked child: never returns. `session` = (command read end, reply write end) for an
    interactive job: they become the child's stdin and fd 3."""
    code = 70
    try:
        # Above every target number first, so that no dup2 below overwrites a descriptor still needed.
        output_fd = fcntl.fcntl(output_fd, fcntl.F_DUPFD, 10)
        if session is not None:
            session = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in session)
        if session is None:
            stdin_read, stdin_write = os.pipe()
            data = request.get("stdin", "").encode()
            if len(data) > 60000:  # must fit the pipe buffer: it is written before anything reads
                os.write(output_fd, b"worker: a job's stdin is limited to 60000 bytes\n")
                os._exit(70)
            os.write(stdin_write, data)
            os.close(stdin_write)
        else:
            stdin_read = session[0]
            os.dup2(session[1], 3)
        os.dup2(stdin_read, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        # Nothing of the parent's survives: not the request and reply pipes, not a log.
        os.closerange(3 if session is None else 4, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        for name, value in request.get("limits", {}).items():
            if name in _LIMITS and value is not None:
                resource.setrlimit(_LIMITS[name], (int(value), int(value)))
        if request.get("cpus"):
            # Before the script: the threads it starts (torch's, CUDA's) inherit the placement.
            try:
                os.sched_setaffinity(0, [int(cpu) for cpu in request["cpus"]])
            except (OSError, ValueError) as error:
                os.write(2, f"worker: cannot place the job on CPUs {request['cpus']}: {error}\n".encode())
                os._exit(70)
        if request.get("cwd"):
            os.chdir(request["cwd"])
        # Python ignores SIGXFSZ and SIGPIPE at start; a job ends by the file size limit as any
        # other process would, not with an exception it could catch.
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGXFSZ):
            signal.signal(number, signal.SIG_DFL)
        script = request["script"]
        sys.argv = [script] + list(request.get("argv", []))
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except BaseException:  # the scripts report their own failures; this is a last resort
            import traceback

            traceback.print_exc()
            code = 3
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)


class _Requests:
    """The driver's request lines, buffered, so an interactive job and the main loop share them."""

    def __init__(self, fd):
        self.fd = fd
        self.pending = b""
        self.closed = False

    def has_line(self):
        return b"\n" in self.pending

    def fill(self):
        """One read; False at end of input."""
        chunk = os.read(self.fd, 65536)
        if not chunk:
            self.closed = True
            return False
        self.pending += chunk
        return True

    def take_line(self):
        line, self.pending = self.pending.split(b"\n", 1)
        return line


_MAX_RELAYED_LINE = 1 << 20


def _relay(request, pid, requests, reply, command_write, reply_read):
    """Relays an interactive job's lines until its child exits; returns (status, usage)."""
    nonce = request.get("job")
    child_lines = b""
    reply_open = True
    ended = None  # (status, usage) once the child was reaped
    try:
        while True:
            if ended is None:
                waited, status, usage = os.wait4(pid, os.WNOHANG)
                if waited == pid:
                    ended = (status, usage)
            if ended is not None and not reply_open:
                return ended
            if requests.has_line():
                line = requests.take_line()
                if not line.strip():
                    continue
                message = json.loads(line)
                if message.get("job") != nonce:
                    raise ValueError("a request for another job arrived during an interactive job")
                if command_write is not None and "send" in message:
                    try:
                        os.write(command_write, (str(message["send"]) + "\n").encode())
                    except OSError:  # the child stopped reading: its end is on its way
                        pass
                if command_write is not None and message.get("close"):
                    os.close(command_write)
                    command_write = None
                continue
            watched = [reply_read]
            if ended is None and not requests.closed:
                watched.append(requests.fd)
            ready, _, _ = select.select(watched, [], [], 0.05)
            if requests.fd in ready and not requests.fill():
                os.kill(pid, signal.SIGKILL)  # the driver went away: end the job
            if reply_read not in ready:
                if ended is not None:
                    return ended  # exited; a descendant may hold the pipe: do not wait for it
                continue
            chunk = os.read(reply_read, 65536)
            if not chunk:
                reply_open = False
                continue
            child_lines += chunk
            while b"\n" in child_lines or len(child_lines) > _MAX_RELAYED_LINE:
                end = child_lines.find(b"\n")
                cut = end < 0 or end > _MAX_RELAYED_LINE
                if cut:
                    text, child_lines = child_lines[:_MAX_RELAYED_LINE], child_lines[_MAX_RELAYED_LINE:]
                else:
                    text, child_lines = child_lines[:end], child_lines[end + 1:]
                answer = {"job": nonce, "line": text.decode("utf-8", "replace")}
                if cut:
                    answer["cut"] = True
                reply.write(json.dumps(answer) + "\n")
                reply.flush()
    finally:
        if command_write is not None:
            os.close(command_write)
        os.close(reply_read)


def _serve_one(request, reply, requests):
    cap = int(request.get("output_cap", 1 << 20))
    output_read, output_write = os.pipe()
    session = None
    if request.get("interactive"):
        command_read, command_write = os.pipe()
        reply_read, reply_write = os.pipe()
        session = (command_read, reply_write)
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(output_read)
        if session is not None:
            os.close(command_write)
            os.close(reply_read)
        _run_child(request, output_write, session)
    os.close(output_write)
    sink = [b"", False]
    drainer = threading.Thread(target=_drain, args=(output_read, cap, sink), daemon=True)
    drainer.start()
    if session is None:
        _, status, usage = os.wait4(pid, 0)
    else:
        os.close(command_read)
        os.close(reply_write)
        status, usage = _relay(request, pid, requests, reply, command_write, reply_read)
    strays, strays_ended = _end_strays()
    scrubbed = _scrub(request.get("scrub", []))
    # The child's own descendants may hold the output pipe; do not wait for them long.
    drainer.join(timeout=0.5)
    answer = {"job": request.get("job"), "output": sink[0].decode("utf-8", "replace"),
              "truncated": bool(sink[1]), "wall_seconds": time.monotonic() - started,
              "user_cpu_seconds": usage.ru_utime, "system_cpu_seconds": usage.ru_stime,
              "max_rss_bytes": usage.ru_maxrss * 1024, "stray_processes": strays}
    if not strays_ended:
        answer["strays_survived"] = True
    if scrubbed is not None:
        answer["scrubbed"] = scrubbed
    if os.WIFSIGNALED(status):
        answer["signal"] = os.WTERMSIG(status)
    else:
        answer["exit"] = os.WEXITSTATUS(status)
    reply.write(json.dumps(answer) + "\n")
    reply.flush()


def _warm_torch_dispatch():
    """Enters a Python dispatch mode once, on the CPU, before any job forks: its first use imports
    a good part of torch's Python machinery (seen on the H200: 4.2 s in every candidate's first
    audited call when each forked child paid it). No device is touched here."""
    try:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        class _Warm(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                _ = func.overloadpacket.__name__
                return func(*args, **(kwargs or {}))

        with torch.no_grad(), _Warm():
            (torch.zeros(4) + 1).relu().sum()
    except Exception as error:  # a worker without it is slower, not wrong
        print(f"worker: dispatch warm-up failed: {type(error).__name__}: {error}", file=sys.stderr)


def _forked_child_can_use_cuda():
    """Whether a job forked from us now could still use the GPU. Importing torch.compile's stack
    can ask the CUDA runtime things (how many devices there are) that leave a forked child unable
    to use it ("Cannot re-initialize CUDA in forked subprocess", "invalid argument to
    exchangeDevice"), and torch.cuda's is_initialized() does not show it. So a forked child does
    what a job's first steps do; where it has no GPU to ask about, there is nothing to spoil."""
    torch = sys.modules.get("torch")
    if torch is None:
        return True
    child = os.fork()
    if child == 0:
        try:
            in_bad_fork = getattr(getattr(torch, "_C", None), "_cuda_isInBadFork", None)
            if in_bad_fork is not None and in_bad_fork():
                os._exit(3)
            if not torch.cuda.is_available():
                os._exit(0)
            # A job's own first steps (device_check.py beside us; -I keeps our folder off the
            # path, and this child exits, so the change stays here).
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            import device_check

            device_check.put_to_work(torch)
            os._exit(0)
        except BaseException:  # noqa: BLE001  (any failure: the jobs would meet it too)
            os._exit(3)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _without_optional_preloads():
    """Starts this worker again without its optional preloads (same process, same pipes): a
    worker whose jobs could not use the GPU would fail every job."""
    argv = [arg for arg in sys.argv if not arg.startswith("--preload-optional=")]
    argv.append("--preloads-dropped")
    os.execv(sys.executable, [sys.executable] + argv)


def _preload_optional(names):
    """Imports modules a job would otherwise import in every fork (torch.compile's stack for the
    filter), where this torch has them: one that is missing or fails costs the jobs time, not
    correctness. Returns {name: "preloaded" | "missing: ..."}. A preload that leaves forked jobs
    unable to use CUDA is undone by starting the worker again without any."""
    # (torch's PYTORCH_NVML_BASED_CUDA_CHECK would keep the device count from spoiling the fork,
    # but NVML does not work inside the sandbox: torch.cuda then says there is no GPU.)
    done = {}
    for name in names:
        try:
            importlib.import_module(name)
            done[name] = "preloaded"
        except Exception as error:  # noqa: BLE001  (any failure: the job imports it itself)
            done[name] = f"missing: {type(error).__name__}"
            print(f"worker: --preload-optional={name}: {type(error).__name__}: {error}", file=sys.stderr)
    if names and not _forked_child_can_use_cuda():
        print("worker: the preloads left forked jobs unable to use CUDA; starting again without "
              "them", file=sys.stderr)
        sys.stderr.flush()
        _without_optional_preloads()
    if names and threading.active_count() > 1:
        print(f"worker: {threading.active_count() - 1} threads after the preloads (forked jobs do "
              "not inherit them)", file=sys.stderr)
    return done


def main():
    preload = [arg.split("=", 1)[1] for arg in sys.argv[1:] if arg.startswith("--preload=")]
    optional = [arg.split("=", 1)[1] for arg in sys.argv[1:] if arg.startswith("--preload-optional=")]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/<us>/fd is closed to our children
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # a job's orphans become ours to end
    versions = {}
    for name in preload:
        module = __import__(name)
        versions[name] = getattr(module, "__version__", "")
    if "torch" in preload:
        _warm_torch_dispatch()
    versions.update(_preload_optional(optional))
    if "--preloads-dropped" in sys.argv[1:]:
        versions["preloads"] = "dropped: they left forked jobs unable to use CUDA"
    reply = os.fdopen(os.dup(1), "w")
    # Our own stdout is the reply channel only: stray prints of libraries go to stderr.
    os.dup2(2, 1)
    requests = _Requests(os.dup(0))
    os.close(0)
    reply.write(json.dumps({"ready": True, "versions": versions, "pid": os.getpid()}) + "\n")
    reply.flush()
    while True:
        while not requests.has_line():
            if requests.closed or not requests.fill():
                return 0
        line = requests.take_line()
        if not line.strip():
            continue
        request = json.loads(line)
        if "send" in request or "close" in request:
            # A late word for an interactive job that has already ended (its driver's close can
            # cross the job's own exit): not a job. Served as one, its answer would reach the next
            # job's driver as a stranger's.
            continue
        _serve_one(request, reply, requests)


if __name__ == "__main__":
    sys.exit(main())
