"""How the values of one call cross an evaluation session: the owner and every runner lay a call's
inputs and outputs out the same way (this module), so a buffer holds each tensor at a known offset
and a runner's answer can be held to the reference's structure.

A value is flattened depth-first into leaves with paths ("input[0]", "output[1]"); tensors become
slots of a shared buffer (dtype, shape, byte offset aligned to 256), numbers travel in the call's
messages. Anything else (a dict, a custom object) cannot cross a session.
"""

ALIGN = 256


def flatten(torch, value, path="output", strict=True):
    """[(path, leaf)] in depth-first order; leaves are tensors or plain numbers. Anything else
    raises TypeError when `strict`, else is a leaf of its own (a runner reports it, the owner
    refuses it)."""
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, (tuple, list)):
        out = []
        for index, item in enumerate(value):
            out += flatten(torch, item, f"{path}[{index}]", strict)
        return out
    if isinstance(value, (bool, int, float)) or value is None or not strict:
        return [(path, value)]
    raise TypeError(f"{path}: a {type(value).__name__} cannot cross a session (tensors, tuples, "
                    f"lists and numbers can)")


def layout_of(torch, leaves):
    """Buffer layout of the tensor leaves: [{"path", "dtype", "shape", "offset", "bytes"}] and the
    total size; number leaves are listed with their value."""
    specs, offset = [], 0
    for path, leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            nbytes = leaf.numel() * leaf.element_size()
            specs.append({"path": path, "dtype": str(leaf.dtype).replace("torch.", ""),
                          "shape": list(leaf.shape), "offset": offset, "bytes": nbytes})
            offset += (nbytes + ALIGN - 1) // ALIGN * ALIGN
        else:
            specs.append({"path": path, "value": leaf})
    return specs, offset


def structure_of(torch, value):
    """The nesting of a value without its data: "t" for a tensor, "b" for a bool, "n" for another
    number, null for None, ["tuple" | "list", item, ...] for sequences, a type name otherwise
    (a tensor subclass is "subclass:NAME": a foreign type, never accepted)."""
    if type(value) is torch.Tensor:
        return "t"
    if isinstance(value, torch.Tensor):
        return "subclass:" + type(value).__name__
    if isinstance(value, (tuple, list)):
        return [type(value).__name__] + [structure_of(torch, item) for item in value]
    if isinstance(value, bool):
        return "b"
    if isinstance(value, (int, float)):
        return "n"
    return None if value is None else type(value).__name__


def views(torch, buffer, layout, base=0):
    """One tensor view of `buffer` per tensor slot of `layout` (None for number leaves), the
    layout starting `base` bytes into the buffer (a call's k-th forward: base = k * its bytes)."""
    return [buffer.tensor(torch, getattr(torch, spec["dtype"]), spec["shape"], base + spec["offset"])
            if "dtype" in spec else None for spec in layout]


def slot_seed(seed, slot):
    """The seed of a call's `slot`-th forward: the call's own for the first, a fixed function of
    it for the others (the call's seed is fresh and private, so theirs are too)."""
    return (int(seed) + slot * 0x9E3779B97F4A7C15) % (1 << 63) if slot else int(seed)
