"""The trusted comparison of one call's output with the reference's, on the device where both are.

Run only in the owner process (session_owner.py), over tensors it holds itself: the reference's
output and the output buffer the runner wrote into. The rules (man/cudaagent-verify.1, CORRECTNESS):

  structure   the number, dtype and shape of the output tensors match the reference's exactly
              (the owner sized the buffers from the reference, so a runner reports a mismatch);
  specials    NaN, +Inf and -Inf sit at the same positions;
  values      every finite element satisfies |a - e| <= A + R * |e|, with S the mean |e| over the
              reference tensor's finite elements, eps the spacing at 1 of a half-precision reference
              dtype (2^-7 bfloat16, 2^-10 float16, 0 otherwise), A = max(atol * min(1, S),
              2 * eps * S) and R = max(rtol, eps): the absolute tolerance shrinks with outputs that
              are small (a softmax over 8,192 columns, values near 1e-4, would otherwise pass with
              every element wrong), is atol itself for outputs of magnitude 1 or more, and never
              falls below what half-precision rounding needs (the same rule as
              lib/candidate/tensor_compare.cpp);
  degenerate  a constant output where the reference varies fails even within tolerance.

Elements are judged in float32 (float64 for a float64 reference; complex tensors as their real
and imaginary parts), S is summed in float64. Integer and bool tensors must be equal. Returns a dict with the record's fields (match, failure,
reason, max_abs_error, max_rel_error, mismatched, worst).
"""

import math

# Elements per pass: each pass holds a few float64 temporaries of this many elements (128 MiB
# each), so comparing outputs of gigabytes never needs several times their size on the device.
CHUNK = 1 << 24


def _floating(torch, tensor):
    return tensor.is_floating_point() or tensor.is_complex()


def _chunks(n, chunk):
    return range(0, n, chunk)


def _first_index(torch, bad, offset, first):
    """The running minimum of the first True position of `bad` (+ offset) and `first`, on the
    device: torch.argmax returns the first of equal maxima."""
    found = torch.where(bad.any(), torch.argmax(bad.to(torch.uint8)).to(torch.int64) + offset,
                        torch.full_like(first, torch.iinfo(torch.int64).max))
    return torch.minimum(first, found)


def _constant(torch, flat, first_value):
    return torch.all((flat == first_value) | (torch.isnan(flat) & torch.isnan(first_value))) \
        if flat.is_floating_point() else torch.all(flat == first_value)


