# estimate: 16x128x96x96 fp32 (75 MB) in and out: memory-bound depthwise plus a 4.8 GFLOP pointwise,
#   ~0.1-0.3 ms on an H200
import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = "cuda"  # the bench scripts write "cpu" here for a smoke run at tiny sizes
B, C, H, W = {"cuda": (16, 128, 96, 96), "cpu": (2, 4, 8, 8)}[SIZE]


class Model(nn.Module):
    """Depthwise 3x3 convolution, pointwise 1x1 convolution, ReLU6."""

    def __init__(self, channels):
        super().__init__()
        self.depthwise = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)
        self.pointwise = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        return F.relu6(self.pointwise(self.depthwise(x)))


def get_inputs():
    return [torch.randn(B, C, H, W)]


def get_init_inputs():
    return [C]
