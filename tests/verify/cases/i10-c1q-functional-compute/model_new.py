# Issue 10, class 1 (ordinary forbidden use): torch.nn.functional does the work.
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored)
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return F.relu(x + self.bias) * 2.0
