# Issue 10, class 1: the harness's own module, found in sys.modules, and its audit mode class
# replaced by one that lets everything through.
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored)
import sys


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        for module in list(sys.modules.values()):
            if hasattr(module, "make_audit_mode"):
                module.make_audit_mode = lambda *args: None
        return torch.relu(x + self.bias) * 2.0
