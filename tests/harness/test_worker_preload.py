"""share/harness/worker.py's optional preloads: a module that exists is imported before any job
forks, one that does not is reported and skipped (the jobs import what they need themselves), and
a preload that leaves CUDA initialised stops the worker (a forked child cannot use its parent's
CUDA context)."""

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

    def test_a_preload_that_started_cuda_stops_the_worker(self):
        fake = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True))
        saved = sys.modules.get("torch")
        sys.modules["torch"] = fake
        try:
            with self.assertRaises(SystemExit):
                worker._preload_optional(["json"])
        finally:
            if saved is None:
                del sys.modules["torch"]
            else:
                sys.modules["torch"] = saved


if __name__ == "__main__":
    unittest.main()
