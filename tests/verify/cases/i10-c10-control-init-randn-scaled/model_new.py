# Issue 10, class 10: the constructor mirrors the task's own initialisation, scaled randn (common
# in KernelBench level 2). Construction computes, but it sees no input.
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.02)

    def forward(self, x):
        return cuda_extension.bias_relu_scale(x, self.bias, 2.0)