def compare_tensor(torch, expected, actual, atol, rtol, reject_degenerate, path, stop_at_first=False,
                   chunk=CHUNK):
    """None on a match without error statistics, (None, max_abs, max_rel) on a match, else
    (failure, reason, mismatched, max_abs, max_rel). With stop_at_first, only whether they match:
    the passes end at the first chunk that holds a mismatch, and the count covers what was read."""
    if actual.dtype != expected.dtype or tuple(actual.shape) != tuple(expected.shape):
        return ("format", f"{path}: {actual.dtype} {tuple(actual.shape)} where the reference is "
                          f"{expected.dtype} {tuple(expected.shape)}", expected.numel(), None, None)
    if expected.is_complex():  # judged as its real and imaginary parts, each an element
        expected, actual = torch.view_as_real(expected), torch.view_as_real(actual)
    n = expected.numel()
    if n == 0:
        return None
    flat_e, flat_a = expected.reshape(-1), actual.reshape(-1)
    device = flat_e.device
    first = torch.full((), torch.iinfo(torch.int64).max, dtype=torch.int64, device=device)
    count = torch.zeros((), dtype=torch.int64, device=device)
    if not _floating(torch, expected):
        for at in _chunks(n, chunk):
            differs = flat_a[at:at + chunk] != flat_e[at:at + chunk]
            count += differs.sum()
            first = _first_index(torch, differs, at, first)
            if stop_at_first and int(count.item()):
                break
        count = int(count.item())
        if count:
            index = int(first.item())
            counted = "elements differ (compared up to the first)" if stop_at_first \
                else f"{count} of {n} elements differ"
            return ("values", f"{path}: {counted} (first at flat index {index}: "
                              f"{flat_a[index].item()} vs {flat_e[index].item()})", count, None, None)
        return None
    if not stop_at_first and n <= chunk:
        matched = _match_in_one_read(torch, flat_e, flat_a, atol, rtol, reject_degenerate)
        if matched is not None:
            return (None, *matched)
    f64 = torch.float64
    # Pass 1: the mean |e| over the reference's finite elements (S), whatever the candidate wrote
    # (a non-finite element where e is finite fails on its own), as in
    # lib/candidate/tensor_compare.cpp. Summed in float64. First as one read of the reference:
    # a finite sum of |e| means that no element is NaN or infinite, which is nearly always so and
    # lets pass 2 drop the masks that only non-finite references need (a third of its traffic).
    # Otherwise the finite elements are counted and summed in a second read.
    total = torch.zeros((), dtype=f64, device=device)
    for at in _chunks(n, chunk):
        total += torch.linalg.vector_norm(flat_e[at:at + chunk], 1, dtype=f64)
    finite_reference = math.isfinite(total.item())  # the one read-back before pass 2
    if finite_reference:
        mean = total / n
    else:
        finite_count = torch.zeros((), dtype=f64, device=device)
        total.zero_()
        for at in _chunks(n, chunk):
            e = _working(torch, flat_e[at:at + chunk])
            finite_count += torch.isfinite(e).sum()
            total += torch.nan_to_num(e.abs(), nan=0.0, posinf=0.0).sum(dtype=f64)
        mean = total / finite_count.clamp_min(1)
    absolute, relative = _tolerances(torch, expected.dtype, mean, atol, rtol)
    working = _working(torch, flat_e[:1]).dtype
    working_absolute = absolute.to(working)
    # Pass 2: the elements. Everything is accumulated on the device and read back once (each read
    # is a synchronisation), except that stop_at_first reads the count after each chunk.
    max_abs = torch.zeros((), dtype=f64, device=device)
    max_rel = max_abs.clone()
    # A tensor is constant when its least and greatest elements are equal (aminmax carries NaN,
    # so one NaN makes them unequal) or when every element is NaN.
    a_low = torch.full((), float("inf"), dtype=working, device=device)
    a_high = torch.full((), -float("inf"), dtype=working, device=device)
    e_low, e_high = a_low.clone(), a_high.clone()
    # A finite reference is not all NaN, and an output that is all NaN then mismatches
    # everywhere: whether it is all NaN is asked after the loop, only when something mismatched.
    a_all_nan = torch.full((), not finite_reference, dtype=torch.bool, device=device)
    e_all_nan = a_all_nan.clone()
    read = 0
    for at in _chunks(n, chunk):
        e = _working(torch, flat_e[at:at + chunk])
        a = _working(torch, flat_a[at:at + chunk])
        ok, diff, e_abs, a_nan, e_nan = _element_match(torch, e, a, working_absolute, relative,
                                                       finite_reference)
        count += ok.numel() - ok.sum()
        read = at + e.numel()
        # Statistics over the pairs where both are finite; a difference that is not finite (a
        # non-finite element, or one that overflows the working precision) is left out of them
        # and counted above.
        finite_diff = torch.nan_to_num(diff, nan=0.0, posinf=0.0)
        max_abs = torch.maximum(max_abs, finite_diff.max().to(f64))
        rel = torch.nan_to_num(finite_diff / e_abs, nan=0.0, posinf=0.0)  # e = 0: left out
        max_rel = torch.maximum(max_rel, rel.max().to(f64))
        (a_min, a_max), (e_min, e_max) = torch.aminmax(a), torch.aminmax(e)
        a_low, a_high = torch.minimum(a_low, a_min), torch.maximum(a_high, a_max)
        e_low, e_high = torch.minimum(e_low, e_min), torch.maximum(e_high, e_max)
        if not finite_reference:
            a_all_nan &= a_nan.all()
            e_all_nan &= e_nan.all()
        if stop_at_first and int(count.item()):
            break
    a_constant = (a_low == a_high) | a_all_nan
    e_constant = (e_low == e_high) | e_all_nan
    count, max_abs, max_rel, absolute, a_constant, e_constant = torch.stack([
        count.to(f64), max_abs, max_rel, absolute, a_constant.to(f64), e_constant.to(f64)]).tolist()
    count = int(count)
    if finite_reference and count and not a_constant and reject_degenerate and not stop_at_first:
        a_constant = bool(_all_nan(torch, flat_a, read, chunk))
    # A constant output where the reference varies says more than "values differ": checked first.
    if reject_degenerate and not stop_at_first and n > 1 and a_constant and not e_constant:
        return ("degenerate", f"{path}: constant output ({flat_a[0].item():.6g}) where the reference "
                              f"varies", n, max_abs, max_rel)
    if count:
        # The first mismatch, found again only now that there is one: honest outputs, which
        # match, never pay for it.
        index = _first_mismatch(torch, flat_e, flat_a, read, chunk, working_absolute, relative)
        counted = "elements (compared up to the first)" if stop_at_first else f"{count} of {n} elements"
        return ("values", f"{path}: {counted} outside {absolute:.3g} + "
                          f"{relative:g}*|e| (first at flat index {index}: "
                          f"{flat_a[index].item():.6g} vs {flat_e[index].item():.6g})",
                count, max_abs, max_rel)
    return None, max_abs, max_rel


