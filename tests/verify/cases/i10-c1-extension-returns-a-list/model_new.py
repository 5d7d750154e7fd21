import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        rows, cols = x.shape
        b = cuda_extension.to_list(self.bias.detach())
        v = cuda_extension.to_list(x)
        out = [max(v[i] + b[i % cols], 0.0) * 2.0 for i in range(rows * cols)]
        return cuda_extension.from_list(out, rows, cols)
