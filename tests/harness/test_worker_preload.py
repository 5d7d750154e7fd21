"""share/harness/worker.py's optional preloads: a module that exists is imported before any job
forks, one that does not is reported and skipped (the jobs import what they need themselves), and
a preload after which a forked child could not use CUDA (torch's "bad fork") makes the worker start
again without its preloads."""

import contextlib
import io
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "share", "harness"))
import worker  # noqa: E402


class PreloadOptionalTest(unittest.TestCase):
    def test_present_modules_are_imported_and_missing_ones_reported(self):
        sys.modules.pop("wave", None)
        with contextlib.redirect_stderr(io.StringIO()) as err:
            done = worker._preload_optional(["wave", "no_such_module_for_the_worker"])
        self.assertEqual(done["wave"], "preloaded")
        self.assertIn("wave", sys.modules)
        self.assertEqual(done["no_such_module_for_the_worker"], "missing: ModuleNotFoundError")
        self.assertIn("no_such_module_for_the_worker", err.getvalue())

    def test_nothing_asked_nothing_done(self):
        self.assertEqual(worker._preload_optional([]), {})

    def _with_fake_torch(self, in_bad_fork=None, cuda=None):
        fake = types.SimpleNamespace(
            _C=types.SimpleNamespace(**({"_cuda_isInBadFork": in_bad_fork} if in_bad_fork else {})),
            cuda=cuda or types.SimpleNamespace(is_available=lambda: False))
        saved = sys.modules.get("torch")
        sys.modules["torch"] = fake
        self.addCleanup(lambda: sys.modules.__setitem__("torch", saved) if saved is not None
                        else sys.modules.pop("torch", None))

    def test_a_preload_that_spoils_forked_cuda_restarts_the_worker_without_preloads(self):
        parent = os.getpid()
        # As torch's atfork hook does once the parent asked the CUDA runtime anything.
        self._with_fake_torch(lambda: os.getpid() != parent)
        restarts = []

        class Restarted(Exception):
            pass

        def restart():
            restarts.append(True)
            raise Restarted

        saved = worker._without_optional_preloads
        worker._without_optional_preloads = restart
        self.addCleanup(setattr, worker, "_without_optional_preloads", saved)
        with contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(Restarted):
            worker._preload_optional(["json"])
        self.assertEqual(restarts, [True])
        self.assertIn("unable to use CUDA", err.getvalue())

    def test_a_child_whose_gpu_work_fails_restarts_the_worker_without_preloads(self):
        def init():
            raise RuntimeError("invalid argument to exchangeDevice")

        self._with_fake_torch(cuda=types.SimpleNamespace(is_available=lambda: True, init=init))
        self.assertFalse(worker._forked_child_can_use_cuda())

    def test_a_clean_fork_keeps_the_preloads(self):
        self._with_fake_torch(lambda: False)
        self.assertEqual(worker._preload_optional(["json"]), {"json": "preloaded"})

    def test_the_restart_drops_only_the_optional_preloads(self):
        calls = []
        saved_execv, saved_argv = os.execv, sys.argv
        os.execv = lambda path, argv: calls.append((path, argv))
        sys.argv = ["worker.py", "--preload=torch", "--preload-optional=torch._dynamo"]
        try:
            worker._without_optional_preloads()
        finally:
            os.execv, sys.argv = saved_execv, saved_argv
        self.assertEqual(calls, [(sys.executable, [sys.executable, "worker.py", "--preload=torch",
                                                   "--preloads-dropped"])])


if __name__ == "__main__":
    unittest.main()
