import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        cuda_extension.prepare()
        y = x + self.bias
        return y * (y > 0) * 2.0
