"""The owner's comparison (share/harness/compare.py) on the cases its rule exists for: small
outputs (a softmax over 8,192 columns) wrong in most elements fail, honest float32 reorderings
pass, specials must sit where the reference has them, a constant output fails where the
reference varies, integers must be equal. Run by CTest with a python3 that has torch."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "share", "harness"))
import compare  # noqa: E402
import torch  # noqa: E402


def check(expected, actual, atol=1e-2, rtol=1e-2):
    return compare.compare_outputs(torch, [("output", expected)], [("output", actual)], atol, rtol)


class CompareTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def assert_as_the_plain_rule(self, reference, actual, chunk, label):
        """The comparator, in chunks of `chunk` elements, finds the mismatches (count and first)
        and the statistics of plain_rule below."""
        bad, first, max_abs, max_rel = plain_rule(reference, actual, 1e-2, 1e-2)
        found = compare.compare_tensor(torch, reference, actual, 1e-2, 1e-2, False, "output", chunk=chunk)
        if bad:
            self.assertEqual(found[0], "values", label)
            self.assertEqual(found[2], bad, label)
            self.assertIn(f"first at flat index {first}:", found[1], label)
        else:
            self.assertIsNone(found[0], label)
        self.assertAlmostEqual(found[-2], max_abs, delta=1e-6 * max(1.0, max_abs), msg=label)
        self.assertAlmostEqual(found[-1], max_rel, delta=1e-5 * max(1.0, max_rel), msg=label)

    def test_small_outputs_wrong_in_most_elements_fail(self):
        logits = torch.randn(4, 8192)
        reference = torch.softmax(logits, dim=1)  # values near 1.2e-4
        wrong = reference.clone()
        wrong[:, : 8192 * 99 // 100] = wrong[:, : 8192 * 99 // 100].flip(1)  # 99% misplaced
        result = check(reference, wrong)
        self.assertFalse(result["match"])
        self.assertEqual(result["failure"], "values")
        # The same error a plain atol of 0.01 would have let through:
        self.assertTrue(torch.allclose(wrong, reference, atol=1e-2, rtol=1e-2))

    def test_honest_float32_reorderings_pass(self):
        x = torch.randn(64, 4096)
        reference = torch.softmax(x, dim=1)
        # Another order of summation and a fused/unfused difference, in float32.
        e = torch.exp(x - x.max(dim=1, keepdim=True).values)
        other = e / e.flip(1).sum(dim=1, keepdim=True)
        self.assertTrue(check(reference, other)["match"])
        a, b = torch.randn(256, 512), torch.randn(512, 128)
        reference = a @ b
        chunked = sum(a[:, k:k + 64] @ b[k:k + 64] for k in range(0, 512, 64))
        self.assertTrue(check(reference, chunked)["match"])

    def test_mixed_magnitudes_keep_the_absolute_tolerance(self):
        reference = torch.tensor([1e-6, 0.5, 3.0, -2.0, 1e-8])
        near = reference + torch.tensor([5e-3, 0.0, 0.01, -0.01, -5e-3])
        self.assertTrue(check(reference, near)["match"])  # rms > 1: atol stays 0.01

    def test_specials_must_match_in_place(self):
        reference = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
        self.assertTrue(check(reference, reference.clone())["match"])
        moved = torch.tensor([float("nan"), 1.0, float("inf"), -float("inf")])
        self.assertFalse(check(reference, moved)["match"])
        sign = torch.tensor([1.0, float("nan"), -float("inf"), -float("inf")])
        self.assertFalse(check(reference, sign)["match"])

    def test_a_constant_output_fails_where_the_reference_varies(self):
        reference = torch.rand(1000) * 1e-3
        result = check(reference, torch.zeros(1000))
        self.assertFalse(result["match"])
        self.assertEqual(result["failure"], "degenerate")
        constant = torch.full((10,), 2.0)
        self.assertTrue(check(constant, constant.clone())["match"])

    def test_integers_and_formats(self):
        reference = torch.arange(10)
        self.assertTrue(check(reference, reference.clone())["match"])
        off = reference.clone()
        off[3] += 1
        self.assertFalse(check(reference, off)["match"])
        self.assertEqual(check(reference, reference.float())["failure"], "format")
        self.assertEqual(check(reference, reference[:5])["failure"], "format")

    def test_bfloat16_reference_within_its_own_rounding(self):
        x = torch.randn(1024)
        reference = (x * 1.5).to(torch.bfloat16)
        other = (x.to(torch.bfloat16) * 1.5).to(torch.bfloat16)
        self.assertTrue(check(reference, other)["match"])

    def test_the_rule_at_its_limits_as_the_cpp_comparator_applies_it(self):
        # The cases of tests/unit/candidate/tensor_tolerance.cpp, "element_tolerance": A and R.
        # float32 of mean magnitude 1e-4: A = 1e-6, R = 0.01, so each element within 2e-6.
        reference = torch.tensor([1e-4, -1e-4, 1e-4, -1e-4], dtype=torch.float32)
        self.assertTrue(check(reference, reference + 1.8e-6)["match"])
        self.assertFalse(check(reference, reference + 2.2e-6)["match"])
        # bfloat16 at S = 4: A = 2 * 2^-7 * 4 = 0.0625, R = 0.01: within 0.1025 of 4.
        reference = torch.tensor([4.0, -4.0], dtype=torch.bfloat16)
        self.assertTrue(check(reference, torch.tensor([4.09375, -4.0], dtype=torch.bfloat16))["match"])
        self.assertFalse(check(reference, torch.tensor([4.125, -4.0], dtype=torch.bfloat16))["match"])
        # R = max(rtol, 2^-7) for bfloat16: with rtol 0 and atol 0, 4 + 2^-5 (one spacing, within
        # 2 * 2^-7 * 4 = 2^-4) passes.
        self.assertTrue(check(reference, torch.tensor([4.03125, -4.0], dtype=torch.bfloat16),
                              atol=0.0, rtol=0.0)["match"])
        # Magnitude above 1: atol itself (0.01 + 0.01 * |e|); the reference's infinities do not
        # count towards S.
        reference = torch.tensor([10.0, -30.0, float("inf")])
        self.assertTrue(check(reference, reference + torch.tensor([0.105, -0.305, 0.0]))["match"])
        self.assertFalse(check(reference, reference + torch.tensor([0.115, 0.0, 0.0]))["match"])

    def test_the_scale_is_the_references_whatever_the_candidate_wrote(self):
        # S over the reference's finite elements (2e-4 here), also where the candidate wrote NaN.
        reference = torch.tensor([1e-4, 3e-4], dtype=torch.float64)
        result = check(reference, torch.tensor([float("nan"), 3.1e-4], dtype=torch.float64))
        self.assertFalse(result["match"])
        self.assertIn("outside 2e-06 ", result["reason"])

    def test_chunks_give_the_whole_tensors_answer(self):
        # Passes over chunks of 64 elements: the scale, the count, the first bad element and the
        # constant checks are the same as in one pass, across chunk boundaries.
        reference = torch.rand(1000) + 0.5
        actual = reference.clone()
        actual[[700, 701, 999]] += 1.0
        whole = compare.compare_tensor(torch, reference, actual, 1e-2, 1e-2, True, "output")
        chunked = compare.compare_tensor(torch, reference, actual, 1e-2, 1e-2, True, "output", chunk=64)
        self.assertEqual(whole[:3], chunked[:3])
        self.assertIn("3 of 1000 elements outside", chunked[1])
        self.assertIn("first at flat index 700", chunked[1])
        # stop_at_first reads up to the chunk that holds the first mismatch, and says so.
        early = compare.compare_tensor(torch, reference, actual, 1e-2, 1e-2, True, "output",
                                       stop_at_first=True, chunk=64)
        self.assertEqual(early[0], "values")
        self.assertIn("compared up to the first", early[1])
        self.assertEqual(early[2], 2)  # 700 and 701 share a chunk; 999 was never read
        self.assertIsNone(compare.compare_tensor(torch, reference, reference.clone(), 1e-2, 1e-2, True,
                                                 "output", stop_at_first=True, chunk=64)[0])
        # A constant output is seen as one across chunks; integers are chunked too.
        self.assertEqual(compare.compare_tensor(torch, reference, torch.full((1000,), 1.0), 1e-2, 1e-2,
                                                True, "output", chunk=64)[0], "degenerate")
        ints = torch.arange(1000)
        off = ints.clone()
        off[513] = -1
        found = compare.compare_tensor(torch, ints, off, 0, 0, True, "output", chunk=64)
        self.assertIn("1 of 1000 elements differ (first at flat index 513", found[1])

    def test_the_rule_written_plainly_in_float64_agrees_element_by_element(self):
        # The comparator works in float32 for float32 and the half types, in chunks, with masks
        # combined for speed; here the rule is written out once, in float64 and in one piece, and
        # both must find the same mismatches (count and first) and the same statistics on outputs
        # near the tolerance's edge, with NaN and infinities on either side.
        generator = torch.Generator().manual_seed(7)
        for trial in range(60):
            dtype = (torch.float32, torch.bfloat16, torch.float16, torch.float64)[trial % 4]
            n = 500 + 37 * trial
            scale = 10.0 ** (trial % 7 - 4)
            reference = (torch.randn(n, generator=generator) * scale).to(dtype)
            e = reference.double()
            magnitude = min(1.0, float(e.abs().mean()))
            edge = 1e-2 * magnitude + 1e-2 * e.abs()
            actual = (e + edge * (torch.rand(n, generator=generator, dtype=torch.float64) * 2.4 - 1.2)).to(dtype)
            specials = torch.randint(0, n, (12,), generator=generator)
            values = torch.tensor([float("nan"), float("inf"), -float("inf")], dtype=dtype)
            for k, index in enumerate(specials.tolist()):
                side = k % 3  # reference only, output only, both the same
                if side != 1:
                    reference[index] = values[k % 3]
                if side != 0:
                    actual[index] = values[k % 3]
            self.assert_as_the_plain_rule(reference, actual, 97, f"trial {trial} ({dtype})")

    def test_a_finite_reference_takes_the_short_pass_with_the_same_answers(self):
        # No NaN or infinity in the reference (the usual case): the comparator drops the masks
        # that only non-finite references need. NaN and infinities in the output, outputs near
        # the tolerance's edge, chunk boundaries: the same mismatches and statistics as the rule
        # written plainly.
        generator = torch.Generator().manual_seed(11)
        for trial in range(40):
            n = 300 + 41 * trial
            dtype, reference, actual = near_the_edge(generator, trial, n, 1.2)
            if trial % 3:
                specials = torch.randint(0, n, (6,), generator=generator).tolist()
                for k, index in enumerate(specials):
                    actual[index] = (float("nan"), float("inf"), -float("inf"))[k % 3]
            self.assert_as_the_plain_rule(reference, actual, 61, f"trial {trial} ({dtype})")

    def test_a_matching_output_is_judged_in_one_read_with_the_passes_numbers(self):
        # Whole tensors within one chunk take the one-read path when they match; it must give
        # the passes' statistics to the last bit (the passes run here by making the chunk one
        # element short), and hand everything else to the passes.
        generator = torch.Generator().manual_seed(5)
        for trial in range(24):
            n = 50 + 37 * trial
            dtype, reference, actual = near_the_edge(generator, trial, n, 0.9)
            one_read = compare.compare_tensor(torch, reference, actual, 1e-2, 1e-2, True, "output")
            passes = compare.compare_tensor(torch, reference, actual, 1e-2, 1e-2, True, "output", chunk=n - 1)
            self.assertIsNone(passes[0], f"trial {trial}")
            self.assertEqual(one_read, passes, f"trial {trial} ({dtype})")
        # Not a match, a constant output, a reference with an infinity: the passes' answers.
        reference = torch.rand(500, generator=generator) + 0.5
        for actual, failure in ((reference + 1.0, "values"), (torch.full((500,), 0.75), "degenerate")):
            self.assertEqual(compare.compare_tensor(torch, reference, actual, 1e-2, 1e-2, True, "output")[0], failure)
        infinite = reference.clone()
        infinite[7] = float("inf")
        self.assertEqual(compare.compare_tensor(torch, infinite, infinite.clone(), 1e-2, 1e-2, True, "output")[0], None)
        # What the path is for: fewer of the owner's operators per judged output.
        self.assertLess(count_operators(lambda: check(reference, reference * (1 + 1e-6))),
                        count_operators(lambda: compare.compare_tensor(
                            torch, reference, reference * (1 + 1e-6), 1e-2, 1e-2, True, "output", chunk=499)) / 1.5)

    def test_an_output_of_nan_only_is_constant_whatever_the_reference(self):
        # All NaN where a finite reference varies: degenerate, across chunks, as where the
        # reference holds a NaN itself; one number among the NaN makes it a plain mismatch.
        varying = torch.rand(1000) + 0.5
        with_nan = varying.clone()
        with_nan[999] = float("nan")
        for reference in (varying, with_nan):
            nan = torch.full((1000,), float("nan"))
            found = compare.compare_tensor(torch, reference, nan, 1e-2, 1e-2, True, "output", chunk=64)
            self.assertEqual(found[0], "degenerate")
            self.assertEqual(found[2], 1000)
            nan[800] = 1.0
            found = compare.compare_tensor(torch, reference, nan, 1e-2, 1e-2, True, "output", chunk=64)
            self.assertEqual(found[0], "values")
        # A finite sum that overflows float64 is read as non-finite: the long pass, same answer.
        huge = torch.tensor([1e308, 1e308, -1e308, 5.0], dtype=torch.float64)
        self.assertTrue(check(huge, huge.clone())["match"])
        off = huge.clone()
        off[3] = 6.0
        self.assertFalse(check(huge, off)["match"])

    def test_complex_outputs_are_judged_by_both_parts(self):
        reference = torch.randn(64, dtype=torch.complex64)
        self.assertTrue(check(reference, reference.clone())["match"])
        imaginary_wrong = reference.clone()
        imaginary_wrong.imag[5] += 1.0
        result = check(reference, imaginary_wrong)
        self.assertFalse(result["match"])
        self.assertEqual(result["failure"], "values")


def near_the_edge(generator, trial, n, reach):
    """A reference of n elements (the trial picks its dtype and magnitude) and an output that
    differs from it by up to `reach` times the tolerance at each element: (dtype, reference,
    output)."""
    dtype = (torch.float32, torch.bfloat16, torch.float16, torch.float64)[trial % 4]
    reference = (torch.randn(n, generator=generator) * 10.0 ** (trial % 5 - 3)).to(dtype)
    e = reference.double()
    edge = 1e-2 * min(1.0, float(e.abs().mean())) + 1e-2 * e.abs()
    offset = torch.rand(n, generator=generator, dtype=torch.float64) * (2 * reach) - reach
    return dtype, reference, (e + edge * offset).to(dtype)


def count_operators(work):
    """How many ATen operators `work` runs (each one a launch on the GPU)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Counter.count += 1
            return func(*args, **(kwargs or {}))

    with Counter():
        work()
    return Counter.count


def plain_rule(reference, actual, atol, rtol):
    """The comparison rule of man/cudaagent-verify.1 in float64, in one piece: the number of
    mismatched elements, the first, and the largest absolute and relative errors over the pairs
    where both are finite (e = 0 left out of the relative)."""
    e, a = reference.double(), actual.double()
    finite_e = torch.isfinite(e)
    mean = float(e[finite_e].abs().mean()) if bool(finite_e.any()) else 0.0
    eps = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}.get(reference.dtype, 0.0)
    absolute = max(atol * min(1.0, mean), 2 * eps * mean)
    relative = max(rtol, eps)
    both = finite_e & torch.isfinite(a)
    diff = torch.where(both, (a - e).abs(), torch.zeros_like(e))
    ok = torch.where(both, diff <= absolute + relative * e.abs(),
                     (a == e) | (torch.isnan(a) & torch.isnan(e)))
    bad = int((~ok).sum())
    first = int(torch.nonzero(~ok)[0]) if bad else -1
    rel = torch.where(both & (e != 0), diff / e.abs(), torch.zeros_like(e))
    return bad, first, float(diff.max()), float(rel.max())


if __name__ == "__main__":
    unittest.main()
