#!/usr/bin/env python3
"""Compare two safetensors files tensor by tensor: same names, shapes and dtypes, and values equal
within --rtol/--atol (0/0: exactly). Exit 0 when they match; otherwise print the first difference
and exit 1. Reads the format with the standard library alone (the tests' tensors are small)."""
import argparse
import json
import math
import struct
import sys

FORMATS = {"F32": "f", "F64": "d", "F16": "e", "I64": "q", "I32": "i", "U8": "B", "BOOL": "?"}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    header.pop("__metadata__", None)
    out = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = data[8 + length + begin:8 + length + end]
        code = FORMATS[entry["dtype"]]
        count = len(raw) // struct.calcsize(code)
        out[name] = (entry["dtype"], tuple(entry["shape"]), struct.unpack(f"<{count}{code}", raw))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rtol", type=float, default=0.0)
    parser.add_argument("--atol", type=float, default=0.0)
    args = parser.parse_args()
    a, b = read(args.a), read(args.b)
    if sorted(a) != sorted(b):
        print(f"names differ: {sorted(a)} vs {sorted(b)}")
        return 1
    for name in sorted(a):
        (dtype_a, shape_a, x), (dtype_b, shape_b, y) = a[name], b[name]
        if shape_a != shape_b or dtype_a != dtype_b:
            print(f"{name}: {shape_a} {dtype_a} vs {shape_b} {dtype_b}")
            return 1
        worst = 0.0
        for u, v in zip(x, y):
            if isinstance(u, float) and math.isnan(u) and math.isnan(v):
                continue
            if abs(u - v) > args.atol + args.rtol * abs(v):
                worst = max(worst, abs(u - v))
        if worst > 0:
            print(f"{name}: values differ (largest difference {worst:g})")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
