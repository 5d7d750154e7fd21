"""How the owner and a runner wait for each other's next message during a session's calls.

A blocking receive puts the waiting process to sleep, and the kernel's wake-up when the message
lands costs tens of microseconds that vary from call to call; the owner's clock runs across two
such wake-ups per call (the runner's for "call", the owner's for the reply), so they become the
floor and most of the noise of every timed call. Spinning on a non-blocking receive for a while
first answers within a few microseconds, at the price of one busy core per waiting process; the
spin yields its core at every turn, so on a busy machine it costs no more than blocking would.
After the spin the wait blocks as before, so a long call or an idle session costs no CPU.

The owner chooses the spin (--spin-ms; 0 blocks at once) for itself and for its runners. It is
worth it on a GPU machine, where both processes wait for the device and the cores are otherwise
idle; on a CPU session the waiting process would take a core from the one doing the work.
"""

import os
import time


def receive(conn, size, spin_s):
    """conn.recv(size), spinning up to spin_s seconds before it blocks with conn's own timeout
    (socket.timeout and OSError reach the caller as from conn.recv)."""
    if spin_s > 0:
        timeout = conn.gettimeout()
        conn.settimeout(0.0)
        deadline = time.perf_counter() + spin_s
        try:
            while True:
                try:
                    return conn.recv(size)
                except BlockingIOError:
                    # A busy machine: give the core to whoever else wants it (the other side of
                    # the call, a build), or the spin would hold the answer back by a whole
                    # scheduler slice. An idle machine returns at once.
                    os.sched_yield()
                    if time.perf_counter() >= deadline:
                        break
        finally:
            conn.settimeout(timeout)
    return conn.recv(size)