def _match_in_one_read(torch, flat_e, flat_a, atol, rtol, reject_degenerate):
    """The usual case, judged with one read-back where the passes below take two and some sixty
    operators (each a launch of the owner's, in every judged call of a profile): a reference with
    no NaN or infinity, an output that matches it everywhere and is not constant where the
    reference varies. Returns (max_abs, max_rel), the same numbers the passes would give, or None
    when any of that does not hold; the passes then judge the output and say why it fails."""
    f64 = torch.float64
    n = flat_e.numel()
    total = torch.linalg.vector_norm(flat_e, 1, dtype=f64)
    absolute, relative = _tolerances(torch, flat_e.dtype, total / n, atol, rtol)
    e, a = _working(torch, flat_e), _working(torch, flat_a)
    # The same operators, in the same order and precision, as _element_match and the statistics
    # of pass 2, so that the errors reported are the passes' to the last bit. Where every element
    # matches, every difference is finite (a NaN or infinite one fails the test), so the largest
    # is taken as it is.
    ok, diff, e_abs, _, _ = _element_match(torch, e, a, absolute.to(e.dtype), relative, True)
    max_abs = diff.max()
    max_rel = diff.div_(e_abs).nan_to_num_(nan=0.0, posinf=0.0).max()  # e = 0: left out
    # A constant output is left to the passes, which also ask whether the reference varies.
    ends = list(torch.aminmax(a)) if reject_degenerate and n > 1 else []
    matched, total, max_abs, max_rel, *ends = torch.cat([
        torch.stack([ok.sum().to(f64), total]),
        torch.stack([max_abs, max_rel, *ends]).to(f64)]).tolist()
    if not math.isfinite(total) or int(matched) != n or (ends and ends[0] == ends[1]):
        return None
    return max_abs, max_rel


def _tolerances(torch, dtype, mean, atol, rtol):
    """The rule's A (a device scalar, from the reference's mean magnitude) and R for a reference
    of `dtype`: eps is the spacing at 1 of the half-precision dtypes, 0 otherwise."""
    eps = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}.get(dtype, 0.0)
    return torch.maximum(atol * torch.clamp(mean, max=1.0), 2 * eps * mean), max(rtol, eps)


def _working(torch, tensor):
    """The precision an element is judged in: float32 for float32 and the half types (which it
    holds exactly; the rule's own rounding in it is some 1e-7 of a tolerance), float64 for float64.
    Half the memory traffic of judging everything in float64, on outputs of up to gigabytes."""
    return tensor if tensor.dtype in (torch.float32, torch.float64) else tensor.float()


def _element_match(torch, e, a, absolute, relative, finite_reference=False):
    """Per element, whether `a` matches `e`: both finite and |a - e| <= absolute + relative * |e|,
    or equal (infinities of the same sign), or both NaN. Also what the statistics reuse. With
    finite_reference (no element of `e` is NaN or infinite) the first test alone decides: a NaN or
    infinite `a` fails it, and a == e passes it; the NaN masks are then None."""
    e_abs = e.abs()
    diff = (a - e).abs_()
    ok = diff <= e_abs.mul(relative).add_(absolute)
    if finite_reference:
        return ok, diff, e_abs, None, None
    ok &= torch.isfinite(e)  # an infinite reference element is matched only by itself, below
    ok |= a == e
    a_nan, e_nan = torch.isnan(a), torch.isnan(e)
    ok |= a_nan & e_nan
    return ok, diff, e_abs, a_nan, e_nan


def _all_nan(torch, flat, read, chunk):
    """Whether every element below `read` is NaN, as a device bool, stopping at the first chunk
    that holds a number."""
    result = torch.ones((), dtype=torch.bool, device=flat.device)
    for at in _chunks(read, chunk):
        result &= torch.isnan(flat[at:min(at + chunk, read)]).all()
        if not bool(result):
            break
    return result


def _first_mismatch(torch, flat_e, flat_a, read, chunk, absolute, relative):
    """The flat index of the first element below `read` that does not match."""
    for at in _chunks(read, chunk):
        stop = min(at + chunk, read)
        ok = _element_match(torch, _working(torch, flat_e[at:stop]), _working(torch, flat_a[at:stop]),
                            absolute, relative)[0]
        if not bool(ok.all()):
            return at + int(torch.argmin(ok.to(torch.uint8)))
    return 0


def compare_outputs(torch, expected, actual, atol, rtol, reject_degenerate=True):
    """`expected` and `actual`: lists of (path, tensor) in the same order. The record's check
    fields as a dict."""
    result = {"match": True, "failure": "none", "reason": "", "max_abs_error": 0.0,
              "max_rel_error": 0.0, "mismatched": 0, "worst": ""}
    worst = -1.0
    if len(expected) != len(actual):
        result.update(match=False, failure="format",
                      reason=f"{len(actual)} output tensors where the reference has {len(expected)}")
        return result
    for (path, e), (_, a) in zip(expected, actual):
        found = compare_tensor(torch, e, a, atol, rtol, reject_degenerate, path)
        if found is None:
            continue
        if found[0] is None:  # a match with its errors
            _, max_abs, max_rel = found
        else:
            failure, reason, count, max_abs, max_rel = found
            if result["match"]:
                result.update(match=False, failure=failure, reason=reason)
            result["mismatched"] += int(count)
        if max_abs is not None:
            if max_abs > worst:
                worst = max_abs
                result["worst"] = path
            result["max_abs_error"] = max(result["max_abs_error"], max_abs)
            result["max_rel_error"] = max(result["max_rel_error"], max_rel)
    return result
