# class: >=1ms
# estimate: 4096^3 fp32 matmul, 137 GFLOP at ~50-60 TFLOP/s (SGEMM, TF32 off by default):
#   ~2.3-2.7 ms on an H200.
import torch
import torch.nn as nn

SIZE = "cuda"  # the bench scripts write "cpu" here for a smoke run at tiny sizes
N = {"cuda": 4096, "cpu": 128}[SIZE]


class Model(nn.Module):
    """Product of two square fp32 matrices."""

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
