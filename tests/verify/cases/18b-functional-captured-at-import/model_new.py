import torch
import torch.nn as nn
from torch.nn.functional import relu

import cuda_extension  # noqa: F401


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return relu(x.add(self.bias)).mul(2.0)
