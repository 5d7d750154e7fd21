#!/usr/bin/env python3
"""Writes N synthetic KernelBench-style task records (JSONL) for the dedup benchmark.

Each task stacks 1-5 operators from a small catalog into `Model`, with `get_inputs` and
`get_init_inputs`; sizes, variable names and docstrings vary, so the stream holds exact
duplicates, renamed near-duplicates and distinct tasks, as a synthesizer's output would.
Deterministic for a seed; standard library only. Not cudaagent-synth: only what dedup reads.
Usage: make_dedup_tasks.py N SEED > tasks.jsonl
"""

import hashlib
import json
import random
import sys

# name: (lines in __init__ or None, line in forward); {i} numbers the layer, {v} is the variable.
IMAGE_OPS = {
    "conv": ("self.conv{i} = nn.Conv2d(channels, channels, {k}, padding={k} // 2)",
             "{v} = self.conv{i}({v})"),
    "conv_transpose": ("self.up{i} = nn.ConvTranspose2d(channels, channels, 3, stride=1, padding=1)",
                       "{v} = self.up{i}({v})"),
    "batch_norm": ("self.bn{i} = nn.BatchNorm2d(channels)", "{v} = self.bn{i}({v})"),
    "group_norm": ("self.gn{i} = nn.GroupNorm(4, channels)", "{v} = self.gn{i}({v})"),
    "bias": ("self.bias{i} = nn.Parameter(torch.randn(channels, 1, 1))", "{v} = {v} + self.bias{i}"),
    "relu": (None, "{v} = torch.relu({v})"),
    "gelu": (None, "{v} = F.gelu({v})"),
    "sigmoid": (None, "{v} = torch.sigmoid({v})"),
    "tanh": (None, "{v} = torch.tanh({v})"),
    "leaky_relu": (None, "{v} = F.leaky_relu({v}, negative_slope={s})"),
    "hardswish": (None, "{v} = F.hardswish({v})"),
    "mish": (None, "{v} = {v} * torch.tanh(F.softplus({v}))"),
    "scale": (None, "{v} = {v} * {s}"),
    "clamp": (None, "{v} = torch.clamp({v}, min=-{s}, max={s})"),
    "max_pool": (None, "{v} = F.max_pool2d({v}, 2)"),
    "avg_pool": (None, "{v} = F.avg_pool2d({v}, 2)"),
    "softmax": (None, "{v} = torch.softmax({v}, dim=1)"),
    "dropout": (None, "{v} = F.dropout({v}, p={s}, training=self.training)"),
    "residual": (None, "{v} = {v} + {v}.mean(dim=(2, 3), keepdim=True)"),
}

NAMES = ["x", "h", "out", "y", "t"]


def make_task(rng):
    ops = [rng.choice(sorted(IMAGE_OPS)) for _ in range(rng.randint(1, 5))]
    v = rng.choice(NAMES)
    init, forward = [], []
    for i, op in enumerate(ops):
        init_line, forward_line = IMAGE_OPS[op]
        fill = {"i": i, "v": v, "k": rng.choice([1, 3, 5]), "s": rng.choice([0.1, 0.5, 2.0])}
        if init_line:
            init.append("        " + init_line.format(**fill))
        forward.append("        " + forward_line.format(**fill))
    doc = "    \"\"\"%s.\"\"\"\n" % ", then ".join(ops).capitalize() if rng.random() < 0.5 else ""
    source = (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        "class Model(nn.Module):\n" + doc +
        "    def __init__(self, channels):\n        super().__init__()\n" +
        "".join(line + "\n" for line in init) +
        "\n    def forward(self, %s):\n" % v + "".join(line + "\n" for line in forward) +
        "        return %s\n\n\n" % v +
        "batch_size = %d\nchannels = %d\nheight = width = %d\n\n\n" % (
            rng.choice([8, 16, 32, 64]), rng.choice([16, 32, 64]), rng.choice([32, 64, 128])) +
        "def get_inputs():\n    return [torch.randn(batch_size, channels, height, width)]\n\n\n"
        "def get_init_inputs():\n    return [channels]\n")
    return ops, source


def main():
    count, seed = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    out = sys.stdout
    for n in range(count):
        ops, source = make_task(rng)
        record = {
            "id": hashlib.sha256(source.encode()).hexdigest(),
            "task": {"source": "bench", "model_py": source, "ops": ops,
                     "meta": {"seed": seed, "index": n}},
        }
        out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
