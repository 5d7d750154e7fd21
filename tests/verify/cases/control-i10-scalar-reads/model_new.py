# Issue 10, class 1's budget of values read one by one, honest side: a forward that reads a few
# scalars (a parameter, a buffer, a size held in a tensor) for its kernel's arguments must pass.
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))
        self.register_buffer("scale", torch.tensor([2.0]), persistent=False)
        self.register_buffer("features", torch.tensor(features), persistent=False)

    def forward(self, x):
        if int(self.features) != x.size(1) or not bool(self.features):
            raise RuntimeError("unexpected shape")
        scale = float(self.scale.item())
        return cuda_extension.bias_relu_scale(x, self.bias, scale)
