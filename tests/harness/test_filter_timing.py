"""share/harness/filter_task.py's timing, with the CPU torch: eager is timed, then the compiled
model (any module stands in for one: torch 1.13 has no torch.compile), each into its own list; a
task that eager puts far beyond the window is timed once and its compiled model not at all; without
a compiled model only eager is timed. await_go says "checked" on fd 3 and times only on "go"."""

import argparse
import io
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "share", "harness"))
import filter_task  # noqa: E402
import torch  # noqa: E402


def settings(slow_ms=0.0):
    return argparse.Namespace(device="cpu", warmup=2, warmup_s=0.05, runs=5, budget_s=5.0,
                              slow_ms=slow_ms)


class TimeTaskTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.report = filter_task.Report(self.dir.name, "check")
        self.model = torch.nn.Linear(8, 8)
        self.compiled = torch.nn.Sequential(torch.nn.Linear(8, 8))
        self.inputs = [torch.randn(4, 8)]

    def tearDown(self):
        self.dir.cleanup()

    def test_eager_then_the_compiled_model_each_into_its_own_list(self):
        filter_task.time_task(torch, self.report, settings(), self.model, self.inputs, self.compiled)
        self.assertEqual(len(self.report.data["samples_ms"]), 5)
        self.assertEqual(len(self.report.data["compile_samples_ms"]), 5)
        self.assertEqual(self.report.data["phase"], "compile_timing")
        self.assertGreaterEqual(self.report.data["warmup_calls"], 2)

    def test_a_task_far_beyond_the_window_is_timed_once_and_not_compiled(self):
        filter_task.time_task(torch, self.report, settings(slow_ms=1e-9), self.model, self.inputs,
                              self.compiled)
        self.assertEqual(len(self.report.data["samples_ms"]), 1)
        self.assertEqual(self.report.data["compile_samples_ms"], [])

    def test_without_a_compiled_model_only_eager_is_timed(self):
        filter_task.time_task(torch, self.report, settings(), self.model, self.inputs, None)
        self.assertEqual(len(self.report.data["samples_ms"]), 5)
        self.assertEqual(self.report.data["compile_samples_ms"], [])


class AwaitGoTest(unittest.TestCase):
    def test_checked_on_fd_3_then_go_or_stop(self):
        with tempfile.TemporaryDirectory() as out:
            read_end, write_end = os.pipe()
            saved_fd3 = os.dup(3) if self._fd_open(3) else None
            saved_stdin = sys.stdin
            try:
                os.dup2(write_end, 3)
                for line, expected in (("go\n", True), ("", False)):
                    sys.stdin = io.StringIO(line)
                    report = filter_task.Report(out, "check")
                    self.assertEqual(filter_task.await_go(report), expected)
                    self.assertEqual(report.data["phase"], "checked")
            finally:
                sys.stdin = saved_stdin
                if saved_fd3 is None:
                    os.close(3)
                else:
                    os.dup2(saved_fd3, 3)
                    os.close(saved_fd3)
                os.close(write_end)
            with os.fdopen(read_end) as said:
                self.assertEqual(said.read(), "checked\nchecked\n")

    @staticmethod
    def _fd_open(fd):
        try:
            os.fstat(fd)
            return True
        except OSError:
            return False


if __name__ == "__main__":
    unittest.main()
