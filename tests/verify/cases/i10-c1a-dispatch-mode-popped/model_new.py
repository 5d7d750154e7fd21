# Issue 10, class 1: leave the operator audit by popping its dispatch mode for the call, compute
# with torch, and let the harness push nothing back.
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored)
from torch.utils._python_dispatch import _pop_mode_temporarily


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        with _pop_mode_temporarily():
            return torch.relu(x + self.bias) * 2.0
