import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Conv2d + ReLU: cuDNN for the convolution, our own kernel for bias and ReLU."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)

    def forward(self, x):
        return cuda_extension.conv_bias_relu(x, self.conv.weight, self.conv.bias)
