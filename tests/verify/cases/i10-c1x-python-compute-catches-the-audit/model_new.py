# Issue 10, class 1 (compute outside the candidate's kernels, and the audit told apart): the
# forward reads the values one by one inside try; where the audit stops that (an audited call)
# it falls back to its kernel, elsewhere it computes in Python. Every call here is audited, so
# it always takes the kernel: the values it read before the audit stopped it must still count.
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        try:
            values = [float(v) for v in x.reshape(-1)]
        except RuntimeError:
            return cuda_extension.bias_relu_scale(x, self.bias, 2.0)
        bias = [float(b) for b in self.bias]
        cols = len(bias)
        out = [max(v + bias[i % cols], 0.0) * 2.0 for i, v in enumerate(values)]
        return torch.tensor(out, dtype=x.dtype).view(x.shape)
