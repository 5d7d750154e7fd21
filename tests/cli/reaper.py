#!/usr/bin/env python3
"""Runs a command as a child subreaper and fails when it leaves processes behind.

Usage: reaper.py PIDFILE COMMAND [ARG...]. The command's pid goes to PIDFILE (so a test can
signal it). Anything the command started and did not end is reparented to this process when the
command exits; after the exit, living processes among this process's children are listed on
stderr and the exit status is 99. Otherwise the exit status is the command's (128+N for a
signal)."""
import ctypes
import os
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def children():
    mine = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == os.getpid() and state != "Z":
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    mine.append(entry + " " + f.read().replace(b"\0", b" ").decode(errors="replace")[:300])
            except OSError:
                mine.append(entry)
    return mine


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main():
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("reaper.py: cannot become a child subreaper", file=sys.stderr)
        return 98
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(sys.argv[2], sys.argv[2:])
        finally:
            os._exit(127)
    with open(sys.argv[1], "w") as f:
        f.write(str(pid))
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        code = 128 - code
    # Orphans are reparented as their parent dies; give the last ones a moment to arrive.
    deadline = time.monotonic() + 2
    left = children()
    while left and time.monotonic() < deadline:
        reap()
        time.sleep(0.05)
        left = children()
    if left:
        print("reaper.py: left behind:\n  " + "\n  ".join(left), file=sys.stderr)
        return 99
    return code


sys.exit(main())
