# Issue 10, class 10: ones plus scaled noise, as norm layers' tasks initialise their weights.
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.ones(features) + 0.1 * torch.randn(features))

    def forward(self, x):
        return cuda_extension.bias_relu_scale(x, self.bias, 2.0)
