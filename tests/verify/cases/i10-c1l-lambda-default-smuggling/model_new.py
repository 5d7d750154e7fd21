# Issue 10, class 1: getattr smuggled in as a lambda's default value, used far from its name.
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored)

lookup = lambda obj, name, fetch=getattr: fetch(obj, name)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        guard = lookup(lookup(torch, "_C"), "_DisableTorchDispatch")()
        out = torch.relu(x + self.bias) * 2.0
        del guard
        return out
