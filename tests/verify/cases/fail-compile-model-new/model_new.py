# A model_new.py that does not parse: FAIL_COMPILE from its static policy, before any build.
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features)
        super().__init__()

    def forward(self, x):
        return cuda_extension.bias_relu_scale(x, self.bias, 2.0)
