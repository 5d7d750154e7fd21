# Issue 10, class 1: a function rebinding a module-level name the checker resolved as torch.
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored)


def swap(replacement):
    global torch
    torch = replacement


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return cuda_extension.bias_relu_scale(x, self.bias, 2.0)
