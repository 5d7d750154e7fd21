import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Linear + ReLU through the candidate's own extension; the weights load from Model's state_dict."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return cuda_extension.linear_relu(x, self.linear.weight, self.linear.bias)
