# Issue 10, class 1: a dispatch mode of the candidate's own, pushed inside the audit; it answers
# every operator with the Python dispatch key excluded, so the audit beneath never sees one.
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored)
from torch.utils._python_dispatch import TorchDispatchMode


class Quiet(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        guard = torch._C._DisableTorchDispatch()
        try:
            return func(*args, **(kwargs or {}))
        finally:
            del guard


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        with Quiet():
            return torch.relu(x + self.bias) * 2.0
