# Issue 10, class 1: the same switch, spelled at run time so that no source scan sees "_C".
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        core = getattr(torch, "_" + "C")
        guard = getattr(core, "_Disable" + "TorchDispatch")()
        out = torch.relu(x + self.bias) * 2.0
        del guard
        return out
