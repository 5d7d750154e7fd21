# Issue 10, class 1 (compute outside the candidate's kernels): no kernel and no torch compute at
# all; every element is read into Python with float(), computed there, and put back in a tensor.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        bias = [float(b) for b in self.bias]
        rows = [[max(float(v) + b, 0.0) * 2.0 for v, b in zip(row, bias)] for row in x]
        return torch.tensor(rows, dtype=x.dtype)
