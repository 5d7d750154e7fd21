"""The filter's output checks (share/harness/output_judge.py): each kind of output a task can return,
with the findings and details the filter's records carry. Run by CTest with a python3 that has
torch (the CPU here; the same code runs on the GPU in the filter's jobs)."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "share", "harness"))
import compare  # noqa: E402
import output_judge  # noqa: E402
import torch  # noqa: E402


def floats(values, shape=None):
    t = torch.tensor(values, dtype=torch.float32)
    return t.reshape(shape) if shape else t


def judge(a1, a2, b, inputs_equal=False, atol=1e-2, rtol=1e-2):
    j = output_judge.Judgement(torch, atol, rtol)
    j.first_call(a1)
    j.second_call(a2)
    j.other_draw(b, inputs_equal)
    return j


def checks(j):
    return [check for check, _ in j.findings]


class OutputJudgeTest(unittest.TestCase):
    def test_a_healthy_task_passes_bitwise_deterministic(self):
        j = judge(floats([1, 2, 3, 4]), floats([1, 2, 3, 4]), floats([5, 6, 7, 8]))
        self.assertEqual(j.findings, [])
        self.assertEqual(j.determinism, "bitwise")

    def test_determinism_within_tolerance_and_beyond_it(self):
        a1, b = floats([1, 2, 3, 4]), floats([5, 6, 7, 8])
        j = judge(a1, floats([1, 2, 3, 4.001]), b)
        self.assertEqual((j.findings, j.determinism), ([], "within tolerance"))
        j = judge(a1, floats([1, 2, 3, 4.5]), b)
        self.assertEqual(checks(j), ["determinism"])
        self.assertEqual(j.determinism, "no")
        self.assertTrue(j.findings[0][1].startswith(
            "two runs on the same inputs differ beyond atol=0.01, rtol=0.01: output: 1 of 4 elements outside"))
        self.assertIn("first at flat index 3: 4.5 vs 4", j.findings[0][1])
        # A different shape between runs is a difference too.
        self.assertEqual(checks(judge(a1, floats([1, 2, 3]), b)), ["determinism"])
        # Bitwise means the bits: -0.0 and 0.0 are equal values, not equal bits.
        j = judge(floats([1, 0.0]), floats([1, -0.0]), floats([2, 3]))
        self.assertEqual(j.determinism, "within tolerance")
        nan = float("nan")
        self.assertEqual(judge(floats([1, nan]), floats([1, nan]), b).determinism, "bitwise")

    def test_outputs_that_do_not_follow_the_inputs(self):
        a = floats([1, 2, 3, 4])
        j = judge(a, a, floats([1, 2, 3, 4.001]))
        self.assertEqual(checks(j), ["input_dependence"])
        self.assertNotIn("same inputs", j.findings[0][1])
        j = judge(a, a, a, inputs_equal=True)
        self.assertIn("get_inputs returned the same inputs for both seeds", j.findings[0][1])
        # A tighter tolerance tells them apart.
        self.assertEqual(judge(a, a, floats([1, 2, 3, 4.001]), atol=1e-6, rtol=1e-6).findings, [])

    def test_all_zero_constant_and_non_finite_outputs(self):
        b = floats([5, 6, 7, 8])
        j = judge(floats([0, -0.0, 0, 0], (2, 2)), floats([0, 0, 0, 0], (2, 2)), floats([0, 1, 0, 0], (2, 2)))
        self.assertEqual(checks(j), ["all_zero"])
        self.assertEqual(j.findings[0][1], "output float32[2, 2] is all zeros")
        c = floats([2.5, 2.5, 2.5])
        self.assertEqual(judge(c, c, floats([1, 2, 3])).findings,
                         [("constant", "output float32[3] is constant (every element 2.5)")])
        # One element is not "constant"; a zero one is still all zeros.
        self.assertEqual(judge(floats([7]), floats([7]), floats([8])).findings, [])
        self.assertEqual(checks(judge(floats([0]), floats([0]), floats([8]))), ["all_zero"])
        nan, inf = float("nan"), float("inf")
        bad = floats([1, nan, inf, nan])
        j = judge(bad, bad, b)
        self.assertEqual(checks(j), ["non_finite"])
        self.assertEqual(j.findings[0][1], "output float32[4] has 2 NaN and 1 infinite values of 4")
        # Integers: a constant argmax-like output.
        i = torch.tensor([3, 3, 3])
        self.assertEqual(checks(judge(i, i, torch.tensor([1, 2, 3]))), ["constant"])

    def test_the_second_draw_is_scanned_too_and_named(self):
        a = floats([1, 2, 3])
        j = judge(a, a, floats([0, 0, 0]))
        self.assertEqual(j.findings, [("all_zero", "output float32[3] is all zeros (second input draw)")])

    def test_containers_are_walked_and_values_that_are_not_tensors_refused(self):
        good = (floats([1, 2]), floats([3, 4]))
        zero_second = (floats([1, 2]), floats([0, 0]))
        self.assertEqual(judge(zero_second, zero_second, good).findings,
                         [("all_zero", "output[1] float32[2] is all zeros")])
        d = {"logits": floats([1, 1])}
        self.assertEqual(judge(d, d, {"logits": floats([2, 3])}).findings,
                         [("constant", 'output["logits"] float32[2] is constant (every element 1)')])
        odd = (floats([1, 2]), "text")
        j = judge(odd, odd, odd)
        self.assertEqual(j.findings, [("output", 'output[1] is a "builtins.str", not a tensor')])
        self.assertEqual(j.determinism, "")
        j = judge(3, 3, 3)
        self.assertEqual(j.findings, [("output", "output is a Python int, not a tensor"),
                                      ("output", "the output holds no tensor")])
        complex_output = torch.zeros(2, dtype=torch.complex64)
        self.assertEqual(checks(judge(complex_output, complex_output, complex_output)), ["output", "output"])

    def test_torch_compile_against_eager(self):
        j = output_judge.Judgement(torch, 1e-2, 1e-2)
        j.first_call(floats([1, 2]))
        self.assertEqual(j.compiled_differs(floats([1, 2.001])), "")
        self.assertTrue(j.compiled_differs(floats([1, 3])).startswith(
            "torch.compile's output differs from eager beyond atol=0.01, rtol=0.01: output: 1 of 2"))
        self.assertIn("structure differs", j.compiled_differs((floats([1, 2]),)))
        # A constant compiled output of a constant eager output is still a match.
        j = output_judge.Judgement(torch, 1e-2, 1e-2)
        j.first_call(floats([1, 1]))
        self.assertEqual(j.compiled_differs(floats([1, 1])), "")

    def test_large_outputs_are_judged_in_chunks(self):
        # Chunks of 64 elements: the scan and the comparisons see the whole tensor.
        saved = compare.CHUNK
        compare.CHUNK = 64
        try:
            a = torch.rand(1000) + 1
            late_zero = torch.zeros(1000)
            late_zero[999] = 1
            self.assertEqual(checks(judge(late_zero, late_zero, a)), [])
            nan_late = a.clone()
            nan_late[998] = float("nan")
            self.assertEqual(checks(judge(nan_late, nan_late, a)), ["non_finite"])
            flipped = a.clone()
            flipped[900] = -flipped[900]
            self.assertEqual(judge(a, flipped, a + 1).determinism, "no")
            self.assertEqual(judge(a, a.clone(), a + 1).determinism, "bitwise")
        finally:
            compare.CHUNK = saved


if __name__ == "__main__":
    unittest.main()
