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

def _floating(torch, tensor):
    return tensor.is_floating_point() or tensor.is_complex()


def compare_tensor(torch, expected, actual, atol, rtol, reject_degenerate, path):
    """None on a match, else (failure, reason, mismatched, max_abs, max_rel)."""
    if actual.dtype != expected.dtype or tuple(actual.shape) != tuple(expected.shape):
        return ("format", f"{path}: {actual.dtype} {tuple(actual.shape)} where the reference is "
                          f"{expected.dtype} {tuple(expected.shape)}", expected.numel(), None, None)
    if expected.numel() == 0:
        return None
    if not _floating(torch, expected):
        differs = actual != expected
        count = int(differs.sum().item())
        if count:
            index = int(differs.flatten().nonzero()[0].item())
            return ("values", f"{path}: {count} of {expected.numel()} elements differ (first at flat "
                              f"index {index}: {actual.flatten()[index].item()} vs "
                              f"{expected.flatten()[index].item()})", count, None, None)
        return None
    e = expected.to(torch.float64)
    a = actual.to(torch.float64)
    e_nan, a_nan = torch.isnan(e), torch.isnan(a)
    e_inf, a_inf = torch.isinf(e), torch.isinf(a)
    special = (e_nan != a_nan) | (e_inf != a_inf) | (e_inf & a_inf & (torch.sign(e) != torch.sign(a)))
    finite = torch.isfinite(e) & torch.isfinite(a)
    zero = torch.zeros((), dtype=torch.float64, device=e.device)
    diff = torch.where(finite, (a - e).abs(), zero)
    magnitude = torch.where(finite, e.abs(), zero)
    # The mean |e| over the finite elements decides the absolute tolerance; everything below is
    # computed on the device and read back in one transfer (each read is a synchronisation).
    eps = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}.get(expected.dtype, 0.0)
    finite_count = finite.sum().to(torch.float64)
    mean = magnitude.sum() / finite_count.clamp_min(1)
    scale = torch.clamp(mean, max=1.0)
    absolute = torch.maximum(atol * scale, 2 * eps * mean)
    relative = max(rtol, eps)
    limit = absolute + relative * magnitude
    bad = (finite & (diff > limit)) | special
    rel = torch.where(finite & (e != 0), diff / e.abs().clamp_min(1e-300), zero)
    flat_a, flat_e = a.flatten(), e.flatten()
    a_constant = torch.all((flat_a == flat_a[0]) | (torch.isnan(flat_a) & torch.isnan(flat_a[0])))
    e_constant = torch.all((flat_e == flat_e[0]) | (torch.isnan(flat_e) & torch.isnan(flat_e[0])))
    count, max_abs, max_rel, absolute, a_constant, e_constant = torch.stack([
        bad.sum().to(torch.float64), diff.max(), rel.max(), absolute, a_constant.to(torch.float64),
        e_constant.to(torch.float64)]).tolist()
    count = int(count)
    # A constant output where the reference varies says more than "values differ": checked first.
    if reject_degenerate and expected.numel() > 1 and a_constant and not e_constant:
        return ("degenerate", f"{path}: constant output ({flat_a[0].item():.6g}) where the reference "
                              f"varies", expected.numel(), max_abs, max_rel)
    if count:
        index = int(bad.flatten().nonzero()[0].item())
        return ("values", f"{path}: {count} of {expected.numel()} elements outside {absolute:.3g} + "
                          f"{relative:g}*|e| (first at flat index {index}: "
                          f"{actual.flatten()[index].item():.6g} vs {expected.flatten()[index].item():.6g})",
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
