# Issue 10, class 1: the dispatcher's switch, reached through another name for torch: with the
# Python dispatch key excluded, no dispatch mode (the audit) sees the operators.
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored)
import torch as t


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        guard = t._C._DisableTorchDispatch()
        out = t.relu(x + self.bias) * 2.0
        del guard
        return out
