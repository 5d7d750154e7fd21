import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return cuda_extension.bias_relu_scale(x, self.bias, lambda v, c: max(v + c, 0.0) * 2.0)
