# Issue 10, class 1 (ordinary forbidden use): numpy computes where no operator audit looks.
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored)
import numpy as np


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        out = np.maximum(x.numpy() + self.bias.detach().numpy(), 0) * 2.0
        return torch.from_numpy(out)
