import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return x


def get_inputs():
    return [torch.zeros(1, 1)]


def get_init_inputs():
    return [1]
