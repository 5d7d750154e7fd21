# Issue 10, class 10: honest idioms a model writes around its kernel, none of which may be
# refused: typing and math, an unused torch.nn.functional import, a non-persistent buffer, a
# private helper, views and shape arithmetic, if/for over sizes, the extension called with tensors
# and Python scalars.
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401  (a habit; never used)

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.features = features
        self.bias = nn.Parameter(torch.empty(features))
        self.register_buffer("scale", torch.full((1,), 2.0), persistent=False)
        self._chunks = max(1, int(math.log2(features)) // 4)

    def _launch(self, x: torch.Tensor, scale: float) -> torch.Tensor:
        return cuda_extension.bias_relu_scale(x.contiguous(), self.bias, scale)

    def forward(self, x: torch.Tensor, scale: Optional[float] = None) -> torch.Tensor:
        batch, features = x.shape
        assert features == self.features and x.dim() == 2
        flat = x.view(batch, -1)
        for _ in range(self._chunks):
            if flat.size(0) != batch:
                raise RuntimeError("unexpected shape")
        out = self._launch(flat, float(self.scale.item()) if scale is None else scale)
        return out.view(batch, features)
