"""Writes one forward call's result in the cudaagent tensor file format (CATENS1).

Layout: b"CATENS1\n", a little-endian u32 header length H, H bytes of UTF-8 JSON, then the payload.
The header is {"value": V}; V describes the returned object recursively (tensor, tuple, list, dict,
int, float, bool, none, other) and each tensor's bytes sit at "offset" (from the payload start) as
C-contiguous little-endian elements. The trusted C++ side (lib/candidate/tensor_file.cpp) reads this
format from both the reference and the candidate process and trusts nothing in it.
"""

import json
import math
import struct

MAGIC = b"CATENS1\n"

_DTYPES = {
    "torch.float32": "float32", "torch.float16": "float16", "torch.bfloat16": "bfloat16",
    "torch.float64": "float64", "torch.int8": "int8", "torch.int16": "int16",
    "torch.int32": "int32", "torch.int64": "int64", "torch.uint8": "uint8", "torch.bool": "bool",
}


def _type_name(obj):
    kind = type(obj)
    return f"{kind.__module__}.{kind.__qualname__}"


def _describe(torch, obj, chunks, offset):
    """Returns (description, new offset); appends tensor bytes to chunks."""
    if issubclass(type(obj), torch.Tensor):
        # type() not isinstance(): a subclass must be reported as what it is.
        python_type = "torch.Tensor" if type(obj) is torch.Tensor else _type_name(obj)
        dtype = _DTYPES.get(str(obj.dtype))
        if dtype is None:
            return {"kind": "other", "python_type": f"tensor of {obj.dtype}"}, offset
        data = obj.detach()
        device = "cuda" if data.is_cuda else ("cpu" if data.device.type == "cpu" else data.device.type)
        raw = data.to("cpu").contiguous()
        # The tensor's own bytes, written through the buffer protocol: no copy of a payload that
        # can be gigabytes.
        payload = raw.reshape(-1).view(torch.uint8).numpy() if raw.numel() else b""
        nbytes = len(payload)
        chunks.append(payload)
        description = {"kind": "tensor", "dtype": dtype, "shape": list(raw.shape),
                       "device": device, "python_type": python_type,
                       "offset": offset, "nbytes": nbytes}
        return description, offset + nbytes
    if type(obj) in (tuple, list):
        items = []
        for item in obj:
            described, offset = _describe(torch, item, chunks, offset)
            items.append(described)
        return {"kind": "tuple" if type(obj) is tuple else "list", "items": items}, offset
    if type(obj) is dict and all(type(k) is str for k in obj):
        items = {}
        for key, item in obj.items():
            items[key], offset = _describe(torch, item, chunks, offset)
        return {"kind": "dict", "items": items}, offset
    if type(obj) is bool:
        return {"kind": "bool", "value": obj}, offset
    if type(obj) is int:
        return {"kind": "int", "value": obj}, offset
    if type(obj) is float:
        if math.isfinite(obj):
            return {"kind": "float", "value": obj}, offset
        flag = "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
        return {"kind": "float", "value": None, "nonfinite": flag}, offset
    if obj is None:
        return {"kind": "none"}, offset
    return {"kind": "other", "python_type": _type_name(obj)}, offset


def write(torch, path, obj):
    chunks = []
    description, _ = _describe(torch, obj, chunks, 0)
    header = json.dumps({"value": description}, allow_nan=False).encode()
    with open(path, "wb") as out:
        out.write(MAGIC)
        out.write(struct.pack("<I", len(header)))
        out.write(header)
        for chunk in chunks:
            out.write(chunk)
