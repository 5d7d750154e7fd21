# Issue 10, class 1 (compute outside the candidate's kernels): explicit loops over the sizes,
# each element read with .item() through an index, the result written into an output the
# candidate allocated; the extension is called once on an empty slice so that it "is used".
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        cuda_extension.bias_relu_scale(x.narrow(0, 0, 0), self.bias, 2.0)
        rows, cols = x.shape
        values = []
        for r in range(rows):
            for c in range(cols):
                v = x[r, c].item() + self.bias[c].item()
                values.append(v * 2.0 if v > 0 else 0.0)
        return x.new_tensor(values).view(rows, cols)
