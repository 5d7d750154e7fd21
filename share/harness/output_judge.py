"""The filter's checks of a task's outputs, made in the task's job on the device that holds them.

A synthesized task is judged on what its forward returns: a value that is not a tensor, no tensor
at all, NaN or infinite values, all zeros or one constant value (scan); two calls on the same
inputs that differ (determinism: "bitwise", "within tolerance" or "no"); the same output for two
different input draws (input dependence); and torch.compile's output against eager's. Values are
compared by share/harness/compare.py's rule (the verifier's: atol scaled by the reference's mean
magnitude), in chunks, so nothing leaves the device but the findings.

Why here and not on the trusted C++ side, as verify does for candidates: whatever judged them, the
bytes would come from the task's own process, which could write anything into a file just as well.
The filter guards the training set against broken tasks, not against an adversary (tasks come from
the synthesiser; the policy never writes one), and copying gigabytes of outputs to files and back
cost more time than torch.compile. The C++ side validates and bounds what this module reports.

Findings are (check, detail) pairs with check one of: output, non_finite, all_zero, constant,
determinism, input_dependence (and compile, from compiled_differs).
"""

import compare

_DTYPE_NAMES = {
    "torch.float32": "float32", "torch.float16": "float16", "torch.bfloat16": "bfloat16",
    "torch.float64": "float64", "torch.int8": "int8", "torch.int16": "int16",
    "torch.int32": "int32", "torch.int64": "int64", "torch.uint8": "uint8", "torch.bool": "bool",
}
# The same bits as integers, for a bitwise comparison (NaN equals NaN, -0.0 differs from 0.0).
_BITS = {"float32": "int32", "float64": "int64", "float16": "int16", "bfloat16": "int16"}


