# estimate: 2048x4096 @ 4096x8192 fp32: 137 GFLOP, ~2.3-2.7 ms on an H200
import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = "cuda"  # the bench scripts write "cpu" here for a smoke run at tiny sizes
B, D_IN, D_OUT = {"cuda": (2048, 4096, 8192), "cpu": (8, 32, 64)}[SIZE]


class Model(nn.Module):
    """Linear layer 4096 -> 8192, then GELU."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.linear = nn.Linear(d_in, d_out)

    def forward(self, x):
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(B, D_IN)]


def get_init_inputs():
    return [D_IN, D_OUT]
