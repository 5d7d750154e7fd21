"""share/harness/session_owner.py under the GPU call timer: how the owner waits for a call's window
to close (wait_window) and frees its own stream from a runner that never signals (release). The
CUDA events and flags are stand-ins here; tests/gpu/ runs the real ones."""

import os
import socket
import sys
import threading
import time
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "share", "harness"))
import session_owner  # noqa: E402


class Event:
    """A CUDA event that has run once `at` (time.monotonic) has passed; never when at is None."""

    def __init__(self, at=None):
        self.at = at
        self.synchronized = False

    def query(self):
        return self.at is not None and time.monotonic() >= self.at

    def synchronize(self):
        self.synchronized = True


class Flags:
    def __init__(self):
        self.writes = []

    def write(self, stream, name, value):
        self.writes.append((stream, name, value))


def owner():
    return types.SimpleNamespace(args=types.SimpleNamespace(spin_ms=1.0))


class WaitWindowTest(unittest.TestCase):
    def setUp(self):
        self.runner, self.owner_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.arm = types.SimpleNamespace(conn=self.owner_end)
        self.grace = session_owner.ANSWER_GRACE_S
        session_owner.ANSWER_GRACE_S = 0.1

    def tearDown(self):
        session_owner.ANSWER_GRACE_S = self.grace
        self.runner.close()
        self.owner_end.close()

    def wait(self, t1, timeout=5.0):
        return session_owner.Owner.wait_window(owner(), self.arm, t1, timeout)

    def test_a_window_that_closes_is_waited_for_and_leaves_the_answer_unread(self):
        self.runner.send(b'{"ok": true}')  # an honest runner may answer just before T1 runs
        self.assertIsNone(self.wait(Event(time.monotonic() + 0.05)))
        self.assertEqual(self.owner_end.recv(100), b'{"ok": true}')

    def test_a_silent_runner_times_out(self):
        started = time.monotonic()
        lost = self.wait(Event(None), timeout=0.2)
        self.assertEqual(lost["why"], "timeout")
        self.assertLess(time.monotonic() - started, 2.0)

    def test_an_error_answer_without_done_comes_back_as_the_answer(self):
        self.runner.send(b'{"ok": false, "error": "ValueError"}')
        lost = self.wait(Event(None))
        self.assertEqual(lost, {"answer": b'{"ok": false, "error": "ValueError"}'})

    def test_an_answer_that_claims_success_without_done_is_a_timeout(self):
        self.runner.send(b'{"ok": true, "slots": []}')
        lost = self.wait(Event(None))
        self.assertEqual(lost["why"], "timeout")
        self.assertIn("never said done", lost["detail"])

    def test_a_runner_that_ends_is_seen_without_waiting_for_the_timeout(self):
        threading.Timer(0.05, self.runner.close).start()
        started = time.monotonic()
        lost = self.wait(Event(None), timeout=30)
        self.assertEqual(lost["why"], "runner ended")
        self.assertLess(time.monotonic() - started, 5.0)


class ReleaseTest(unittest.TestCase):
    def test_release_writes_both_flags_from_the_side_stream_then_waits_for_the_window(self):
        flags, t1 = Flags(), Event(None)
        arm = types.SimpleNamespace(flags=flags, side="side", events=(Event(None), t1))
        session_owner.Owner.release(owner(), arm, 7)
        self.assertEqual(flags.writes, [("side", "ready", 7), ("side", "done", 7)])
        self.assertTrue(t1.synchronized)


if __name__ == "__main__":
    unittest.main()