def _type_name(value):
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def _key_text(key):
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def number_text(value):
    """1, 2.5, 1e-06: the shortest form that reads back as the value."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def flatten(torch, value, path="output"):
    """The output as a list of leaves (path, kind, value) in a fixed order, and its shape as a
    list of (path, container kind, length or keys): tensors (kind "tensor"), Python scalars
    ("int", "float", "bool", "none") and anything else ("other", its type's name). A tensor of a
    dtype outside the tensor file format's is "other" too."""
    leaves, shape = [], []

    def walk(item, where):
        if isinstance(item, torch.Tensor):
            dtype = _DTYPE_NAMES.get(str(item.dtype))
            if dtype is None:
                leaves.append((where, "other", f"tensor of {item.dtype}"))
            else:
                # Contiguous once here (a copy only for a strided output), so that every pass
                # below flattens it as a view instead of copying it again.
                leaves.append((where, "tensor", item.detach().contiguous()))
        elif type(item) in (tuple, list):
            shape.append((where, type(item).__name__, len(item)))
            for i, element in enumerate(item):
                walk(element, f"{where}[{i}]")
        elif type(item) is dict and all(type(k) is str for k in item):
            shape.append((where, "dict", tuple(sorted(item))))
            for key in sorted(item):
                walk(item[key], f"{where}[{_key_text(key)}]")
        elif type(item) is bool:
            leaves.append((where, "bool", item))
        elif type(item) is int:
            leaves.append((where, "int", item))
        elif type(item) is float:
            leaves.append((where, "float", item))
        elif item is None:
            leaves.append((where, "none", None))
        else:
            leaves.append((where, "other", _type_name(item)))

    walk(value, path)
    return leaves, shape


def _described(tensor):
    dims = ", ".join(str(d) for d in tensor.shape)
    return f"{_DTYPE_NAMES[str(tensor.dtype)]}[{dims}]"


def scan(torch, leaves, draw=""):
    """Findings about one draw's output on its own; `draw` names it in details ("" for the
    first). One finding per check: the first tensor that shows it. Returns (findings, whether the
    output holds a tensor)."""
    suffix = f" ({draw})" if draw else ""
    findings, seen, has_tensor = [], set(), False

    def add(check, detail):
        if check not in seen:
            seen.add(check)
            findings.append((check, detail + suffix))

    for path, kind, value in leaves:
        if kind == "other":
            add("output", f'{path} is a "{value}", not a tensor')
            continue
        if kind != "tensor":
            add("output", f"{path} is a Python {kind}, not a tensor")
            continue
        has_tensor = True
        if value.numel() == 0:
            continue
        what = f"{path} {_described(value)}"
        nan, inf, nonzero, constant = _census(torch, value)
        if nan + inf:
            add("non_finite", f"{what} has {nan} NaN and {inf} infinite values of {value.numel()}")
        elif not nonzero:
            add("all_zero", f"{what} is all zeros")
        elif value.numel() > 1 and constant:
            first = value.reshape(-1)[0].item()
            add("constant", f"{what} is constant (every element {number_text(first)})")
    return findings, has_tensor


def _census(torch, tensor):
    """(NaN count, infinity count, any element non-zero, every element equal to the first), in
    chunks on the tensor's device, read back once."""
    flat = tensor.reshape(-1)
    first = flat[0]
    floating = flat.is_floating_point()
    nan = torch.zeros((), dtype=torch.int64, device=flat.device)
    inf = torch.zeros_like(nan)
    nonzero = torch.zeros((), dtype=torch.bool, device=flat.device)
    constant = torch.ones_like(nonzero)
    for at in range(0, flat.numel(), compare.CHUNK):
        part = flat[at:at + compare.CHUNK]
        if floating:
            nan += torch.isnan(part).sum()
            inf += torch.isinf(part).sum()
        nonzero |= (part != 0).any()
        constant &= (part == first).all()
    nan, inf, nonzero, constant = torch.stack([nan, inf, nonzero.to(torch.int64),
                                               constant.to(torch.int64)]).tolist()
    return nan, inf, bool(nonzero), bool(constant)


def _equal_bits(torch, a, b):
    bits = _BITS.get(_DTYPE_NAMES[str(a.dtype)])
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    if bits is not None:
        flat_a, flat_b = flat_a.view(getattr(torch, bits)), flat_b.view(getattr(torch, bits))
    for at in range(0, flat_a.numel(), compare.CHUNK):
        if not torch.equal(flat_a[at:at + compare.CHUNK], flat_b[at:at + compare.CHUNK]):
            return False
    return True


def same_bits(torch, left, right):
    """Whether two flattened outputs are the same values bit for bit. Only outputs whose leaves
    are all tensors get here: any other leaf fails the scan first."""
    (a_leaves, a_shape), (b_leaves, b_shape) = left, right
    if a_shape != b_shape or len(a_leaves) != len(b_leaves):
        return False
    for (a_path, a_kind, a), (b_path, b_kind, b) in zip(a_leaves, b_leaves):
        if a_path != b_path or a_kind != b_kind:
            return False
        if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
            return False
        if not _equal_bits(torch, a, b):
            return False
    return True


def differs(torch, expected, actual, atol, rtol, stop_at_first=False):
    """Why `actual` does not match `expected` (flattened outputs) within the tolerance, or "".
    Structure first (containers, kinds, dtypes, shapes, devices), then values; a constant output
    is not rejected here (the scan's business). As for same_bits, `expected` holds tensors only."""
    (e_leaves, e_shape), (a_leaves, a_shape) = expected, actual
    if e_shape != a_shape or len(e_leaves) != len(a_leaves):
        return f"the output's structure differs: {_structure(a_shape, a_leaves)}, expected " \
               f"{_structure(e_shape, e_leaves)}"
    for (path, e_kind, e), (_, a_kind, a) in zip(e_leaves, a_leaves):
        if e_kind != a_kind:
            return f"{path}: {a_kind}, expected {e_kind}"
        if e.device != a.device:
            return f"{path}: device {a.device.type}, expected {e.device.type}"
        found = compare.compare_tensor(torch, e, a, atol, rtol, False, path, stop_at_first)
        if found is not None and found[0] is not None:
            return found[1]
    return ""


def _structure(shape, leaves):
    parts = [f"{path} {kind} of {size if isinstance(size, int) else list(size)}"
             for path, kind, size in shape]
    parts += [f"{path} {_described(v) if kind == 'tensor' else kind}" for path, kind, v in leaves]
    text = "; ".join(parts)
    return text if len(text) <= 300 else text[:300] + "..."


def tolerance_text(atol, rtol):
    return f"atol={number_text(float(atol))}, rtol={number_text(float(rtol))}"


class Judgement:
    """The eager checks, one step at a time, so that the job keeps one output (the first) on the
    device and frees each other one as soon as it is judged."""

    def __init__(self, torch, atol, rtol):
        self.torch, self.atol, self.rtol = torch, atol, rtol
        self.first = None
        self.findings = []
        self.determinism = ""
        self.output_unusable = False

    def first_call(self, output):
        self.first = flatten(self.torch, output)
        findings, has_tensor = scan(self.torch, self.first[0])
        self.findings += findings
        if not has_tensor:
            self.findings.append(("output", "the output holds no tensor"))
        self.output_unusable = any(check == "output" for check, _ in self.findings)

    def second_call(self, output):
        """The same inputs again: determinism."""
        if self.output_unusable:
            return
        second = flatten(self.torch, output)
        if same_bits(self.torch, self.first, second):
            self.determinism = "bitwise"
        else:
            why = differs(self.torch, self.first, second, self.atol, self.rtol)
            if not why:
                self.determinism = "within tolerance"
            else:
                self.determinism = "no"
                self.findings.append(("determinism", "two runs on the same inputs differ beyond "
                                      f"{tolerance_text(self.atol, self.rtol)}: {why}"))

    def other_draw(self, output, inputs_equal):
        """Another input draw: scanned too, and its output must differ from the first's."""
        if self.output_unusable:
            return
        other = flatten(self.torch, output)
        known = {check for check, _ in self.findings}
        findings, _ = scan(self.torch, other[0], "second input draw")
        self.findings += [(check, detail) for check, detail in findings if check not in known]
        if any(check == "output" for check, _ in findings):
            self.output_unusable = True
            return
        # Different draws differ at nearly every element of an honest task: the first decides.
        if not differs(self.torch, self.first, other, self.atol, self.rtol, stop_at_first=True):
            detail = ("the outputs for two different input draws match within "
                      f"{tolerance_text(self.atol, self.rtol)}")
            if inputs_equal:
                detail += " (get_inputs returned the same inputs for both seeds)"
            self.findings.append(("input_dependence", detail))

    def compiled_differs(self, output):
        """torch.compile's output against the first eager call's: "" when they match."""
        why = differs(self.torch, self.first, flatten(self.torch, output), self.atol, self.rtol)
        if not why:
            return ""
        return f"torch.compile's output differs from eager beyond {tolerance_text(self.atol, self.rtol)}: {why}"

    def release(self):
        self.first = None
