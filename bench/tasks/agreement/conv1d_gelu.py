# estimate: 16x256x4096 -> 16x256x4096 fp32, kernel 7: 60 GFLOP, ~0.4-0.8 ms on an H200
import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = "cuda"  # the bench scripts write "cpu" here for a smoke run at tiny sizes
B, C, L = {"cuda": (16, 256, 4096), "cpu": (2, 8, 64)}[SIZE]


class Model(nn.Module):
    """1-D convolution over a long sequence (kernel 7), then GELU."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 7, padding=3)

    def forward(self, x):
        return F.gelu(self.conv(x))


def get_inputs():
    return [torch.randn(B, C, L)]


def get_init_inputs():
    return [C]
