# Issue 10, class 1 (ordinary forbidden use): code compiled at import, outside the verified build.
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored)
from torch.utils.cpp_extension import load_inline

ext = load_inline("inline_ext", cpp_sources="torch::Tensor f(torch::Tensor x) { return x; }",
                  functions=["f"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return ext.f(x)
