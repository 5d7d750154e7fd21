# estimate: 4096^3 fp32: 137 GFLOP, SGEMM (TF32 is off for matmul by default), ~2.3-2.7 ms on an H200
import torch
import torch.nn as nn

SIZE = "cuda"  # the bench scripts write "cpu" here for a smoke run at tiny sizes
N = {"cuda": 4096, "cpu": 64}[SIZE]


class Model(nn.Module):
    """Product of two square fp32 matrices."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
