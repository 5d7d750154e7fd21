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

Integer and bool tensors must be equal. Returns a dict with the record's fields (match, failure,
reason, max_abs_error, max_rel_error, mismatched, worst).
"""

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
    f64 = torch.float64
    zero = torch.zeros((), dtype=f64, device=device)
    # Pass 1: the mean |e| over the reference's finite elements (S), whatever the candidate wrote
    # (a non-finite element where e is finite fails on its own), as in
    # lib/candidate/tensor_compare.cpp.
    finite_count = torch.zeros((), dtype=f64, device=device)
    total = torch.zeros((), dtype=f64, device=device)
    for at in _chunks(n, chunk):
        e = flat_e[at:at + chunk].to(f64)
        e_finite = torch.isfinite(e)
        finite_count += e_finite.sum()
        total += torch.where(e_finite, e.abs(), zero).sum()
    mean = total / finite_count.clamp_min(1)
    eps = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}.get(expected.dtype, 0.0)
    absolute = torch.maximum(atol * torch.clamp(mean, max=1.0), 2 * eps * mean)
    relative = max(rtol, eps)
    # Pass 2: the elements. Everything is accumulated on the device and read back once (each read
    # is a synchronisation), except that stop_at_first reads the count after each chunk.
    max_abs = zero.clone()
    max_rel = zero.clone()
    e0, a0 = flat_e[0].to(f64), flat_a[0].to(f64)
    a_constant = torch.ones((), dtype=torch.bool, device=device)
    e_constant = torch.ones((), dtype=torch.bool, device=device)
    for at in _chunks(n, chunk):
        e = flat_e[at:at + chunk].to(f64)
        a = flat_a[at:at + chunk].to(f64)
        e_nan, a_nan = torch.isnan(e), torch.isnan(a)
        e_inf, a_inf = torch.isinf(e), torch.isinf(a)
        special = (e_nan != a_nan) | (e_inf != a_inf) | (e_inf & a_inf & (torch.sign(e) != torch.sign(a)))
        finite = torch.isfinite(e) & torch.isfinite(a)
        diff = torch.where(finite, (a - e).abs(), zero)
        magnitude = torch.where(finite, e.abs(), zero)
        bad = (finite & (diff > absolute + relative * magnitude)) | special
        count += bad.sum()
        first = _first_index(torch, bad, at, first)
        max_abs = torch.maximum(max_abs, diff.max())
        rel = torch.where(finite & (e != 0), diff / e.abs().clamp_min(1e-300), zero)
        max_rel = torch.maximum(max_rel, rel.max())
        a_constant &= _constant(torch, a, a0)
        e_constant &= _constant(torch, e, e0)
        if stop_at_first and int(count.item()):
            break
    count, max_abs, max_rel, absolute, a_constant, e_constant = torch.stack([
        count.to(f64), max_abs, max_rel, absolute, a_constant.to(f64), e_constant.to(f64)]).tolist()
    count = int(count)
    # A constant output where the reference varies says more than "values differ": checked first.
    if reject_degenerate and not stop_at_first and n > 1 and a_constant and not e_constant:
        return ("degenerate", f"{path}: constant output ({flat_a[0].item():.6g}) where the reference "
                              f"varies", n, max_abs, max_rel)
    if count:
        index = int(first.item())
        counted = "elements (compared up to the first)" if stop_at_first else f"{count} of {n} elements"
        return ("values", f"{path}: {counted} outside {absolute:.3g} + "
                          f"{relative:g}*|e| (first at flat index {index}: "
                          f"{flat_a[index].item():.6g} vs {flat_e[index].item():.6g})",
                count, max_abs, max_rel)
    return None, max_abs, max_rel


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
