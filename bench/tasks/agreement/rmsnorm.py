# estimate: 8192x4096 fp32 (134 MB): five kernels (square, mean, rsqrt, two products), ~0.25-0.5 ms on an H200
import torch
import torch.nn as nn

SIZE = "cuda"  # the bench scripts write "cpu" here for a smoke run at tiny sizes
ROWS, D = {"cuda": (8192, 4096), "cpu": (16, 32)}[SIZE]


class Model(nn.Module):
    """RMS norm written out with a learned scale."""

    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * self.weight


def get_inputs():
    return [torch.randn(ROWS, D)]


def get_init_inputs():
    return [D]
