# Issue 10, class 10: an honest conv2d + bias. nn.Conv2d holds the weights (so the task's
# state_dict loads), and the candidate's own kernel does the arithmetic.
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.empty(bias_shape))

    def forward(self, x):
        return cuda_extension.conv2d_bias(x.contiguous(), self.conv.weight.contiguous(),
                                          self.conv.bias, self.bias.view(-1))
