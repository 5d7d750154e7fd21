# Issue 10, class 1 (compute outside the candidate's kernels): the values reach Python as text,
# through an f-string and %-formatting of each element (no float() of a tensor or .item() in the
# source), and are parsed back.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        bias = [float("%.9g" % b) for b in self.bias]
        out = []
        for row in x:
            out.append([max(float(f"{v:.9g}") + b, 0.0) * 2.0 for v, b in zip(row, bias)])
        return torch.tensor(out)
