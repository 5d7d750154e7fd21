# Issue 10, class 1: a dispatch mode of the candidate's own, pushed inside the audit, answering
# every operator before the audit sees it.
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored)
from torch.utils._python_dispatch import TorchDispatchMode


class Quiet(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        with Quiet():
            return torch.relu(x + self.bias) * 2.0
